// Profile: per-instruction timing of one or more invocations, summarised by instruction kind,
// kernel and external region, or exported as a Chrome trace.
#ifndef KILN_VM_PROFILE_H_
#define KILN_VM_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vm/executable.h"

namespace kiln {

/// One executed instruction.
struct ProfileEvent {
  int32_t function;
  int32_t pc;
  uint8_t opcode;
  int32_t callee;    // kernel / shape function / external region index, or -1
  int64_t start_ns;  // steady clock, relative to the profile's first event
  int64_t dur_ns;
};

/// Filled by Context::Invoke when InvokeOptions::profile points at it (events accumulate over
/// invocations until Clear). Not thread-safe: one profile per context at a time.
class Profile {
 public:
  struct Row {
    std::string name;
    int64_t calls = 0;
    double total_ms = 0;
  };

  void Clear() { events_.clear(); origin_ns_ = -1; }
  const std::vector<ProfileEvent>& events() const { return events_; }

  /// Rows sorted by total time, largest first.
  std::vector<Row> ByInstruction() const;                          // "invoke_kernel", "move", ...
  std::vector<Row> ByKernel(const Executable& exe) const;          // kernels and shape functions
  std::vector<Row> ByExternalRegion(const Executable& exe) const;  // "onednn_0 (onednn)"
  /// The three tables as text, with each row's share of the total.
  std::string Table(const Executable& exe) const;
  /// Chrome trace (chrome://tracing, Perfetto): one complete event per instruction, named by the
  /// kernel / region it calls or its mnemonic, with function, pc and source node as arguments.
  std::string ChromeTrace(const Executable& exe) const;

  // Used by the interpreter.
  void Record(int32_t function, int32_t pc, uint8_t opcode, int32_t callee, int64_t start_ns,
              int64_t end_ns);

 private:
  std::vector<ProfileEvent> events_;
  int64_t origin_ns_ = -1;
};

}  // namespace kiln

#endif  // KILN_VM_PROFILE_H_
