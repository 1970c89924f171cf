// 64-bit dims and byte offsets (issue 17, finding 1): the builder writes them whole (operands,
// disassembly), format 1.0's 32-bit alloc_tensor still runs, and oversized or misplaced tensors
// fail with a clean status instead of wrapping into another tensor's bytes.
#define BOOST_TEST_MODULE wide_dims_test
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "serializer/version.h"
#include "tests/vm/test_programs.h"
#include "vm/disassembler.h"

namespace kiln::testing {
namespace {

constexpr int64_t k2to31 = int64_t{1} << 31;
constexpr int64_t k2to40 = int64_t{1} << 40;

std::shared_ptr<const Executable> LoadUnbound(const std::vector<uint8_t>& bytes) {
  LoadOptions options;
  options.bind = false;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::vector<uint8_t> FinishOrFail(ExecutableBuilder& b) {
  auto bytes = b.Finish();
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *bytes;
}

BOOST_AUTO_TEST_CASE(builder_writes_dims_and_offsets_above_2_to_31_whole) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.set_register_count(4);
  // 7.8e18 bytes: as large as int64 allows with room for the offset (the verifier checks).
  f.AllocTensor(0, 1, int64_t{5} << 32, DType::kU8, {1, 1207959552, 3 * k2to31});
  f.AllocTensorReg(2, 1, k2to40 + 8, DType::kI64, 3);
  f.Ret({});
  std::vector<uint8_t> bytes = FinishOrFail(b);
  auto exe = LoadUnbound(bytes);
  BOOST_TEST(exe->version_minor() == kFormatMinor);
  const fb::Function* fn = exe->root().functions()->Get(0);
  const fb::Instruction* in = fn->code()->Get(0);
  BOOST_TEST(in->opcode() == static_cast<uint8_t>(Opcode::kAllocTensor));
  const int32_t* ops = fn->operands()->data();
  BOOST_TEST(ReadOperand64(ops, in->c()) == int64_t{5} << 32);
  BOOST_REQUIRE(in->e() == 3);
  BOOST_TEST(ReadOperand64(ops, in->d() + 2) == 1207959552);
  BOOST_TEST(ReadOperand64(ops, in->d() + 4) == 3 * k2to31);
  BOOST_TEST(DisassembleInstruction(*exe, 0, 0) ==
             "alloc_tensor u8 r0 r1 21474836480 shape (1, 1207959552, 6442450944)");
  BOOST_TEST(DisassembleInstruction(*exe, 0, 1) == "alloc_tensor_reg i64 r2 r1 1099511627784 r3");
}

// Format 1.0 files keep loading, and their alloc_tensor keeps its 32-bit meaning.
BOOST_AUTO_TEST_CASE(format_1_0_alloc_tensor32_still_runs) {
  ExecutableBuilder b;
  b.SetVersion(1, 0);
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(ValueSpec{"r", DType::kI64, {DimSpec{2}}, false});
  f.LoadConsti(0, 24);
  f.AllocStorage(1, 0);
  int dims = f.AddOperands({2});
  f.EmitRaw(static_cast<uint8_t>(Opcode::kAllocTensor32), 2, 1, 8, dims, 1,
            static_cast<uint8_t>(DType::kI64));
  f.set_register_count(3);
  f.Ret({2});
  auto exe = LoadOrDie(b);
  BOOST_TEST(exe->version_minor() == 0);
  BOOST_TEST(DisassembleInstruction(*exe, 0, 2) == "alloc_tensor32 i64 r2 r1 8 shape (2)");
  auto ctx = *Context::Create(exe);
  auto out = ctx->Invoke("main", {});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST((*out)[0].shape().ToString() == Shape{2}.ToString());
  BOOST_TEST((*out)[0].byte_offset() == 8);
}

// Two tensors in one storage at distinct offsets stay distinct (the Concat reproduction placed
// a buffer inside another when its offset wrapped).
BOOST_AUTO_TEST_CASE(tensors_at_distinct_offsets_do_not_alias) {
  ExecutableBuilder b;
  LoopKernels k = AddLoopKernels(b);
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(Scalar("x", DType::kI64));
  f.AddResult(Scalar("y", DType::kI64));
  f.LoadConsti(0, 5);
  f.LoadConsti(1, 7);
  f.LoadConsti(2, 16);
  f.AllocStorage(3, 2);
  f.AllocTensor(4, 3, 0, DType::kI64, {});
  f.AllocTensor(5, 3, 8, DType::kI64, {});
  f.InvokeKernel(k.add, {0, 1}, {4});
  f.InvokeKernel(k.add, {4, 0}, {5});
  f.Ret({4, 5});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("main", {});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(*(*out)[0].data_as<int64_t>() == 12);
  BOOST_TEST(*(*out)[1].data_as<int64_t>() == 17);
}

// Offsets and dims past 2^31 in a small storage: InvalidArgument naming the extent, never a
// view that wrapped back into the storage.
BOOST_AUTO_TEST_CASE(oversized_views_fail_cleanly) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("far_offset");
  f.AddResult(Scalar("r", DType::kI64));
  f.LoadConsti(0, 64);
  f.AllocStorage(1, 0);
  f.AllocTensor(2, 1, int64_t{1} << 32, DType::kI64, {});  // wrapped to 0 in 32 bits
  f.Ret({2});
  FunctionBuilder& g = b.AddFunction("wide_dim");
  g.AddResult(ValueSpec{"r", DType::kU8, {DimSpec{1}, DimSpec{-1, "n"}}, false});
  g.LoadConsti(0, 64);
  g.AllocStorage(1, 0);
  g.AllocTensor(2, 1, 0, DType::kU8, {1, 1207959552 * int64_t{4}});  // 4.5 GiB in 64 bytes
  g.Ret({2});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("far_offset", {});
  BOOST_TEST(out.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(out.status().message().find("at offset 4294967296 does not fit in storage of 64") !=
             std::string::npos, out.status().ToString());
  out = ctx->Invoke("wide_dim", {});
  BOOST_TEST(out.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(out.status().message().find("[1, 4831838208]") != std::string::npos,
             out.status().ToString());
}

// An absurd allocation is refused by the allocator with ResourceExhausted, not wrapped.
BOOST_AUTO_TEST_CASE(absurd_storage_is_resource_exhausted) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.AddResult(ValueSpec{"r", DType::kU8, {DimSpec{int64_t{1} << 61}}, false});
  f.LoadConsti(0, int64_t{1} << 61);
  f.AllocStorage(1, 0);
  f.AllocTensor(2, 1, 0, DType::kU8, {int64_t{1} << 61});
  f.Ret({2});
  auto ctx = *Context::Create(LoadOrDie(b));
  auto out = ctx->Invoke("main", {});
  BOOST_TEST(out.status().code() == StatusCode::kResourceExhausted, out.status().ToString());
  BOOST_TEST(out.status().message().find("2305843009213693952 bytes") != std::string::npos,
             out.status().ToString());
}

}  // namespace
}  // namespace kiln::testing
