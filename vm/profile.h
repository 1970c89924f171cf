// Profile: per-instruction timing of one or more invocations (and, inside external regions, per
// vendor step), summarised by instruction kind, kernel, external region and op type, or
// exported as JSON or a Chrome trace.
#ifndef KILN_VM_PROFILE_H_
#define KILN_VM_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vm/executable.h"
#include "vm/providers.h"

namespace kiln {

/// `s` for the inside of a JSON string: quotes and backslashes escaped, control characters
/// dropped.
std::string JsonEscape(std::string_view s);

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
  /// One step of one external region (RegionStepSample), summed over the profiled calls. Steps
  /// with the same position but another kind, implementation or shapes (another plan) are
  /// separate rows.
  struct StepRow {
    int32_t region = 0;  // external region index
    int32_t step = 0;
    std::string kind, impl, shapes;
    bool reference = false;
    int64_t calls = 0;
    double total_ms = 0;
  };

  Profile() = default;
  Profile(const Profile&) = delete;  // the region sink points back at its profile
  Profile& operator=(const Profile&) = delete;

  void Clear();
  const std::vector<ProfileEvent>& events() const { return events_; }
  /// Every step row, in the order first seen (empty if no region reported steps).
  const std::vector<StepRow>& steps() const { return steps_; }

  /// Rows sorted by total time, largest first.
  std::vector<Row> ByInstruction() const;                          // "invoke_kernel", "move", ...
  std::vector<Row> ByKernel(const Executable& exe) const;          // kernels and shape functions
  std::vector<Row> ByExternalRegion(const Executable& exe) const;  // "onednn_0 (onednn)"
  /// The step rows of region `region`, largest total first.
  std::vector<StepRow> RegionSteps(int32_t region) const;
  /// Time per op type, summing to the total: "onednn:conv" (region steps by kind), "jit:Conv"
  /// (kernels by the op their name starts with; "jit:fused_Add" for fused chains), "onednn
  /// (outside steps)" (region time its steps do not cover), "test (region)" (regions that
  /// reported no steps), "shape functions", "vm (other instructions)".
  std::vector<Row> ByOpType(const Executable& exe) const;
  /// "onednn:conv(brgconv:avx2)": the region's vendor, the step's kind and implementation.
  static std::string StepName(const Executable& exe, const StepRow& step);

  /// The tables as text, with each row's share of the total; region steps are listed under
  /// their region (reference implementations flagged "REF"); names are never truncated.
  std::string Table(const Executable& exe) const;
  /// The tables as the members of a JSON object (no braces): "total_ms", "instructions",
  /// "kernels", "regions" (each with its "steps") and "op_types".
  std::string JsonFields(const Executable& exe) const;
  /// Chrome trace (chrome://tracing, Perfetto): one complete event per instruction, named by the
  /// kernel / region it calls or its mnemonic, with function, pc and source node as arguments;
  /// inside each region call's event, one event per step the vendor reported (named as
  /// StepName, with step, implementation, shapes and reference as arguments), ending when the
  /// vendor reported it and clipped to the call, so the viewer nests them under the region.
  std::string ChromeTrace(const Executable& exe) const;

  // Used by the interpreter.
  void Record(int32_t function, int32_t pc, uint8_t opcode, int32_t callee, int64_t start_ns,
              int64_t end_ns);
  /// The profiler to pass to external region `region`'s RunProfiled; valid until the next call.
  RegionProfiler* ForRegion(int32_t region) {
    sink_.region = region;
    return &sink_;
  }

 private:
  // Adds a region's samples to steps_.
  class StepSink : public RegionProfiler {
   public:
    explicit StepSink(Profile* profile) : profile_(profile) {}
    void Record(const RegionStepSample& sample) override;
    int32_t region = -1;

   private:
    Profile* profile_;
  };

  // One reported step of one region call, for the trace.
  struct StepEvent {
    size_t row;      // into steps_
    size_t event;    // the index the region call's event gets in events_ (recorded after it)
    int64_t end_ns;  // steady clock when the vendor reported it
    int64_t dur_ns;
  };
  void AddStepTraceEvents(const Executable& exe, std::vector<std::string>* lines) const;

  std::vector<ProfileEvent> events_;
  std::vector<StepEvent> step_events_;
  int64_t origin_ns_ = -1;
  std::vector<StepRow> steps_;
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> step_index_;  // (region, step)
  StepSink sink_{this};
};

}  // namespace kiln

#endif  // KILN_VM_PROFILE_H_
