// libFuzzer target: load + verify (no binding) + inspect + disassemble arbitrary bytes. Any
// crash, sanitizer report or leak is a bug in vm/ (loader, verifier or disassembler); an error
// status is the expected answer for almost every input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "vm/disassembler.h"
#include "vm/executable.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::LoadOptions options;
  options.bind = false;
  options.prefetch_constants = false;  // madvise is a system call per constant: slow, no coverage
  auto exe = kiln::Executable::LoadBytes(data, size, options);
  if (!exe.ok()) return 0;
  // Verified: everything below trusts the indices, so it must not fault.
  const kiln::Executable& e = **exe;
  size_t total = kiln::InspectExecutable(e).size();
  for (int i = 0; i < e.num_functions(); ++i) total += kiln::DisassembleFunction(e, i).size();
  return total == 0;  // never: keeps the work from being optimised away
}
