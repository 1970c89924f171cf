// Lowering of graph nodes to kernel IR: the per-node contexts op lowerings are written against,
// and the table that maps (op type, opset) to them.
//
// A node lowers to ONE kernel whose buffers are, in order: every present input of the node (an
// omitted optional input has no buffer; index i below always counts ONNX input slots), then every
// present output. All buffers are contiguous (row-major); the emitter allocates outputs with the
// shapes shape inference computed and calls `invoke_kernel` with exactly this operand list.
//
// Shapes: a kernel reads the dims it needs through InputDim / OutputDim, which are constants when
// shape inference proved them and DimOf(buffer, axis) otherwise, so one kernel serves every run-
// time shape and the JIT's dispatcher may still specialize it. A kernel never checks shapes: the
// emitter guarantees that every buffer has the shape shape inference gave it (the shape
// functions check the inputs' symbolic dims agree before any kernel runs).
//
// Data-dependent outputs (NonZero, TopK with a run-time k, Reshape from a computed tensor, ...)
// additionally need a *shape function*: a kernel whose buffers are the node's present inputs
// followed by one i64[rank] buffer per present output, storing each output's dims from input
// shapes and input values. The emitter runs it before allocating the outputs.
#ifndef KILN_COMPILER_LOWER_LOWER_H_
#define KILN_COMPILER_LOWER_LOWER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "compiler/ir/graph.h"
#include "compiler/lower/loops.h"
#include "compiler/ops/node_context.h"
#include "jit/kernel_ir.h"

namespace kiln::compiler {

/// An elementwise op's math for one element: `values` are its inputs at that element (loaded,
/// broadcast and widened: f16/bf16 as f32), in the order of the slots it was registered with;
/// the result is cast to the output dtype by the caller.
using ElementFn = std::function<jit::Expr(Lets& lets, const std::vector<jit::Expr>& values)>;

/// What every lowering sees of its node: NodeContextBase (inputs, attributes, errors naming
/// the node) plus compile-time input values and the kernel parameter buffers of the inputs.
/// Borrowed graph; not thread-safe.
class NodeContext : public NodeContextBase {
 public:
  NodeContext(const Graph& graph, NodeId node, int64_t opset);

  /// A kernel name for this node: "<op_type>_<node name>" with characters outside
  /// [A-Za-z0-9_] replaced by '_'.
  std::string KernelName() const;

  /// The elements of a rank-0/1 integer input when every one is a compile-time constant.
  std::optional<std::vector<int64_t>> InputConstInts(int i) const;
  /// The elements of a rank-0/1 float or integer input as doubles when compile-time constant.
  std::optional<std::vector<double>> InputConstDoubles(int i) const;

  /// The kernel parameter for input i (requires has_input(i)): contiguous, the input's dtype
  /// and rank.
  jit::Buffer in(int i) const;
  /// Dim `axis` of input i: IntImm when shape inference knows it is constant, else DimOf.
  jit::Expr InputDim(int i, int axis) const;
  std::vector<jit::Expr> InputDims(int i) const;

  /// Kernel buffers in ABI order for the inputs (present ones, in slot order).
  std::vector<jit::Buffer> InputBuffers() const;

 protected:
  std::map<int, jit::Buffer> in_;  // by input slot
};

/// Lowering of a node to its compute kernel (or to a view).
class LowerContext : public NodeContext {
 public:
  LowerContext(const Graph& graph, NodeId node, int64_t opset);

  // ---- Outputs ----
  const Value& output(int i) const { return graph_.value(node().outputs[i]); }
  DType output_dtype(int i) const { return output(i).dtype; }
  const SymbolicShape& output_shape(int i) const { return *output(i).shape; }
  int output_rank(int i) const { return static_cast<int>(output_shape(i).size()); }
  /// The kernel parameter for output i (requires has_output(i)).
  jit::Buffer out(int i) const;
  /// Dim `axis` of output i: IntImm when constant at compile time, else DimOf(out(i), axis).
  jit::Expr OutputDim(int i, int axis) const;
  std::vector<jit::Expr> OutputDims(int i) const;

  // ---- Results (exactly one of SetBody / SetView per successful lowering) ----
  /// The kernel body, over in(i) / out(i) only.
  void SetBody(jit::Stmt body) { body_ = std::move(body); }
  /// No kernel: output 0 is input `input` reinterpreted with output 0's shape (same element
  /// count and dtype; data shared). Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout.
  void SetView(int input) { view_of_ = input; }
  /// Elementwise ops additionally record their element function over input `slots` (output 0
  /// is f of those inputs broadcast to its shape), so fusion can compose chains of them into one
  /// kernel and apply them as epilogues of matmul / conv / reduction kernels. SetBody is still
  /// required (the unfused kernel).
  void SetElementFn(std::vector<int> slots, ElementFn f) {
    element_slots_ = std::move(slots);
    element_fn_ = std::move(f);
  }
  const std::vector<int>& element_slots() const { return element_slots_; }
  const ElementFn& element_fn() const { return element_fn_; }
  /// Convenience: SetBody(jit::ComputeInto(out(output), f)).
  void SetCompute(int output, const std::function<jit::Expr(const std::vector<jit::Expr>&)>& f);

  const jit::Stmt& body() const { return body_; }
  /// The input the output is a view of, or -1.
  int view_of() const { return view_of_; }
  /// The kernel: KernelName(), InputBuffers() then the output buffers, no dims, body().
  jit::Kernel MakeKernel() const;
  std::vector<jit::Buffer> OutputBuffers() const;

 private:
  std::map<int, jit::Buffer> out_;
  jit::Stmt body_;
  int view_of_ = -1;
  std::vector<int> element_slots_;
  ElementFn element_fn_;
};

/// Construction of a node's run-time shape function (data-dependent outputs).
class ShapeFuncContext : public NodeContext {
 public:
  ShapeFuncContext(const Graph& graph, NodeId node, int64_t opset);

  const Value& output(int i) const { return graph_.value(node().outputs[i]); }
  int output_rank(int i) const { return static_cast<int>(output(i).shape->size()); }
  DType output_dtype(int i) const { return output(i).dtype; }
  /// i64[output_rank(i)]: the body stores output i's dims here.
  jit::Buffer out_shape(int i) const;

  /// The body over in(i) and out_shape(i). It must store every element of every out_shape.
  /// When the inputs contradict each other (shapes that do not broadcast, a reshape to a
  /// different element count) it stores -1 in a dim: the emitted program then fails at the
  /// allocation with an error naming the node, before any kernel reads out of bounds.
  void SetBody(jit::Stmt body) { body_ = std::move(body); }
  const jit::Stmt& body() const { return body_; }
  /// The kernel: "<KernelName()>_shape", InputBuffers() then the out_shape buffers, body().
  jit::Kernel MakeKernel() const;
  std::vector<jit::Buffer> OutputBuffers() const;

 private:
  std::map<int, jit::Buffer> out_;
  jit::Stmt body_;
};

/// Emits a node as kernel IR (LowerContext::SetBody or SetView).
using LowerFn = Status (*)(LowerContext& ctx);
/// Emits a node's shape function (ShapeFuncContext::SetBody).
using ShapeFuncFn = Status (*)(ShapeFuncContext& ctx);

/// One op type's lowering over an opset range.
struct Lowering {
  std::string op_type;  // ai.onnx domain
  int since_version = 1;
  int until_version = INT32_MAX;  // inclusive
  LowerFn lower = nullptr;        // required
  /// Required for ops whose output shape can depend on input values or that shape inference
  /// gives fresh dims (broadcasting two unrelated symbols); the emitter calls it when the node
  /// is data-dependent or an output dim cannot be computed from symbols bound earlier.
  ShapeFuncFn shape_function = nullptr;
};

/// (op type, opset) -> Lowering. Built once; lookups are const and thread-safe.
class LoweringTable {
 public:
  /// Every lowering kiln has (all families), built on first use. Defined in //compiler/lower
  /// (the family libraries and //compiler/lower:context do not link it).
  static const LoweringTable& Global();
  /// InvalidArgument on a null lower or a range overlapping an existing one of the same op.
  Status Add(Lowering lowering);
  /// Adds and aborts on error (for the family tables, where an error is a bug).
  void MustAdd(Lowering lowering);
  const Lowering* Find(std::string_view op_type, int64_t opset) const;
  std::vector<std::string> OpTypes() const;

 private:
  std::map<std::string, std::vector<Lowering>, std::less<>> table_;
};

// Family registration functions (compiler/lower/<family>.cc). Global() calls them all; tests may
// build a table of one family.
void AddElementwiseLowerings(LoweringTable& table);  // elementwise.cc
void AddReduceLowerings(LoweringTable& table);       // reduce.cc
void AddNnLowerings(LoweringTable& table);           // nn.cc
void AddShapeLowerings(LoweringTable& table);        // shape_ops.cc
void AddIndexingLowerings(LoweringTable& table);     // indexing.cc
void AddQuantizeLowerings(LoweringTable& table);     // quantize.cc
void AddSignalLowerings(LoweringTable& table);       // signal.cc

/// The result of lowering one node.
struct LoweredNode {
  /// Set unless the node is a view (Lowering produced SetView).
  std::optional<jit::Kernel> kernel;
  int view_of = -1;
  /// Set when `need_shape_function` was requested and the op has one.
  std::optional<jit::Kernel> shape_function;
  /// Elementwise ops (LowerContext::SetElementFn): the element function and its input slots.
  ElementFn element_fn;
  std::vector<int> element_slots;
};

/// Lowers node `node` of `graph` (shape inference must have run) with `table`. When
/// `need_shape_function`, also builds its shape function (Unsupported naming the node if the op
/// has none). The kernel passes jit::ValidateKernel (Internal naming the node otherwise: a bug
/// in the lowering). Unsupported naming node and op when the table has no lowering.
StatusOr<LoweredNode> LowerNode(const Graph& graph, NodeId node, bool need_shape_function,
                                const LoweringTable& table);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_LOWER_H_
