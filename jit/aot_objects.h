// Code compiled ahead of time, load side: which stored CPU target a host may run, and checking
// an object's bytes before ORC sees them. The compile side is jit/aot_compile.h.
#ifndef KILN_JIT_AOT_OBJECTS_H_
#define KILN_JIT_AOT_OBJECTS_H_

#include <llvm/Support/MemoryBuffer.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jit/codegen.h"
#include "vm/providers.h"

namespace kiln::jit {

/// Version of the contract between a kernel object and the process linking it: the KernelFn
/// ABI (jit/codegen.h), the runtime symbols objects call (kiln_parallel_for, libm, libmvec's
/// vector-ABI names) and the relocation model. Bump it when any of those changes: objects of
/// another ABI are ignored (the JIT compiles), never linked.
inline constexpr const char* kAotAbiVersion = "kiln-kernel-abi-1";

/// The AotTarget.abi string of objects generated with `options`, e.g. "kiln-kernel-abi-1|O3|mvec"
/// (libmvec calls need a host whose engine resolves them).
std::string AotAbi(const CodegenOptions& options);

/// This build's LLVM release ("19.1.7"): AotTarget.llvm_version must equal it exactly.
std::string LlvmVersion();

/// Every feature the x86-64 CPU `cpu` ("x86-64-v3", "znver4", ...) has, as LLVM knows it
/// (implied ones included), sorted; empty for a name LLVM does not know as a 64-bit x86 CPU.
std::vector<std::string> X86CpuFeatures(const std::string& cpu);

/// Why code for `target` cannot run in a process on `host` whose engine generates code with
/// ABI string `abi`; empty when it can: same triple, LLVM version and ABI, and every feature the
/// target enables ("+name" in its feature string) enabled on the host (a feature the host's
/// detection does not report counts as present only if the triple's baseline CPU has it).
std::string CodeTargetMismatch(const CodeTargetSpec& target, const TargetInfo& host,
                               const std::string& abi);

/// What a process does with code for a target that runs on its host but whose vectors are
/// narrower than the host's (HostHasWiderVectors: `kiln compile`'s default x86-64-v3 on an
/// AVX-512 host, x86-64-v2 code on an AVX2 host).
enum class NarrowerCode {
  /// Links it as the first tier: no compile before the first inference, and the kernels that
  /// keep being called tier up to the JIT's code for the host in the background, as first-tier
  /// JIT code does (DispatchOptions::tiering on).
  kFirstTier,
  /// Does not link it: the JIT compiles optimized code for the host on first use (tiering
  /// off, which pins the code that runs to the host's optimized code from the first call).
  kIgnore,
};

/// The index of the target whose code to use on `host`, or -1 (then `*why_not`, if given, says
/// why none applies). Among several that run, one whose vectors are as wide as the host's wins
/// over a narrower one, then the one built for exactly this host (same CPU and feature
/// string), then the one enabling the most features. A narrower target is chosen only with
/// `narrower` kFirstTier: its code is then a first tier.
int ChooseCodeTarget(const std::vector<CodeTargetSpec>& targets, const TargetInfo& host,
                     const std::string& abi, std::string* why_not = nullptr,
                     NarrowerCode narrower = NarrowerCode::kFirstTier);

/// Whether the host has wider vectors than code for a target enabling `features` uses (AVX-512
/// on the host, not in the target; or AVX2 on the host, not in the target): that code runs
/// here, but the JIT's code for the host is faster, so it is only a first tier (NarrowerCode).
/// False for the same width, e.g. x86-64-v3 code on an AVX2-only host: that code is final
/// (the JIT's for a Zen 3 would differ in scheduling, not in what the vectors hold).
bool HostHasWiderVectors(std::string_view features, const TargetInfo& host);

/// Checks, without linking, that `code` is a relocatable object file for `host`'s architecture
/// whose sections and symbols all parse and which defines `code.symbol`, and returns a copy
/// (aligned, as the object parsers need) for Engine::AcquireObject. InvalidFormat naming
/// code.where otherwise: bytes ORC would otherwise parse (and could crash on) stop here.
StatusOr<std::unique_ptr<llvm::MemoryBuffer>> LoadCodeObject(const CodeObjectSpec& code,
                                                             const TargetInfo& host);

}  // namespace kiln::jit

#endif  // KILN_JIT_AOT_OBJECTS_H_
