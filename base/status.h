// Status and StatusOr: how every fallible call in kiln reports what went wrong and where.
#ifndef KILN_BASE_STATUS_H_
#define KILN_BASE_STATUS_H_

#include <cassert>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

/// A small code set; the message carries the detail ("functions[3].code[17]: register 40 >= 32").
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // bad user input: tensors, names, options
  kInvalidFormat = 2,     // a file or buffer that fails verification
  kUnsupported = 3,       // valid but not supported by this build (version, dtype, vendor)
  kNotFound = 4,          // a named thing does not exist (function, file, vendor)
  kOutOfRange = 5,        // a bound was exceeded (call depth, allocator cap)
  kDeadlineExceeded = 6,  // an invocation ran past its deadline
  kResourceExhausted = 7, // out of memory
  kInternal = 8,          // a broken invariant or a failure of a library we call
  kAborted = 9,           // the program executed `fatal`
  kDeclined = 10,         // a vendor declines an external region (vm/providers.h); not a failure
};

/// Name of a code, e.g. "INVALID_FORMAT".
const char* StatusCodeName(StatusCode code);

inline std::ostream& operator<<(std::ostream& os, StatusCode code) { return os << StatusCodeName(code); }

/// The result of a fallible call: ok, or a code with a message. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Returns a copy whose message is "prefix: message" (adds where the error happened).
  Status WithContext(std::string_view prefix) const;

  /// "INVALID_FORMAT: functions[3].code[17]: register 40 >= 32", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status InvalidFormat(std::string m) { return {StatusCode::kInvalidFormat, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Declined(std::string m) { return {StatusCode::kDeclined, std::move(m)}; }

/// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) { assert(!status_.ok()); }  // NOLINT
  StatusOr(Status&& status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(const T& value) : has_value_(true) { new (&storage_) T(value); }  // NOLINT
  StatusOr(T&& value) : has_value_(true) { new (&storage_) T(std::move(value)); }  // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, T>>>
  StatusOr(U&& value) : has_value_(true) { new (&storage_) T(std::forward<U>(value)); }  // NOLINT
  StatusOr(const StatusOr& other) : status_(other.status_), has_value_(other.has_value_) {
    if (has_value_) new (&storage_) T(*other);
  }
  StatusOr(StatusOr&& other) noexcept : status_(std::move(other.status_)), has_value_(other.has_value_) {
    if (has_value_) new (&storage_) T(std::move(*other));
  }
  StatusOr& operator=(StatusOr other) {
    Reset();
    status_ = std::move(other.status_);
    has_value_ = other.has_value_;
    if (has_value_) new (&storage_) T(std::move(*other));
    return *this;
  }
  ~StatusOr() { Reset(); }

  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }

  T& value() & { assert(has_value_); return *reinterpret_cast<T*>(&storage_); }
  const T& value() const& { assert(has_value_); return *reinterpret_cast<const T*>(&storage_); }
  T&& value() && { assert(has_value_); return std::move(*reinterpret_cast<T*>(&storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Reset() {
    if (has_value_) reinterpret_cast<T*>(&storage_)->~T();
    has_value_ = false;
  }
  Status status_;
  bool has_value_ = false;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

/// Returns the Status from the enclosing function if `expr` is not ok.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::kiln::Status kiln_status_ = (expr);      \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

/// `ASSIGN_OR_RETURN(auto x, MakeX());` — binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // KILN_BASE_STATUS_H_
