// Kernel preconditions: facts about argument shapes a kernel's indexing relies on (an output
// has the shape of its inputs, a broadcast dim is 1 or matches, a shape vector has rank
// entries). The compiler writes them into the payload; the kernel provider checks them before
// every call, so a program that passes mismatched tensors gets an error instead of a kernel
// reading or writing out of bounds.
#ifndef KILN_JIT_PRECONDITION_H_
#define KILN_JIT_PRECONDITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "jit/kernel_ir.h"
#include "base/status.h"

namespace kiln::jit {

/// A precondition is a bool expression over DimOf(parameter buffer, axis), integer constants,
/// add/sub/mul/floordiv/floormod/min/max, comparisons, and/or/not and select — no loads, vars
/// or reductions. InvalidFormat naming the kernel and the precondition otherwise.
Status ValidatePreconditions(const Kernel& kernel, const std::vector<Expr>& preconditions);

/// Preconditions flattened for cheap evaluation. Immutable after Compile; thread-safe.
class PreconditionProgram {
 public:
  PreconditionProgram() = default;
  /// Validates and flattens.
  static StatusOr<PreconditionProgram> Compile(const Kernel& kernel,
                                               const std::vector<Expr>& preconditions);
  bool empty() const { return roots_.empty(); }
  /// shapes[i]: the dims of parameter buffer i (as in the kernel ABI). Returns -1 when every
  /// precondition holds, else the index of the first that does not.
  int Check(const int64_t* const* shapes) const;
  /// Human-readable text of precondition i ("dim(out0, 1) == dim(in0, 1)").
  const std::string& Describe(int i) const { return text_[i]; }
  /// What failing precondition i means for `shapes`, in terms a user can act on, when it has a
  /// form kiln knows; "" otherwise. Known today: a dim d broadcast against min(c, d), a table of
  /// c rows sliced to d (as position embeddings are), which fails when d exceeds c; and an
  /// equality, for which it gives both sides' values ("in1.shape[0] is 2, in0.shape[1] is 3").
  std::string Explain(int i, const int64_t* const* shapes) const;

 private:
  // A precondition `min(c, d) == 1 || min(c, d) == d` (either operand order of the min).
  struct ClampedTable {
    int dim = -1;  // node of d, -1 when the precondition has another form
    int64_t rows = 0;
    std::string dim_text;
  };
  // A precondition `a == b`: its sides' nodes and texts (lhs -1 when it has another form).
  struct Equality {
    int lhs = -1, rhs = -1;
    std::string lhs_text, rhs_text;
  };
  struct Node {
    ExprOp op;
    int64_t value = 0;  // kIntImm; kDim: axis
    int buffer = 0;     // kDim: parameter index
    int args[3] = {-1, -1, -1};
  };
  int64_t Eval(int node, const int64_t* const* shapes) const;
  std::vector<Node> nodes_;
  std::vector<int> roots_;
  std::vector<std::string> text_;
  std::vector<ClampedTable> tables_;  // per precondition
  std::vector<Equality> equalities_;  // per precondition
};

}  // namespace kiln::jit

#endif  // KILN_JIT_PRECONDITION_H_
