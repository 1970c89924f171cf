// Emission of one item of a function: a node's kernel (with its own shape function when its
// output dims are only known at run time) or view, a fused kernel, or an external region; the
// allocation of what they write; and the executable's tables (kernels, shape functions and
// constants, each stored once).
#include <algorithm>
#include <cstring>

#include "compiler/emit/emitter.h"
#include "jit/kernel_ir_serialize.h"

namespace kiln::compiler::emit_internal {
namespace {

std::string PreKey(const std::vector<jit::Expr>& pre) {
  std::string key;
  for (const jit::Expr& e : pre) key += jit::ToText(e) + ";";
  return key;
}

// The index of a stored kernel (or shape function) structurally equal to `k` under the same
// preconditions, or -1.
int FindStored(const KernelTable& table, const std::map<int, std::vector<jit::Expr>>& pres,
               uint64_t hash, const jit::Kernel& k, const std::string& pre_key) {
  auto it = table.find(hash);
  if (it == table.end()) return -1;
  for (const auto& [kernel, index] : it->second) {
    if (jit::StructurallyEqual(kernel, k) && PreKey(pres.at(index)) == pre_key) return index;
  }
  return -1;
}

}  // namespace

int Emitter::AddKernel(const jit::Kernel& k, std::vector<DType> ins, std::vector<DType> outs,
                       const std::vector<jit::Expr>& pre) {
  const std::string pre_key = PreKey(pre);
  uint64_t h = jit::HashKernel(k) ^ std::hash<std::string>()(pre_key);
  if (int index = FindStored(kernels_, sh_.kernel_pre, h, k, pre_key); index >= 0) return index;
  KernelDef def;
  def.name = k.name;
  def.inputs = std::move(ins);
  def.outputs = std::move(outs);
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(k, {}, pre);
  int index = eb_.AddKernel(std::move(def));
  kernels_[h].emplace_back(k, index);
  sh_.kernel_pre[index] = pre;
  ++st_.kernels;
  return index;
}

int Emitter::AddShapeFunction(const jit::Kernel& k, int num_inputs,
                              std::vector<bool> data_dependent,
                              const std::vector<jit::Expr>& pre) {
  const std::string pre_key = PreKey(pre);
  uint64_t h = jit::HashKernel(k) ^ std::hash<std::string>()(pre_key);
  if (int index = FindStored(shape_funcs_, sh_.shape_func_pre, h, k, pre_key); index >= 0) {
    return index;
  }
  ShapeFunctionDef def;
  def.name = k.name;
  def.num_inputs = num_inputs;
  def.num_outputs = static_cast<int>(k.buffers.size()) - num_inputs;
  def.data_dependent = std::move(data_dependent);
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(k, {}, pre);
  int index = eb_.AddShapeFunction(std::move(def));
  shape_funcs_[h].emplace_back(k, index);
  sh_.shape_func_pre[index] = pre;
  ++st_.shape_functions;
  return index;
}

int Emitter::AddConstantData(const std::string& name, const TensorData& d) {
  int index = eb_.AddConstant(name, d.dtype(), d.dims(), d.data(), d.size_bytes());
  ++st_.constants;
  st_.constant_bytes += static_cast<int64_t>(d.size_bytes());
  return index;
}

namespace {
// FNV-1a over the bytes, 8 at a time (the tail byte-wise): a key for finding equal constants,
// which are then compared in full.
uint64_t HashBytes(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
}  // namespace

int Emitter::StoredConstant(const std::string& name, const std::shared_ptr<const TensorData>& d) {
  auto key = std::make_tuple(d->dtype(), d->dims(), HashBytes(d->data(), d->size_bytes()));
  auto [lo, hi] = sh_.constant_by_content.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    const TensorData& other = *it->second.first;
    if (other.size_bytes() == d->size_bytes() &&
        (d->size_bytes() == 0 || std::memcmp(other.data(), d->data(), d->size_bytes()) == 0)) {
      return it->second.second;
    }
  }
  int index = AddConstantData(name, *d);
  sh_.constant_by_content.emplace(std::move(key), std::make_pair(d, index));
  return index;
}

StatusOr<int> Emitter::ConstantIndexOf(ValueId v) {
  auto it = constant_index_.find(v);
  if (it != constant_index_.end()) return it->second;
  const Value& val = g_.value(v);
  if (!val.data || val.kind == ValueKind::kGraphInput) {
    return InvalidArgument("'" + val.name + "' is not a constant");
  }
  auto stored = sh_.constant_by_data.find(val.data.get());
  int index = share_constants_ && stored != sh_.constant_by_data.end()
                  ? stored->second
                  : StoredConstant(val.name, val.data);
  sh_.constant_by_data.emplace(val.data.get(), index);
  constant_index_[v] = index;
  return index;
}

// A register holding the i64 vector `values` (a constant shared by every function).
int Emitter::ConstI64Tensor(const std::vector<int64_t>& values) {
  auto it = const_shapes_.find(values);
  int index;
  if (it != const_shapes_.end()) {
    index = it->second;
  } else {
    index = eb_.AddConstant("shape" + std::to_string(const_shapes_.size()), DType::kI64,
                            {static_cast<int64_t>(values.size())}, values.data(),
                            values.size() * sizeof(int64_t));
    const_shapes_[values] = index;
  }
  int r = NewReg();
  fb_.LoadConst(r, index);
  return r;
}

// A register holding new storage of `bytes` (whoever views it keeps it alive).
int Emitter::ScratchStorage(int64_t bytes) {
  int size = NewReg();
  fb_.LoadConsti(size, bytes);
  int storage = NewReg();
  fb_.AllocStorage(storage, size);
  fb_.KillRegister(size);
  return storage;
}

// The register holding `v`: computed already, or a constant loaded on first use.
StatusOr<int> Emitter::RegFor(ValueId v) {
  ValueState& s = vals_[v];
  if (s.reg >= 0) return s.reg;
  const Value& val = g_.value(v);
  if (val.data && val.kind != ValueKind::kGraphInput) {
    ASSIGN_OR_RETURN(int index, ConstantIndexOf(v));
    s.reg = NewReg();
    fb_.LoadConst(s.reg, index);
    return s.reg;
  }
  return Internal("value '" + val.name + "' is used before it is computed");
}

// Allocates the tensors a kernel or region writes: in the arena, in storage of their own
// (returned values), or sized by a shape function (dynamic shapes).
StatusOr<std::vector<int>> Emitter::AllocOutputs(const std::vector<ValueId>& outs, NodeId at) {
  std::vector<ValueId> dyn;
  for (ValueId out : outs) {
    if (vals_[out].dynamic) dyn.push_back(out);
  }
  if (!dyn.empty()) RETURN_IF_ERROR(EnsureShapes(dyn, at));
  std::vector<int> out_regs;
  for (ValueId out : outs) {
    const Value& v = g_.value(out);
    ValueState& s = vals_[out];
    s.reg = NewReg();
    if (s.dynamic) {
      int storage = NewReg();
      fb_.AllocStorage(storage, s.bytes_reg, kAlign);
      fb_.AllocTensorReg(s.reg, storage, 0, v.dtype, s.shape_reg);
      fb_.KillRegister(storage);
    } else if (s.arena_offset >= 0) {
      fb_.AllocTensor(s.reg, arena_reg_, s.arena_offset, v.dtype, StaticDims(*v.shape));
    } else {
      int storage = ScratchStorage(std::max<int64_t>(StaticBytes(v), 1));
      fb_.AllocTensor(s.reg, storage, 0, v.dtype, StaticDims(*v.shape));
      fb_.KillRegister(storage);
    }
    out_regs.push_back(s.reg);
  }
  return out_regs;
}

Status Emitter::EmitFused(const Item& item) {
  const FusedKernel& fk = fused_[item.fused];
  fb_.SetSourceNode(g_.node(item.node).name);
  std::vector<int> in_regs;
  std::vector<DType> in_dtypes;
  for (ValueId in : fk.inputs) {
    ASSIGN_OR_RETURN(int r, RegFor(in));
    in_regs.push_back(r);
    in_dtypes.push_back(g_.value(in).dtype);
  }
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs({fk.output}, item.node));
  std::vector<ValueId> values = fk.inputs;
  values.push_back(fk.output);
  int k = AddKernel(fk.kernel, in_dtypes, {g_.value(fk.output).dtype},
                    Preconditions(fk.kernel, values, {}, fk.nodes));
  fb_.InvokeKernel(k, in_regs, out_regs);
  return Status::Ok();
}

// A node: If / Loop as calls, else its own shape function when it has one, then its view or
// kernel.
Status Emitter::EmitNode(NodeId n) {
  const Node& node = g_.node(n);
  fb_.SetSourceNode(node.name);
  if (node.op_type == "If") return EmitIf(n);
  if (node.op_type == "Loop") return EmitLoop(n);
  const LoweredNode& lowered = lowered_.at(n);
  std::vector<int> in_regs;
  for (ValueId in : node.inputs) {
    if (in == kNoValue) continue;
    ASSIGN_OR_RETURN(int r, RegFor(in));
    in_regs.push_back(r);
  }
  std::vector<ValueId> outs = Present(node.outputs);
  if (lowered.shape_function) {
    RETURN_IF_ERROR(EmitNodeShapeFunction(n, *lowered.shape_function, in_regs, outs));
  }
  if (lowered.view_of >= 0) return EmitView(n, lowered, outs[0]);
  return EmitKernel(n, *lowered.kernel, in_regs, outs);
}

// The node's own shape function: the output shapes, written to views of one scratch storage,
// bind the fresh symbols of the outputs (read as elements of those shape tensors).
Status Emitter::EmitNodeShapeFunction(NodeId n, const jit::Kernel& sk,
                                      const std::vector<int>& in_regs,
                                      const std::vector<ValueId>& outs) {
  std::vector<int> shape_regs;
  int64_t total = 0;
  for (ValueId out : outs) total += 8 * static_cast<int64_t>(g_.value(out).shape->size());
  int storage = ScratchStorage(std::max<int64_t>(total, 8));
  int64_t offset = 0;
  for (ValueId out : outs) {
    int64_t rank = static_cast<int64_t>(g_.value(out).shape->size());
    int r = NewReg();
    fb_.AllocTensor(r, storage, offset, DType::kI64, {rank});
    offset += 8 * rank;
    shape_regs.push_back(r);
  }
  fb_.KillRegister(storage);
  std::vector<ValueId> in_values = Present(g_.node(n).inputs);
  std::vector<jit::Expr> extra;
  for (size_t j = 0; j < outs.size(); ++j) {
    extra.push_back(jit::Eq(jit::DimOf(sk.buffers[in_values.size() + j], 0),
                            jit::IntImm(static_cast<int64_t>(g_.value(outs[j]).shape->size()))));
  }
  int sf = AddShapeFunction(sk, static_cast<int>(in_regs.size()),
                            std::vector<bool>(in_regs.size(), true),
                            Preconditions(sk, in_values, std::move(extra)));
  fb_.InvokeShapeFunc(sf, in_regs, shape_regs);
  for (size_t j = 0; j < outs.size(); ++j) {
    const SymbolicShape& shape = *g_.value(outs[j]).shape;
    for (size_t a = 0; a < shape.size(); ++a) {
      auto inv = Invertible(shape[a]);
      if (inv && !bound_.count(inv->first)) {
        bound_[inv->first] = SymbolSource{shape_regs[j], static_cast<int>(a), false,
                                          DType::kI64, 1, inv->second};
      }
    }
    if (!SymbolsBound(shape)) {
      return Unsupported(g_.DescribeNode(n) + ": output '" + g_.value(outs[j]).name +
                         "' has shape " + ShapeToString(shape) +
                         " whose dims cannot be computed at run time");
    }
  }
  return Status::Ok();
}

// A view: the source register itself when the shapes agree, else reshape_tensor to the static
// or computed shape.
Status Emitter::EmitView(NodeId n, const LoweredNode& lowered, ValueId dst) {
  ValueId src = g_.node(n).inputs[lowered.view_of];
  const Value& dv = g_.value(dst);
  int r = NewReg();
  ASSIGN_OR_RETURN(int src_reg, RegFor(src));
  if (*g_.value(src).shape == *dv.shape) {
    fb_.Move(r, src_reg);
  } else {
    int shape_reg;
    if (IsStatic(*dv.shape)) {
      shape_reg = ConstI64Tensor(StaticDims(*dv.shape));
    } else {
      RETURN_IF_ERROR(EnsureShapes({dst}, n));
      shape_reg = vals_[dst].shape_reg;
    }
    fb_.ReshapeTensor(r, src_reg, shape_reg);
  }
  vals_[dst].reg = r;
  return Status::Ok();
}

Status Emitter::EmitKernel(NodeId n, const jit::Kernel& k, const std::vector<int>& in_regs,
                           const std::vector<ValueId>& outs) {
  std::vector<ValueId> values = Present(g_.node(n).inputs);
  std::vector<DType> in_dtypes, out_dtypes;
  for (ValueId in : values) in_dtypes.push_back(g_.value(in).dtype);
  for (ValueId out : outs) out_dtypes.push_back(g_.value(out).dtype);
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs(outs, n));
  values.insert(values.end(), outs.begin(), outs.end());
  int index = AddKernel(k, in_dtypes, out_dtypes, Preconditions(k, values, {}, {n}));
  fb_.InvokeKernel(index, in_regs, out_regs);
  return Status::Ok();
}

// The region's constants: graph values (stored once, shared with kernels reading them) or
// bytes its codegen made.
Status Emitter::RegionConstants(const ExternalRegionToEmit& region, const std::string& where,
                                ExternalRegionDef& def) {
  for (size_t i = 0; i < region.constants.size(); ++i) {
    const ExternalRegionToEmit::Constant& c = region.constants[i];
    int index;
    if (c.value != kNoValue) {
      ASSIGN_OR_RETURN(index, ConstantIndexOf(c.value));
    } else if (c.data) {
      index = AddConstantData(region.name + "_c" + std::to_string(i), *c.data);
    } else {
      return InvalidArgument(where + ": constant " + std::to_string(i) +
                             " has neither a value nor data");
    }
    def.constants.push_back(static_cast<uint32_t>(index));
  }
  return Status::Ok();
}

Status Emitter::EmitRegion(int r) {
  const ExternalRegionToEmit& region = regions_[r];
  fb_.SetSourceNode(region.nodes.empty() ? region.name : g_.node(region.nodes.back()).name);
  const std::string where = "external region '" + region.name + "' (" + region.vendor + ")";
  for (ValueId out : region.outputs) {
    if (!SymbolsBound(*g_.value(out).shape)) {
      return Unsupported(where + ": output '" + g_.value(out).name + "' has shape " +
                         ShapeToString(*g_.value(out).shape) +
                         ", which is only known after the region runs");
    }
  }
  std::vector<int> in_regs;
  for (ValueId in : region.inputs) {
    ASSIGN_OR_RETURN(int reg, RegFor(in));
    in_regs.push_back(reg);
  }
  ExternalRegionDef def;
  def.name = region.name;
  def.vendor = region.vendor;
  def.blob = region.blob;
  def.num_inputs = static_cast<int>(region.inputs.size());
  def.num_outputs = static_cast<int>(region.outputs.size());
  RETURN_IF_ERROR(RegionConstants(region, where, def));
  NodeId at = region.nodes.empty() ? kNoNode : region.nodes.back();
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs(region.outputs, at));
  int index = eb_.AddExternalRegion(std::move(def));
  sh_.region_index.resize(regions_.size(), -1);
  sh_.region_index[r] = index;
  ++st_.external_regions;
  fb_.InvokeExternal(index, in_regs, out_regs);
  return Status::Ok();
}

}  // namespace kiln::compiler::emit_internal
