// .npy images: the preamble, the header (a Python dict literal, parsed by hand), the raw data.
#include "tools/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace kiln {
namespace {

// Data bytes are copied as they are, so the host must share the files' byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "kiln's .npy code assumes little-endian");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kArrayAlign = 64;
// numpy >= 1.23 leaves room in the header for the first dim to grow to this many digits.
constexpr size_t kGrowthAxisMaxDigits = 21;

std::string Str(int64_t v) { return std::to_string(v); }

// The numpy types kiln has, as (kind, itemsize); the descr numpy writes is `order kind size`.
struct NpyType {
  DType dtype;
  char kind;
  int size;
  char order;  // what numpy writes: '<' or '|' (byte-order free)
};

constexpr NpyType kTypes[] = {
    {DType::kF32, 'f', 4, '<'}, {DType::kF16, 'f', 2, '<'}, {DType::kF64, 'f', 8, '<'},
    {DType::kI8, 'i', 1, '|'},  {DType::kU8, 'u', 1, '|'},  {DType::kI16, 'i', 2, '<'},
    {DType::kI32, 'i', 4, '<'}, {DType::kI64, 'i', 8, '<'}, {DType::kBool, 'b', 1, '|'},
    {DType::kU16, 'u', 2, '<'}, {DType::kU32, 'u', 4, '<'}, {DType::kU64, 'u', 8, '<'},
};

StatusOr<DType> DTypeFromDescr(const std::string& descr) {
  std::string_view code = descr;
  char order = '=';
  if (!code.empty() && std::strchr("<>|=", code[0]) != nullptr) {
    order = code[0];
    code.remove_prefix(1);
  }
  for (const NpyType& t : kTypes) {
    if (code.size() != 2 || code[0] != t.kind || code[1] != '0' + t.size) continue;
    // '|' and '=' mean native on a multi-byte type; only '>' is foreign here.
    if (order == '>' && t.size > 1) {
      return InvalidArgument("big-endian dtype '" + descr + "' is not supported (save it as '<" +
                             std::string(code) + "')");
    }
    return t.dtype;
  }
  return InvalidArgument("unsupported dtype '" + descr +
                         "' (kiln reads <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 |b1)");
}

// "()", "(3,)", "(2, 3)": Python's repr of a tuple, as numpy writes it.
std::string ShapeRepr(const int64_t* dims, size_t rank) {
  std::string s = "(";
  for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + Str(dims[i]);
  return s + (rank == 1 ? ",)" : ")");
}

// The three entries numpy requires, in any order.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header's dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// (any key order, either quote, any whitespace, optional trailing commas, Python 2 'L' ints).
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Status Parse(NpyHeader* h) {
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    bool seen[3] = {false, false, false};
    static constexpr const char* kKeys[3] = {"descr", "fortran_order", "shape"};
    for (;;) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      RETURN_IF_ERROR(ParseString(&key, "a key"));
      int k = 0;
      while (k < 3 && key != kKeys[k]) ++k;
      if (k == 3) return Error("unknown key '" + key + "'");
      if (seen[k]) return Error("duplicate key '" + key + "'");
      seen[k] = true;
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after '" + key + "'");
      SkipSpace();
      if (k == 0) RETURN_IF_ERROR(ParseDescr(&h->descr));
      if (k == 1) RETURN_IF_ERROR(ParseBool(&h->fortran_order));
      if (k == 2) RETURN_IF_ERROR(ParseShape(&h->shape));
      SkipSpace();
      if (Consume(',')) continue;
      if (Peek() != '}') return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the dict");
    for (int k = 0; k < 3; ++k) {
      if (!seen[k]) {
        return InvalidArgument(std::string(".npy header has no '") + kKeys[k] + "' key");
      }
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("malformed .npy header dict at column " + Str(pos_) + ": " + what);
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  static bool IsSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  Status ParseString(std::string* out, const char* what) {
    char quote = Peek();
    if (quote != '\'' && quote != '"') return Error(std::string("expected ") + what + " in quotes");
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return Error("unterminated string");
    std::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) {
      return Error("escapes in strings are not supported");
    }
    *out = std::string(body);
    pos_ = end + 1;
    return Status::Ok();
  }

  Status ParseDescr(std::string* out) {
    if (Peek() == '[') {
      return InvalidArgument(
          "unsupported dtype: structured dtypes (a descr list) are not supported");
    }
    return ParseString(out, "the descr");
  }

  Status ParseBool(bool* out) {
    std::string_view rest = text_.substr(pos_);
    for (std::string_view word : {std::string_view("True"), std::string_view("False")}) {
      if (rest.substr(0, word.size()) == word) {
        *out = word[0] == 'T';
        pos_ += word.size();
        return Status::Ok();
      }
    }
    return Error("fortran_order must be True or False");
  }

  // A tuple of ints; "(3)" is an int in Python, not a tuple, so it is rejected.
  Status ParseShape(std::vector<int64_t>* dims) {
    if (!Consume('(')) return Error("shape must be a tuple");
    bool comma = false;
    for (;;) {
      SkipSpace();
      if (Consume(')')) break;
      int64_t d;
      RETURN_IF_ERROR(ParseInt(&d));
      dims->push_back(d);
      SkipSpace();
      comma = Consume(',');
      if (!comma && Peek() != ')') return Error("expected ',' or ')' in shape");
    }
    if (dims->size() == 1 && !comma) return Error("shape (" + Str((*dims)[0]) + ") is not a tuple");
    return Status::Ok();
  }

  Status ParseInt(int64_t* out) {
    bool negative = Consume('-');
    if (!negative) Consume('+');
    if (!IsDigit(Peek())) return Error("shape entries must be integers");
    uint64_t v = 0;
    bool overflow = false;
    size_t digits = pos_;
    while (IsDigit(Peek())) {
      overflow |= __builtin_mul_overflow(v, 10, &v) ||
                  __builtin_add_overflow(v, static_cast<uint64_t>(text_[pos_] - '0'), &v);
      ++pos_;
    }
    std::string_view number = text_.substr(digits, pos_ - digits);
    if (Peek() == 'L' || Peek() == 'l') ++pos_;  // Python 2 long, still in old headers
    char next = Peek();
    if (next == '.' || next == '_' || next == 'e' || next == 'E' || next == 'x' || next == 'j') {
      return Error("shape entries must be integers");
    }
    if (negative && v != 0) {
      return InvalidArgument("shape has a negative dimension (-" + std::string(number) + ")");
    }
    if (overflow || v > static_cast<uint64_t>(INT64_MAX)) {
      return InvalidArgument("shape dimension " + std::string(number) + " overflows int64");
    }
    *out = static_cast<int64_t>(v);
    return Status::Ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Where the header text is: after the magic, the version and a 2- or 4-byte length.
struct Preamble {
  size_t header_offset = 0;
  size_t header_size = 0;
};

StatusOr<Preamble> ParsePreamble(const uint8_t* data, size_t size) {
  size_t magic = std::min(size, kMagicLen);
  if (magic > 0 && std::memcmp(data, kMagic, magic) != 0) {
    return InvalidArgument("not a .npy file: bad magic (expected \\x93NUMPY)");
  }
  if (size < kMagicLen + 2) {
    return InvalidArgument("truncated: " + Str(size) + " bytes is too short for a .npy preamble");
  }
  int major = data[kMagicLen], minor = data[kMagicLen + 1];
  if (major < 1 || major > 3 || minor != 0) {
    return InvalidArgument("unsupported .npy format version " + Str(major) + "." + Str(minor) +
                           " (kiln reads 1.0, 2.0 and 3.0)");
  }
  Preamble p;
  size_t length_bytes = major == 1 ? 2 : 4;
  p.header_offset = kMagicLen + 2 + length_bytes;
  if (size < p.header_offset) {
    return InvalidArgument("truncated: " + Str(size) + " bytes is too short for a .npy preamble");
  }
  for (size_t i = 0; i < length_bytes; ++i) {
    p.header_size |= size_t{data[kMagicLen + 2 + i]} << (8 * i);
  }
  if (p.header_size > size - p.header_offset) {
    return InvalidArgument("truncated: the header claims " + Str(p.header_size) + " bytes but " +
                           Str(size - p.header_offset) + " follow the preamble");
  }
  return p;
}

// The header text numpy writes, padded (spaces and '\n') so the data starts 64-byte aligned.
StatusOr<std::string> EncodeHeader(const Tensor& tensor) {
  if (tensor.empty()) return InvalidArgument("cannot encode an empty tensor (no storage)");
  if (tensor.dtype() == DType::kBF16) {
    return Unsupported("bfloat16 has no numpy dtype; convert the tensor to float32 first");
  }
  const NpyType* type = nullptr;
  for (const NpyType& t : kTypes) {
    if (t.dtype == tensor.dtype()) type = &t;
  }
  if (type == nullptr) {
    return InvalidArgument("cannot encode a tensor of dtype " +
                           Str(static_cast<int>(tensor.dtype())));
  }
  if (!tensor.IsContiguous()) {
    return InvalidArgument("cannot encode non-contiguous " + tensor.TypeString());
  }
  const Shape& shape = tensor.shape();
  std::string dict = std::string("{'descr': '") + type->order + type->kind + Str(type->size) +
                     "', 'fortran_order': False, 'shape': " +
                     ShapeRepr(shape.data(), shape.rank()) + ", }";
  if (shape.rank() > 0) {
    size_t digits = Str(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  size_t text = dict.size() + 1;  // + '\n'
  size_t pad = kArrayAlign - (kMagicLen + 2 + 2 + text) % kArrayAlign;
  size_t header_size = text + pad;
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header_size & 0xff);
  out += static_cast<char>(header_size >> 8);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}

// Closes a descriptor or unmaps a file on every return path.
struct MappedFile {
  int fd = -1;
  void* addr = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (addr != MAP_FAILED) munmap(addr, size);
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

StatusOr<Tensor> ParseNpy(const uint8_t* data, size_t size, Allocator& allocator) {
  ASSIGN_OR_RETURN(Preamble p, ParsePreamble(data, size));
  NpyHeader h;
  std::string_view text(reinterpret_cast<const char*>(data + p.header_offset), p.header_size);
  RETURN_IF_ERROR(HeaderParser(text).Parse(&h));
  ASSIGN_OR_RETURN(DType dtype, DTypeFromDescr(h.descr));
  std::string shape_text = ShapeRepr(h.shape.data(), h.shape.size());
  if (h.fortran_order) {
    return InvalidArgument("fortran_order True is not supported (save with np.ascontiguousarray)");
  }
  if (h.shape.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument("shape " + shape_text + " has rank " + Str(h.shape.size()) +
                           ", more than the maximum " + Str(kMaxRank));
  }
  ASSIGN_OR_RETURN(Shape shape, Shape::Make(h.shape.data(), static_cast<int>(h.shape.size())));
  StatusOr<int64_t> n = shape.CheckedNumElements();
  if (!n.ok()) return InvalidArgument("shape " + shape_text + " has too many elements");
  uint64_t need = static_cast<uint64_t>(*n) * DTypeSize(dtype);
  size_t data_offset = p.header_offset + p.header_size;
  uint64_t have = size - data_offset;
  if (have != need) {
    return InvalidArgument("data is " + Str(have) + " bytes but shape " + shape_text + " of '" +
                           h.descr + "' needs " + Str(need) +
                           (have < need ? " (truncated)" : " (trailing bytes)"));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, dtype, shape));
  if (need > 0) std::memcpy(t.data(), data + data_offset, need);
  if (dtype == DType::kBool) {
    auto* b = t.data_as<uint8_t>();
    for (uint64_t i = 0; i < need; ++i) b[i] = b[i] != 0;
  }
  return t;
}

StatusOr<Tensor> ReadNpy(const std::string& path, Allocator& allocator) {
  MappedFile file;
  // O_NONBLOCK: a FIFO would otherwise block open() until a writer came; the regular files
  // accepted below ignore it.
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd < 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st;
  if (fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return InvalidArgument(path + ": not a regular file (inputs are read from files, not "
                           "pipes or devices)");
  }
  file.size = static_cast<size_t>(st.st_size);
  const uint8_t* data = reinterpret_cast<const uint8_t*>("");
  if (file.size > 0) {
    file.addr = mmap(nullptr, file.size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (file.addr == MAP_FAILED) {
      return InvalidArgument(path + ": mmap failed: " + std::strerror(errno));
    }
    data = static_cast<const uint8_t*>(file.addr);
  }
  StatusOr<Tensor> t = ParseNpy(data, file.size, allocator);
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

StatusOr<std::vector<uint8_t>> EncodeNpy(const Tensor& tensor) {
  ASSIGN_OR_RETURN(std::string header, EncodeHeader(tensor));
  std::vector<uint8_t> out(header.begin(), header.end());
  const auto* bytes = static_cast<const uint8_t*>(tensor.data());
  out.insert(out.end(), bytes, bytes + tensor.NumBytes());
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& tensor) {
  StatusOr<std::string> header = EncodeHeader(tensor);
  if (!header.ok()) return header.status().WithContext(path);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(path + ": cannot open for writing: " + std::strerror(errno));
  }
  bool ok = std::fwrite(header->data(), 1, header->size(), f) == header->size() &&
            std::fwrite(tensor.data(), 1, tensor.NumBytes(), f) == tensor.NumBytes();
  int saved = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) return Internal(path + ": write failed: " + std::strerror(saved));
  return Status::Ok();
}

}  // namespace kiln
