// Tensor files of the kiln CLI: .npy through tools/npy, .pb through the ONNX importer.
#include "tools/tensor_file.h"

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/onnx/importer.h"
#include "tools/npy.h"

namespace kiln::tools {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The whole file, read by its size: NotFound when it does not exist, InvalidArgument for
// anything but a regular file (a FIFO would block, /dev/zero would never end) or one larger
// than protobuf can parse.
StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file (inputs are read from files, not pipes "
                           "or devices)");
  }
  constexpr off_t kMaxBytes = (off_t{1} << 31) - 1;  // protobuf's message size limit
  if (st.st_size > kMaxBytes) {
    ::close(fd);
    return InvalidArgument(path + ": " + std::to_string(st.st_size) +
                           " bytes; a TensorProto file holds at most 2 GiB");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return InvalidArgument(path + ": read failed after " + std::to_string(done) + " of " +
                             std::to_string(bytes.size()) + " bytes");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace

int OnnxDataType(DType dtype) { return compiler::DTypeToOnnx(dtype); }

StatusOr<Tensor> ParseTensorProto(std::string_view bytes, Allocator& allocator,
                                  std::string* name) {
  ASSIGN_OR_RETURN(compiler::TensorDataRef data, compiler::ImportOnnxTensorBytes(bytes, name));
  const std::vector<int64_t>& dims = data->dims();
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return Unsupported("tensor of rank " + std::to_string(dims.size()) + " (kiln allows at most " +
                       std::to_string(kMaxRank) + ")");
  }
  ASSIGN_OR_RETURN(Shape shape, Shape::Make(dims.data(), static_cast<int>(dims.size())));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, data->dtype(), shape));
  if (data->size_bytes() != t.NumBytes()) {
    return Internal("tensor data holds " + std::to_string(data->size_bytes()) + " bytes, " +
                    t.TypeString() + " needs " + std::to_string(t.NumBytes()));
  }
  if (t.NumBytes() > 0) std::memcpy(t.data(), data->data(), t.NumBytes());
  return t;
}

StatusOr<std::string> EncodeTensorProto(const Tensor& tensor, const std::string& name) {
  if (tensor.empty()) return InvalidArgument("cannot encode an empty tensor");
  if (!tensor.IsContiguous()) return InvalidArgument("cannot encode a non-contiguous tensor");
  int type = OnnxDataType(tensor.dtype());
  if (type == 0) {
    return InvalidArgument("cannot encode a tensor of dtype " +
                           std::string(DTypeName(tensor.dtype())));
  }
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(type);
  for (int d = 0; d < tensor.rank(); ++d) proto.add_dims(tensor.dim(d));
  proto.set_raw_data(tensor.data(), tensor.NumBytes());
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) return Internal("cannot serialize tensor '" + name + "'");
  return bytes;
}

StatusOr<Tensor> ReadTensorFile(const std::string& path, Allocator& allocator,
                                std::string* name) {
  if (name != nullptr) name->clear();
  if (EndsWith(path, ".npy")) return ReadNpy(path, allocator);
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  bool npy = !EndsWith(path, ".pb") && bytes.compare(0, sizeof(kNpyMagic) - 1, kNpyMagic) == 0;
  StatusOr<Tensor> t =
      npy ? ParseNpy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), allocator)
          : ParseTensorProto(bytes, allocator, name);
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

Status WriteTensorProto(const std::string& path, const Tensor& tensor, const std::string& name) {
  StatusOr<std::string> bytes = EncodeTensorProto(tensor, name);
  if (!bytes.ok()) return bytes.status().WithContext(path);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(path + ": cannot open for writing: " + std::strerror(errno));
  }
  bool ok = std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size();
  int saved = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) return Internal(path + ": write failed: " + std::strerror(saved));
  return Status::Ok();
}

}  // namespace kiln::tools
