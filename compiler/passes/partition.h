// Bring Your Own Codegen, compile side: composite patterns, annotation, region merging and
// partitioning (TVM's MergeComposite -> AnnotateTarget -> MergeCompilerRegions ->
// PartitionGraph, over kiln's graph IR).
//
//   VendorRules rules = ...;                       // per vendor: op predicate + composites
//   ASSIGN_OR_RETURN(auto regions, PartitionGraph(graph, rules));
//   // each region: its nodes, the values it reads from outside and the values it produces
//   // for the rest of the program; the vendor codegen serializes it, the emitter calls it.
#ifndef KILN_COMPILER_PASSES_PARTITION_H_
#define KILN_COMPILER_PASSES_PARTITION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

/// A pattern over the dataflow graph, matched at a node and walking towards its inputs.
///   Op({"Conv"}, {Any(), Any(), Any()})       a Conv node
///   Op({"Relu", "Clip"}, {p})                 alternatives
///   Op({"Add"}, {p, Any()}).Commutative()     either input order
///   Op({"Relu"}, {p}).Optional()              Relu(p) or just p
///   Any()                                     any value (left outside the composite)
/// Copyable; cheap to share.
class Pattern {
 public:
  static Pattern Any();
  /// A node whose op type is one of `ops`, whose first inputs match `inputs` (inputs beyond
  /// them are not constrained).
  static Pattern Op(std::vector<std::string> ops, std::vector<Pattern> inputs = {});
  /// Also match when the two first inputs are swapped.
  Pattern Commutative() const;
  /// The node may be absent: then the pattern matches its first input pattern in its place.
  Pattern Optional() const;
  /// An extra condition on the matched node.
  Pattern Where(std::function<bool(const Graph&, NodeId)> predicate) const;

  /// Matches at `node`. On success appends every node the pattern consumed (the root first)
  /// to `*matched`. A consumed node other than the root must have all its outputs used only by
  /// consumed nodes (a composite is fused as a unit, so an inner value cannot escape).
  bool Match(const Graph& graph, NodeId node, std::vector<NodeId>* matched) const;

 private:
  struct Rep;
  explicit Pattern(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}
  bool MatchValue(const Graph& g, ValueId v, std::vector<NodeId>* matched) const;
  bool MatchNode(const Graph& g, NodeId n, std::vector<NodeId>* matched) const;
  std::shared_ptr<const Rep> rep_;
};

/// A named composite: nodes matched together are claimed together even when some of them are
/// not supported alone (e.g. the erf form of Gelu: Div, Erf, Add, Mul, Mul).
struct CompositePattern {
  std::string name;
  Pattern pattern;
};

/// What one vendor's compiler claims.
struct VendorRules {
  std::string vendor;
  /// Single nodes the vendor runs.
  std::function<bool(const Graph&, NodeId)> supported;
  /// Tried at every node (in order, first match wins) before single-node annotation.
  std::vector<CompositePattern> composites;
  /// A region is kept only if it contains at least one node of these op types (a lone Add is
  /// cheaper in a JIT kernel than behind a vendor call). Empty: keep every region.
  std::vector<std::string> anchor_ops;
};

/// One region PartitionGraph cut out for a vendor: what its codegen serializes and the emitter
/// calls as one opaque unit.
struct PartitionedRegion {
  std::string vendor;           // VendorRules::vendor
  std::vector<NodeId> nodes;    // topological order
  std::vector<ValueId> inputs;  // read from outside (not constants), in first-use order
  std::vector<ValueId> outputs; // produced here and read outside or returned, in node order
};

/// Annotates, merges and partitions (main graph only; If/Loop nodes are never claimed).
/// Merging is greedy in topological order: a node joins the regions of its claimed producers
/// when the union stays convex (no path leaves the region and comes back, so contracting each
/// region to one call keeps the program acyclic) — never through an unclaimed node. Composite
/// members always share a region. Returns the regions in topological order of their first node.
StatusOr<std::vector<PartitionedRegion>> PartitionGraph(const Graph& graph,
                                                       const VendorRules& rules);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_PARTITION_H_
