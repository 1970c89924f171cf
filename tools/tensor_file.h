// Tensor files of the kiln CLI: NumPy .npy images and ONNX TensorProto .pb files (the format of
// the ONNX test data), read into kiln tensors and written from them.
#ifndef KILN_TOOLS_TENSOR_FILE_H_
#define KILN_TOOLS_TENSOR_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/allocator.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln::tools {

/// Parses a serialized ONNX TensorProto (raw_data or typed fields; no external data) into a
/// contiguous tensor from `allocator`. InvalidFormat for malformed or truncated bytes or data of
/// the wrong size; Unsupported for ONNX types kiln has no dtype for (string, complex, uint16/32/
/// 64) and for rank > kMaxRank. The result does not refer to `bytes`. `name`, when not null,
/// receives the TensorProto's name ("" when unnamed). Thread-safe.
StatusOr<Tensor> ParseTensorProto(std::string_view bytes, Allocator& allocator,
                                  std::string* name = nullptr);

/// Serializes a contiguous tensor as a TensorProto: dims, data_type, raw_data (little-endian)
/// and `name`. InvalidArgument for an empty or non-contiguous tensor.
StatusOr<std::string> EncodeTensorProto(const Tensor& tensor, const std::string& name);

/// The ONNX TensorProto.DataType code of a kiln dtype (FLOAT = 1, ..., BFLOAT16 = 16); 0 for
/// kInvalid.
int OnnxDataType(DType dtype);

/// Reads a tensor file: `.npy` as NumPy, `.pb` as a TensorProto; any other name by its content
/// (the NumPy magic, else TensorProto). NotFound if the file cannot be opened; every error
/// names the path. `name`, when not null, receives the tensor's stored name: a TensorProto's
/// name, "" for .npy files (which have none) and unnamed TensorProtos.
StatusOr<Tensor> ReadTensorFile(const std::string& path, Allocator& allocator,
                                std::string* name = nullptr);

/// Writes EncodeTensorProto(tensor, name) to `path` (created or truncated); errors name it.
Status WriteTensorProto(const std::string& path, const Tensor& tensor, const std::string& name);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_TENSOR_FILE_H_
