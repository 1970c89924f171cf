// Runs graph nodes on concrete tensors through their lowered kernels and the JIT, outside the VM.
// Constant folding evaluates through it (so a folded value is computed by the same kernel the
// executable would run), and tests of lowerings use it to check an op against known answers.
#ifndef KILN_COMPILER_LOWER_EVALUATE_H_
#define KILN_COMPILER_LOWER_EVALUATE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/lower.h"
#include "jit/engine.h"
#include "base/status.h"

namespace kiln::compiler {

/// Thread-compatible (one thread at a time); the engine may be shared.
class Evaluator {
 public:
  /// `table` is borrowed (pass &LoweringTable::Global() for every op).
  Evaluator(std::shared_ptr<jit::Engine> engine, const LoweringTable* table);
  /// With an engine of its own.
  static StatusOr<std::unique_ptr<Evaluator>> Create(const LoweringTable* table);

  /// Runs node `node` of `graph` (shape inference done) on `inputs`, one per input slot
  /// (nullptr for an omitted optional input). Checks that each input's dtype and dims match the
  /// value's type (symbols bound consistently; InvalidArgument naming the node and input
  /// otherwise) and that the facts its shape rule assumed (Node::dim_facts) hold for them
  /// (InvalidArgument naming the node and both dims' values otherwise); output shapes come from the symbolic shapes, or from the node's shape function
  /// when they are data-dependent. Returns one tensor per output slot (nullptr where omitted).
  /// `tier` is the JIT tier of the node's kernel (jit/engine.h): kFast compiles several times
  /// cheaper, and gives the same bits as kOptimized only for a kernel without floating-point
  /// arithmetic (the caller's judgement). The node's shape function, if run, takes it too.
  StatusOr<std::vector<TensorDataRef>> RunNode(const Graph& graph, NodeId node,
                                               const std::vector<TensorDataRef>& inputs,
                                               jit::Tier tier = jit::Tier::kOptimized);

  /// Runs a whole graph (no If/Loop): `inputs` for graph inputs in order (nullptr uses an
  /// input's default); constants from the graph. Returns the graph outputs in order.
  StatusOr<std::vector<TensorDataRef>> RunGraph(const Graph& graph,
                                                const std::vector<TensorDataRef>& inputs);

  jit::Engine& engine() { return *engine_; }

 private:
  // Runs `kernel` on `args`, compiled at `tier`.
  Status Call(const jit::Kernel& kernel, const std::vector<const TensorData*>& args,
              jit::Tier tier);

  std::shared_ptr<jit::Engine> engine_;
  const LoweringTable* table_;
  // First-tier kernels stay compiled while the evaluator lives (a fold of the same kernel in
  // another branch reuses them); optimized ones are pinned by the engine.
  std::vector<jit::KernelRef> fast_kernels_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_EVALUATE_H_
