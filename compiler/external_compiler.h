// The compile side of Bring Your Own Codegen: the interface a vendor's compiler implements
// (annotation rules + region codegen) and the registry the compiler finds it in by name. The
// compiler knows vendors only through this header; embed/compile.h registers the built-in ones.
#ifndef KILN_COMPILER_EXTERNAL_COMPILER_H_
#define KILN_COMPILER_EXTERNAL_COMPILER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "compiler/ir/graph.h"
#include "compiler/passes/partition.h"

namespace kiln::compiler {

/// Vendor options as key -> value (CompileOptions::external_options), strings so a command line
/// can pass them through unparsed. Each vendor documents its keys.
using ExternalOptions = std::map<std::string, std::string>;

/// One constant of a region's blob; ExternalCode::constants[i] is the blob's constant index i
/// (the run side receives it as ExternalRegionSpec::constants[i]). Exactly one field is set:
///  - `value`: a graph value holding data (an initializer, or a value constant folding
///    computed); the emitter stores its bytes once and shares them with any kernel reading it;
///  - `data`: new bytes the codegen computed (e.g. weights with a BatchNormalization folded in);
///    the emitter adds them to the constant section.
struct ExternalConstant {
  ValueId value = kNoValue;
  TensorDataRef data;
};

/// What a vendor's codegen makes of one region: an opaque blob for its run side and the
/// constants the blob refers to by index.
struct ExternalCode {
  std::vector<uint8_t> blob;
  std::vector<ExternalConstant> constants;
};

/// One vendor's compiler. Immutable once registered and called from any thread, so an
/// implementation keeps no mutable state (or guards it).
class ExternalCompiler {
 public:
  virtual ~ExternalCompiler() = default;

  /// The vendor name: `--external=NAME` selects the compiler, regions carry it
  /// (ExternalRegionSpec::vendor) and are named "<name>_<index>", and the run side registers
  /// its runtime under the same name. Lower-case letters, digits and '_'.
  virtual std::string_view name() const = 0;

  /// Annotation rules for PartitionGraph under `options`. The compiler sets the rules' `vendor`
  /// to name(). InvalidArgument naming the key for an unknown key or a bad value.
  virtual StatusOr<VendorRules> Rules(const ExternalOptions& options) const = 0;

  /// Serializes one region PartitionGraph returned for these rules (`graph` has its shapes
  /// inferred). Any error leaves the region's nodes on the JIT: the compile goes on and the
  /// result computes the same, so a codegen may decline what its rules were too optimistic
  /// about. The error's message is reported as progress.
  virtual StatusOr<ExternalCode> Codegen(const Graph& graph,
                                         const PartitionedRegion& region) const = 0;
};

/// External compilers by name. Thread-safe; compilers stay registered for the registry's life.
class ExternalCompilerRegistry {
 public:
  ExternalCompilerRegistry() = default;
  ExternalCompilerRegistry(const ExternalCompilerRegistry&) = delete;
  ExternalCompilerRegistry& operator=(const ExternalCompilerRegistry&) = delete;

  /// The process-wide registry (the default of CompileOptions::external_compilers; built-in
  /// vendors register here through embed/compile.h). Never destroyed.
  static ExternalCompilerRegistry& Global();

  /// Adds `compiler` under compiler->name(). InvalidArgument for a null compiler, an empty name,
  /// "none" (which means "no external compiler") or a name already registered (as
  /// ExternalRegistry::Register does for runtimes; base/status.h has no AlreadyExists code).
  Status Register(std::shared_ptr<const ExternalCompiler> compiler);

  /// The compiler registered as `name`, or null.
  std::shared_ptr<const ExternalCompiler> Find(std::string_view name) const;

  /// The registered names, sorted.
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ExternalCompiler>, std::less<>> compilers_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_EXTERNAL_COMPILER_H_
