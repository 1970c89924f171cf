// Compute-style builders: operators as index functions over an output, generated to loop nests.
#ifndef KILN_JIT_COMPUTE_H_
#define KILN_JIT_COMPUTE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "jit/kernel_ir.h"
#include "base/status.h"

namespace kiln::jit {

// Every builder returns a Kernel (or a Stmt to compose into one). Shapes stay runtime values:
// the caller (the VM, after the op's shape function) passes an output of the right shape; a
// kernel never checks shapes itself. Buffer parameter order is documented per builder and is the
// order of the compiled ABI's `buffers` array. Builders taking axes, permutations or windows
// return kInvalidArgument for values out of range; dtype mistakes surface from ValidateKernel
// (run by the code generator). Builders are pure functions: thread-safe.

/// Maps an output multi-index to the value stored there.
using IndexFn = std::function<Expr(const std::vector<Expr>& index)>;

/// A loop nest over every element of `out` storing `f(index)` (cast to out's dtype): the outermost
/// loop is parallel, the innermost vectorized. Rank 0 stores once. This is how fused operators
/// are built: compose IndexFns, then ComputeInto the group's output.
Stmt ComputeInto(const Buffer& out, const IndexFn& f);

/// What is known at compile time about one input dim under numpy broadcasting.
enum class BroadcastDim : uint8_t {
  kUnknown,  // decided at run time (size 1 repeats, otherwise it matches the output)
  kSame,     // matches the output dim
  kOne,      // size 1: repeats
};

/// One input of an elementwise kernel. `broadcast` is empty (all kUnknown) or has one entry per
/// dim of this input.
struct Operand {
  DType dtype;
  int rank;
  std::vector<BroadcastDim> broadcast;
};

/// Loads `in` at the element broadcasting maps output position `out_index` to (numpy rules:
/// dims aligned from the right; leading output dims and size-1 dims do not index the input).
Expr BroadcastLoad(const Buffer& in, const std::vector<Expr>& out_index,
                   const std::vector<BroadcastDim>& hint = {});

/// out = f(inputs...) elementwise with numpy broadcasting; out's rank is the largest input rank.
/// f receives loaded values (f16/bf16 widened to f32); its result is cast to `out`.
/// Buffers: inputs in order, then out. Innermost dims of kUnknown inputs are versioned (a loop
/// nest per combination of "size 1 or not", up to two such inputs) so each version vectorizes.
Kernel Elementwise(std::string name, const std::vector<Operand>& inputs, DType out,
                   const std::function<Expr(const std::vector<Expr>&)>& f);
/// Elementwise with one input. Buffers: in, out.
Kernel ElementwiseUnary(std::string name, DType in, DType out, int rank,
                        const std::function<Expr(Expr)>& f);
/// Elementwise with two inputs. Buffers: a, b, out.
Kernel ElementwiseBinary(std::string name, Operand a, Operand b, DType out,
                         const std::function<Expr(Expr, Expr)>& f);

/// Reductions as operators (ONNX ReduceX / ArgX).
enum class Reduction : uint8_t { kSum, kMean, kProd, kMax, kMin, kArgMax, kArgMin };

/// out = reduce(in) over `axes` (each in [0, rank); repeats ignored; empty = identity copy).
/// keepdims keeps reduced dims as size 1. Output dtype: i64 for arg reductions, else the input's.
/// f16/bf16 accumulate in f32; kMean divides by the reduced element count (NaN for an empty float
/// mean, 0 for integers). Buffers: in, out.
StatusOr<Kernel> ReduceKernel(std::string name, Reduction reduction, DType dtype, int rank,
                              std::vector<int> axes, bool keepdims);

/// out = in permuted: out dim k is in dim perm[k]. Buffers: in, out.
StatusOr<Kernel> TransposeKernel(std::string name, DType dtype, const std::vector<int>& perm);

/// ONNX Gather along `axis`: out has rank index_rank + rank - 1. Negative indices count from the
/// end; indices still out of range are clamped (never read outside `data`). Buffers: data,
/// indices (i32 or i64), out.
StatusOr<Kernel> GatherKernel(std::string name, DType dtype, int rank, DType index_dtype,
                              int index_rank, int axis);

/// out[i] = in[start + i * step] per dim, with start and step runtime dims (kernel dims
/// start_0, step_0, start_1, step_1, ...; already normalized by the caller so every read is in
/// bounds). Buffers: in, out.
Kernel SliceKernel(std::string name, DType dtype, int rank);

enum class PadMode : uint8_t { kConstant, kEdge, kReflect };

/// out[i] = in[i - pad_begin] per dim (kernel dims pad_begin_0, ...); outside the input: the
/// scalar `value` (kConstant), the nearest edge (kEdge) or the mirror image without repeating the
/// edge (kReflect, valid for pads smaller than the dim). Buffers: in, value (rank 0, same dtype;
/// read only for kConstant but always passed), out.
Kernel PadKernel(std::string name, DType dtype, int rank, PadMode mode);

/// Concatenation of `inputs` along `axis`. Buffers: the inputs in order, then out.
StatusOr<Kernel> ConcatKernel(std::string name, DType dtype, int rank, int inputs, int axis);

/// Max or average pooling over the trailing `kernel.size()` (spatial) dims of an N, C, spatial...
/// input (spatial dims >= 1). Windows, strides, dilations and begin pads are compile-time
/// constants (strides/dilations default to 1, pads to 0 when shorter than `kernel`). Positions in
/// the padding are skipped; average divides by the in-bounds count, or by the window size if
/// `count_include_pad`. A max window entirely in the padding gives -inf.
struct PoolSpec {
  bool max = true;
  std::vector<int64_t> kernel, strides, dilations, pads_begin;
  bool count_include_pad = false;
};
/// Buffers: in, out (f32, f64, f16 or bf16).
StatusOr<Kernel> PoolKernel(std::string name, DType dtype, const PoolSpec& spec);

/// C[M, N] = A[M, K] x B[K, N] in f32, tiled into register blocks (parallel over row tiles,
/// vectorized over columns). Buffers: a, b, c (all f32, contiguous).
Kernel MatmulKernel(std::string name);

}  // namespace kiln::jit

#endif  // KILN_JIT_COMPUTE_H_
