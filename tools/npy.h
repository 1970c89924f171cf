// Reading and writing NumPy .npy images: how `kiln run` takes inputs and writes outputs.
#ifndef KILN_TOOLS_NPY_H_
#define KILN_TOOLS_NPY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln {

/// Parses a .npy image (format 1.0, 2.0, 3.0; C order; little-endian or byte-order-free types).
/// dtypes: <f4 <f2 <f8 |i1 |u1 <i2 <i4 <i8 |b1 (and '<i1'/'|u1' spellings numpy writes). Returns a
/// contiguous tensor allocated from `allocator`. InvalidArgument naming what is wrong for a bad magic,
/// unsupported version, malformed header dict, fortran_order True, big-endian data, unknown dtype,
/// negative/overflowing shape, rank > kMaxRank, or data shorter/longer than the shape needs.
/// Never reads outside [data, data + size); the result does not refer to `data`. Bool elements
/// are normalised to 0/1. Thread-safe (the allocator is).
StatusOr<Tensor> ParseNpy(const uint8_t* data, size_t size, Allocator& allocator);

/// ReadNpy: the file at `path` (NotFound if missing; errors prefixed with the path).
StatusOr<Tensor> ReadNpy(const std::string& path, Allocator& allocator);

/// Format 1.0 image of a contiguous tensor (header padded so data starts at a multiple of 64).
/// bf16 has no numpy dtype: Unsupported. InvalidArgument for an empty (storage-less) or
/// non-contiguous tensor. The header is byte-for-byte what numpy >= 1.23 `np.save` writes.
StatusOr<std::vector<uint8_t>> EncodeNpy(const Tensor& tensor);

/// EncodeNpy(tensor) written to `path` (created or truncated); errors prefixed with the path.
Status WriteNpy(const std::string& path, const Tensor& tensor);

}  // namespace kiln

#endif  // KILN_TOOLS_NPY_H_
