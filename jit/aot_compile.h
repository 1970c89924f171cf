// Code compiled ahead of time, compile side: named CPU targets, and every kernel of an executable
// compiled to a relocatable object for one of them (the load side is jit/aot_objects.h).
#ifndef KILN_JIT_AOT_COMPILE_H_
#define KILN_JIT_AOT_COMPILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "jit/codegen.h"
#include "vm/builder.h"

namespace kiln::jit {

/// The CPU target `name` denotes: "native" (the compiling host, its CPU name and its whole
/// feature string), or an x86-64 CPU name LLVM knows ("x86-64-v3", "x86-64-v4", "znver4", ...)
/// with every feature it implies. InvalidArgument naming the target for an unknown name, or for
/// a CPU name on a host of another architecture.
StatusOr<TargetInfo> ResolveCodeTarget(const std::string& name);

/// The targets a compile embeds code for when none is named (kiln::CompileOptions in
/// embed/compile.h: `kiln compile`, Python's kiln.compile, C++ embedders): x86-64-v3 (AVX2,
/// FMA, BMI2; Haswell and Zen 1 on) on an x86-64 host, so a first inference links instead of
/// compiling on any such CPU (a host with AVX-512 links it as a first tier and tiers hot
/// kernels up to its own code: NarrowerCode in jit/aot_objects.h); none on other
/// architectures.
std::vector<std::string> DefaultCodeTargets();

/// Compiles, for `target`, every kernel and shape function whose payload is kernel IR
/// (kPayloadFormat) through the JIT's own pipeline: GenerateModule (O3, libmvec) and code
/// generation configured as ORC's LLJIT configures it (position-independent, small code model),
/// so the objects link exactly as the JIT's own would. Entries with other payloads get no
/// object. The result's tables are parallel to `kernels` and `shape_functions`. `threads` > 0
/// compiles on that many threads (0: one per core). Only the first `num_kernels` kernels and
/// `num_shape_functions` shape functions get objects: the rest are those only the fallback
/// functions of external regions use, which run (JIT-compiled) only if a vendor declines its
/// region, and compiling them ahead of time made mobilenet_v3_small's compile 0.2 -> 9 s CPU.
/// Errors name the entry and the target: the payload's (kInvalidFormat / kUnsupported), LLVM's
/// (kInternal).
StatusOr<AotTargetDef> CompileCodeTarget(const TargetInfo& target,
                                         const std::vector<KernelDef>& kernels,
                                         const std::vector<ShapeFunctionDef>& shape_functions,
                                         int threads = 0, size_t num_kernels = SIZE_MAX,
                                         size_t num_shape_functions = SIZE_MAX);

}  // namespace kiln::jit

#endif  // KILN_JIT_AOT_COMPILE_H_
