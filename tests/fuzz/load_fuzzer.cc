// libFuzzer target: load + verify + bind + inspect + disassemble arbitrary bytes. Binding goes
// through the embedding layer's Runtime (JIT kernel provider, oneDNN region runtime), so kernel
// payloads (serialized kernel IR) and external-region blobs are decoded too. Any crash,
// sanitizer report or leak is a bug in vm/ (loader, verifier, disassembler), jit/ (payload
// decoding, kernel preparation) or the vendor's region decoder; an error status is the
// expected answer for almost every input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "embed/runtime.h"
#include "vm/disassembler.h"
#include "vm/executable.h"

namespace {

// One runtime for the whole run: creating LLJIT per input would dominate every execution.
const kiln::Runtime& SharedRuntime() {
  static const std::shared_ptr<kiln::Runtime> runtime = [] {
    kiln::RuntimeOptions options;
    options.num_threads = 1;
    options.plugins_from_environment = false;
    options.prefetch_constants = false;  // madvise per constant: a system call, no coverage
    options.huge_page_constants = false;
    auto rt = kiln::Runtime::Create(options);
    if (!rt.ok()) {
      std::fprintf(stderr, "load_fuzzer: %s\n", rt.status().ToString().c_str());
      std::abort();
    }
    return *rt;
  }();
  return *runtime;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto exe = SharedRuntime().LoadBytes(data, size);
  if (!exe.ok()) return 0;
  // Verified and bound: everything below trusts the indices, so it must not fault.
  const kiln::Executable& e = **exe;
  size_t total = kiln::InspectExecutable(e).size();
  for (int i = 0; i < e.num_functions(); ++i) total += kiln::DisassembleFunction(e, i).size();
  return total == 0;  // never: keeps the work from being optimised away
}
