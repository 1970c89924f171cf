// Profile summaries and the Chrome trace.
#include "vm/profile.h"

#include <algorithm>
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

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
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

void AppendRows(std::string& out, const char* title, const std::vector<Profile::Row>& rows, double total) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-40s %10s %12s %10s %7s\n", title, "calls", "total ms", "mean us", "share");
  out += line;
  for (const Profile::Row& r : rows) {
    std::snprintf(line, sizeof(line), "  %-38.38s %10lld %12.3f %10.2f %6.1f%%\n", r.name.c_str(),
                  static_cast<long long>(r.calls), r.total_ms, r.total_ms * 1000.0 / std::max<int64_t>(r.calls, 1),
                  total > 0 ? 100.0 * r.total_ms / total : 0.0);
    out += line;
  }
  out += "\n";
}

}  // namespace

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
  for (const ProfileEvent& e : events_) {
    if (static_cast<Opcode>(e.opcode) != Opcode::kInvokeExternal) continue;
    Row& r = rows[CalleeName(exe, e)];
    ++r.calls;
    r.total_ms += e.dur_ns / 1e6;
  }
  return Sorted(rows);
}

std::string Profile::Table(const Executable& exe) const {
  double total = 0;
  for (const ProfileEvent& e : events_) total += e.dur_ns / 1e6;
  std::string out;
  AppendRows(out, "instruction", ByInstruction(), total);
  AppendRows(out, "kernel / shape function", ByKernel(exe), total);
  AppendRows(out, "external region", ByExternalRegion(exe), total);
  char line[96];
  std::snprintf(line, sizeof(line), "%zu instructions, %.3f ms in total\n", events_.size(), total);
  return out + line;
}

std::string Profile::ChromeTrace(const Executable& exe) const {
  std::string out = "{\"traceEvents\": [\n";
  char buf[128];
  for (size_t i = 0; i < events_.size(); ++i) {
    const ProfileEvent& e = events_[i];
    std::string name = CalleeName(exe, e);
    if (name.empty()) name = GetOpcodeInfo(static_cast<Opcode>(e.opcode)).mnemonic;
    std::snprintf(buf, sizeof(buf), "\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f",
                  e.start_ns / 1e3, e.dur_ns / 1e3);
    out += "  {\"name\": \"" + Escape(name) + "\", \"cat\": \"" +
           GetOpcodeInfo(static_cast<Opcode>(e.opcode)).mnemonic + "\", " + buf +
           ", \"args\": {\"function\": \"" +
           Escape(exe.root().functions()->Get(e.function)->name()->str()) + "\", \"pc\": " +
           std::to_string(e.pc) + ", \"node\": \"" + Escape(exe.SourceNode(e.function, e.pc)) + "\"}}";
    out += i + 1 < events_.size() ? ",\n" : "\n";
  }
  return out + "]}\n";
}

}  // namespace kiln
