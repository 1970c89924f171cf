// A small, strict, bounded JSON parser (RFC 8259) and a streaming writer for the KServe server.
#ifndef KILN_EXAMPLES_SERVING_JSON_H_
#define KILN_EXAMPLES_SERVING_JSON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kiln::serving {

/// A parsed JSON value. Move-only: request bodies can hold millions of numbers, so a node is
/// kept to 24 bytes (strings, arrays and objects live behind one pointer) and never copied.
class Json {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  Json(Json&&) noexcept = default;
  Json& operator=(Json&&) noexcept = default;
  Json(const Json&) = delete;
  Json& operator=(const Json&) = delete;

  static Json Bool(bool b);
  static Json Double(double d);
  static Json Int(int64_t i);
  static Json String(std::string s);
  static Json Array();
  static Json Object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  /// Preconditions (asserted): the matching type.
  bool bool_value() const;
  /// The number as a double (an integer literal converts with rounding to nearest, as strtod
  /// would have parsed it).
  double double_value() const;
  /// True if the number was written as an integer literal (no fraction or exponent) that fits
  /// int64; then int_value() is exact.
  bool is_int() const { return type_ == Type::kNumber && is_int_; }
  int64_t int_value() const;
  const std::string& string_value() const;
  /// Array elements, or object values (in document order).
  const std::vector<Json>& items() const;
  /// Object keys, parallel to items().
  const std::vector<std::string>& keys() const;
  size_t size() const;

  /// The value of the first member called `key`, or null if absent or not an object.
  const Json* Find(std::string_view key) const;

  /// Builders: Append to an array, Set (appends a member) on an object.
  void Append(Json value);
  void Set(std::string key, Json value);

  /// Compact serialization (see JsonWriter).
  std::string Serialize() const;

 private:
  struct Composite {
    std::string str;
    std::vector<Json> items;
    std::vector<std::string> keys;
  };
  Type type_ = Type::kNull;
  bool is_int_ = false;
  union {
    bool b_;
    double d_;
    int64_t i_ = 0;
  };
  std::unique_ptr<Composite> c_;
};

/// Bounds on untrusted input. Depth counts nested arrays and objects (a scalar document has
/// depth 0). Every node costs at least one input byte, so max_bytes also bounds memory.
struct JsonLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_depth = 64;
};

/// Parses exactly one JSON document (surrounding whitespace allowed). Strict RFC 8259:
/// no comments, trailing commas, leading zeros, NaN/Infinity literals, control characters in
/// strings or invalid UTF-8; \u escapes must pair surrogates. Numbers: integer literals that fit
/// int64 are exact (strtoll semantics); others are doubles (strtod semantics, round to
/// nearest; underflow gives 0 or a subnormal) and a finite literal that overflows a double is
/// rejected. Duplicate object keys are kept; Find returns the first. Never crashes or
/// recurses past max_depth on any bytes. InvalidArgument "JSON byte 12: expected ':'".
/// Uses strtod: the process must run in the "C" numeric locale (the default).
StatusOr<Json> ParseJson(std::string_view text, const JsonLimits& limits = {});

/// Writes compact JSON into a string, inserting commas itself. Floats are written in the
/// shortest form that parses back to the same value (std::to_chars); non-finite floats, which
/// JSON cannot express, are written as the strings "NaN", "Infinity" and "-Infinity". Strings are
/// escaped; bytes that are not valid UTF-8 become U+FFFD so the output is always valid JSON.
/// The caller balances Begin/End calls and puts a Key before each object member.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);
  void Float(float v);  // shortest form that round-trips through float
  void Bool(bool v);
  void Null();
  void Value(const Json& v);

 private:
  void Separate();
  void WriteEscaped(std::string_view s);

  std::string* out_;
  // One entry per open container: whether it has a first element yet; after a Key the next
  // value must not be preceded by a comma.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_JSON_H_
