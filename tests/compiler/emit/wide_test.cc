// 64-bit dims and offsets through the whole compiler (issue 17, finding 1): the reproductions
// compiled with the real op set and inspected in the file (storage plan, dims, constants)
// without running them, since they describe tensors of gigabytes to exabytes.
#define BOOST_TEST_MODULE wide_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "embed/compile.h"
#include "tests/compiler/test_util.h"
#include "vm/disassembler.h"
#include "vm/executable.h"
#include "vm/opcodes.h"

namespace kiln::compiler {
namespace {

// One static alloc_tensor as written: storage register, byte offset, dims.
struct StaticAlloc {
  int storage;
  int64_t offset;
  std::vector<int64_t> dims;
  DType dtype;
  int64_t bytes() const {
    int64_t n = static_cast<int64_t>(DTypeSize(dtype));
    for (int64_t d : dims) n *= d;
    return n;
  }
};

StatusOr<std::vector<uint8_t>> CompileText(const std::string& text) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = "none";
  return kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o);
}

// Compiles `text` and loads it verify-only (the loader must accept what the compiler wrote).
std::shared_ptr<const Executable> CompileAndLoad(const std::string& text) {
  auto bytes = CompileText(text);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  LoadOptions options;
  options.bind = false;
  auto exe = Executable::LoadBytes(bytes->data(), bytes->size(), options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::vector<StaticAlloc> StaticAllocs(const Executable& exe, int function) {
  const fb::Function* fn = exe.root().functions()->Get(function);
  const int32_t* ops = fn->operands() ? fn->operands()->data() : nullptr;
  std::vector<StaticAlloc> out;
  for (const fb::Instruction* in : *fn->code()) {
    if (in->opcode() != static_cast<uint8_t>(Opcode::kAllocTensor)) continue;
    StaticAlloc a{in->b(), ReadOperand64(ops, in->c()), {}, static_cast<DType>(in->dtype())};
    for (int j = 0; j < in->e(); ++j) a.dims.push_back(ReadOperand64(ops, in->d() + 2 * j));
    out.push_back(a);
  }
  return out;
}

// The constants load_consti writes in `function`.
std::vector<int64_t> Immediates(const Executable& exe, int function) {
  const fb::Function* fn = exe.root().functions()->Get(function);
  std::vector<int64_t> out;
  for (const fb::Instruction* in : *fn->code()) {
    if (in->opcode() != static_cast<uint8_t>(Opcode::kLoadConsti)) continue;
    int32_t pair[2] = {in->b(), in->c()};
    out.push_back(ReadOperand64(pair, 0));
  }
  return out;
}

bool Has(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Expand [1, 1] to 4.5 GiB and to 0.5 GiB, reduce both, concat: the two expanded buffers are
// alive together, so their arena ranges must not overlap (with 32-bit offsets the second was
// placed inside the first and the answer was [2, 2, 1] instead of [1, 2, 1]).
BOOST_AUTO_TEST_CASE(expand_reduce_concat_buffers_do_not_overlap) {
  auto exe = CompileAndLoad(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 1] a, float[1, 1] b) => (float[1, 3] out) {
      big = Constant <value = int64[2] {1, 1207959552}> ()
      small = Constant <value = int64[2] {1, 134217728}> ()
      ea = Expand (a, big)
      eb = Expand (b, small)
      ma = ReduceMax <axes = [1], keepdims = 1> (ea)
      mb = ReduceMax <axes = [1], keepdims = 1> (eb)
      na = ReduceMin <axes = [1], keepdims = 1> (ea)
      out = Concat <axis = 1> (ma, mb, na)
    }
  )");
  int entry = exe->FindFunction(exe->entry_function());
  std::vector<StaticAlloc> allocs = StaticAllocs(*exe, entry);
  std::vector<StaticAlloc> big;
  for (const StaticAlloc& a : allocs) {
    if (a.bytes() >= (int64_t{1} << 29)) big.push_back(a);
  }
  BOOST_TEST_MESSAGE(DisassembleFunction(*exe, entry));
  BOOST_REQUIRE_MESSAGE(big.size() == 2u, DisassembleFunction(*exe, entry));
  BOOST_TEST(big[0].storage == big[1].storage);  // both in the arena
  const StaticAlloc& lo = big[0].offset < big[1].offset ? big[0] : big[1];
  const StaticAlloc& hi = big[0].offset < big[1].offset ? big[1] : big[0];
  BOOST_TEST(lo.offset + lo.bytes() <= hi.offset);
  BOOST_TEST(hi.offset >= (int64_t{1} << 29));  // past 2^31 when the 4.5 GiB one comes first
  // The arena is sized for both: its load_consti covers the end of the higher one.
  std::vector<int64_t> imm = Immediates(*exe, entry);
  BOOST_TEST(*std::max_element(imm.begin(), imm.end()) >= hi.offset + hi.bytes());
}

// Relu over a static f32 input of `dims`: the file keeps every dim whole, in the output's
// alloc_tensor, its storage size and the signature.
void CheckDimsStayWhole(int64_t d0, int64_t d1) {
  std::string shape = "float[" + std::to_string(d0) + ", " + std::to_string(d1) + "]";
  auto exe = CompileAndLoad("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                            "g (" + shape + " x) => (" + shape + " y) { y = Relu (x) }");
  int entry = exe->FindFunction(exe->entry_function());
  std::vector<StaticAlloc> allocs = StaticAllocs(*exe, entry);
  BOOST_REQUIRE_MESSAGE(!allocs.empty(), DisassembleFunction(*exe, entry));
  BOOST_TEST((allocs.back().dims == std::vector<int64_t>{d0, d1}));
  BOOST_TEST(Has(Immediates(*exe, entry), d0 * d1 * 4), DisassembleFunction(*exe, entry));
  const FunctionSignature& sig = exe->signature(entry);
  BOOST_TEST(sig.params[0].shape[0].value == d0);
  BOOST_TEST(sig.results[0].shape[1].value == d1);
}

// A static batch of 2^40 stays 2^40 in the file (it was written as 0).
BOOST_AUTO_TEST_CASE(batch_of_2_to_the_40_stays_in_the_file) {
  CheckDimsStayWhole(int64_t{1} << 40, 512);
}

// A dim of 2^31 compiles to a file the loader accepts (it was a negative int32 dim).
BOOST_AUTO_TEST_CASE(dim_of_2_to_the_31_loads) { CheckDimsStayWhole(2, int64_t{1} << 31); }

// ConstantOfShape([2^61]) filled with `dtype` ("uint8", "float") as the graph's output.
std::string ConstantOfShape2to61(const std::string& dtype) {
  return "<ir_version: 8, opset_import: [\"\" : 13]>\n"
         "g (float[1] x) => (" + dtype + "[2305843009213693952] y) {\n"
         "  s = Constant <value = int64[1] {2305843009213693952}> ()\n"
         "  y = ConstantOfShape <value = " + dtype + "[1] {1}> (s)\n"
         "}\n";
}

// ConstantOfShape([2^61]) of bytes allocates 2^61 bytes (the file said 1).
BOOST_AUTO_TEST_CASE(constant_of_shape_2_to_the_61_keeps_its_size) {
  auto exe = CompileAndLoad(ConstantOfShape2to61("uint8"));
  int entry = exe->FindFunction(exe->entry_function());
  BOOST_TEST(Has(Immediates(*exe, entry), int64_t{1} << 61), DisassembleFunction(*exe, entry));
}

// 2^61 floats are 2^63 bytes: more than an int64 offset holds, so a compile error naming the
// value, not a wrapped size.
BOOST_AUTO_TEST_CASE(more_bytes_than_int64_is_a_compile_error) {
  auto bytes = CompileText(ConstantOfShape2to61("float"));
  BOOST_REQUIRE(!bytes.ok());
  BOOST_TEST(bytes.status().code() == StatusCode::kInvalidArgument, bytes.status().ToString());
  BOOST_TEST(bytes.status().message().find("'y'") != std::string::npos, bytes.status().ToString());
}

}  // namespace
}  // namespace kiln::compiler
