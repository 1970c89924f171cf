// ExecutableBuilder: assembles functions, kernels, regions, constants and metadata into .kiln
// bytes. Used by the compiler, tests and examples. It checks nothing a loader would check —
// tests use it to write deliberately broken files — so always load what it writes.
#ifndef KILN_VM_BUILDER_H_
#define KILN_VM_BUILDER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "vm/executable.h"
#include "vm/opcodes.h"
#include "base/status.h"

namespace kiln {

struct DispatchHintDef {
  std::string symbol;
  std::vector<int64_t> buckets;
};

struct KernelDef {
  std::string name;
  std::vector<DType> inputs;
  std::vector<DType> outputs;
  std::string payload_format;
  std::vector<uint8_t> payload;
  std::vector<DispatchHintDef> dispatch_hints;
};

struct ShapeFunctionDef {
  std::string name;
  int num_inputs = 0;
  int num_outputs = 0;
  std::vector<bool> data_dependent;
  std::string payload_format;
  std::vector<uint8_t> payload;
};

struct ExternalRegionDef {
  std::string name;
  std::string vendor;
  std::vector<uint8_t> blob;
  std::vector<uint32_t> constants;
  int num_inputs = 0;
  int num_outputs = 0;
  /// Index of the region's fallback function (ExternalRegion.fallback); -1 for none.
  int fallback = -1;
  /// (1.4) `kiln compile --tune` found the fallback faster (ExternalRegion.tuned_fallback),
  /// and what it measured (tuned_note; "" writes none).
  bool tuned_fallback = false;
  std::string tuned_note;
  /// The checksum written is Fnv1a64(blob) unless this is set (tests of corrupt files).
  bool override_checksum = false;
  uint64_t checksum = 0;
};

/// One kernel's machine code for an AotTargetDef (see executable.fbs, AotObject). An empty
/// object means none: that kernel is JIT-compiled.
struct AotObjectDef {
  std::string symbol;
  std::vector<uint8_t> object;
  /// The checksum written is Fnv1a64(object) unless this is set (tests of corrupt files).
  bool override_checksum = false;
  uint64_t checksum = 0;
};

/// Code compiled ahead of time for one CPU target (executable.fbs, AotTarget). `kernels` and
/// `shape_functions` are parallel to the builder's tables (or empty).
struct AotTargetDef {
  std::string triple, cpu, features, llvm_version, abi;
  std::vector<AotObjectDef> kernels;
  std::vector<AotObjectDef> shape_functions;
};

struct MetadataDef {
  std::vector<ValueSpec> inputs;
  std::vector<ValueSpec> outputs;
  std::string entry;
  int64_t opset = 0;
  std::string producer_name;
  std::string doc;
};

/// A jump target; bind it to a pc with FunctionBuilder::Bind before Finish.
struct Label {
  int id = -1;
};

/// Emits one function's code. Parameter i arrives in register i. Registers are plain indices;
/// register_count defaults to one more than the largest used.
class FunctionBuilder {
 public:
  FunctionBuilder(int index, std::string name) : index_(index), name_(std::move(name)) {}

  int index() const { return index_; }
  const std::string& name() const { return name_; }
  /// Declares a parameter; returns its register.
  int AddParam(ValueSpec spec);
  void AddResult(ValueSpec spec);
  void set_register_count(uint32_t n) { register_count_ = n; }
  /// Drops the parameters, results and code emitted so far (for an emitter that gives up on a
  /// function already in the executable; emit a `fatal` after it to keep the function valid).
  void Clear();

  Label NewLabel();
  /// Binds `label` to the next instruction emitted.
  void Bind(Label label);
  /// Source node name recorded for the instructions emitted from now on ("" for none).
  void SetSourceNode(std::string node) { node_ = std::move(node); }
  /// pc of the next instruction.
  int pc() const { return static_cast<int>(code_.size()); }

  // One call per opcode (see vm/opcodes.def for semantics). Each returns its pc.
  int Move(int dst, int src);
  int Ret(const std::vector<int>& regs);
  int Fatal(int string_index);
  int Invoke(int function, const std::vector<int>& args, const std::vector<int>& dsts);
  int InvokeKernel(int kernel, const std::vector<int>& ins, const std::vector<int>& outs);
  int InvokeShapeFunc(int shape_func, const std::vector<int>& ins, const std::vector<int>& outs);
  int InvokeExternal(int region, const std::vector<int>& ins, const std::vector<int>& outs);
  int AllocStorage(int dst, int size_reg, int alignment = 64);
  int AllocTensor(int dst, int storage, int64_t byte_offset, DType dtype,
                  const std::vector<int64_t>& shape);
  int AllocTensorReg(int dst, int storage, int64_t byte_offset, DType dtype, int shape_reg);
  int AllocTuple(int dst, const std::vector<int>& fields);
  int GetField(int dst, int tuple, int index);
  int LoadConst(int dst, int constant);
  int LoadConsti(int dst, int64_t value);
  int ShapeOf(int dst, int tensor);
  int ReshapeTensor(int dst, int tensor, int shape_reg);
  int If(int cond, Label if_true, Label if_false);
  int Goto(Label target);
  int KillRegister(int reg);

  /// Any instruction, fields as given (for tests of the verifier). Returns its pc.
  int EmitRaw(uint8_t opcode, int32_t a = 0, int32_t b = 0, int32_t c = 0, int32_t d = 0,
              int32_t e = 0, uint8_t dtype = 0, uint16_t reserved = 0);
  /// Appends to the operand pool; returns the offset of the first value. A pool that outgrows
  /// int32 offsets makes Finish() fail (InvalidArgument naming the function and pc).
  int AddOperands(const std::vector<int32_t>& values);
  /// Appends 64-bit values as (low, high) int32 pairs, the layout of kImm64 / kImm64List
  /// operands; returns the offset of the first pair.
  int AddOperands64(const std::vector<int64_t>& values);

 private:
  friend class ExecutableBuilder;
  struct Ins {
    uint8_t opcode, dtype;
    uint16_t reserved;
    int32_t f[kNumOperandFields];
    int label_field = -1;   // field holding a label id to resolve at Finish (-1: none)
    int label_field2 = -1;
  };
  int Emit(Opcode op, int32_t a, int32_t b = 0, int32_t c = 0, int32_t d = 0, int32_t e = 0,
           uint8_t dtype = 0);
  void UseReg(int r) { if (r + 1 > max_reg_) max_reg_ = r + 1; }
  int RegList(const std::vector<int>& a, const std::vector<int>& b = {});

  int index_;
  std::string name_;
  std::vector<ValueSpec> params_, results_;
  std::vector<Ins> code_;
  std::vector<int32_t> operands_;
  std::vector<std::string> nodes_;  // per instruction
  std::vector<int> label_pcs_;
  std::string node_;
  int64_t register_count_ = -1;
  int max_reg_ = 0;
  std::string error_;  // the first thing the format cannot hold; Finish() reports it
};

class ExecutableBuilder {
 public:
  explicit ExecutableBuilder(std::string producer = "kiln ExecutableBuilder");

  /// A new function; the reference stays valid for the builder's lifetime.
  FunctionBuilder& AddFunction(std::string name);
  int AddKernel(KernelDef def);
  int AddShapeFunction(ShapeFunctionDef def);
  int AddExternalRegion(ExternalRegionDef def);
  /// Sets region `region`'s fallback function (a region added before its fallback exists).
  void SetRegionFallback(int region, int function) { regions_[region].fallback = function; }
  /// Records what `kiln compile --tune` measured for region `region` (vm/region_trial.h).
  void SetRegionTune(int region, bool tuned_fallback, std::string note) {
    regions_[region].tuned_fallback = tuned_fallback;
    regions_[region].tuned_note = std::move(note);
  }
  int num_external_regions() const { return static_cast<int>(regions_.size()); }

  /// A builder holding everything `exe` holds (functions with their code, operands and source
  /// nodes, kernels, shape functions, regions with their checksums, constants' bytes, strings in
  /// their order, metadata, code targets), so that Finish() writes the same file at this
  /// builder's format version, plus whatever is changed in between (SetRegionTune). `exe` need
  /// not be bound. Copies the constants' bytes. InvalidFormat if the string table holds a
  /// duplicate (its indices could not be kept; no kiln writer makes one).
  static StatusOr<std::unique_ptr<ExecutableBuilder>> FromExecutable(const Executable& exe);
  /// Copies `bytes` (which must be product(shape) * sizeof(dtype) long) into the data segment.
  int AddConstant(std::string name, DType dtype, std::vector<int64_t> shape, const void* bytes,
                  size_t size);
  /// Interns `s` in the string table.
  int AddString(const std::string& s);
  void SetMetadata(MetadataDef metadata) { metadata_ = std::move(metadata); has_metadata_ = true; }
  /// Appends a table of code compiled ahead of time (written as Executable.aot_targets).
  void AddAotTarget(AotTargetDef target) { aot_targets_.push_back(std::move(target)); }
  /// The tables added so far (an ahead-of-time compiler reads the kernels' payloads).
  const std::vector<KernelDef>& kernels() const { return kernels_; }
  const std::vector<ShapeFunctionDef>& shape_functions() const { return shape_functions_; }
  /// For tests of corrupt files: writes this offset and size for constant `index` instead of
  /// the real ones (the bytes are still placed as usual).
  void OverrideConstantLayout(int index, uint64_t offset, uint64_t size) {
    layout_overrides_.push_back({index, offset, size});
  }
  /// For tests of version handling.
  void SetVersion(uint16_t major, uint16_t minor) { major_ = major; minor_ = minor; }

  /// The .kiln bytes. InvalidArgument if a label was used but never bound, or if a function
  /// holds more than the format can (an operand pool beyond int32 offsets).
  StatusOr<std::vector<uint8_t>> Finish();
  /// Finish() written to `path`.
  Status WriteFile(const std::string& path);

 private:
  struct ConstantDef {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  StatusOr<std::vector<uint8_t>> Serialize(const std::vector<uint64_t>& offsets);

  std::string producer_;
  uint16_t major_, minor_;
  std::deque<FunctionBuilder> functions_;
  std::vector<KernelDef> kernels_;
  std::vector<ShapeFunctionDef> shape_functions_;
  std::vector<ExternalRegionDef> regions_;
  std::vector<ConstantDef> constants_;
  std::vector<std::string> strings_;
  MetadataDef metadata_;
  bool has_metadata_ = false;
  std::vector<AotTargetDef> aot_targets_;
  struct LayoutOverride {
    int index;
    uint64_t offset, size;
  };
  std::vector<LayoutOverride> layout_overrides_;
};

}  // namespace kiln

#endif  // KILN_VM_BUILDER_H_
