// Load-time verification: structure (FlatBuffers), semantics (tables), bytecode (functions).
#include "vm/verifier.h"

#include <string>
#include <unordered_map>

#include "serializer/version.h"
#include "base/dtype.h"
#include "vm/opcodes.h"
#include "base/tensor.h"

namespace kiln {
namespace {

constexpr uint32_t kMaxRegisters = 1u << 20;
constexpr uint32_t kMaxArity = 1u << 16;

// Any integer as written, so uint64 offsets and checksums above 2^63 do not print negative.
template <typename T>
std::string Str(T v) {
  return std::to_string(v);
}

std::string Where(const char* table, size_t i) { return std::string(table) + "[" + Str(i) + "]"; }

std::string Named(const char* table, size_t i, const flatbuffers::String* name) {
  std::string w = Where(table, i);
  if (name != nullptr && name->size() > 0) w += " '" + name->str() + "'";
  return w;
}

// The schema's DType enum and kiln::DType must number the same types.
static_assert(static_cast<int>(fb::DType::MAX) == kNumDTypes - 1);
static_assert(static_cast<int>(fb::DType::U64) == static_cast<int>(DType::kU64));

Status CheckDType(uint8_t raw, const std::string& where) {
  if (!IsValidDType(raw)) return InvalidFormat(where + ": invalid dtype " + Str(raw));
  return Status::Ok();
}

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// ---- Layer 1 -------------------------------------------------------------------------------

// `data` starts at the size prefix; `size` covers prefix + FlatBuffer (alignment is relative
// to the prefix, as FlatBuffers writes it).
Status CheckVersion(const uint8_t* data, size_t size) {
  // Verify just the root table and its header before reading the version, so a file of
  // another major (whose other tables may differ) is reported by version, not as corrupt.
  flatbuffers::Verifier v(data, size);
  const uint8_t* buf = data + sizeof(flatbuffers::uoffset_t);
  auto off = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(buf);
  if (off % 4 != 0 || off < 8 || off > size - 8) {
    return InvalidFormat("root table offset " + Str(off) + " is outside the FlatBuffer");
  }
  auto* root = reinterpret_cast<const fb::Executable*>(buf + off);
  auto* table = reinterpret_cast<const flatbuffers::Table*>(root);  // generated tables derive privately
  if (!table->VerifyTableStart(v) || !table->VerifyOffset(v, fb::Executable::VT_HEADER) ||
      !v.VerifyTable(root->header())) {
    return InvalidFormat("header table is malformed");
  }
  const fb::Header* header = root->header();
  if (header == nullptr || header->version() == nullptr) {
    return InvalidFormat("header or header.version is missing");
  }
  uint16_t major = header->version()->major(), minor = header->version()->minor();
  std::string theirs = Str(major) + "." + Str(minor);
  std::string ours = Str(kFormatMajor) + "." + Str(kFormatMinor);
  if (major != kFormatMajor) {
    return Unsupported("format version " + theirs + " cannot be loaded by this runtime (format " +
                       ours + "): the major version differs");
  }
  if (minor > kFormatMinor) {
    return Unsupported("format version " + theirs + " is newer than this runtime's format " +
                       ours + "; upgrade kiln to load it");
  }
  return Status::Ok();
}

}  // namespace

std::string AotTargetWhere(size_t i, const fb::AotTarget& target) {
  auto text = [](const flatbuffers::String* s) { return s ? s->str() : std::string("?"); };
  return "aot_targets[" + Str(i) + "] (" + text(target.triple()) + ", cpu " + text(target.cpu()) +
         ")";
}

uint64_t Fnv1a64(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// True when the bytes start the way every ONNX exporter writes a ModelProto: field 1
// (ir_version, a small varint), then another of ModelProto's fields 2-8 or 14 (producer_name,
// producer_version, domain, model_version, doc_string, graph, opset_import, metadata_props).
// Only used to word the error for a file that lacks the 'KILN' identifier.
bool LooksLikeOnnxModel(const uint8_t* data, size_t size) {
  if (size < 4 || data[0] != 0x08 || data[1] == 0 || data[1] >= 0x80) return false;
  switch (data[2]) {
    case 0x12: case 0x1a: case 0x22: case 0x28: case 0x32: case 0x3a: case 0x42: case 0x72:
      return true;
    default:
      return false;
  }
}

Status VerifyStructure(const uint8_t* data, size_t size, const fb::Executable** root,
                       size_t* flatbuffer_size) {
  if (size < 12) {
    return InvalidFormat("file is " + Str(size) + " bytes; too small to be a .kiln executable");
  }
  // The identifier first: a file that is not a .kiln at all should say so, not "truncated".
  const uint8_t* buf = data + sizeof(flatbuffers::uoffset_t);
  if (!flatbuffers::BufferHasIdentifier(buf, kFileIdentifier)) {
    if (LooksLikeOnnxModel(data, size)) {
      return InvalidFormat(
          "not a .kiln executable: this is an ONNX model; compile it first with `kiln compile "
          "MODEL.onnx -o MODEL.kiln`");
    }
    std::string got;
    for (int i = 4; i < 8; ++i) {
      char ch = static_cast<char>(buf[i]);
      got += (ch >= 32 && ch < 127) ? std::string(1, ch) : "\\x" + Str(buf[i]);
    }
    return InvalidFormat("wrong file identifier '" + got + "' (expected 'KILN'): not a .kiln file");
  }
  auto fb_len = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data);
  if (fb_len < 8) {
    return InvalidFormat("size prefix " + Str(fb_len) + " is smaller than any FlatBuffer (8 bytes)");
  }
  if (fb_len > size - sizeof(flatbuffers::uoffset_t)) {
    return InvalidFormat("truncated: the FlatBuffer claims " + Str(fb_len) + " bytes but only " +
                         Str(size - sizeof(flatbuffers::uoffset_t)) + " follow the size prefix");
  }
  size_t total = fb_len + sizeof(flatbuffers::uoffset_t);
  RETURN_IF_ERROR(CheckVersion(data, total));
  flatbuffers::Verifier verifier(data, total, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!verifier.VerifySizePrefixedBuffer<fb::Executable>(kFileIdentifier)) {
    return InvalidFormat("FlatBuffers verification failed: the file is corrupt or truncated");
  }
  *root = flatbuffers::GetRoot<fb::Executable>(buf);
  *flatbuffer_size = total;
  return Status::Ok();
}

// ---- Layer 2 -------------------------------------------------------------------------------

namespace {

Status CheckValueSpec(const fb::TensorSpec* spec, const std::string& where) {
  if (spec == nullptr) return InvalidFormat(where + ": missing");
  if (spec->is_tuple()) return Status::Ok();
  RETURN_IF_ERROR(CheckDType(static_cast<uint8_t>(spec->dtype()), where));
  if (Len(spec->shape()) > static_cast<size_t>(kMaxRank)) {
    return InvalidFormat(where + ": rank " + Str(Len(spec->shape())) + " > " + Str(kMaxRank));
  }
  for (size_t d = 0; d < Len(spec->shape()); ++d) {
    const fb::Dim* dim = spec->shape()->Get(d);
    if (dim == nullptr || dim->value() < -1) {
      return InvalidFormat(where + ".shape[" + Str(d) + "]: invalid dim");
    }
  }
  return Status::Ok();
}

Status CheckSpecs(const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>>* specs,
                  const std::string& where) {
  for (size_t i = 0; i < Len(specs); ++i) {
    RETURN_IF_ERROR(CheckValueSpec(specs->Get(i), where + "[" + Str(i) + "]"));
  }
  return Status::Ok();
}

Status CheckFunctions(const fb::Executable& exe) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < Len(exe.functions()); ++i) {
    const fb::Function* f = exe.functions()->Get(i);
    std::string w = Named("functions", i, f->name());
    if (f->name() == nullptr || f->name()->size() == 0) return InvalidFormat(w + ": missing name");
    auto [it, fresh] = seen.emplace(f->name()->str(), i);
    if (!fresh) return InvalidFormat(w + ": duplicate name (also functions[" + Str(it->second) + "])");
    if (f->register_count() > kMaxRegisters) {
      return InvalidFormat(w + ": register_count " + Str(f->register_count()) + " > " +
                           Str(kMaxRegisters));
    }
    if (Len(f->params()) > f->register_count()) {
      return InvalidFormat(w + ": " + Str(Len(f->params())) + " params need more than " +
                           Str(f->register_count()) + " registers");
    }
    if (Len(f->code()) == 0) return InvalidFormat(w + ": no code");
    RETURN_IF_ERROR(CheckSpecs(f->params(), w + ".params"));
    RETURN_IF_ERROR(CheckSpecs(f->results(), w + ".results"));
  }
  return Status::Ok();
}

Status CheckDTypeList(const flatbuffers::Vector<fb::DType>* list, const std::string& where) {
  for (size_t j = 0; j < Len(list); ++j) {
    RETURN_IF_ERROR(CheckDType(static_cast<uint8_t>(list->Get(j)), where + "[" + Str(j) + "]"));
  }
  return Status::Ok();
}

Status CheckKernels(const fb::Executable& exe) {
  for (size_t i = 0; i < Len(exe.kernels()); ++i) {
    const fb::Kernel* k = exe.kernels()->Get(i);
    std::string w = Named("kernels", i, k->name());
    if (k->name() == nullptr || k->name()->size() == 0) return InvalidFormat(w + ": missing name");
    if (Len(k->input_dtypes()) + Len(k->output_dtypes()) > kMaxArity) {
      return InvalidFormat(w + ": too many arguments");
    }
    RETURN_IF_ERROR(CheckDTypeList(k->input_dtypes(), w + ".input_dtypes"));
    RETURN_IF_ERROR(CheckDTypeList(k->output_dtypes(), w + ".output_dtypes"));
  }
  for (size_t i = 0; i < Len(exe.shape_functions()); ++i) {
    const fb::ShapeFunction* s = exe.shape_functions()->Get(i);
    std::string w = Named("shape_functions", i, s->name());
    if (s->name() == nullptr || s->name()->size() == 0) return InvalidFormat(w + ": missing name");
    if (uint64_t{s->num_inputs()} + s->num_outputs() > kMaxArity) {
      return InvalidFormat(w + ": too many arguments");
    }
    // Absent or empty means "reads no input values"; otherwise one flag per input.
    if (Len(s->data_dependent()) != 0 && Len(s->data_dependent()) != s->num_inputs()) {
      return InvalidFormat(w + ": data_dependent has " + Str(Len(s->data_dependent())) +
                           " entries for " + Str(s->num_inputs()) + " inputs");
    }
  }
  return Status::Ok();
}

Status CheckConstants(const fb::Executable& exe, size_t file_size, size_t fb_size) {
  for (size_t i = 0; i < Len(exe.constants()); ++i) {
    const fb::Constant* c = exe.constants()->Get(i);
    std::string w = Named("constants", i, c->name());
    RETURN_IF_ERROR(CheckDType(static_cast<uint8_t>(c->dtype()), w));
    size_t rank = Len(c->shape());
    if (rank > static_cast<size_t>(kMaxRank)) {
      return InvalidFormat(w + ": rank " + Str(rank) + " > " + Str(kMaxRank));
    }
    StatusOr<Shape> shape = Shape::Make(rank ? c->shape()->data() : nullptr, static_cast<int>(rank));
    if (!shape.ok()) return InvalidFormat(w + ": " + shape.status().message());
    StatusOr<int64_t> n = shape->CheckedNumElements();
    if (!n.ok()) return InvalidFormat(w + ": " + n.status().message());
    uint64_t expect = static_cast<uint64_t>(*n) * DTypeSize(static_cast<DType>(c->dtype()));
    if (c->size() != expect) {
      return InvalidFormat(w + ": size " + Str(c->size()) + " bytes but shape " + shape->ToString() +
                           " needs " + Str(expect));
    }
    if (c->offset() % kConstantAlignment != 0) {
      return InvalidFormat(w + ": data offset " + Str(c->offset()) + " is not 64-byte aligned");
    }
    if (c->offset() < fb_size || c->offset() > file_size || c->size() > file_size - c->offset()) {
      return InvalidFormat(w + ": data [" + Str(c->offset()) + ", +" + Str(c->size()) +
                           ") lies outside the data segment [" + Str(fb_size) + ", " +
                           Str(file_size) + ")");
    }
  }
  return Status::Ok();
}

// The fallback stands in for the region at its invoke_external (same operand list), so it
// takes the region's inputs as parameters and returns its outputs.
Status CheckFallback(const fb::Executable& exe, const fb::ExternalRegion& r, const std::string& w) {
  int32_t f = r.fallback();
  if (f == -1) {
    if (!r.tuned_fallback()) return Status::Ok();
    return InvalidFormat(w + ".tuned_fallback: set, but the region has no fallback function to "
                         "run (fallback -1)");
  }
  if (f < -1 || static_cast<size_t>(f) >= Len(exe.functions())) {
    return InvalidFormat(w + ".fallback: function " + Str(f) + " out of range [-1, " +
                         Str(Len(exe.functions())) + ")");
  }
  const fb::Function* fn = exe.functions()->Get(f);
  if (Len(fn->params()) != r.num_inputs() || Len(fn->results()) != r.num_outputs()) {
    return InvalidFormat(w + ".fallback: function " + Str(f) + " '" + fn->name()->str() +
                         "' takes " + Str(Len(fn->params())) + " parameters and returns " +
                         Str(Len(fn->results())) + " results; the region has " +
                         Str(r.num_inputs()) + " inputs and " + Str(r.num_outputs()) + " outputs");
  }
  return Status::Ok();
}

Status CheckExternalRegions(const fb::Executable& exe) {
  for (size_t i = 0; i < Len(exe.external_regions()); ++i) {
    const fb::ExternalRegion* r = exe.external_regions()->Get(i);
    std::string w = Named("external_regions", i, r->name());
    if (r->name() == nullptr || r->name()->size() == 0) return InvalidFormat(w + ": missing name");
    if (r->vendor() == nullptr || r->vendor()->size() == 0) {
      return InvalidFormat(w + ": missing vendor");
    }
    if (uint64_t{r->num_inputs()} + r->num_outputs() > kMaxArity) {
      return InvalidFormat(w + ": too many arguments");
    }
    uint64_t sum = r->blob() ? Fnv1a64(r->blob()->data(), r->blob()->size()) : Fnv1a64(nullptr, 0);
    if (sum != r->checksum()) {
      return InvalidFormat(w + ": blob checksum mismatch (stored " + Str(r->checksum()) +
                           ", computed " + Str(sum) + ")");
    }
    for (size_t j = 0; j < Len(r->constants()); ++j) {
      if (r->constants()->Get(j) >= Len(exe.constants())) {
        return InvalidFormat(w + ".constants[" + Str(j) + "]: constant " +
                             Str(r->constants()->Get(j)) + " >= " + Str(Len(exe.constants())));
      }
    }
    RETURN_IF_ERROR(CheckFallback(exe, *r, w));
  }
  return Status::Ok();
}

// One AotTarget's objects: parallel to `expected` entries (or none), each with a symbol when it
// has code, and intact (checksum). Whether the bytes are an object the host can link is the
// kernel provider's check (jit/aot_objects.h), made only for the target it uses.
Status CheckAotObjects(const flatbuffers::Vector<flatbuffers::Offset<fb::AotObject>>* objects,
                       size_t expected, const std::string& where) {
  if (Len(objects) != 0 && Len(objects) != expected) {
    return InvalidFormat(where + ": " + Str(Len(objects)) + " objects for " + Str(expected) +
                         " entries");
  }
  for (size_t j = 0; j < Len(objects); ++j) {
    const fb::AotObject* o = objects->Get(j);
    std::string w = where + "[" + Str(j) + "]";
    if (Len(o->object()) == 0) continue;
    if (o->symbol() == nullptr || o->symbol()->size() == 0) {
      return InvalidFormat(w + ": object without a symbol");
    }
    uint64_t sum = Fnv1a64(o->object()->data(), o->object()->size());
    if (sum != o->checksum()) {
      return InvalidFormat(w + ": object checksum mismatch (stored " + Str(o->checksum()) +
                           ", computed " + Str(sum) + "): the code section is corrupt");
    }
  }
  return Status::Ok();
}

Status CheckAotTargets(const fb::Executable& exe) {
  for (size_t i = 0; i < Len(exe.aot_targets()); ++i) {
    const fb::AotTarget* t = exe.aot_targets()->Get(i);
    std::string w = AotTargetWhere(i, *t);
    for (auto [field, value] : {std::pair<const char*, const flatbuffers::String*>{"triple", t->triple()},
                                {"cpu", t->cpu()},
                                {"llvm_version", t->llvm_version()},
                                {"abi", t->abi()}}) {
      if (value == nullptr || value->size() == 0) return InvalidFormat(w + ": missing " + field);
    }
    RETURN_IF_ERROR(CheckAotObjects(t->kernels(), Len(exe.kernels()), w + ".kernels"));
    RETURN_IF_ERROR(
        CheckAotObjects(t->shape_functions(), Len(exe.shape_functions()), w + ".shape_functions"));
  }
  return Status::Ok();
}

Status CheckMetadataAndDebug(const fb::Executable& exe) {
  if (const fb::ModelMetadata* m = exe.metadata()) {
    RETURN_IF_ERROR(CheckSpecs(m->inputs(), "metadata.inputs"));
    RETURN_IF_ERROR(CheckSpecs(m->outputs(), "metadata.outputs"));
    if (m->entry() != nullptr && m->entry()->size() > 0) {
      bool found = false;
      for (size_t i = 0; i < Len(exe.functions()) && !found; ++i) {
        found = exe.functions()->Get(i)->name()->str() == m->entry()->str();
      }
      if (!found) return InvalidFormat("metadata.entry: no function named '" + m->entry()->str() + "'");
    }
  }
  const fb::DebugInfo* debug = exe.debug();
  if (debug == nullptr) return Status::Ok();
  if (Len(debug->functions()) > Len(exe.functions())) {
    return InvalidFormat("debug.functions: " + Str(Len(debug->functions())) + " entries for " +
                         Str(Len(exe.functions())) + " functions");
  }
  for (size_t i = 0; i < Len(debug->functions()); ++i) {
    const auto* nodes = debug->functions()->Get(i)->source_nodes();
    if (nodes == nullptr) continue;
    std::string w = "debug.functions[" + Str(i) + "]";
    if (nodes->size() != Len(exe.functions()->Get(i)->code())) {
      return InvalidFormat(w + ": " + Str(nodes->size()) + " source nodes for " +
                           Str(Len(exe.functions()->Get(i)->code())) + " instructions");
    }
    for (size_t pc = 0; pc < nodes->size(); ++pc) {
      int32_t s = nodes->Get(pc);
      if (s < -1 || s >= static_cast<int64_t>(Len(exe.strings()))) {
        return InvalidFormat(w + ".source_nodes[" + Str(pc) + "]: string " + Str(s) +
                             " out of range");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status VerifySemantics(const fb::Executable& exe, size_t file_size, size_t flatbuffer_size) {
  RETURN_IF_ERROR(CheckFunctions(exe));
  RETURN_IF_ERROR(CheckKernels(exe));
  RETURN_IF_ERROR(CheckConstants(exe, file_size, flatbuffer_size));
  RETURN_IF_ERROR(CheckExternalRegions(exe));
  RETURN_IF_ERROR(CheckAotTargets(exe));
  return CheckMetadataAndDebug(exe);
}

// ---- Layer 3 -------------------------------------------------------------------------------

namespace {

// Checks one function; `where` prefixes every message ("functions[3].code[17]: ...").
class FunctionVerifier {
 public:
  FunctionVerifier(const fb::Executable& exe, size_t index)
      : exe_(exe), index_(index), fn_(*exe.functions()->Get(index)) {}

  Status Run() {
    size_t n = fn_.code()->size();
    for (pc_ = 0; pc_ < n; ++pc_) RETURN_IF_ERROR(CheckInstruction(*fn_.code()->Get(pc_)));
    auto last = static_cast<Opcode>(fn_.code()->Get(n - 1)->opcode());
    if (last != Opcode::kRet && last != Opcode::kFatal && last != Opcode::kGoto) {
      pc_ = n - 1;
      return Error("falls off the end of the function (the last instruction must be ret, fatal "
                   "or goto)");
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidFormat("functions[" + Str(index_) + "].code[" + Str(pc_) + "]: " + what);
  }

  Status CheckInstruction(const fb::Instruction& ins) {
    if (!IsValidOpcode(ins.opcode())) return Error("unknown opcode " + Str(ins.opcode()));
    const OpcodeInfo& info = GetOpcodeInfo(static_cast<Opcode>(ins.opcode()));
    mnemonic_ = info.mnemonic;
    if (ins.reserved() != 0) return Error(Op() + "reserved field is " + Str(ins.reserved()));
    if (info.dtype == OpDType::kUsesDType ? !IsValidDType(ins.dtype()) : ins.dtype() != 0) {
      return Error(Op() + "invalid dtype " + Str(ins.dtype()));
    }
    const int32_t f[kNumOperandFields] = {ins.a(), ins.b(), ins.c(), ins.d(), ins.e()};
    int64_t list_len = -1;
    for (int i = 0; i < kNumOperandFields; ++i) {
      RETURN_IF_ERROR(CheckOperand(info.operands[i], f, i, &list_len));
    }
    RETURN_IF_ERROR(CheckStaticExtent(info, f, static_cast<DType>(ins.dtype())));
    return CheckArity(info.arity, f[0], list_len);
  }

  // A static shape (kImmList / kImm64List) at a byte offset (kImm / kImm64): its element count,
  // byte size and end offset must fit in int64, so the interpreter's arithmetic cannot wrap.
  Status CheckStaticExtent(const OpcodeInfo& info, const int32_t* f, DType dtype) const {
    const int32_t* ops = fn_.operands() ? fn_.operands()->data() : nullptr;
    int64_t end = 0;
    bool has_shape = false;
    for (int i = 0; i < kNumOperandFields; ++i) {
      if (info.operands[i] == OperandKind::kImm) end = f[i];
      if (info.operands[i] == OperandKind::kImm64) end = ReadOperand64(ops, f[i]);
      has_shape |= info.operands[i] == OperandKind::kImmList ||
                   info.operands[i] == OperandKind::kImm64List;
    }
    if (!has_shape) return Status::Ok();
    int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
    for (int i = 0; i < kNumOperandFields; ++i) {
      OperandKind kind = info.operands[i];
      if (kind != OperandKind::kImmList && kind != OperandKind::kImm64List) continue;
      for (int32_t j = 0; j < f[i + 1]; ++j) {
        int64_t dim = kind == OperandKind::kImmList ? ops[f[i] + j]
                                                    : ReadOperand64(ops, f[i] + 2 * int64_t{j});
        if (__builtin_mul_overflow(bytes, dim, &bytes)) {
          return Error(Op() + "shape's byte size overflows int64 (at dim " + Str(j) + ")");
        }
      }
    }
    if (__builtin_add_overflow(end, bytes, &end)) {
      return Error(Op() + "byte offset + " + Str(bytes) + " bytes overflows int64");
    }
    return Status::Ok();
  }

  std::string Op() const { return std::string(mnemonic_) + ": "; }
  static char Field(int i) { return static_cast<char>('a' + i); }

  Status CheckIndex(int32_t v, size_t limit, const char* what) const {
    if (v < 0 || static_cast<size_t>(v) >= limit) {
      return Error(Op() + what + " " + Str(v) + (v < 0 ? " is negative" : " >= " + Str(limit)));
    }
    return Status::Ok();
  }

  Status CheckOperand(OperandKind kind, const int32_t* f, int i, int64_t* list_len) {
    int32_t v = f[i];
    switch (kind) {
      case OperandKind::kNone:
        if (v != 0) return Error(Op() + "unused field " + Field(i) + " is " + Str(v));
        return Status::Ok();
      case OperandKind::kReg: return CheckIndex(v, fn_.register_count(), "register");
      case OperandKind::kRegList:
      case OperandKind::kImmList:
      case OperandKind::kImm64List:
        return CheckList(kind, v, i + 1 < kNumOperandFields ? f[i + 1] : -1, list_len);
      case OperandKind::kCount: return Status::Ok();  // checked with its list
      case OperandKind::kFunction: return CheckIndex(v, Len(exe_.functions()), "function");
      case OperandKind::kKernel: return CheckIndex(v, Len(exe_.kernels()), "kernel");
      case OperandKind::kShapeFunc: return CheckIndex(v, Len(exe_.shape_functions()), "shape function");
      case OperandKind::kExternal: return CheckIndex(v, Len(exe_.external_regions()), "external region");
      case OperandKind::kConstant: return CheckIndex(v, Len(exe_.constants()), "constant");
      case OperandKind::kString: return CheckIndex(v, Len(exe_.strings()), "string");
      case OperandKind::kTarget: return CheckIndex(v, fn_.code()->size(), "jump target");
      case OperandKind::kImm:
        if (v < 0) return Error(Op() + "field " + Field(i) + " is negative (" + Str(v) + ")");
        return Status::Ok();
      case OperandKind::kAlign:
        if (v < 1 || v > 64 || (v & (v - 1)) != 0) {
          return Error(Op() + "alignment " + Str(v) + " is not a power of two in [1, 64]");
        }
        return Status::Ok();
      case OperandKind::kImm64Lo:
      case OperandKind::kImm64Hi: return Status::Ok();
      case OperandKind::kImm64: return CheckImm64(v, Field(i));
    }
    return Error(Op() + "bad operand kind in the opcode table");
  }

  // One 64-bit value at operands[offset], operands[offset + 1]: inside the pool, >= 0.
  Status CheckImm64(int32_t offset, char field) const {
    size_t size = Len(fn_.operands());
    if (offset < 0 || static_cast<uint64_t>(offset) + 2 > size) {
      return Error(Op() + "field " + field + ": 64-bit operand at " + Str(offset) +
                   " is outside operands (size " + Str(size) + ")");
    }
    int64_t v = ReadOperand64(fn_.operands()->data(), offset);
    if (v < 0) return Error(Op() + "field " + field + " is negative (" + Str(v) + ")");
    return Status::Ok();
  }

  Status CheckList(OperandKind kind, int32_t offset, int32_t count, int64_t* list_len) {
    size_t size = Len(fn_.operands());
    const int64_t width = kind == OperandKind::kImm64List ? 2 : 1;  // int32 entries per value
    if (offset < 0 || count < 0 || static_cast<uint64_t>(offset) + width * count > size) {
      return Error(Op() + "operand list [" + Str(offset) + ", +" + Str(width * count) +
                   ") is outside operands (size " + Str(size) + ")");
    }
    if (kind != OperandKind::kRegList && count > kMaxRank) {
      return Error(Op() + "shape rank " + Str(count) + " > " + Str(kMaxRank));
    }
    const int32_t* ops = fn_.operands() ? fn_.operands()->data() : nullptr;
    for (int32_t j = 0; j < count; ++j) {
      int64_t v = width == 2 ? ReadOperand64(ops, offset + 2 * int64_t{j}) : ops[offset + j];
      if (kind == OperandKind::kRegList) {
        RETURN_IF_ERROR(CheckIndex(static_cast<int32_t>(v), fn_.register_count(), "register"));
      } else if (v < 0) {
        return Error(Op() + "dim " + Str(j) + " is negative (" + Str(v) + ")");
      }
    }
    *list_len = count;
    return Status::Ok();
  }

  Status CheckArity(OpArity arity, int32_t target, int64_t len) const {
    int64_t want = 0;
    const char* what = "";
    switch (arity) {
      case OpArity::kNoArity: return Status::Ok();
      case OpArity::kArityResults:
        want = Len(fn_.results());
        what = "the function's results";
        break;
      case OpArity::kArityFunction: {
        const fb::Function* callee = exe_.functions()->Get(target);
        want = Len(callee->params()) + Len(callee->results());
        what = "the callee's params + results";
        break;
      }
      case OpArity::kArityKernel: {
        const fb::Kernel* k = exe_.kernels()->Get(target);
        want = Len(k->input_dtypes()) + Len(k->output_dtypes());
        what = "the kernel's inputs + outputs";
        break;
      }
      case OpArity::kArityShapeFunc: {
        const fb::ShapeFunction* s = exe_.shape_functions()->Get(target);
        want = int64_t{s->num_inputs()} + s->num_outputs();
        what = "the shape function's inputs + outputs";
        break;
      }
      case OpArity::kArityExternal: {
        const fb::ExternalRegion* r = exe_.external_regions()->Get(target);
        want = int64_t{r->num_inputs()} + r->num_outputs();
        what = "the region's inputs + outputs";
        break;
      }
    }
    if (len != want) {
      return Error(Op() + "arity mismatch: " + Str(len) + " operands for " + Str(want) + " (" +
                   what + ")");
    }
    return Status::Ok();
  }

  const fb::Executable& exe_;
  size_t index_;
  const fb::Function& fn_;
  size_t pc_ = 0;
  const char* mnemonic_ = "";
};

}  // namespace

Status VerifyBytecode(const fb::Executable& exe) {
  for (size_t i = 0; i < Len(exe.functions()); ++i) {
    RETURN_IF_ERROR(FunctionVerifier(exe, i).Run());
  }
  return Status::Ok();
}

}  // namespace kiln
