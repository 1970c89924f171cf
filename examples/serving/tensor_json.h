// Tensors <-> KServe v2 wire forms: datatype names, JSON `data` lists, raw little-endian bytes.
#ifndef KILN_EXAMPLES_SERVING_TENSOR_JSON_H_
#define KILN_EXAMPLES_SERVING_TENSOR_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "examples/serving/json.h"
#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln::serving {

/// The KServe v2 datatype name of `t`: FP32, FP16, BF16, FP64, INT8, UINT8, INT16, INT32, INT64,
/// BOOL; "INVALID" otherwise.
const char* KServeDatatype(DType t);
/// Inverse of KServeDatatype (exact, upper case); nullopt for any other name (including KServe
/// types kiln has no tensor type for, such as UINT32 or BYTES).
std::optional<DType> ParseKServeDatatype(std::string_view name);

/// Converts a request's `data` (a flat row-major list, or nested lists flattened in order) to
/// a new tensor of `dtype` and `shape` from the default allocator. The element count is checked
/// before anything is allocated. Accepted elements: floats take any number (FP32/FP16/BF16
/// round to nearest; a finite value beyond the type's range is an error) or the strings "NaN",
/// "Infinity", "-Infinity"; integers take numbers with an integral value within the type's
/// range; BOOL takes true/false. InvalidArgument naming `what` (and the element index) for a
/// wrong element and for an element count other than the shape's.
StatusOr<Tensor> DecodeTensorData(const Json& data, DType dtype, const Shape& shape,
                                  std::string_view what);

/// Writes `t`'s elements as one flat row-major JSON array (strided tensors are walked, not
/// assumed contiguous). Floats use the shortest form that round-trips in their own type.
void EncodeTensorData(const Tensor& t, JsonWriter& w);

/// A new tensor (default allocator) from `bytes`: the row-major little-endian elements with no
/// padding, as the binary REST extension and gRPC's raw contents carry them. InvalidArgument
/// naming `what` if the size is not the shape's element count times the element size, or a
/// BOOL byte is neither 0 nor 1.
StatusOr<Tensor> DecodeRawTensorData(std::string_view bytes, DType dtype, const Shape& shape,
                                     std::string_view what);

/// Appends `t`'s elements to `out` in that form (strided tensors are walked).
void AppendRawTensorData(const Tensor& t, std::string* out);

/// IEEE binary16 and bfloat16 <-> float (round to nearest even; NaN stays NaN).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_TENSOR_JSON_H_
