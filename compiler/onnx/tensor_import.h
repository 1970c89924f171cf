// TensorProto -> TensorData (typed fields, raw bytes, external data files) and bounded
// protobuf parsing. Internal to compiler/onnx.
#ifndef KILN_COMPILER_ONNX_TENSOR_IMPORT_H_
#define KILN_COMPILER_ONNX_TENSOR_IMPORT_H_

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler::onnx_import {

/// A read-only mapping of a whole file. The mapping lives as long as the object.
class MappedFile {
 public:
  /// NotFound naming the path (and errno text) when it cannot be opened or mapped.
  static StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

/// External data files of one model, each mapped once and shared by the tensors that use it.
class ExternalData {
 public:
  /// `base_dir` empty: the model has no directory, and any external tensor is an error.
  explicit ExternalData(std::string base_dir) : base_dir_(std::move(base_dir)) {}
  /// The bytes of `tensor` (an EXTERNAL TensorProto) that should hold `expected` bytes. `what`
  /// names the tensor in errors ("initializer 'w'").
  StatusOr<std::pair<std::shared_ptr<const void>, const void*>> Read(
      const onnx::TensorProto& tensor, size_t expected, const std::string& what);

 private:
  std::string base_dir_;
  std::map<std::string, std::shared_ptr<const MappedFile>> files_;
};

/// Converts a TensorProto. Moves raw_data out of `tensor` (zero-copy); typed fields are
/// converted into a new buffer. `external` may be null (then external data is an error).
StatusOr<TensorDataRef> ConvertTensor(onnx::TensorProto& tensor, const std::string& what,
                                      ExternalData* external);

/// Parses untrusted bytes into `message` with bounded total size and nesting depth.
/// InvalidFormat naming `what` when the bytes are not a valid message.
Status ParseBounded(std::string_view bytes, google::protobuf::MessageLite* message,
                    const std::string& what);

}  // namespace kiln::compiler::onnx_import

#endif  // KILN_COMPILER_ONNX_TENSOR_IMPORT_H_
