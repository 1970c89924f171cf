// ExecutableBuilder: FlatBuffer assembly and the data segment.
#include "vm/builder.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "serializer/executable_generated.h"
#include "serializer/version.h"
#include "vm/verifier.h"

namespace kiln {

// ---- FunctionBuilder -----------------------------------------------------------------------

int FunctionBuilder::AddParam(ValueSpec spec) {
  params_.push_back(std::move(spec));
  int r = static_cast<int>(params_.size()) - 1;
  UseReg(r);
  return r;
}

void FunctionBuilder::AddResult(ValueSpec spec) { results_.push_back(std::move(spec)); }

Label FunctionBuilder::NewLabel() {
  label_pcs_.push_back(-1);
  return Label{static_cast<int>(label_pcs_.size()) - 1};
}

void FunctionBuilder::Bind(Label label) { label_pcs_[label.id] = pc(); }

int FunctionBuilder::EmitRaw(uint8_t opcode, int32_t a, int32_t b, int32_t c, int32_t d,
                             int32_t e, uint8_t dtype, uint16_t reserved) {
  code_.push_back(Ins{opcode, dtype, reserved, {a, b, c, d, e}});
  nodes_.push_back(node_);
  return pc() - 1;
}

int FunctionBuilder::Emit(Opcode op, int32_t a, int32_t b, int32_t c, int32_t d, int32_t e,
                          uint8_t dtype) {
  const OpcodeInfo& info = GetOpcodeInfo(op);
  const int32_t f[] = {a, b, c, d, e};
  for (int i = 0; i < kNumOperandFields; ++i) {
    if (info.operands[i] == OperandKind::kReg) UseReg(f[i]);
  }
  return EmitRaw(static_cast<uint8_t>(op), a, b, c, d, e, dtype);
}

int FunctionBuilder::AddOperands(const std::vector<int32_t>& values) {
  // Offsets and counts are int32 fields: past that the file cannot say where a list is.
  if (operands_.size() + values.size() > static_cast<size_t>(INT32_MAX) && error_.empty()) {
    error_ = "code[" + std::to_string(pc()) + "]: operand pool exceeds 2^31 - 1 entries";
  }
  int offset = static_cast<int>(operands_.size());
  operands_.insert(operands_.end(), values.begin(), values.end());
  return offset;
}

int FunctionBuilder::AddOperands64(const std::vector<int64_t>& values) {
  std::vector<int32_t> pairs;
  pairs.reserve(2 * values.size());
  for (int64_t v : values) {
    auto bits = static_cast<uint64_t>(v);
    pairs.push_back(static_cast<int32_t>(static_cast<uint32_t>(bits & 0xffffffffu)));
    pairs.push_back(static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
  }
  return AddOperands(pairs);
}

int FunctionBuilder::RegList(const std::vector<int>& a, const std::vector<int>& b) {
  for (int r : a) UseReg(r);
  for (int r : b) UseReg(r);
  int offset = AddOperands(a);
  AddOperands(b);
  return offset;
}

int FunctionBuilder::Move(int dst, int src) { return Emit(Opcode::kMove, dst, src); }
int FunctionBuilder::Ret(const std::vector<int>& regs) {
  return Emit(Opcode::kRet, RegList(regs), static_cast<int>(regs.size()));
}
int FunctionBuilder::Fatal(int string_index) { return Emit(Opcode::kFatal, string_index); }

int FunctionBuilder::Invoke(int function, const std::vector<int>& args, const std::vector<int>& dsts) {
  return Emit(Opcode::kInvoke, function, RegList(args, dsts), static_cast<int>(args.size() + dsts.size()));
}
int FunctionBuilder::InvokeKernel(int kernel, const std::vector<int>& ins, const std::vector<int>& outs) {
  return Emit(Opcode::kInvokeKernel, kernel, RegList(ins, outs), static_cast<int>(ins.size() + outs.size()));
}
int FunctionBuilder::InvokeShapeFunc(int shape_func, const std::vector<int>& ins,
                                     const std::vector<int>& outs) {
  return Emit(Opcode::kInvokeShapeFunc, shape_func, RegList(ins, outs),
              static_cast<int>(ins.size() + outs.size()));
}
void FunctionBuilder::Clear() {
  params_.clear();
  results_.clear();
  code_.clear();
  operands_.clear();
  nodes_.clear();
  label_pcs_.clear();
  node_.clear();
  register_count_ = -1;
  max_reg_ = 0;
  error_.clear();
}

int FunctionBuilder::InvokeExternal(int region, const std::vector<int>& ins, const std::vector<int>& outs) {
  return Emit(Opcode::kInvokeExternal, region, RegList(ins, outs), static_cast<int>(ins.size() + outs.size()));
}
int FunctionBuilder::AllocStorage(int dst, int size_reg, int alignment) {
  return Emit(Opcode::kAllocStorage, dst, size_reg, alignment);
}
int FunctionBuilder::AllocTensor(int dst, int storage, int64_t byte_offset, DType dtype,
                                 const std::vector<int64_t>& shape) {
  int offset_at = AddOperands64({byte_offset});
  int dims_at = AddOperands64(shape);
  return Emit(Opcode::kAllocTensor, dst, storage, offset_at, dims_at,
              static_cast<int32_t>(shape.size()), static_cast<uint8_t>(dtype));
}
int FunctionBuilder::AllocTensorReg(int dst, int storage, int64_t byte_offset, DType dtype,
                                   int shape_reg) {
  return Emit(Opcode::kAllocTensorReg, dst, storage, AddOperands64({byte_offset}), shape_reg, 0,
              static_cast<uint8_t>(dtype));
}
int FunctionBuilder::AllocTuple(int dst, const std::vector<int>& fields) {
  return Emit(Opcode::kAllocTuple, dst, RegList(fields), static_cast<int>(fields.size()));
}
int FunctionBuilder::GetField(int dst, int tuple, int index) {
  return Emit(Opcode::kGetField, dst, tuple, index);
}
int FunctionBuilder::LoadConst(int dst, int constant) { return Emit(Opcode::kLoadConst, dst, constant); }
int FunctionBuilder::LoadConsti(int dst, int64_t value) {
  auto bits = static_cast<uint64_t>(value);
  return Emit(Opcode::kLoadConsti, dst, static_cast<int32_t>(bits & 0xffffffffu),
              static_cast<int32_t>(bits >> 32));
}
int FunctionBuilder::ShapeOf(int dst, int tensor) { return Emit(Opcode::kShapeOf, dst, tensor); }
int FunctionBuilder::ReshapeTensor(int dst, int tensor, int shape_reg) {
  return Emit(Opcode::kReshapeTensor, dst, tensor, shape_reg);
}
int FunctionBuilder::If(int cond, Label if_true, Label if_false) {
  int pc = Emit(Opcode::kIf, cond, if_true.id, if_false.id);
  code_[pc].label_field = 1;
  code_[pc].label_field2 = 2;
  return pc;
}
int FunctionBuilder::Goto(Label target) {
  int pc = Emit(Opcode::kGoto, target.id);
  code_[pc].label_field = 0;
  return pc;
}
int FunctionBuilder::KillRegister(int reg) { return Emit(Opcode::kKillRegister, reg); }

// ---- ExecutableBuilder ---------------------------------------------------------------------

ExecutableBuilder::ExecutableBuilder(std::string producer)
    : producer_(std::move(producer)), major_(kFormatMajor), minor_(kFormatMinor) {}

FunctionBuilder& ExecutableBuilder::AddFunction(std::string name) {
  functions_.emplace_back(static_cast<int>(functions_.size()), std::move(name));
  return functions_.back();
}

int ExecutableBuilder::AddKernel(KernelDef def) {
  kernels_.push_back(std::move(def));
  return static_cast<int>(kernels_.size()) - 1;
}

int ExecutableBuilder::AddShapeFunction(ShapeFunctionDef def) {
  shape_functions_.push_back(std::move(def));
  return static_cast<int>(shape_functions_.size()) - 1;
}

int ExecutableBuilder::AddExternalRegion(ExternalRegionDef def) {
  regions_.push_back(std::move(def));
  return static_cast<int>(regions_.size()) - 1;
}

int ExecutableBuilder::AddConstant(std::string name, DType dtype, std::vector<int64_t> shape,
                                   const void* bytes, size_t size) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  constants_.push_back({std::move(name), dtype, std::move(shape), std::vector<uint8_t>(p, p + size)});
  return static_cast<int>(constants_.size()) - 1;
}

int ExecutableBuilder::AddString(const std::string& s) {
  for (size_t i = 0; i < strings_.size(); ++i) {
    if (strings_[i] == s) return static_cast<int>(i);
  }
  strings_.push_back(s);
  return static_cast<int>(strings_.size()) - 1;
}

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fb::TensorSpec> WriteSpec(FlatBufferBuilder& b, const ValueSpec& s) {
  std::vector<Offset<fb::Dim>> dims;
  for (const DimSpec& d : s.shape) {
    dims.push_back(fb::CreateDim(b, d.value, d.symbol.empty() ? 0 : b.CreateString(d.symbol)));
  }
  return fb::CreateTensorSpec(b, b.CreateString(s.name), static_cast<fb::DType>(s.dtype),
                              b.CreateVector(dims), s.is_tuple, s.dtype_only);
}

Offset<flatbuffers::Vector<Offset<fb::TensorSpec>>> WriteSpecs(FlatBufferBuilder& b,
                                                               const std::vector<ValueSpec>& specs) {
  std::vector<Offset<fb::TensorSpec>> out;
  for (const ValueSpec& s : specs) out.push_back(WriteSpec(b, s));
  return b.CreateVector(out);
}

Offset<flatbuffers::Vector<fb::DType>> WriteDTypes(FlatBufferBuilder& b, const std::vector<DType>& v) {
  std::vector<fb::DType> raw;
  for (DType t : v) raw.push_back(static_cast<fb::DType>(t));
  return b.CreateVector(raw);
}

Offset<flatbuffers::Vector<Offset<fb::AotObject>>> WriteAotObjects(
    FlatBufferBuilder& b, const std::vector<AotObjectDef>& objects) {
  std::vector<Offset<fb::AotObject>> out;
  for (const AotObjectDef& o : objects) {
    uint64_t sum = o.override_checksum ? o.checksum : Fnv1a64(o.object.data(), o.object.size());
    out.push_back(fb::CreateAotObject(b, b.CreateString(o.symbol), b.CreateVector(o.object), sum));
  }
  return b.CreateVector(out);
}

Offset<flatbuffers::Vector<Offset<fb::AotTarget>>> WriteAotTargets(
    FlatBufferBuilder& b, const std::vector<AotTargetDef>& targets) {
  std::vector<Offset<fb::AotTarget>> out;
  for (const AotTargetDef& t : targets) {
    out.push_back(fb::CreateAotTarget(b, b.CreateString(t.triple), b.CreateString(t.cpu),
                                      b.CreateString(t.features), b.CreateString(t.llvm_version),
                                      b.CreateString(t.abi), WriteAotObjects(b, t.kernels),
                                      WriteAotObjects(b, t.shape_functions)));
  }
  return b.CreateVector(out);
}

}  // namespace

StatusOr<std::vector<uint8_t>> ExecutableBuilder::Finish() {
  // Pass 1 sizes the FlatBuffer (offsets are fixed-width, defaults forced, so pass 2 has the
  // same size); pass 2 writes the real constant offsets after it.
  std::vector<uint64_t> offsets(constants_.size(), 0);
  ASSIGN_OR_RETURN(std::vector<uint8_t> first, Serialize(offsets));
  uint64_t cursor = (first.size() + kConstantAlignment - 1) & ~(kConstantAlignment - 1);
  for (size_t i = 0; i < constants_.size(); ++i) {
    offsets[i] = cursor;
    cursor += (constants_[i].bytes.size() + kConstantAlignment - 1) & ~(kConstantAlignment - 1);
  }
  ASSIGN_OR_RETURN(std::vector<uint8_t> out, Serialize(offsets));
  if (out.size() != first.size()) return Internal("builder: FlatBuffer size changed between passes");
  out.resize(cursor, 0);
  for (size_t i = 0; i < constants_.size(); ++i) {
    if (!constants_[i].bytes.empty()) {
      std::memcpy(out.data() + offsets[i], constants_[i].bytes.data(), constants_[i].bytes.size());
    }
  }
  return out;
}

StatusOr<std::vector<uint8_t>> ExecutableBuilder::Serialize(const std::vector<uint64_t>& offsets) {
  FlatBufferBuilder b(1 << 16);
  b.ForceDefaults(true);
  std::vector<Offset<fb::Function>> fns;
  std::vector<Offset<fb::FunctionDebug>> debug;
  for (FunctionBuilder& f : functions_) {
    if (!f.error_.empty()) return InvalidArgument("function '" + f.name_ + "' " + f.error_);
    std::vector<fb::Instruction> code;
    std::vector<int32_t> nodes;
    for (size_t pc = 0; pc < f.code_.size(); ++pc) {
      FunctionBuilder::Ins ins = f.code_[pc];
      for (int field : {ins.label_field, ins.label_field2}) {
        if (field < 0) continue;
        int label = ins.f[field];
        if (label < 0 || label >= static_cast<int>(f.label_pcs_.size()) || f.label_pcs_[label] < 0) {
          return InvalidArgument("function '" + f.name_ + "' code[" + std::to_string(pc) +
                                 "]: jump to an unbound label");
        }
        ins.f[field] = f.label_pcs_[label];
      }
      code.emplace_back(ins.opcode, ins.dtype, ins.reserved, ins.f[0], ins.f[1], ins.f[2], ins.f[3], ins.f[4]);
      nodes.push_back(f.nodes_[pc].empty() ? -1 : AddString(f.nodes_[pc]));
    }
    uint32_t regs = f.register_count_ >= 0 ? static_cast<uint32_t>(f.register_count_) : f.max_reg_;
    fns.push_back(fb::CreateFunction(b, b.CreateString(f.name_), WriteSpecs(b, f.params_),
                                     WriteSpecs(b, f.results_), regs, b.CreateVectorOfStructs(code),
                                     b.CreateVector(f.operands_)));
    debug.push_back(fb::CreateFunctionDebug(b, b.CreateVector(nodes)));
  }
  std::vector<Offset<fb::Kernel>> kernels;
  for (const KernelDef& k : kernels_) {
    std::vector<Offset<fb::DispatchHint>> hints;
    for (const auto& h : k.dispatch_hints) {
      hints.push_back(fb::CreateDispatchHint(b, b.CreateString(h.symbol), b.CreateVector(h.buckets)));
    }
    kernels.push_back(fb::CreateKernel(b, b.CreateString(k.name), WriteDTypes(b, k.inputs),
                                       WriteDTypes(b, k.outputs), b.CreateString(k.payload_format),
                                       b.CreateVector(k.payload), b.CreateVector(hints)));
  }
  std::vector<Offset<fb::ShapeFunction>> shape_fns;
  for (const ShapeFunctionDef& s : shape_functions_) {
    std::vector<uint8_t> dd(s.data_dependent.begin(), s.data_dependent.end());
    shape_fns.push_back(fb::CreateShapeFunction(
        b, b.CreateString(s.name), s.num_inputs, s.num_outputs,
        b.CreateVector(dd),
        b.CreateString(s.payload_format), b.CreateVector(s.payload)));
  }
  std::vector<Offset<fb::ExternalRegion>> regions;
  for (const ExternalRegionDef& r : regions_) {
    uint64_t sum = r.override_checksum ? r.checksum : Fnv1a64(r.blob.data(), r.blob.size());
    regions.push_back(fb::CreateExternalRegion(b, b.CreateString(r.name), b.CreateString(r.vendor),
                                               b.CreateVector(r.blob), b.CreateVector(r.constants),
                                               sum, r.num_inputs, r.num_outputs, r.fallback,
                                               r.tuned_fallback,
                                               r.tuned_note.empty() ? 0 : b.CreateString(r.tuned_note)));
  }
  std::vector<Offset<fb::Constant>> constants;
  for (size_t i = 0; i < constants_.size(); ++i) {
    const ConstantDef& c = constants_[i];
    uint64_t offset = offsets[i], size = c.bytes.size();
    for (const LayoutOverride& o : layout_overrides_) {
      if (o.index == static_cast<int>(i)) offset = o.offset, size = o.size;
    }
    constants.push_back(fb::CreateConstant(b, b.CreateString(c.name), static_cast<fb::DType>(c.dtype),
                                           b.CreateVector(c.shape), offset, size));
  }
  Offset<fb::ModelMetadata> metadata = 0;
  if (has_metadata_) {
    const MetadataDef& m = metadata_;
    metadata = fb::CreateModelMetadata(b, WriteSpecs(b, m.inputs), WriteSpecs(b, m.outputs),
                                       b.CreateString(m.entry), m.opset,
                                       b.CreateString(m.producer_name), b.CreateString(m.doc));
  }
  auto debug_info = fb::CreateDebugInfo(b, b.CreateVector(debug));
  auto strings = b.CreateVectorOfStrings(strings_);  // after functions: they intern node names
  fb::Version version(major_, minor_);
  auto header = fb::CreateHeader(b, &version, b.CreateString(producer_));
  // Absent rather than empty without targets: such a file is what a 1.1 writer produced.
  Offset<flatbuffers::Vector<Offset<fb::AotTarget>>> aot = 0;
  if (!aot_targets_.empty()) aot = WriteAotTargets(b, aot_targets_);
  auto root = fb::CreateExecutable(b, header, b.CreateVector(fns), b.CreateVector(kernels),
                                   b.CreateVector(shape_fns), b.CreateVector(regions),
                                   b.CreateVector(constants), metadata, debug_info, strings, aot);
  b.FinishSizePrefixed(root, kFileIdentifier);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

namespace {

std::string Text(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::vector<ValueSpec> ReadSpecs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSpec>>* specs) {
  std::vector<ValueSpec> out;
  if (specs == nullptr) return out;
  for (const fb::TensorSpec* t : *specs) {
    ValueSpec v{Text(t->name()), static_cast<DType>(t->dtype()), {}, t->is_tuple(), t->dtype_only()};
    if (t->shape()) {
      for (const fb::Dim* d : *t->shape()) v.shape.push_back(DimSpec{d->value(), Text(d->symbol())});
    }
    out.push_back(std::move(v));
  }
  return out;
}

template <typename T>
std::vector<DType> ReadDTypes(const flatbuffers::Vector<T>* v) {
  std::vector<DType> out;
  if (v) {
    for (auto d : *v) out.push_back(static_cast<DType>(d));
  }
  return out;
}

template <typename T>
std::vector<T> ReadVector(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

std::vector<AotObjectDef> ReadAotObjects(
    const flatbuffers::Vector<flatbuffers::Offset<fb::AotObject>>* objects) {
  std::vector<AotObjectDef> out;
  if (objects == nullptr) return out;
  for (const fb::AotObject* o : *objects) {
    out.push_back(AotObjectDef{Text(o->symbol()), ReadVector(o->object()), true, o->checksum()});
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ExecutableBuilder>> ExecutableBuilder::FromExecutable(
    const Executable& exe) {
  const fb::Executable& r = exe.root();
  auto out = std::make_unique<ExecutableBuilder>(std::string(exe.producer()));
  ExecutableBuilder& b = *out;
  if (r.strings()) {
    for (size_t i = 0; i < r.strings()->size(); ++i) {
      if (b.AddString(r.strings()->Get(i)->str()) != static_cast<int>(i)) {
        return InvalidFormat("strings[" + std::to_string(i) + "]: a duplicate of an earlier "
                             "string; the file cannot be rewritten with its indices kept");
      }
    }
  }
  for (int i = 0; i < exe.num_functions(); ++i) {
    const fb::Function* f = r.functions()->Get(i);
    FunctionBuilder& fb = b.AddFunction(Text(f->name()));
    fb.params_ = ReadSpecs(f->params());
    fb.results_ = ReadSpecs(f->results());
    fb.set_register_count(f->register_count());
    fb.operands_ = ReadVector(f->operands());
    const auto* code = f->code();
    for (size_t pc = 0; code && pc < code->size(); ++pc) {
      const fb::Instruction* in = code->Get(pc);
      fb.SetSourceNode(std::string(exe.SourceNode(i, static_cast<int>(pc))));
      fb.EmitRaw(in->opcode(), in->a(), in->b(), in->c(), in->d(), in->e(), in->dtype(),
                 in->reserved());
    }
  }
  if (r.kernels()) {
    for (const fb::Kernel* k : *r.kernels()) {
      KernelDef def{Text(k->name()), ReadDTypes(k->input_dtypes()), ReadDTypes(k->output_dtypes()),
                    Text(k->payload_format()), ReadVector(k->payload()), {}};
      if (k->dispatch_hints()) {
        for (const fb::DispatchHint* h : *k->dispatch_hints()) {
          def.dispatch_hints.push_back({Text(h->symbol()), ReadVector(h->buckets())});
        }
      }
      b.AddKernel(std::move(def));
    }
  }
  if (r.shape_functions()) {
    for (const fb::ShapeFunction* s : *r.shape_functions()) {
      ShapeFunctionDef def{Text(s->name()), static_cast<int>(s->num_inputs()),
                           static_cast<int>(s->num_outputs()), {}, Text(s->payload_format()),
                           ReadVector(s->payload())};
      if (s->data_dependent()) def.data_dependent.assign(s->data_dependent()->begin(), s->data_dependent()->end());
      b.AddShapeFunction(std::move(def));
    }
  }
  if (r.external_regions()) {
    for (const fb::ExternalRegion* x : *r.external_regions()) {
      ExternalRegionDef def;
      def.name = Text(x->name());
      def.vendor = Text(x->vendor());
      def.blob = ReadVector(x->blob());
      def.constants = ReadVector(x->constants());
      def.num_inputs = static_cast<int>(x->num_inputs());
      def.num_outputs = static_cast<int>(x->num_outputs());
      def.fallback = x->fallback();
      def.override_checksum = true;
      def.checksum = x->checksum();
      def.tuned_fallback = x->tuned_fallback();
      def.tuned_note = Text(x->tuned_note());
      b.AddExternalRegion(std::move(def));
    }
  }
  if (r.constants()) {
    for (const fb::Constant* c : *r.constants()) {
      b.AddConstant(Text(c->name()), static_cast<DType>(c->dtype()), ReadVector(c->shape()),
                    exe.bytes() + c->offset(), c->size());
    }
  }
  if (const fb::ModelMetadata* m = r.metadata()) {
    b.SetMetadata(MetadataDef{ReadSpecs(m->inputs()), ReadSpecs(m->outputs()), Text(m->entry()),
                              m->opset(), Text(m->producer_name()), Text(m->doc())});
  }
  if (r.aot_targets()) {
    for (const fb::AotTarget* t : *r.aot_targets()) {
      b.AddAotTarget(AotTargetDef{Text(t->triple()), Text(t->cpu()), Text(t->features()),
                                  Text(t->llvm_version()), Text(t->abi()),
                                  ReadAotObjects(t->kernels()),
                                  ReadAotObjects(t->shape_functions())});
    }
  }
  return out;
}

Status ExecutableBuilder::WriteFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Finish());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return InvalidArgument(path + ": cannot open for writing");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return InvalidArgument(path + ": write failed");
  }
  if (std::fflush(f.get()) != 0) return InvalidArgument(path + ": write failed");
  return Status::Ok();
}

}  // namespace kiln
