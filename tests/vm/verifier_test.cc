// Load-time verification (vm/verifier.cc): one negative test per corrupt-input class, each
// checking the status code and the part of the message that says where and what; truncation
// at every length and deterministic random byte flips, which must fail cleanly, never crash;
// and mutants that pass verification run without re-checks, failing only with a status.
#define BOOST_TEST_MODULE verifier_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "serializer/version.h"
#include "tests/vm/test_programs.h"
#include "vm/verifier.h"

namespace kiln::testing {
namespace {

namespace data = boost::unit_test::data;

constexpr uint8_t Op(Opcode op) { return static_cast<uint8_t>(op); }
constexpr uint8_t Raw(DType t) { return static_cast<uint8_t>(t); }

const std::string kRegionBlob = "2";
const ValueSpec kI64Scalar{"x", DType::kI64, {}, false};

KernelDef Kernel(std::string name, std::vector<DType> ins, std::vector<DType> outs) {
  KernelDef k;
  k.name = std::move(name);
  k.inputs = std::move(ins);
  k.outputs = std::move(outs);
  return k;
}

ShapeFunctionDef ShapeFn(std::string name, int num_inputs, int num_outputs,
                         std::vector<bool> data_dependent) {
  ShapeFunctionDef s;
  s.name = std::move(name);
  s.num_inputs = num_inputs;
  s.num_outputs = num_outputs;
  s.data_dependent = std::move(data_dependent);
  return s;
}

// A one-input, one-output region.
ExternalRegionDef Region(std::string name, std::string vendor, const std::string& blob,
                         std::vector<uint32_t> constants) {
  ExternalRegionDef r;
  r.name = std::move(name);
  r.vendor = std::move(vendor);
  r.blob.assign(blob.begin(), blob.end());
  r.constants = std::move(constants);
  r.num_inputs = r.num_outputs = 1;
  return r;
}

// Every table a bytecode case may index, one entry each (constants: 1, kernels: 1, ...), and
// the functions "main" (index 0; the case writes its code) and "callee" (index 1:
// x: i64[] -> i64[]). main gets 32 registers and no params or results.
FunctionBuilder& AddBaseTables(ExecutableBuilder& b) {
  FunctionBuilder& main = b.AddFunction("main");
  main.set_register_count(32);
  FunctionBuilder& callee = b.AddFunction("callee");
  callee.AddParam(kI64Scalar);
  callee.AddResult(kI64Scalar);
  callee.Ret({0});
  b.AddKernel(Kernel("add", {DType::kI64, DType::kI64}, {DType::kI64}));
  b.AddShapeFunction(ShapeFn("same_shape", 1, 1, {false}));
  float w[16] = {};
  int c = b.AddConstant("w", DType::kF32, {16}, w, sizeof(w));  // 64 bytes: ends the file
  b.AddExternalRegion(Region("test_0", "test", kRegionBlob, {static_cast<uint32_t>(c)}));
  b.AddString("boom");
  return main;
}

std::vector<uint8_t> FinishOrDie(ExecutableBuilder& b) {
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  return std::move(*bytes);
}

Status LoadStatus(const std::vector<uint8_t>& bytes,
                  const LoadOptions& options = TestLoadOptions()) {
  return Executable::LoadBytes(bytes.data(), bytes.size(), options).status();
}

// The FlatBuffer root of builder output (read only to find where to patch).
const fb::Executable* RootOf(const std::vector<uint8_t>& bytes) {
  return fb::GetSizePrefixedExecutable(bytes.data());
}

// Byte offset in `bytes` of something the root points to.
size_t OffsetOf(const std::vector<uint8_t>& bytes, const void* p) {
  return static_cast<const uint8_t*>(p) - bytes.data();
}

void PutU32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) { std::memcpy(&bytes[at], &v, 4); }
void PutI32(std::vector<uint8_t>& bytes, size_t at, int32_t v) { std::memcpy(&bytes[at], &v, 4); }

// Where the builder places constant `i` (what a layout override must start from).
uint64_t RealOffset(ExecutableBuilder& b, int i) {
  std::vector<uint8_t> bytes = FinishOrDie(b);
  return RootOf(bytes)->constants()->Get(i)->offset();
}

// One corrupt-input class: `build` adds the defect to the base tables (or `patch` writes it
// into the finished bytes); loading must fail with `code` and a message containing every
// fragment.
struct Case {
  const char* name;
  std::function<void(ExecutableBuilder&, FunctionBuilder& main)> build;
  std::function<void(std::vector<uint8_t>&)> patch;
  StatusCode code;
  std::vector<std::string> fragments;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

void CheckCase(const Case& c) {
  ExecutableBuilder b;
  FunctionBuilder& main = AddBaseTables(b);
  c.build(b, main);
  std::vector<uint8_t> bytes = FinishOrDie(b);
  if (c.patch) c.patch(bytes);
  Status s = LoadStatus(bytes);
  BOOST_TEST_INFO("case " << c.name << ": " << s.ToString());
  BOOST_TEST(s.code() == c.code);
  for (const std::string& f : c.fragments) {
    BOOST_TEST_INFO("case " << c.name << ": " << s.ToString());
    BOOST_TEST(s.message().find(f) != std::string::npos, "missing fragment '" << f << "'");
  }
}

void Nothing(ExecutableBuilder&, FunctionBuilder& main) { main.Ret({}); }

// ---- The base file is valid: every case below differs from it only in its defect. ----------

BOOST_AUTO_TEST_CASE(base_tables_load_and_bind) {
  ExecutableBuilder b;
  FunctionBuilder& main = AddBaseTables(b);
  main.Ret({});
  std::vector<uint8_t> bytes = FinishOrDie(b);
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->num_functions() == 2);
  BOOST_TEST((*exe)->bound());
}

// The unsigned types appended to the DType enum (u16, u32, u64) are valid instruction dtypes
// (dtype 0 and kNumDTypes are rejected below).
BOOST_AUTO_TEST_CASE(unsigned_dtypes_are_valid_instruction_dtypes) {
  for (DType dtype : {DType::kU16, DType::kU32, DType::kU64}) {
    ExecutableBuilder b;
    FunctionBuilder& main = AddBaseTables(b);
    main.AllocTensor(0, 1, 0, dtype, {2, 3});
    main.Ret({});
    std::vector<uint8_t> bytes = FinishOrDie(b);
    Status s = LoadStatus(bytes);
    BOOST_TEST(s.ok(), DTypeShortName(dtype) << ": " << s.ToString());
  }
}

// ---- Layer 3: bytecode ----------------------------------------------------------------------

const std::vector<Case> kBytecodeCases = {
    {"register_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.EmitRaw(Op(Opcode::kMove), 40, 0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: move: register 40 >= 32"}},
    {"negative_register",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kMove), 0, -1); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: move: register -1 is negative"}},
    {"register_in_a_list_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({1, 32});
       f.EmitRaw(Op(Opcode::kAllocTuple), 0, off, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tuple: register 32 >= 32"}},
    {"constant_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kLoadConst), 0, 1); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: load_const: constant 1 >= 1"}},
    {"kernel_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1, 2});
       f.EmitRaw(Op(Opcode::kInvokeKernel), 1, off, 3);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke_kernel: kernel 1 >= 1"}},
    {"shape_function_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1});
       f.EmitRaw(Op(Opcode::kInvokeShapeFunc), 5, off, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke_shape_func: shape function 5 >= 1"}},
    {"external_region_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1});
       f.EmitRaw(Op(Opcode::kInvokeExternal), 1, off, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke_external: external region 1 >= 1"}},
    {"function_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1});
       f.EmitRaw(Op(Opcode::kInvoke), 2, off, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke: function 2 >= 2"}},
    {"negative_function",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1});
       f.EmitRaw(Op(Opcode::kInvoke), -1, off, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke: function -1 is negative"}},
    {"string_out_of_range",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kFatal), 1); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: fatal: string 1 >= 1"}},
    {"jump_target_past_the_end",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.EmitRaw(Op(Opcode::kGoto), 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: goto: jump target 2 >= 2"}},
    {"negative_jump_target",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kIf), 0, 0, -5);
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: if: jump target -5 is negative"}},
    {"negative_immediate",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kGetField), 0, 1, -1); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: get_field: field c is negative (-1)"}},
    {"negative_byte_offset",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kAllocTensor32), 0, 1, -64, 0, 0, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor32: field c is negative (-64)"}},
    {"negative_dim_in_an_immediate_list",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({2, -3});
       f.EmitRaw(Op(Opcode::kAllocTensor32), 0, 1, 0, off, 2, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor32: dim 1 is negative (-3)"}},
    {"immediate_list_rank_above_the_maximum",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands(std::vector<int32_t>(9, 1));
       f.EmitRaw(Op(Opcode::kAllocTensor32), 0, 1, 0, off, 9, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor32: shape rank 9 > 8"}},
    // 64-bit alloc_tensor / alloc_tensor_reg (format 1.1): operands are (low, high) pairs.
    {"negative_64bit_byte_offset",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, -(int64_t{1} << 40), DType::kF32, {2});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: field c is negative (-1099511627776)"}},
    {"negative_64bit_dim",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, 0, DType::kF32, {2, -(int64_t{1} << 33)});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: dim 1 is negative (-8589934592)"}},
    {"dim_of_2_to_the_31_wrapped_negative_in_32_bits",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, 0, DType::kU8, {int64_t{1} << 31});
       f.EmitRaw(Op(Opcode::kMove), 0, 40);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: move: register 40 >= 32"}},  // code[0] passed: 2^31 is a dim now
    {"64bit_operand_outside_the_pool",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({7});  // one int32: half a pair
       f.EmitRaw(Op(Opcode::kAllocTensorReg), 0, 1, off, 2, 0, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor_reg: field c: 64-bit operand at 0 is outside operands "
      "(size 1)"}},
    {"64bit_dim_list_outside_the_pool",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int at = f.AddOperands64({0, 4, 4});  // offset, then two dims; claims three
       f.EmitRaw(Op(Opcode::kAllocTensor), 0, 1, at, at + 2, 3, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: operand list [2, +6) is outside operands (size 6)"}},
    {"64bit_dim_list_rank_above_the_maximum",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, 0, DType::kF32, std::vector<int64_t>(9, 1));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: shape rank 9 > 8"}},
    {"byte_size_overflows_int64",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, 0, DType::kF32, {int64_t{1} << 31, int64_t{1} << 31});  // 2^64 B
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: shape's byte size overflows int64 (at dim 1)"}},
    {"byte_size_overflows_int64_in_a_32bit_alloc_tensor",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({INT32_MAX, INT32_MAX, INT32_MAX});
       f.EmitRaw(Op(Opcode::kAllocTensor32), 0, 1, 0, off, 3, Raw(DType::kU8));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor32: shape's byte size overflows int64 (at dim 2)"}},
    {"byte_offset_plus_size_overflows_int64",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AllocTensor(0, 1, INT64_MAX - 8, DType::kF64, {2});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: byte offset + 16 bytes overflows int64"}},
    {"alignment_not_a_power_of_two",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kAllocStorage), 0, 1, 3); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_storage: alignment 3 is not a power of two in [1, 64]"}},
    {"alignment_above_64",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kAllocStorage), 0, 1, 128);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"alloc_storage: alignment 128 is not a power of two"}},
    {"alignment_zero",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kAllocStorage), 0, 1, 0); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"alloc_storage: alignment 0 is not a power of two"}},
    {"unknown_opcode_just_past_the_table",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.EmitRaw(static_cast<uint8_t>(kNumOpcodes));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: unknown opcode " + std::to_string(kNumOpcodes)}},
    {"unknown_opcode_255",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(255); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: unknown opcode 255"}},
    {"reserved_field_non_zero",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kMove), 0, 1, 0, 0, 0, 0, /*reserved=*/7);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: move: reserved field is 7"}},
    {"dtype_invalid_zero",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kAllocTensor), 0, 1, 0, 0, 0, Raw(DType::kInvalid));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor: invalid dtype 0"}},
    {"dtype_past_the_enum",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kAllocTensorReg), 0, 1, 0, 2, 0, kNumDTypes);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tensor_reg: invalid dtype " + std::to_string(kNumDTypes)}},
    {"dtype_on_an_opcode_without_one",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kMove), 0, 1, 0, 0, 0, Raw(DType::kF32));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: move: invalid dtype 1"}},
    {"unused_field_non_zero",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kMove), 0, 1, 5); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: move: unused field c is 5"}},
    {"unused_last_field_non_zero",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kKillRegister), 0, 0, 0, 0, -1);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: kill_register: unused field e is -1"}},
    {"operand_list_past_the_end",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddOperands({0, 1});
       f.EmitRaw(Op(Opcode::kAllocTuple), 0, 1, 2);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: alloc_tuple: operand list [1, +2) is outside operands (size 2)"}},
    {"operand_list_in_an_empty_pool",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kRet), 10, 1); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: ret: operand list [10, +1) is outside operands (size 0)"}},
    {"operand_list_negative_offset",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddOperands({0});
       f.EmitRaw(Op(Opcode::kAllocTuple), 0, -1, 1);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"alloc_tuple: operand list [-1, +1) is outside operands (size 1)"}},
    {"operand_list_negative_count",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.EmitRaw(Op(Opcode::kAllocTuple), 0, 0, -2); },
     nullptr,
     StatusCode::kInvalidFormat,
     {"alloc_tuple: operand list [0, +-2) is outside operands"}},
    {"operand_list_offset_plus_count_overflows_int32",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddOperands({0});
       f.EmitRaw(Op(Opcode::kAllocTuple), 0, 0x7fffffff, 0x7fffffff);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"alloc_tuple: operand list [2147483647, +2147483647) is outside operands (size 1)"}},
    {"invoke_arity",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0});
       f.EmitRaw(Op(Opcode::kInvoke), 1, off, 1);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke: arity mismatch: 1 operands for 2 (the callee's params + "
      "results)"}},
    {"invoke_kernel_arity",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0, 1, 2, 3});
       f.EmitRaw(Op(Opcode::kInvokeKernel), 0, off, 4);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[0]: invoke_kernel: arity mismatch: 4 operands for 3 (the kernel's inputs "
      "+ "
      "outputs)"}},
    {"invoke_shape_func_arity",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       int off = f.AddOperands({0});
       f.EmitRaw(Op(Opcode::kInvokeShapeFunc), 0, off, 1);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"invoke_shape_func: arity mismatch: 1 operands for 2 (the shape function's inputs + "
      "outputs)"}},
    {"invoke_external_arity",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.EmitRaw(Op(Opcode::kInvokeExternal), 0, 0, 0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"invoke_external: arity mismatch: 0 operands for 2 (the region's inputs + outputs)"}},
    {"ret_arity",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddResult(kI64Scalar);
       f.LoadConsti(0, 1);
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: ret: arity mismatch: 0 operands for 1 (the function's results)"}},
    {"falls_off_the_end",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.Move(1, 0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: falls off the end of the function (the last instruction must be ret"}},
    {"falls_off_the_end_after_a_branch",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       Label done = f.NewLabel();
       f.If(0, done, done);
       f.Bind(done);
       f.KillRegister(0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0].code[1]: falls off the end"}},
    {"empty_code",
     [](ExecutableBuilder&, FunctionBuilder&) {},
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main': no code"}},
    {"error_in_a_later_function_is_located",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       FunctionBuilder& g = b.AddFunction("third");
       g.set_register_count(2);
       g.Move(0, 1);
       g.Move(1, 0);
       g.EmitRaw(Op(Opcode::kMove), 2, 0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[2].code[2]: move: register 2 >= 2"}},
};

BOOST_DATA_TEST_CASE(bytecode_errors_name_function_pc_and_operand, data::make(kBytecodeCases), c) {
  CheckCase(c);
}

// ---- Layer 2: table contents ----------------------------------------------------------------

ValueSpec WithShape(DType t, std::vector<DimSpec> dims) {
  return ValueSpec{"v", t, std::move(dims), false};
}

const std::vector<Case> kSemanticCases = {
    {"duplicate_function_names",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddFunction("callee").Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[2] 'callee': duplicate name (also functions[1])"}},
    {"function_without_a_name",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddFunction("").Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[2]: missing name"}},
    {"params_exceed_register_count",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddParam(kI64Scalar);
       f.AddParam(kI64Scalar);
       f.set_register_count(1);
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main': 2 params need more than 1 registers"}},
    {"register_count_above_the_limit",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.set_register_count((1u << 20) + 1);
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main': register_count 1048577 > 1048576"}},
    {"param_with_invalid_dtype",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddParam(WithShape(DType::kInvalid, {}));
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main'.params[0]: invalid dtype 0"}},
    {"param_rank_above_the_maximum",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddParam(WithShape(DType::kF32, std::vector<DimSpec>(9, DimSpec{1, ""})));
       f.Ret({});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main'.params[0]: rank 9 > 8"}},
    {"result_dim_below_minus_one",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.AddResult(WithShape(DType::kF32, {{3, ""}, {-2, ""}}));
       f.Ret({0});
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"functions[0] 'main'.results[0].shape[1]: invalid dim"}},
    {"kernel_with_invalid_dtype",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddKernel(Kernel("bad", {DType::kI64, static_cast<DType>(kNumDTypes)}, {DType::kI64}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"kernels[1] 'bad'.input_dtypes[1]: invalid dtype " + std::to_string(kNumDTypes)}},
    {"kernel_output_with_invalid_dtype",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddKernel(Kernel("bad", {}, {DType::kInvalid}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"kernels[1] 'bad'.output_dtypes[0]: invalid dtype 0"}},
    {"kernel_without_a_name",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddKernel(Kernel("", {}, {}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"kernels[1]: missing name"}},
    {"shape_function_data_dependent_length",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddShapeFunction(ShapeFn("sf", 1, 1, {false, true}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"shape_functions[1] 'sf': data_dependent has 2 entries for 1 inputs"}},
    {"shape_function_with_too_many_arguments",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddShapeFunction(ShapeFn("sf", 70000, 1, {}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"shape_functions[1] 'sf': too many arguments"}},
    {"constant_size_does_not_match_its_shape",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, RealOffset(b, 0), 60);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': size 60 bytes but shape [16] needs 64"}},
    {"constant_shape_overflows",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       float x = 0;
       b.AddConstant("huge", DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, &x, sizeof(x));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[1] 'huge': shape [1099511627776, 1099511627776] has too many elements"}},
    {"constant_shape_overflows_int64",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       float x = 0;
       b.AddConstant("huge", DType::kF32, {8, int64_t{1} << 61}, &x, sizeof(x));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[1] 'huge': shape [8, 2305843009213693952] has too many elements"}},
    {"constant_negative_dim",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddConstant("neg", DType::kF32, {-4}, nullptr, 0);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[1] 'neg': dim 0 is negative (-4)"}},
    {"constant_rank_above_the_maximum",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       float x = 0;
       b.AddConstant("r9", DType::kF32, std::vector<int64_t>(9, 1), &x, sizeof(x));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[1] 'r9': rank 9 > 8"}},
    {"constant_invalid_dtype",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       uint8_t x = 0;
       b.AddConstant("bad", DType::kInvalid, {1}, &x, 1);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[1] 'bad': invalid dtype 0"}},
    {"constant_data_outside_the_file",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, uint64_t{1} << 40, 64);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': data [1099511627776, +64) lies outside the data segment ["}},
    {"constant_offset_near_the_top_of_uint64",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, ~uint64_t{63}, 64);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': data [18446744073709551552, +64) lies outside the data segment ["}},
    {"constant_offset_misaligned",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, RealOffset(b, 0) + 4, 64);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': data offset ", " is not 64-byte aligned"}},
    {"constant_offset_inside_the_flatbuffer",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, 64, 64);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': data [64, +64) lies outside the data segment ["}},
    {"constant_offset_zero",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.OverrideConstantLayout(0, 0, 64);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"constants[0] 'w': data [0, +64) lies outside the data segment"}},
    {"external_region_checksum_mismatch",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       ExternalRegionDef r = Region("bad", "test", "7", {});  // FNV-1a of "7" is above 2^63
       r.override_checksum = true;
       r.checksum = ~uint64_t{0};
       b.AddExternalRegion(r);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'bad': blob checksum mismatch (stored 18446744073709551615, computed " +
      std::to_string(Fnv1a64(reinterpret_cast<const uint8_t*>("7"), 1)) + ")"}},
    {"external_region_references_a_missing_constant",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddExternalRegion(Region("r", "test", "1", {0, 7}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r'.constants[1]: constant 7 >= 1"}},
    {"external_region_without_a_vendor",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.AddExternalRegion(Region("r", "", "1", {}));
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r': missing vendor"}},
    {"external_region_fallback_out_of_range",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       ExternalRegionDef r = Region("r", "test", "1", {});
       r.fallback = 2;  // two functions: main, callee
       b.AddExternalRegion(r);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r'.fallback: function 2 out of range [-1, 2)"}},
    {"external_region_fallback_negative",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       ExternalRegionDef r = Region("r", "test", "1", {});
       r.fallback = -2;
       b.AddExternalRegion(r);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r'.fallback: function -2 out of range [-1, 2)"}},
    {"external_region_fallback_of_another_arity",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       ExternalRegionDef r = Region("r", "test", "1", {});
       r.fallback = 0;  // main: no params, no results
       b.AddExternalRegion(r);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r'.fallback: function 0 'main' takes 0 parameters and returns 0 "
      "results; the region has 1 inputs and 1 outputs"}},
    {"external_region_tuned_fallback_without_a_fallback",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       ExternalRegionDef r = Region("r", "test", "1", {});
       r.tuned_fallback = true;  // 1.4: `kiln compile --tune` preferred a fallback it lacks
       r.tuned_note = "fallback 1 ms vs region 2 ms";
       b.AddExternalRegion(r);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"external_regions[1] 'r'.tuned_fallback: set, but the region has no fallback function "
      "to run (fallback -1)"}},
    {"metadata_entry_names_no_function",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       MetadataDef m;
       m.entry = "nope";
       b.SetMetadata(m);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"metadata.entry: no function named 'nope'"}},
    {"metadata_input_with_invalid_dtype",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       MetadataDef m;
       m.entry = "main";
       m.inputs = {WithShape(DType::kF32, {}), WithShape(static_cast<DType>(200), {})};
       b.SetMetadata(m);
     },
     nullptr,
     StatusCode::kInvalidFormat,
     {"metadata.inputs[1]: invalid dtype 200"}},
    {"debug_info_shorter_than_the_code",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.Ret({});
     },
     [](std::vector<uint8_t>& bytes) {
       const auto* nodes = RootOf(bytes)->debug()->functions()->Get(0)->source_nodes();
       PutU32(bytes, OffsetOf(bytes, nodes), 1);  // the vector's length field
     },
     StatusCode::kInvalidFormat,
     {"debug.functions[0]: 1 source nodes for 2 instructions"}},
    {"debug_info_names_a_missing_string",
     [](ExecutableBuilder&, FunctionBuilder& f) {
       f.Move(0, 1);
       f.Ret({});
     },
     [](std::vector<uint8_t>& bytes) {
       const auto* nodes = RootOf(bytes)->debug()->functions()->Get(0)->source_nodes();
       PutI32(bytes, OffsetOf(bytes, nodes->Data()) + 4, 99);  // source_nodes[1]
     },
     StatusCode::kInvalidFormat,
     {"debug.functions[0].source_nodes[1]: string 99 out of range"}},
    {"debug_info_for_more_functions_than_exist",
     [](ExecutableBuilder&, FunctionBuilder& f) { f.Ret({}); },
     [](std::vector<uint8_t>& bytes) {
       PutU32(bytes, OffsetOf(bytes, RootOf(bytes)->functions()), 1);  // drop "callee"
     },
     StatusCode::kInvalidFormat,
     {"debug.functions: 2 entries for 1 functions"}},
};

BOOST_DATA_TEST_CASE(table_errors_name_the_entry, data::make(kSemanticCases), c) { CheckCase(c); }

// ---- Layer 1: structure and version ---------------------------------------------------------

const std::vector<Case> kStructureCases = {
    {"wrong_identifier",
     Nothing,
     [](std::vector<uint8_t>& bytes) { std::memcpy(&bytes[8], "NOPE", 4); },
     StatusCode::kInvalidFormat,
     {"wrong file identifier 'NOPE' (expected 'KILN'): not a .kiln file"}},
    {"unprintable_identifier",
     Nothing,
     [](std::vector<uint8_t>& bytes) { bytes[8] = 1; },
     StatusCode::kInvalidFormat,
     {"wrong file identifier '\\x1ILN'"}},
    {"size_prefix_past_the_end",
     Nothing,
     [](std::vector<uint8_t>& bytes) { PutU32(bytes, 0, static_cast<uint32_t>(bytes.size())); },
     StatusCode::kInvalidFormat,
     {"truncated: the FlatBuffer claims "}},
    {"size_prefix_too_small",
     Nothing,
     [](std::vector<uint8_t>& bytes) { PutU32(bytes, 0, 4); },
     StatusCode::kInvalidFormat,
     {"size prefix 4 is smaller than any FlatBuffer (8 bytes)"}},
    {"root_offset_outside_the_flatbuffer",
     Nothing,
     [](std::vector<uint8_t>& bytes) { PutU32(bytes, 4, 0xffffff00u); },
     StatusCode::kInvalidFormat,
     {"root table offset 4294967040 is outside the FlatBuffer"}},
    {"vector_length_past_the_end",
     Nothing,
     [](std::vector<uint8_t>& bytes) {
       PutU32(bytes, OffsetOf(bytes, RootOf(bytes)->functions()->Get(0)->code()), 0x7fffffff);
     },
     StatusCode::kInvalidFormat,
     {"FlatBuffers verification failed: the file is corrupt or truncated"}},
    {"next_major_version",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.SetVersion(kFormatMajor + 1, 0);
     },
     nullptr,
     StatusCode::kUnsupported,
     {"format version " + std::to_string(kFormatMajor + 1) +
      ".0 cannot be loaded by this runtime (format " + std::to_string(kFormatMajor) + "." +
      std::to_string(kFormatMinor) + "): the major version differs"}},
    {"previous_major_version",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.SetVersion(kFormatMajor - 1, 7);
     },
     nullptr,
     StatusCode::kUnsupported,
     {"format version " + std::to_string(kFormatMajor - 1) + ".7 cannot be loaded",
      "the major version differs"}},
    {"newer_minor_version",
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.Ret({});
       b.SetVersion(kFormatMajor, kFormatMinor + 1);
     },
     nullptr,
     StatusCode::kUnsupported,
     {"format version " + std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor + 1) +
      " is newer than this runtime's format " + std::to_string(kFormatMajor) + "." +
      std::to_string(kFormatMinor) + "; upgrade kiln"}},
    {"newer_minor_of_a_file_whose_other_tables_are_corrupt",  // the version is read first
     [](ExecutableBuilder& b, FunctionBuilder& f) {
       f.EmitRaw(255);
       b.SetVersion(kFormatMajor, 65535);
     },
     nullptr,
     StatusCode::kUnsupported,
     {"format version 1.65535 is newer"}},
};

BOOST_DATA_TEST_CASE(structure_and_version_errors, data::make(kStructureCases), c) { CheckCase(c); }

BOOST_AUTO_TEST_CASE(older_or_equal_minor_loads) {
  for (uint16_t minor = 0; minor <= kFormatMinor; ++minor) {
    ExecutableBuilder b;
    AddBaseTables(b).Ret({});
    b.SetVersion(kFormatMajor, minor);
    std::vector<uint8_t> bytes = FinishOrDie(b);
    auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
    BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
    BOOST_TEST((*exe)->version_major() == kFormatMajor);
    BOOST_TEST((*exe)->version_minor() == minor);
  }
}

// ---- Truncation -----------------------------------------------------------------------------

// A file with code, debug info, metadata, every table and two constants, the last of which
// fills its 64-byte slot so the file has no tail padding: every shorter prefix is incomplete.
std::vector<uint8_t> RichFile(size_t* flatbuffer_size, uint64_t* last_constant_offset) {
  ExecutableBuilder b;
  FunctionBuilder& main = AddBaseTables(b);
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i);
  int c = b.AddConstant("v", DType::kF32, {2, 16}, v, sizeof(v));
  main.AddParam(kI64Scalar);
  main.AddResult(kI64Scalar);
  main.SetSourceNode("Add_1");
  main.Invoke(1, {0}, {1});
  main.LoadConst(2, c);
  main.Ret({1});
  MetadataDef m;
  m.entry = "main";
  m.inputs = {kI64Scalar};
  b.SetMetadata(m);
  std::vector<uint8_t> bytes = FinishOrDie(b);
  uint32_t prefix;
  std::memcpy(&prefix, bytes.data(), 4);
  *flatbuffer_size = 4 + prefix;
  *last_constant_offset = RootOf(bytes)->constants()->Get(c)->offset();
  return bytes;
}

BOOST_AUTO_TEST_CASE(every_prefix_of_a_valid_file_fails_cleanly) {
  size_t fb_size;
  uint64_t last;
  std::vector<uint8_t> bytes = RichFile(&fb_size, &last);
  BOOST_REQUIRE_EQUAL(last + 128, bytes.size());
  BOOST_REQUIRE(LoadStatus(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    Status s = LoadStatus(prefix);
    BOOST_TEST_INFO("prefix of " << n << " bytes: " << s.ToString());
    BOOST_REQUIRE(s.code() == StatusCode::kInvalidFormat);
    const char* expect = n < 12        ? "too small to be a .kiln executable"
                         : n < fb_size ? "truncated: the FlatBuffer claims"
                                       : "lies outside the data segment";
    BOOST_TEST_INFO("prefix of " << n << " bytes: " << s.ToString());
    BOOST_REQUIRE(s.message().find(expect) != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(file_cut_inside_the_constant_data_segment) {
  size_t fb_size;
  uint64_t last;
  std::vector<uint8_t> bytes = RichFile(&fb_size, &last);
  bytes.resize(last + 100);  // constant 'v' is [last, last + 128)
  Status s = LoadStatus(bytes);
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message() == "constants[1] 'v': data [" + std::to_string(last) +
                                ", +128) lies outside the data segment [" +
                                std::to_string(fb_size) + ", " + std::to_string(last + 100) + ")");
}

// ---- Random corruption ----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(random_byte_flips_load_or_fail_cleanly) {
  size_t fb_size;
  uint64_t last;
  const std::vector<uint8_t> bytes = RichFile(&fb_size, &last);
  std::mt19937 rng(20240611);  // fixed: the same mutations every run
  int loaded = 0, failed = 0;
  int by_code[10] = {};
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> mutant = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the FlatBuffer part: the data segment is plain constant bytes.
      size_t limit = rng() % 10 == 0 ? mutant.size() : fb_size;
      mutant[rng() % limit] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    Status s = LoadStatus(mutant);
    if (s.ok()) {
      ++loaded;
      continue;
    }
    ++failed;
    ++by_code[static_cast<int>(s.code())];
    BOOST_TEST_INFO("mutation " << iter << ": " << s.ToString());
    BOOST_TEST((s.code() == StatusCode::kInvalidFormat || s.code() == StatusCode::kUnsupported ||
                s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument));
    BOOST_TEST(!s.message().empty());
  }
  BOOST_TEST_MESSAGE("loaded " << loaded << ", failed " << failed);
  BOOST_TEST(loaded + failed == 4000);
  // Both outcomes happen: the flips are neither all caught by one check nor all harmless.
  BOOST_TEST(by_code[static_cast<int>(StatusCode::kInvalidFormat)] > 1000);
  BOOST_TEST(loaded > 100);
}

// ---- Verified code runs blind ---------------------------------------------------------------

// main(n: i64[]) -> (i64[], f32[2, 2]): the sum loop, a call, a tuple, a constant through an
// external region, a shape function and a reshape: most opcodes, for mutants to rearrange.
std::vector<uint8_t> ProgramForMutation() {
  ExecutableBuilder b;
  LoopKernels k = AddLoopKernels(b);
  int same = b.AddShapeFunction(ShapeFn("same_shape", 1, 1, {false}));
  float w[4] = {1, 2, 3, 4};
  int64_t dims[2] = {2, 2};
  int cw = b.AddConstant("w", DType::kF32, {4}, w, sizeof(w));
  int cd = b.AddConstant("dims", DType::kI64, {2}, dims, sizeof(dims));
  int region = b.AddExternalRegion(Region("test_0", "test", "2", {}));
  FunctionBuilder& helper = b.AddFunction("helper");
  helper.AddParam(kI64Scalar);
  helper.AddResult(kI64Scalar);
  helper.AllocTuple(1, {0, 0});
  helper.GetField(2, 1, 1);
  helper.Ret({2});
  BuildSumLoop(b, k, "sum");
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(kI64Scalar);
  f.AddResult(kI64Scalar);
  f.AddResult(ValueSpec{"y", DType::kF32, {{2, ""}, {2, ""}}, false});
  f.Invoke(1, {0}, {1});
  f.Invoke(0, {1}, {7});
  f.LoadConst(8, cw);
  EmitAlloc(f, 9, 10, DType::kF32, {4});
  f.InvokeExternal(region, {8}, {9});
  EmitAlloc(f, 13, 10, DType::kI64, {1});
  f.InvokeShapeFunc(same, {9}, {13});
  f.LoadConst(14, cd);
  f.ReshapeTensor(15, 9, 14);
  f.KillRegister(9);
  f.Ret({7, 15});
  return FinishOrDie(b);
}

// Inputs matching a signature (i64 elements 3, others 0), or false if it has a tuple or a
// large fixed dim.
bool MakeInputs(const FunctionSignature& sig, Allocator& a, std::vector<Tensor>* inputs) {
  for (const ValueSpec& p : sig.params) {
    if (p.is_tuple) return false;
    Shape shape;
    std::vector<int64_t> dims;
    for (const DimSpec& d : p.shape) {
      if (d.value > 16) return false;
      dims.push_back(d.fixed() ? d.value : 1);
    }
    StatusOr<Tensor> t =
        Tensor::Allocate(a, p.dtype, *Shape::Make(dims.data(), static_cast<int>(dims.size())));
    if (!t.ok()) return false;
    std::memset(t->data(), 0, t->NumBytes());
    if (p.dtype == DType::kI64) {
      for (int64_t i = 0; i < t->NumElements(); ++i) t->data_as<int64_t>()[i] = 3;
    }
    inputs->push_back(std::move(*t));
  }
  return true;
}

BOOST_AUTO_TEST_CASE(verified_mutants_run_without_crashing) {
  const std::vector<uint8_t> bytes = ProgramForMutation();
  {  // The unmutated program computes the known answer.
    auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
    BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
    auto out = (*Context::Create(*exe))->Invoke("main", {I64Scalar(5)});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_TEST(*(*out)[0].data_as<int64_t>() == 10);
    BOOST_TEST((*out)[1].TypeString() == "f32[2, 2]");
    BOOST_TEST((*out)[1].data_as<float>()[3] == 8.0f);
  }
  // Flip bytes where they change behaviour, not just names: code, operand lists, kernel dtypes.
  std::vector<std::pair<size_t, size_t>> ranges;  // [begin, end) in bytes
  const fb::Executable* root = RootOf(bytes);
  for (const fb::Function* f : *root->functions()) {
    size_t code = OffsetOf(bytes, f->code()->Data());
    ranges.push_back({code, code + f->code()->size() * sizeof(fb::Instruction)});
    size_t ops = OffsetOf(bytes, f->operands()->Data());
    ranges.push_back({ops, ops + f->operands()->size() * 4});
  }
  for (const fb::Kernel* k : *root->kernels()) {
    size_t in = OffsetOf(bytes, k->input_dtypes()->Data());
    ranges.push_back({in, in + k->input_dtypes()->size()});
  }
  Allocator allocator(1 << 20);
  ContextOptions context_options;
  context_options.allocator = &allocator;
  context_options.max_call_depth = 32;
  std::mt19937 rng(99);
  int loaded = 0, ran = 0, succeeded = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::vector<uint8_t> mutant = bytes;
    int flips = 1 + static_cast<int>(rng() % 2);
    for (int j = 0; j < flips; ++j) {
      auto [lo, hi] = ranges[rng() % ranges.size()];
      size_t at = lo + rng() % (hi - lo);
      // Small changes keep more mutants verifiable: a low bit, or a whole new byte.
      mutant[at] ^= rng() % 2 ? static_cast<uint8_t>(1u << (rng() % 3))
                              : static_cast<uint8_t>(1 + rng() % 255);
    }
    auto exe = Executable::LoadBytes(mutant.data(), mutant.size(), TestLoadOptions());
    if (!exe.ok()) continue;
    ++loaded;
    auto ctx = Context::Create(*exe, context_options);
    BOOST_REQUIRE(ctx.ok());
    for (int fn = 0; fn < (*exe)->num_functions(); ++fn) {
      std::vector<Tensor> inputs;
      if (!MakeInputs((*exe)->signature(fn), allocator, &inputs)) continue;
      InvokeOptions options;
      options.timeout = std::chrono::milliseconds(5);
      auto out = (*ctx)->Invoke(fn, inputs, options);
      ++ran;
      if (out.ok()) {
        ++succeeded;
      } else {
        BOOST_TEST_INFO("mutation " << iter << ", function " << fn << ": "
                                    << out.status().ToString());
        BOOST_TEST(!out.status().message().empty());
      }
    }
  }
  BOOST_TEST_MESSAGE("loaded " << loaded << ", ran " << ran << ", succeeded " << succeeded);
  BOOST_TEST(loaded > 500);
  BOOST_TEST(succeeded > 500);
  BOOST_TEST(ran > succeeded);  // and some mutants fail at run time, cleanly
}

}  // namespace
}  // namespace kiln::testing
