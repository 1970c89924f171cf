// Code compiled ahead of time, load side: target matching against the host, object checks.
#include "jit/aot_objects.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <algorithm>
#include <set>
#include <string_view>

namespace kiln::jit {
namespace {

// The names a feature string enables ("+avx2,-avx512f,+fma" -> {avx2, fma}), or with
// `all`, the names it mentions at all ({avx2, avx512f, fma}).
std::set<std::string> EnabledFeatures(std::string_view features, bool all = false) {
  std::set<std::string> out;
  size_t pos = 0;
  while (pos <= features.size()) {
    size_t end = features.find(',', pos);
    if (end == std::string_view::npos) end = features.size();
    std::string_view f = features.substr(pos, end - pos);
    if (f.size() > 1 && (f[0] == '+' || (all && f[0] == '-'))) out.emplace(f.substr(1));
    pos = end + 1;
  }
  return out;
}

// Features every CPU of the triple's architecture has, which host detection need not report
// (x87 on x86-64, say).
std::set<std::string> BaselineFeatures(const std::string& triple) {
  if (llvm::Triple(triple).getArch() != llvm::Triple::x86_64) return {};
  std::vector<std::string> names = X86CpuFeatures("x86-64");
  return std::set<std::string>(names.begin(), names.end());
}

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

// Every section's contents and every symbol's name and section must parse: what JITLink reads.
Status CheckParts(const llvm::object::ObjectFile& object, const CodeObjectSpec& code) {
  for (const llvm::object::SectionRef& section : object.sections()) {
    llvm::Expected<llvm::StringRef> contents = section.getContents();
    if (!contents) {
      return InvalidFormat(code.where + ": corrupt section: " + ErrorText(contents.takeError()));
    }
  }
  bool found = false;
  for (const llvm::object::SymbolRef& symbol : object.symbols()) {
    llvm::Expected<llvm::StringRef> name = symbol.getName();
    if (!name) return InvalidFormat(code.where + ": corrupt symbol: " + ErrorText(name.takeError()));
    llvm::Expected<llvm::object::section_iterator> section = symbol.getSection();
    if (!section) {
      return InvalidFormat(code.where + ": symbol '" + name->str() +
                           "': " + ErrorText(section.takeError()));
    }
    llvm::Expected<uint32_t> flags = symbol.getFlags();
    if (!flags) {
      return InvalidFormat(code.where + ": symbol '" + name->str() +
                           "': " + ErrorText(flags.takeError()));
    }
    if (std::string_view(name->data(), name->size()) == code.symbol && !(*flags & llvm::object::SymbolRef::SF_Undefined) &&
        *section != object.section_end()) {
      found = true;
    }
  }
  if (!found) {
    return InvalidFormat(code.where + ": the object does not define its entry point '" +
                         std::string(code.symbol) + "'");
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> X86CpuFeatures(const std::string& cpu) {
  if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) == llvm::X86::CK_None) return {};
  llvm::SmallVector<llvm::StringRef, 32> names;
  llvm::X86::getFeaturesForCPU(cpu, names);
  llvm::StringMap<bool> implied;
  for (llvm::StringRef name : names) {
    implied[name] = true;  // updateImpliedFeatures sets only what `name` implies
    llvm::X86::updateImpliedFeatures(name, true, implied);
  }
  std::vector<std::string> out;
  for (const auto& f : implied) {
    if (f.second) out.push_back(f.first().str());
  }
  std::sort(out.begin(), out.end());  // StringMap's order is not stable across builds
  return out;
}

std::string AotAbi(const CodegenOptions& options) {
  return std::string(kAotAbiVersion) + (options.optimize ? "|O3" : "|O0") +
         (options.use_libmvec ? "|mvec" : "");
}

std::string LlvmVersion() { return LLVM_VERSION_STRING; }

std::string CodeTargetMismatch(const CodeTargetSpec& target, const TargetInfo& host,
                               const std::string& abi) {
  if (target.triple != host.triple) {
    return "triple " + std::string(target.triple) + ", the host is " + host.triple;
  }
  if (target.llvm_version != LlvmVersion()) {
    return "LLVM " + std::string(target.llvm_version) + ", this kiln has LLVM " + LlvmVersion();
  }
  if (target.abi != abi) return "ABI '" + std::string(target.abi) + "', this kiln needs '" + abi + "'";
  std::set<std::string> reported = EnabledFeatures(host.features, /*all=*/true);
  std::set<std::string> enabled = EnabledFeatures(host.features);
  std::set<std::string> baseline = BaselineFeatures(host.triple);
  std::string missing;
  for (const std::string& f : EnabledFeatures(target.features)) {
    if (enabled.count(f) || (!reported.count(f) && baseline.count(f))) continue;
    missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty()) return "the host CPU lacks " + missing;
  return "";
}

bool HostHasWiderVectors(std::string_view features, const TargetInfo& host) {
  std::set<std::string> enabled = EnabledFeatures(features);
  return (host.has_avx512f && !enabled.count("avx512f")) ||
         (host.has_avx2 && !enabled.count("avx2"));
}

int ChooseCodeTarget(const std::vector<CodeTargetSpec>& targets, const TargetInfo& host,
                     const std::string& abi, std::string* why_not, NarrowerCode narrower) {
  int best = -1;
  size_t best_score = 0;
  std::string reasons;
  for (size_t i = 0; i < targets.size(); ++i) {
    const CodeTargetSpec& t = targets[i];
    std::string mismatch = CodeTargetMismatch(t, host, abi);
    const bool first_tier = mismatch.empty() && HostHasWiderVectors(t.features, host);
    if (first_tier && narrower == NarrowerCode::kIgnore) {
      mismatch = std::string("its vectors are narrower than this host's (") +
                 (host.has_avx512f ? "AVX-512" : "AVX2") +
                 ") and tiering is off: the JIT compiles for the host";
    }
    if (!mismatch.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + t.where + ": " + mismatch;
      continue;
    }
    // Final code first, then this exact host, then the most features.
    bool exact = t.cpu == host.cpu && t.features == host.features;
    size_t score = EnabledFeatures(t.features).size() + (exact ? size_t{1} << 20 : 0) +
                   (first_tier ? 0 : size_t{1} << 21);
    if (best < 0 || score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  if (best < 0 && why_not != nullptr) *why_not = reasons;
  return best;
}

StatusOr<std::unique_ptr<llvm::MemoryBuffer>> LoadCodeObject(const CodeObjectSpec& code,
                                                             const TargetInfo& host) {
  // A copy: the bytes sit at any offset in the file, and the ELF reader wants them aligned.
  std::unique_ptr<llvm::MemoryBuffer> copy = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char*>(code.data), code.size), code.where);
  llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> object =
      llvm::object::ObjectFile::createObjectFile(copy->getMemBufferRef());
  if (!object) {
    return InvalidFormat(code.where + ": not an object file: " + ErrorText(object.takeError()));
  }
  if (!(*object)->isRelocatableObject()) {
    return InvalidFormat(code.where + ": not a relocatable object");
  }
  llvm::Triple::ArchType arch = llvm::Triple(host.triple).getArch();
  if ((*object)->getArch() != arch) {
    return InvalidFormat(code.where + ": an object for " +
                         llvm::Triple::getArchTypeName((*object)->getArch()).str() +
                         ", the target says " + llvm::Triple::getArchTypeName(arch).str());
  }
  RETURN_IF_ERROR(CheckParts(**object, code));
  return copy;
}

}  // namespace kiln::jit
