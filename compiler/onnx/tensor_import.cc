// TensorProto conversion, external data and bounded parsing (see tensor_import.h).
#include "compiler/onnx/tensor_import.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace kiln::compiler::onnx_import {

// ---- MappedFile ------------------------------------------------------------------------------

StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever; regular files (the
  // only kind accepted below) ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NotFound("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("'" + path + "' is not a regular file");
  }
  auto file = std::shared_ptr<MappedFile>(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return NotFound("cannot map '" + path + "': " + std::strerror(err));
    }
    file->addr_ = addr;
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, size_);
}

// ---- External data ---------------------------------------------------------------------------

namespace {

// A location must stay inside the model directory: relative, no "..", no empty components.
bool IsSafeRelativePath(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    std::string part =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

// The real path of `dir`/`location` if it lies inside the real path of `dir`.
StatusOr<std::string> ResolveInside(const std::string& dir, const std::string& location,
                                    const std::string& what) {
  char real_dir[PATH_MAX];
  if (::realpath(dir.c_str(), real_dir) == nullptr) {
    return NotFound(what + ": model directory '" + dir + "': " + std::strerror(errno));
  }
  std::string joined = dir + "/" + location;
  char real_file[PATH_MAX];
  if (::realpath(joined.c_str(), real_file) == nullptr) {
    if (errno == ENOENT) {
      return NotFound(what + ": external data file '" + location +
                      "' does not exist in the model directory");
    }
    return InvalidFormat(what + ": external data location '" + location +
                         "' cannot be resolved inside the model directory");
  }
  std::string root(real_dir);
  if (root != "/") root += "/";
  std::string file(real_file);
  if (file.compare(0, root.size(), root) != 0) {
    return InvalidFormat(what + ": external data location '" + location +
                         "' leads outside the model directory (through a symbolic link)");
  }
  return file;
}

StatusOr<uint64_t> ParseSize(const std::string& s, const std::string& what) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    return InvalidFormat(what + ": '" + s + "' is not a byte count");
  return std::stoull(s);
}

}  // namespace

StatusOr<std::pair<std::shared_ptr<const void>, const void*>> ExternalData::Read(
    const onnx::TensorProto& tensor, size_t expected, const std::string& what) {
  std::string location;
  uint64_t offset = 0, length = expected;
  for (const auto& kv : tensor.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      ASSIGN_OR_RETURN(offset, ParseSize(kv.value(), what + " external data offset"));
    } else if (kv.key() == "length") {
      ASSIGN_OR_RETURN(length, ParseSize(kv.value(), what + " external data length"));
    }
  }
  if (location.empty()) return InvalidFormat(what + ": external data has no location");
  if (!IsSafeRelativePath(location))
    return InvalidFormat(what + ": external data location '" + location +
                         "' is not inside the model directory");
  if (base_dir_.empty()) {
    return InvalidArgument(
        what + ": uses external data file '" + location +
        "' but no model directory is known (set ImportOptions::external_data_dir)");
  }
  // The location is checked by its words above and by where it really leads here: a symlink
  // inside the model directory must not reach a file outside it. Nothing about such a file
  // (whether it exists, its size) goes into the error.
  ASSIGN_OR_RETURN(std::string path, ResolveInside(base_dir_, location, what));
  auto it = files_.find(path);
  if (it == files_.end()) {
    StatusOr<std::shared_ptr<const MappedFile>> f = MappedFile::Open(path);
    if (!f.ok()) return f.status().WithContext(what + ": external data file");
    it = files_.emplace(path, *f).first;
  }
  const std::shared_ptr<const MappedFile>& file = it->second;
  if (length != expected) {
    return InvalidFormat(what + ": external data length " + std::to_string(length) + " in '" +
                         location + "' does not match the " + std::to_string(expected) +
                         " bytes the tensor needs");
  }
  if (offset > file->size() || length > file->size() - offset) {
    return InvalidFormat(what + ": external data file '" + location + "' has " +
                         std::to_string(file->size()) + " bytes, the tensor needs bytes [" +
                         std::to_string(offset) + ", " + std::to_string(offset + length) + ")");
  }
  static const uint8_t kEmpty = 0;
  const void* p = file->size() ? file->data() + offset : &kEmpty;
  return std::make_pair(std::shared_ptr<const void>(file), p);
}

// ---- TensorProto -----------------------------------------------------------------------------

namespace {

// Copies `count` values of a repeated field into a buffer of `dtype`, narrowing each.
template <typename Src, typename Field>
StatusOr<TensorDataRef> FromTypedField(const Field& field, DType dtype, std::vector<int64_t> dims,
                                       int64_t numel, const std::string& what,
                                       const char* field_name) {
  if (field.size() != numel) {
    return InvalidFormat(what + ": has " + std::to_string(field.size()) + " values in " +
                         field_name + ", expected " + std::to_string(numel));
  }
  size_t elem = DTypeSize(dtype);
  std::vector<uint8_t> buf(static_cast<size_t>(numel) * elem);
  for (int64_t i = 0; i < numel; ++i) {
    Src v = field.Get(static_cast<int>(i));
    switch (dtype) {
      case DType::kF32: {
        float f = static_cast<float>(v);
        std::memcpy(&buf[i * 4], &f, 4);
        break;
      }
      case DType::kF64: {
        double d = static_cast<double>(v);
        std::memcpy(&buf[i * 8], &d, 8);
        break;
      }
      case DType::kI64:
      case DType::kU64: {
        int64_t x = static_cast<int64_t>(v);
        std::memcpy(&buf[i * 8], &x, 8);
        break;
      }
      case DType::kI32:
      case DType::kU32: {
        uint32_t x = static_cast<uint32_t>(v);
        std::memcpy(&buf[i * 4], &x, 4);
        break;
      }
      case DType::kI16:
      case DType::kU16:
      case DType::kF16:
      case DType::kBF16: {
        uint16_t x = static_cast<uint16_t>(v);
        std::memcpy(&buf[i * 2], &x, 2);
        break;
      }
      case DType::kI8:
      case DType::kU8:
        buf[i] = static_cast<uint8_t>(v);
        break;
      case DType::kBool:
        buf[i] = v != 0;
        break;
      default:
        return Internal("bad dtype");
    }
  }
  return TensorData::Copy(dtype, std::move(dims), buf.data(), buf.size());
}

}  // namespace

StatusOr<TensorDataRef> ConvertTensor(onnx::TensorProto& tensor, const std::string& what,
                                      ExternalData* external) {
  StatusOr<DType> dtype_or = DTypeFromOnnx(tensor.data_type());
  if (!dtype_or.ok()) return dtype_or.status().WithContext(what);
  DType dtype = *dtype_or;
  if (tensor.has_segment()) return Unsupported(what + ": segmented tensors are not supported");
  std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidFormat(what + ": dim " + std::to_string(d) + " is negative");
    if (__builtin_mul_overflow(numel, d, &numel) || numel > (INT64_MAX >> 4))
      return InvalidFormat(what + ": element count overflows");
  }
  size_t bytes = static_cast<size_t>(numel) * DTypeSize(dtype);
  auto wrap = [&what](StatusOr<TensorDataRef> t) -> StatusOr<TensorDataRef> {
    if (!t.ok()) return t.status().WithContext(what);
    return t;
  };

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!external) return InvalidArgument(what + ": external data is not allowed here");
    ASSIGN_OR_RETURN(auto owner_and_ptr, external->Read(tensor, bytes, what));
    return wrap(
        TensorData::Make(dtype, std::move(dims), owner_and_ptr.first, owner_and_ptr.second, bytes));
  }
  if (tensor.has_raw_data()) {
    auto owner = std::make_shared<std::string>(std::move(*tensor.mutable_raw_data()));
    tensor.clear_raw_data();
    const void* p = owner->data();
    size_t size = owner->size();
    return wrap(TensorData::Make(dtype, std::move(dims), std::move(owner), p, size));
  }
  switch (dtype) {
    case DType::kF32:
      return FromTypedField<float>(tensor.float_data(), dtype, std::move(dims), numel, what,
                                   "float_data");
    case DType::kF64:
      return FromTypedField<double>(tensor.double_data(), dtype, std::move(dims), numel, what,
                                    "double_data");
    case DType::kI64:
      return FromTypedField<int64_t>(tensor.int64_data(), dtype, std::move(dims), numel, what,
                                     "int64_data");
    case DType::kU32:
    case DType::kU64:
      return FromTypedField<uint64_t>(tensor.uint64_data(), dtype, std::move(dims), numel, what,
                                      "uint64_data");
    default:  // int32, int16, uint16, int8, uint8, bool, float16, bfloat16 live in int32_data
      return FromTypedField<int32_t>(tensor.int32_data(), dtype, std::move(dims), numel, what,
                                     "int32_data");
  }
}

Status ParseBounded(std::string_view bytes, google::protobuf::MessageLite* message,
                    const std::string& what) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return InvalidFormat(what + " is larger than 2 GiB (protobuf's limit); use external data");
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  input.SetTotalBytesLimit(INT_MAX);
  input.SetRecursionLimit(100);
  if (!message->ParseFromCodedStream(&input) || !input.ConsumedEntireMessage())
    return InvalidFormat(what + " is not a valid protobuf message (malformed or truncated)");
  return Status::Ok();
}

}  // namespace kiln::compiler::onnx_import
