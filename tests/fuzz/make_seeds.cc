// Writes the load fuzzer's seed corpus: valid executables that together use every opcode and
// every table (kernels, shape functions, external regions, constants, metadata, debug info).
//
//   make_seeds DIR   -> DIR/<name>.kiln, each verified by loading it (bind=false) first.
#include <cstdio>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "vm/builder.h"
#include "vm/executable.h"

namespace kiln {
namespace {

ValueSpec Spec(std::string name, DType t, std::vector<DimSpec> shape = {}) {
  return ValueSpec{std::move(name), t, std::move(shape), false};
}

// dst := new tensor<dtype>[shape] in a fresh storage (uses scratch, scratch + 1).
void EmitAlloc(FunctionBuilder& f, int dst, int scratch, DType dtype,
               const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  f.LoadConsti(scratch, n * static_cast<int64_t>(DTypeSize(dtype)));
  f.AllocStorage(scratch + 1, scratch);
  f.AllocTensor(dst, scratch + 1, 0, dtype, shape);
}

// sum(n) = 0 + 1 + ... + (n - 1): a loop (if / goto) over two kernels, with source nodes.
void AddLoop(ExecutableBuilder& b) {
  int add = b.AddKernel({"add", {DType::kI64, DType::kI64}, {DType::kI64}, "kiln-kir-1",
                         {1, 2, 3, 4}, {{"batch", {1, 8, 64}}}});
  int less = b.AddKernel({"less", {DType::kI64, DType::kI64}, {DType::kBool}, "", {}, {}});
  FunctionBuilder& f = b.AddFunction("sum");
  f.AddParam(Spec("n", DType::kI64));
  f.AddResult(Spec("sum", DType::kI64));
  Label loop = f.NewLabel(), body = f.NewLabel(), done = f.NewLabel();
  f.SetSourceNode("init");
  f.LoadConsti(1, 0);
  f.LoadConsti(2, 0);
  f.LoadConsti(3, 1);
  f.Bind(loop);
  f.SetSourceNode("Less_0");
  EmitAlloc(f, 4, 10, DType::kBool, {});
  f.InvokeKernel(less, {2, 0}, {4});
  f.If(4, body, done);
  f.Bind(body);
  f.SetSourceNode("Add_1");
  EmitAlloc(f, 5, 10, DType::kI64, {});
  f.InvokeKernel(add, {1, 2}, {5});
  f.Move(1, 5);
  EmitAlloc(f, 6, 10, DType::kI64, {});
  f.InvokeKernel(add, {2, 3}, {6});
  f.Move(2, 6);
  f.KillRegister(5);
  f.Goto(loop);
  f.Bind(done);
  f.SetSourceNode("");
  f.Ret({1});
}

// Calls: swap returns two results; twice calls swap twice; guard calls fatal on a negative
// input; recurse calls itself (a cycle in the call graph).
void AddCalls(ExecutableBuilder& b) {
  FunctionBuilder& swap = b.AddFunction("swap");
  swap.AddParam(Spec("x", DType::kI64));
  swap.AddParam(Spec("y", DType::kF32, {{4, ""}}));
  swap.AddResult(Spec("y", DType::kF32, {{4, ""}}));
  swap.AddResult(Spec("x", DType::kI64));
  swap.Ret({1, 0});

  FunctionBuilder& twice = b.AddFunction("twice");
  twice.AddParam(Spec("x", DType::kI64));
  twice.AddParam(Spec("y", DType::kF32, {{4, ""}}));
  twice.AddResult(Spec("x", DType::kI64));
  twice.AddResult(Spec("y", DType::kF32, {{4, ""}}));
  twice.Invoke(swap.index(), {0, 1}, {2, 3});
  twice.Invoke(swap.index(), {3, 2}, {4, 5});
  twice.Ret({5, 4});

  FunctionBuilder& recurse = b.AddFunction("recurse");
  recurse.AddParam(Spec("c", DType::kBool));
  recurse.AddResult(Spec("c", DType::kBool));
  Label again = recurse.NewLabel(), out = recurse.NewLabel();
  recurse.If(0, again, out);
  recurse.Bind(again);
  recurse.Invoke(recurse.index(), {0}, {1});
  recurse.Fatal(b.AddString("recursed without end"));
  recurse.Bind(out);
  recurse.Ret({0});
}

// Tuples: build, nest, read back, and a tuple-typed parameter and result.
void AddTuples(ExecutableBuilder& b) {
  FunctionBuilder& f = b.AddFunction("tuples");
  f.AddParam(Spec("a", DType::kI64));
  f.AddParam(ValueSpec{"t", DType::kInvalid, {}, true});
  f.AddResult(Spec("a", DType::kI64));
  f.AddResult(ValueSpec{"pair", DType::kInvalid, {}, true});
  f.LoadConsti(2, -42);
  f.AllocTuple(3, {0, 2});
  f.AllocTuple(4, {3, 1, 0});
  f.GetField(5, 4, 0);
  f.GetField(6, 5, 1);
  f.KillRegister(3);
  f.Ret({6, 4});
}

// Constants of several dtypes and ranks (one empty), shape_of / reshape / alloc_tensor_reg,
// and symbolic dims in the signature.
void AddConstants(ExecutableBuilder& b) {
  const float w[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[2] = {3, 2};
  const uint8_t mask[4] = {1, 0, 1, 1};
  int cw = b.AddConstant("w", DType::kF32, {2, 3}, w, sizeof(w));
  int cs = b.AddConstant("new_shape", DType::kI64, {2}, shape, sizeof(shape));
  b.AddConstant("mask", DType::kBool, {2, 2}, mask, sizeof(mask));
  b.AddConstant("", DType::kF16, {0, 5}, nullptr, 0);
  FunctionBuilder& f = b.AddFunction("reshape");
  f.AddParam(Spec("x", DType::kF32, {{-1, "batch"}, {-1, "seq"}, {-1, ""}}));
  f.AddParam(Spec("y", DType::kF32, {{-1, "batch"}, {4, ""}}));
  f.AddResult(Spec("w", DType::kF32, {{3, ""}, {2, ""}}));
  f.AddResult(Spec("s", DType::kI64, {{2, ""}}));
  f.AddResult(Spec("z", DType::kF32, {{-1, "batch"}, {-1, "seq"}, {-1, ""}}));
  f.LoadConst(2, cw);
  f.LoadConst(3, cs);
  f.ReshapeTensor(4, 2, 3);
  f.ShapeOf(5, 0);
  f.LoadConsti(6, 4096);
  f.AllocStorage(7, 6, 16);
  f.AllocTensorReg(8, 7, 64, DType::kF32, 5);
  f.Ret({4, 3, 8});
}

// A shape function (one data-dependent input) feeding an allocation.
void AddShapeFunctions(ExecutableBuilder& b) {
  int sf = b.AddShapeFunction({"broadcast_shape", 2, 1, {false, true}, "kiln-kir-1", {9, 8, 7}});
  b.AddShapeFunction({"same_shape", 1, 1, {false}, "", {}});
  FunctionBuilder& f = b.AddFunction("dynamic");
  f.AddParam(Spec("x", DType::kF32, {{-1, "n"}}));
  f.AddParam(Spec("k", DType::kI64));
  f.AddResult(Spec("y", DType::kF32, {{-1, ""}}));
  EmitAlloc(f, 2, 10, DType::kI64, {1});
  f.InvokeShapeFunc(sf, {0, 1}, {2});
  f.LoadConsti(3, 1 << 20);
  f.AllocStorage(4, 3);
  f.AllocTensorReg(5, 4, 0, DType::kF32, 2);
  f.Ret({5});
}

// An external region with a blob and constants it receives by reference.
void AddExternalRegions(ExecutableBuilder& b) {
  const float scale[1] = {0.5f};
  int c = b.AddConstant("bias", DType::kF32, {1}, scale, sizeof(scale));
  auto bias = static_cast<uint32_t>(c);
  int r = b.AddExternalRegion({"onednn_0", "test", {'2', '.', '5'}, {bias}, 1, 1});
  b.AddExternalRegion({"empty_region", "other", {}, {}, 0, 0});
  FunctionBuilder& f = b.AddFunction("region");
  f.AddParam(Spec("x", DType::kF32, {{2, ""}, {2, ""}}));
  f.AddResult(Spec("y", DType::kF32, {{2, ""}, {2, ""}}));
  EmitAlloc(f, 1, 10, DType::kF32, {2, 2});
  f.InvokeExternal(r, {0}, {1});
  f.InvokeExternal(1, {}, {});
  f.Ret({1});
}

void AddMetadata(ExecutableBuilder& b, const std::string& entry) {
  MetadataDef m;
  m.inputs = {Spec("n", DType::kI64)};
  m.outputs = {Spec("sum", DType::kI64), ValueSpec{"t", DType::kInvalid, {}, true}};
  m.entry = entry;
  m.opset = 17;
  m.producer_name = "pytorch";
  m.doc = "seed for the load fuzzer";
  b.SetMetadata(std::move(m));
}

struct Seed {
  const char* name;
  std::function<void(ExecutableBuilder&)> build;
};

const Seed kSeeds[] = {
    {"loop", [](ExecutableBuilder& b) { AddLoop(b); AddMetadata(b, "sum"); }},
    {"calls", AddCalls},
    {"tuples", AddTuples},
    {"constants", AddConstants},
    {"shape_functions", AddShapeFunctions},
    {"external_regions", AddExternalRegions},
    {"everything", [](ExecutableBuilder& b) {
       AddExternalRegions(b);
       AddLoop(b);
       AddCalls(b);
       AddTuples(b);
       AddConstants(b);
       AddShapeFunctions(b);
       AddMetadata(b, "sum");
       b.AddString("an unused string");
     }},
};

Status WriteSeed(const Seed& seed, const std::string& dir) {
  ExecutableBuilder b("kiln make_seeds");
  seed.build(b);
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, b.Finish());
  LoadOptions verify_only;
  verify_only.bind = false;
  // A seed the loader rejects would only teach the fuzzer the error paths.
  StatusOr<std::shared_ptr<const Executable>> exe =
      Executable::LoadBytes(bytes.data(), bytes.size(), verify_only);
  if (!exe.ok()) return exe.status();
  return b.WriteFile(dir + "/" + seed.name + ".kiln");
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  for (const kiln::Seed& seed : kiln::kSeeds) {
    kiln::Status s = kiln::WriteSeed(seed, argv[1]);
    if (!s.ok()) {
      std::fprintf(stderr, "make_seeds: %s: %s\n", seed.name, s.ToString().c_str());
      return 1;
    }
  }
  std::printf("make_seeds: wrote %zu executables to %s\n", std::size(kiln::kSeeds), argv[1]);
  return 0;
}
