// DLPack interop: exchange tensors with other frameworks without copying.
#ifndef KILN_EMBED_DLPACK_H_
#define KILN_EMBED_DLPACK_H_

#include <dlpack/dlpack.h>

#include "base/status.h"
#include "base/tensor.h"

namespace kiln {

/// Views `managed`'s data as a kiln Tensor, no copy. On success kiln owns `managed`: its deleter
/// runs exactly once, when the last tensor (or storage) referring to the data is released, from
/// whichever thread releases it. On error the caller keeps ownership and the deleter is not called.
/// Accepted: CPU device, one lane, a dtype kiln has (bool as DLPack >= 0.8's code 6, 8 bits),
/// rank <= kMaxRank, non-negative dims, and row-major contiguous data (strides null or equal
/// to the row-major ones; size-1 dims may have any stride). InvalidArgument / Unsupported
/// otherwise, naming what is wrong.
StatusOr<Tensor> FromDLPack(DLManagedTensor* managed);

/// Exports `tensor` (contiguous) as a DLManagedTensor that keeps the tensor's storage alive until
/// its deleter is called; the consumer must call the deleter exactly once. InvalidArgument for
/// an empty or non-contiguous tensor.
StatusOr<DLManagedTensor*> ToDLPack(const Tensor& tensor);

}  // namespace kiln

#endif  // KILN_EMBED_DLPACK_H_
