// Disassembly and inspection, printed from the opcode table's operand kinds.
#include "vm/disassembler.h"

#include <cinttypes>
#include <cstdio>

#include "vm/opcodes.h"

namespace kiln {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

std::string Quoted(const flatbuffers::String* s) { return s ? " '" + s->str() + "'" : ""; }

std::string List(const std::string& prefix, const int32_t* values, int from, int to) {
  std::string s = "(";
  for (int i = from; i < to; ++i) s += (i > from ? ", " : "") + prefix + Str(values[i]);
  return s + ")";
}

// A kImm64List: `count` 64-bit values stored as (low, high) pairs.
std::string List64(const int32_t* values, int count) {
  std::string s = "(";
  for (int i = 0; i < count; ++i) s += (i > 0 ? ", " : "") + Str(ReadOperand64(values, 2 * i));
  return s + ")";
}

// Where a combined list splits into inputs and outputs, per arity kind.
int SplitPoint(const fb::Executable& exe, OpArity arity, int32_t target, int len) {
  switch (arity) {
    case OpArity::kArityFunction: return static_cast<int>(Len(exe.functions()->Get(target)->params()));
    case OpArity::kArityKernel: return static_cast<int>(Len(exe.kernels()->Get(target)->input_dtypes()));
    case OpArity::kArityShapeFunc: return static_cast<int>(exe.shape_functions()->Get(target)->num_inputs());
    case OpArity::kArityExternal: return static_cast<int>(exe.external_regions()->Get(target)->num_inputs());
    default: return len;
  }
}

std::string Operand(const fb::Executable& exe, OperandKind kind, int32_t v) {
  switch (kind) {
    case OperandKind::kReg: return "r" + Str(v);
    case OperandKind::kFunction: return "@" + exe.functions()->Get(v)->name()->str();
    case OperandKind::kKernel: return "kernels[" + Str(v) + "]" + Quoted(exe.kernels()->Get(v)->name());
    case OperandKind::kShapeFunc:
      return "shape_functions[" + Str(v) + "]" + Quoted(exe.shape_functions()->Get(v)->name());
    case OperandKind::kExternal:
      return "external_regions[" + Str(v) + "]" + Quoted(exe.external_regions()->Get(v)->name());
    case OperandKind::kConstant: return "constants[" + Str(v) + "]" + Quoted(exe.constants()->Get(v)->name());
    case OperandKind::kString: return "\"" + exe.strings()->Get(v)->str() + "\"";
    case OperandKind::kTarget: return "L" + Str(v);
    case OperandKind::kAlign: return "align " + Str(v);
    default: return Str(v);
  }
}

std::string Signature(const FunctionSignature& sig) {
  std::string s = "@" + sig.name + "(";
  for (size_t i = 0; i < sig.params.size(); ++i) s += (i ? ", " : "") + sig.params[i].ToString();
  s += ") -> (";
  for (size_t i = 0; i < sig.results.size(); ++i) s += (i ? ", " : "") + sig.results[i].ToString();
  return s + ")";
}

std::string Bytes(uint64_t n) {
  char buf[64];
  if (n >= (1u << 20)) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes (%.1f MiB)", n, n / 1048576.0);
  } else if (n >= 1024) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes (%.1f KiB)", n, n / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", n);
  }
  return buf;
}

std::string DTypes(const flatbuffers::Vector<fb::DType>* v) {
  std::string s = "(";
  for (size_t i = 0; i < Len(v); ++i) s += (i ? ", " : "") + std::string(DTypeShortName(static_cast<DType>(v->Get(i))));
  return s + ")";
}

}  // namespace

std::string DisassembleInstruction(const Executable& exe, int function, int pc) {
  const fb::Executable& root = exe.root();
  const fb::Function* fn = root.functions()->Get(function);
  const fb::Instruction* in = fn->code()->Get(pc);
  const OpcodeInfo& info = GetOpcodeInfo(static_cast<Opcode>(in->opcode()));
  const int32_t f[kNumOperandFields] = {in->a(), in->b(), in->c(), in->d(), in->e()};
  const int32_t* ops = fn->operands() ? fn->operands()->data() : nullptr;
  std::string s = info.mnemonic;
  if (info.dtype == OpDType::kUsesDType) s += std::string(" ") + DTypeShortName(static_cast<DType>(in->dtype()));
  for (int i = 0; i < kNumOperandFields; ++i) {
    OperandKind kind = info.operands[i];
    if (kind == OperandKind::kNone || kind == OperandKind::kCount || kind == OperandKind::kImm64Hi) continue;
    s += " ";
    if (kind == OperandKind::kImm64Lo) {
      s += Str(static_cast<int64_t>((uint64_t{static_cast<uint32_t>(f[i + 1])} << 32) | static_cast<uint32_t>(f[i])));
    } else if (kind == OperandKind::kImm64) {
      s += Str(ReadOperand64(ops, f[i]));
    } else if (kind == OperandKind::kImmList) {
      s += "shape " + List("", ops + f[i], 0, f[i + 1]);
    } else if (kind == OperandKind::kImm64List) {
      s += "shape " + List64(ops + f[i], f[i + 1]);
    } else if (kind == OperandKind::kRegList) {
      int len = f[i + 1];
      int split = i > 0 ? SplitPoint(root, info.arity, f[0], len) : len;
      s += List("r", ops + f[i], 0, split);
      if (split < len) s += " -> " + List("r", ops + f[i], split, len);
    } else {
      s += Operand(root, kind, f[i]);
    }
  }
  return s;
}

std::string DisassembleFunction(const Executable& exe, int function) {
  const fb::Function* fn = exe.root().functions()->Get(function);
  std::string s = "func " + Signature(exe.signature(function)) + "  registers=" +
                  Str(fn->register_count()) + "\n";
  for (int pc = 0; pc < static_cast<int>(fn->code()->size()); ++pc) {
    char num[16];
    std::snprintf(num, sizeof(num), "%5d  ", pc);
    s += num + DisassembleInstruction(exe, function, pc);
    std::string_view node = exe.SourceNode(function, pc);
    if (!node.empty()) s += "    ; " + std::string(node);
    s += "\n";
  }
  return s;
}

namespace {

// Bytes of a code target's objects (kernels and shape functions).
uint64_t AotBytes(const fb::AotTarget& t) {
  uint64_t n = 0;
  for (const auto* table : {t.kernels(), t.shape_functions()}) {
    for (size_t i = 0; i < Len(table); ++i) n += Len(table->Get(i)->object());
  }
  return n;
}

// "41 enabled (avx2 fma)": how many features a target requires, and the vector ones that
// decide where it runs.
std::string FeatureSummary(const flatbuffers::String* features) {
  std::string text = features ? features->str() : "";
  int enabled = 0;
  std::string notable;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string f = text.substr(pos, end - pos);
    if (f.size() > 1 && f[0] == '+') {
      ++enabled;
      for (const char* name : {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni",
                               "avx512bf16", "amx-tile"}) {
        if (f.compare(1, std::string::npos, name) == 0) notable += (notable.empty() ? "" : " ") + f.substr(1);
      }
    }
    pos = end + 1;
  }
  return Str(enabled) + " enabled" + (notable.empty() ? "" : " (" + notable + ")");
}

// One line per code target: triple, cpu, features, LLVM, objects and bytes.
std::string InspectAotTargets(const fb::Executable& r) {
  std::string s = "== code ahead of time (" + Str(Len(r.aot_targets())) + " targets)\n";
  for (size_t i = 0; i < Len(r.aot_targets()); ++i) {
    const fb::AotTarget* t = r.aot_targets()->Get(i);
    size_t objects = 0;
    for (const auto* table : {t->kernels(), t->shape_functions()}) {
      for (size_t j = 0; j < Len(table); ++j) objects += Len(table->Get(j)->object()) ? 1 : 0;
    }
    s += "  [" + Str(i) + "] " + t->triple()->str() + " cpu " + t->cpu()->str() + ", features " +
         FeatureSummary(t->features()) + ", LLVM " + t->llvm_version()->str() + ", " +
         t->abi()->str() + ": " + Str(objects) + " objects, " + Bytes(AotBytes(*t)) + "\n";
  }
  return s;
}

}  // namespace

std::string InspectExecutable(const Executable& exe, const RegionDescriber& describe) {
  const fb::Executable& r = exe.root();
  std::string s = "kiln executable, format " + Str(exe.version_major()) + "." +
                  Str(exe.version_minor()) + ", producer '" + std::string(exe.producer()) + "'\n";
  s += "entry: @" + std::string(exe.entry_function()) + "\n";
  if (const fb::ModelMetadata* m = r.metadata()) {
    if (m->opset()) s += "opset: " + Str(m->opset()) + "\n";
    if (m->producer_name() && m->producer_name()->size()) s += "model: " + m->producer_name()->str() + "\n";
  }
  s += "\n== functions (" + Str(exe.num_functions()) + ")\n";
  for (int i = 0; i < exe.num_functions(); ++i) s += DisassembleFunction(exe, i) + "\n";
  s += "== kernels (" + Str(Len(r.kernels())) + ")\n";
  for (size_t i = 0; i < Len(r.kernels()); ++i) {
    const fb::Kernel* k = r.kernels()->Get(i);
    s += "  [" + Str(i) + "] " + k->name()->str() + " " + DTypes(k->input_dtypes()) + " -> " +
         DTypes(k->output_dtypes()) + "  payload " + Bytes(Len(k->payload())) +
         (k->payload_format() && k->payload_format()->size() ? " (" + k->payload_format()->str() + ")" : "") + "\n";
  }
  s += "== shape functions (" + Str(Len(r.shape_functions())) + ")\n";
  for (size_t i = 0; i < Len(r.shape_functions()); ++i) {
    const fb::ShapeFunction* f = r.shape_functions()->Get(i);
    s += "  [" + Str(i) + "] " + f->name()->str() + " inputs=" + Str(f->num_inputs()) +
         " outputs=" + Str(f->num_outputs()) + "  payload " + Bytes(Len(f->payload())) + "\n";
  }
  s += "== external regions (" + Str(Len(r.external_regions())) + ")\n";
  for (size_t i = 0; i < Len(r.external_regions()); ++i) {
    const fb::ExternalRegion* x = r.external_regions()->Get(i);
    s += "  [" + Str(i) + "] " + x->name()->str() + " vendor=" + x->vendor()->str() + " inputs=" +
         Str(x->num_inputs()) + " outputs=" + Str(x->num_outputs()) + " constants=" +
         Str(Len(x->constants())) + "  blob " + Bytes(Len(x->blob())) + "\n";
    // Verified: -1 or a function index.
    s += "      fallback: " +
         (x->fallback() < 0 ? std::string("none (the region needs its vendor)")
                            : "@" + r.functions()->Get(x->fallback())->name()->str() +
                                  " (functions[" + Str(x->fallback()) + "])") +
         "\n";
    if (x->tuned_fallback() || (x->tuned_note() && x->tuned_note()->size() > 0)) {
      s += std::string("      tuned: ") +
           (x->tuned_fallback() ? "runs its fallback (measured faster)" : "runs its vendor") +
           (x->tuned_note() && x->tuned_note()->size() > 0 ? "; " + x->tuned_note()->str() : "") +
           "\n";
    }
    if (describe) {
      StatusOr<std::string> text = describe(x->vendor()->str(), x->blob() ? x->blob()->data() : nullptr,
                                            Len(x->blob()));
      std::string lines = text.ok() ? *text : "(" + text.status().ToString() + ")\n";
      size_t start = 0;
      while (start < lines.size()) {
        size_t end = lines.find('\n', start);
        if (end == std::string::npos) end = lines.size();
        s += "      " + lines.substr(start, end - start) + "\n";
        start = end + 1;
      }
    }
  }
  s += InspectAotTargets(r);
  s += "== constants (" + Str(exe.num_constants()) + ")\n";
  uint64_t const_bytes = 0;
  for (int i = 0; i < exe.num_constants(); ++i) {
    const fb::Constant* c = r.constants()->Get(i);
    const_bytes += c->size();
    s += "  [" + Str(i) + "] " + (c->name() ? c->name()->str() : "") + " " +
         exe.constant(i).TypeString() + " at " + Str(c->offset()) + "  " + Bytes(c->size()) + "\n";
  }
  uint64_t code = 0, operands = 0, payloads = 0, blobs = 0, debug = 0, strings = 0, aot = 0;
  for (size_t i = 0; i < Len(r.aot_targets()); ++i) aot += AotBytes(*r.aot_targets()->Get(i));
  for (size_t i = 0; i < Len(r.functions()); ++i) {
    code += Len(r.functions()->Get(i)->code()) * sizeof(fb::Instruction);
    operands += Len(r.functions()->Get(i)->operands()) * sizeof(int32_t);
  }
  for (size_t i = 0; i < Len(r.kernels()); ++i) payloads += Len(r.kernels()->Get(i)->payload());
  for (size_t i = 0; i < Len(r.shape_functions()); ++i) payloads += Len(r.shape_functions()->Get(i)->payload());
  for (size_t i = 0; i < Len(r.external_regions()); ++i) blobs += Len(r.external_regions()->Get(i)->blob());
  if (r.debug() && r.debug()->functions()) {
    for (size_t i = 0; i < r.debug()->functions()->size(); ++i) {
      debug += Len(r.debug()->functions()->Get(i)->source_nodes()) * sizeof(int32_t);
    }
  }
  for (size_t i = 0; i < Len(r.strings()); ++i) strings += r.strings()->Get(i)->size() + 1;
  s += "\n== sections\n";
  s += "  file              " + Bytes(exe.file_size()) + "\n";
  s += "  flatbuffer        " + Bytes(exe.flatbuffer_size()) + "\n";
  s += "    code            " + Bytes(code) + "\n";
  s += "    operands        " + Bytes(operands) + "\n";
  s += "    kernel payloads " + Bytes(payloads) + "\n";
  s += "    region blobs    " + Bytes(blobs) + "\n";
  s += "    AOT objects     " + Bytes(aot) + "\n";
  s += "    debug info      " + Bytes(debug) + "\n";
  s += "    strings         " + Bytes(strings) + "\n";
  s += "  constant data     " + Bytes(const_bytes) + " (segment " +
       Bytes(exe.file_size() - exe.flatbuffer_size()) + ")\n";
  return s;
}

}  // namespace kiln
