// Profile summaries (text tables, JSON, op types), region steps and the Chrome trace.
#include "vm/profile.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>

#include "vm/opcodes.h"

namespace kiln {
namespace {

std::vector<Profile::Row> Sorted(std::map<std::string, Profile::Row>& rows) {
  std::vector<Profile::Row> out;
  for (auto& [name, row] : rows) {
    row.name = name;
    out.push_back(row);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return out;
}

// The kernel, shape function or region an event called, or "" for other instructions.
std::string CalleeName(const Executable& exe, const ProfileEvent& e) {
  if (e.callee < 0) return "";
  const fb::Executable& r = exe.root();
  switch (static_cast<Opcode>(e.opcode)) {
    case Opcode::kInvokeKernel: return r.kernels()->Get(e.callee)->name()->str();
    case Opcode::kInvokeShapeFunc: return "shape:" + r.shape_functions()->Get(e.callee)->name()->str();
    case Opcode::kInvokeExternal: {
      const fb::ExternalRegion* x = r.external_regions()->Get(e.callee);
      return x->name()->str() + " (" + x->vendor()->str() + ")";
    }
    case Opcode::kInvoke: return "@" + r.functions()->Get(e.callee)->name()->str();
    default: return "";
  }
}

// Time per external region, by region index (rows named as CalleeName names them).
std::map<int32_t, Profile::Row> RegionTotals(const Executable& exe,
                                             const std::vector<ProfileEvent>& events) {
  std::map<int32_t, Profile::Row> regions;
  for (const ProfileEvent& e : events) {
    if (static_cast<Opcode>(e.opcode) != Opcode::kInvokeExternal) continue;
    Profile::Row& r = regions[e.callee];
    if (r.calls == 0) r.name = CalleeName(exe, e);
    ++r.calls;
    r.total_ms += e.dur_ns / 1e6;
  }
  return regions;
}

double TotalMs(const std::vector<ProfileEvent>& events) {
  double total = 0;
  for (const ProfileEvent& e : events) total += e.dur_ns / 1e6;
  return total;
}

// The name column's width: wide enough for every name (names are never truncated).
int NameWidth(int width, const std::vector<Profile::Row>& rows) {
  for (const Profile::Row& r : rows) width = std::max(width, static_cast<int>(r.name.size()));
  return width;
}

std::string FormatRow(int indent, int width, const std::string& name, int64_t calls, double ms,
                      double total) {
  char line[160];
  std::snprintf(line, sizeof(line), " %10lld %12.3f %10.2f %6.1f%%", static_cast<long long>(calls),
                ms, ms * 1000.0 / std::max<int64_t>(calls, 1),
                total > 0 ? 100.0 * ms / total : 0.0);
  std::string name_col(indent, ' ');
  name_col += name;
  name_col.resize(std::max<size_t>(name_col.size(), width + 2), ' ');
  return name_col + line;
}

std::string Header(const char* title, int width) {
  char line[160];
  std::snprintf(line, sizeof(line), " %10s %12s %10s %7s\n", "calls", "total ms", "mean us",
                "share");
  std::string t(title);
  t.resize(std::max<size_t>(t.size(), width + 2), ' ');
  return t + line;
}

void AppendRows(std::string& out, const char* title, const std::vector<Profile::Row>& rows,
                double total, int width) {
  out += Header(title, width);
  for (const Profile::Row& r : rows)
    out += FormatRow(2, width, r.name, r.calls, r.total_ms, total) + "\n";
  out += "\n";
}

// "jit:Conv" for kernel "Conv_features_0": the compiler names kernels <OpType>_<node> (epilogue
// variants add a suffix) and fused elementwise chains fused_<OpType>_<count>.
std::string KernelType(const std::string& name) {
  size_t first = name.find('_');
  if (name.rfind("fused_", 0) == 0) first = name.find('_', first + 1);
  return "jit:" + name.substr(0, first);
}

std::string JsonRow(const Profile::Row& r) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "\", \"calls\": %lld, \"total_ms\": %.6f}",
                static_cast<long long>(r.calls), r.total_ms);
  return "{\"name\": \"" + JsonEscape(r.name) + buf;
}

std::string JsonRows(const std::vector<Profile::Row>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) out += (i ? ", " : "") + JsonRow(rows[i]);
  return out + "]";
}

}  // namespace

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

void Profile::Record(int32_t function, int32_t pc, uint8_t opcode, int32_t callee, int64_t start_ns,
                     int64_t end_ns) {
  if (origin_ns_ < 0) origin_ns_ = start_ns;
  events_.push_back({function, pc, opcode, callee, start_ns - origin_ns_, end_ns - start_ns});
}

std::vector<Profile::Row> Profile::ByInstruction() const {
  std::map<std::string, Row> rows;
  for (const ProfileEvent& e : events_) {
    Row& r = rows[GetOpcodeInfo(static_cast<Opcode>(e.opcode)).mnemonic];
    ++r.calls;
    r.total_ms += e.dur_ns / 1e6;
  }
  return Sorted(rows);
}

std::vector<Profile::Row> Profile::ByKernel(const Executable& exe) const {
  std::map<std::string, Row> rows;
  for (const ProfileEvent& e : events_) {
    auto op = static_cast<Opcode>(e.opcode);
    if (op != Opcode::kInvokeKernel && op != Opcode::kInvokeShapeFunc) continue;
    Row& r = rows[CalleeName(exe, e)];
    ++r.calls;
    r.total_ms += e.dur_ns / 1e6;
  }
  return Sorted(rows);
}

std::vector<Profile::Row> Profile::ByExternalRegion(const Executable& exe) const {
  std::map<std::string, Row> rows;
  for (const auto& [index, r] : RegionTotals(exe, events_)) {
    rows[r.name].calls += r.calls;
    rows[r.name].total_ms += r.total_ms;
  }
  return Sorted(rows);
}

void Profile::Clear() {
  events_.clear();
  origin_ns_ = -1;
  steps_.clear();
  step_index_.clear();
  step_events_.clear();
}

void Profile::StepSink::Record(const RegionStepSample& sample) {
  std::vector<size_t>& candidates = profile_->step_index_[{region, sample.step}];
  StepRow* row = nullptr;
  for (size_t i : candidates) {
    StepRow& r = profile_->steps_[i];
    if (r.kind == sample.kind && r.impl == sample.impl && r.shapes == sample.shapes) row = &r;
  }
  if (row == nullptr) {
    candidates.push_back(profile_->steps_.size());
    row = &profile_->steps_.emplace_back();
    row->region = region;
    row->step = sample.step;
    row->kind = sample.kind;
    row->impl = sample.impl;
    row->shapes = sample.shapes;
    row->reference = sample.reference;
  }
  ++row->calls;
  row->total_ms += sample.dur_ns / 1e6;
  // The call's own event is still pending in the interpreter: it is recorded next.
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  profile_->step_events_.push_back({static_cast<size_t>(row - profile_->steps_.data()),
                                    profile_->events_.size(), now, sample.dur_ns});
}

std::vector<Profile::StepRow> Profile::RegionSteps(int32_t region) const {
  std::vector<StepRow> out;
  for (const StepRow& r : steps_) {
    if (r.region == region) out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return out;
}

std::string Profile::StepName(const Executable& exe, const StepRow& step) {
  return exe.root().external_regions()->Get(step.region)->vendor()->str() + ":" + step.kind + "(" +
         step.impl + ")";
}

std::vector<Profile::Row> Profile::ByOpType(const Executable& exe) const {
  std::map<std::string, Row> rows;
  std::map<int32_t, double> stepped_ms;  // per region: the time its steps account for
  for (const StepRow& s : steps_) {
    std::string vendor = exe.root().external_regions()->Get(s.region)->vendor()->str();
    Row& r = rows[vendor + ":" + s.kind];
    r.calls += s.calls;
    r.total_ms += s.total_ms;
    stepped_ms[s.region] += s.total_ms;
  }
  for (const ProfileEvent& e : events_) {
    auto op = static_cast<Opcode>(e.opcode);
    std::string type = "vm (other instructions)";
    double ms = e.dur_ns / 1e6;
    if (op == Opcode::kInvokeKernel) {
      type = KernelType(exe.root().kernels()->Get(e.callee)->name()->str());
    } else if (op == Opcode::kInvokeShapeFunc) {
      type = "shape functions";
    } else if (op == Opcode::kInvokeExternal) {
      std::string vendor = exe.root().external_regions()->Get(e.callee)->vendor()->str();
      type = stepped_ms.count(e.callee) ? vendor + " (outside steps)" : vendor + " (region)";
    }
    Row& r = rows[type];
    ++r.calls;
    r.total_ms += ms;
  }
  // The steps' time was counted in their regions' events: take it out of "outside steps".
  for (const auto& [region, ms] : stepped_ms) {
    rows[exe.root().external_regions()->Get(region)->vendor()->str() + " (outside steps)"]
        .total_ms -= ms;
  }
  return Sorted(rows);
}

std::string Profile::Table(const Executable& exe) const {
  double total = TotalMs(events_);
  std::vector<Row> instructions = ByInstruction(), kernels = ByKernel(exe), types = ByOpType(exe);
  int width = NameWidth(NameWidth(NameWidth(38, instructions), kernels), types);
  std::map<int32_t, Row> regions = RegionTotals(exe, events_);  // by index: steps go under them
  for (const auto& [index, r] : regions) width = std::max(width, static_cast<int>(r.name.size()));
  for (const StepRow& s : steps_) {
    width = std::max(width,
                     static_cast<int>(StepName(exe, s).size() + 4 + std::to_string(s.step).size()));
  }
  std::string out;
  AppendRows(out, "instruction", instructions, total, width);
  AppendRows(out, "kernel / shape function", kernels, total, width);
  std::vector<std::pair<int32_t, Row>> by_time(regions.begin(), regions.end());
  std::stable_sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) {
    return a.second.total_ms > b.second.total_ms;
  });
  out +=
      Header("external region (steps: vendor:kind(implementation), REF = reference code)", width);
  for (const auto& [index, r] : by_time) {
    out += FormatRow(2, width, r.name, r.calls, r.total_ms, total) + "\n";
    std::vector<StepRow> steps = RegionSteps(index);
    double stepped = 0;
    for (const StepRow& s : steps) {
      stepped += s.total_ms;
      out += FormatRow(4, width, "#" + std::to_string(s.step) + " " + StepName(exe, s), s.calls,
                       s.total_ms, total) +
             (s.reference ? "  REF " : "      ") + s.shapes + "\n";
    }
    if (!steps.empty())
      out += FormatRow(4, width, "(outside steps)", r.calls, r.total_ms - stepped, total) + "\n";
  }
  out += "\n";
  AppendRows(out, "op type", types, total, width);
  char line[96];
  std::snprintf(line, sizeof(line), "%zu instructions, %.3f ms in total\n", events_.size(), total);
  return out + line;
}

std::string Profile::JsonFields(const Executable& exe) const {
  double total = TotalMs(events_);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "\"total_ms\": %.6f, \"instructions_executed\": %zu", total,
                events_.size());
  std::string out = buf;
  out += ", \"instructions\": " + JsonRows(ByInstruction());
  out += ", \"kernels\": " + JsonRows(ByKernel(exe));
  out += ", \"regions\": [";
  bool first = true;
  for (const auto& [index, r] : RegionTotals(exe, events_)) {
    const fb::ExternalRegion* x = exe.root().external_regions()->Get(index);
    std::snprintf(buf, sizeof(buf), "\", \"calls\": %lld, \"total_ms\": %.6f, \"steps\": [",
                  static_cast<long long>(r.calls), r.total_ms);
    out += std::string(first ? "" : ", ") + "{\"name\": \"" + JsonEscape(x->name()->str()) +
           "\", \"vendor\": \"" + JsonEscape(x->vendor()->str()) + buf;
    first = false;
    std::vector<StepRow> steps = RegionSteps(index);
    for (size_t i = 0; i < steps.size(); ++i) {
      const StepRow& s = steps[i];
      std::snprintf(buf, sizeof(buf),
                    "\"step\": %d, \"calls\": %lld, \"total_ms\": %.6f, \"reference\": %s", s.step,
                    static_cast<long long>(s.calls), s.total_ms, s.reference ? "true" : "false");
      out += std::string(i ? ", " : "") + "{" + buf + ", \"name\": \"" +
             JsonEscape(StepName(exe, s)) + "\", \"kind\": \"" + JsonEscape(s.kind) +
             "\", \"impl\": \"" + JsonEscape(s.impl) + "\", \"shapes\": \"" + JsonEscape(s.shapes) +
             "\"}";
    }
    out += "]}";
  }
  out += "], \"op_types\": " + JsonRows(ByOpType(exe));
  return out;
}

std::string Profile::ChromeTrace(const Executable& exe) const {
  std::vector<std::string> lines;
  char buf[128];
  for (const ProfileEvent& e : events_) {
    std::string name = CalleeName(exe, e);
    if (name.empty()) name = GetOpcodeInfo(static_cast<Opcode>(e.opcode)).mnemonic;
    std::snprintf(buf, sizeof(buf), "\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f",
                  e.start_ns / 1e3, e.dur_ns / 1e3);
    lines.push_back("  {\"name\": \"" + JsonEscape(name) + "\", \"cat\": \"" +
                    GetOpcodeInfo(static_cast<Opcode>(e.opcode)).mnemonic + "\", " + buf +
                    ", \"args\": {\"function\": \"" +
                    JsonEscape(exe.root().functions()->Get(e.function)->name()->str()) +
                    "\", \"pc\": " + std::to_string(e.pc) + ", \"node\": \"" +
                    JsonEscape(exe.SourceNode(e.function, e.pc)) + "\"}}");
  }
  AddStepTraceEvents(exe, &lines);
  std::string out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < lines.size(); ++i) out += lines[i] + (i + 1 < lines.size() ? ",\n" : "\n");
  return out + "]}\n";
}

// The region steps as complete events inside their call's event: each ends when it was
// reported and starts its duration earlier, clipped to the call and to the previous step of
// the same call, so the events nest even when a vendor's durations and the clock disagree.
void Profile::AddStepTraceEvents(const Executable& exe, std::vector<std::string>* lines) const {
  char buf[128];
  int64_t floor_ns = 0;
  size_t call = SIZE_MAX;
  for (const StepEvent& s : step_events_) {
    if (s.event >= events_.size()) continue;  // the call's event was never recorded
    const ProfileEvent& region = events_[s.event];
    if (s.event != call) floor_ns = region.start_ns;
    call = s.event;
    int64_t end = std::clamp(s.end_ns - origin_ns_, floor_ns, region.start_ns + region.dur_ns);
    int64_t start = std::clamp(end - s.dur_ns, floor_ns, end);
    floor_ns = end;
    const StepRow& row = steps_[s.row];
    std::snprintf(buf, sizeof(buf), "\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f",
                  start / 1e3, (end - start) / 1e3);
    lines->push_back("  {\"name\": \"" + JsonEscape(StepName(exe, row)) +
                     "\", \"cat\": \"region_step\", " + buf + ", \"args\": {\"step\": " +
                     std::to_string(row.step) + ", \"impl\": \"" + JsonEscape(row.impl) +
                     "\", \"shapes\": \"" + JsonEscape(row.shapes) +
                     "\", \"reference\": " + (row.reference ? "true" : "false") + "}}");
  }
}

}  // namespace kiln
