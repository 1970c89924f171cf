// For the import-expansion tests: compile a model in ONNX text syntax with the JIT only, run it
// once and return its outputs (failing the current Boost test on any error).
#ifndef KILN_TESTS_COMPILER_ONNX_RUN_TEXT_H_
#define KILN_TESTS_COMPILER_ONNX_RUN_TEXT_H_

#include <string>
#include <vector>

#include <memory>

#include "compiler/ir/graph.h"
#include "vm/executable.h"

namespace kiln::compiler::testing {

/// Compiles `text` with the JIT only and loads it (for tests that drive the executable
/// themselves: contexts, deadlines).
std::shared_ptr<const Executable> CompileAndLoadText(const std::string& text);

/// Compiles `text` with the JIT only, runs it once on `inputs` and returns its outputs; with
/// `listing`, also stores there the executable as `kiln inspect` prints it (every function's
/// disassembly), for assertions on the compiled program.
std::vector<TensorDataRef> CompileAndRunText(const std::string& text,
                                             const std::vector<TensorDataRef>& inputs,
                                             std::string* listing = nullptr);

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_ONNX_RUN_TEXT_H_
