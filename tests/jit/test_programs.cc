// Small executables built in code around JIT kernels (see test_programs.h).
#include "tests/jit/test_programs.h"

#include <utility>

#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"

namespace kiln::jit::testing {

KernelDef KirKernel(const Kernel& k, std::vector<DType> ins, std::vector<DType> outs) {
  return KernelDef{k.name, std::move(ins), std::move(outs), kPayloadFormat, SerializeKernel(k), {}};
}

ShapeFunctionDef KirShapeFunction(const Kernel& k, int ins, int outs) {
  return ShapeFunctionDef{k.name, ins, outs, {}, kPayloadFormat, SerializeKernel(k)};
}

void AddPassThroughProgram(ExecutableBuilder& b) {
  float w[2] = {0.5f, -1.5f};
  int c = b.AddConstant("w", DType::kF32, {2}, w, sizeof(w));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddParam(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddResult(ValueSpec{"w", DType::kF32, {{2, ""}}, false});
  f.SetSourceNode("Identity_0");
  f.LoadConst(2, c);
  f.Ret({1, 0, 2});
  FunctionBuilder& spin = b.AddFunction("spin");
  Label top = spin.NewLabel();
  spin.Bind(top);
  spin.Move(1, 0);
  spin.Goto(top);
  spin.set_register_count(2);
  MetadataDef meta;
  meta.entry = "main";
  b.SetMetadata(meta);
}

void AddTwicePlusProgram(ExecutableBuilder& b) {
  Operand x{DType::kF32, 1, {}};
  Kernel add = ElementwiseBinary("add", x, x, DType::kF32, [](Expr a, Expr c) { return a + c; });
  int k = b.AddKernel(KirKernel(add, {DType::kF32, DType::kF32}, {DType::kF32}));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{3, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}}, false});
  f.LoadConsti(1, 12);
  f.AllocStorage(2, 1);
  f.AllocTensor(3, 2, 0, DType::kF32, {3});
  f.InvokeKernel(k, {0, 0}, {3});
  f.Ret({3});
}

void AddTunedFallbackProgram(ExecutableBuilder& b, const std::string& vendor) {
  Operand x{DType::kF32, 1, {}};
  Kernel add = ElementwiseBinary("add", x, x, DType::kF32, [](Expr a, Expr c) { return a + c; });
  int k = b.AddKernel(KirKernel(add, {DType::kF32, DType::kF32}, {DType::kF32}));
  const ValueSpec vec{"x", DType::kF32, {{3, ""}}, false};
  ExternalRegionDef def;
  def.name = "acme_0";
  def.vendor = vendor;
  def.blob = {'x', '2'};
  def.num_inputs = def.num_outputs = 1;
  const int region = b.AddExternalRegion(def);
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(vec);
  main.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}}, false});
  main.LoadConsti(1, 12);
  main.AllocStorage(2, 1);
  main.AllocTensor(3, 2, 0, DType::kF32, {3});
  main.InvokeExternal(region, {0}, {3});
  main.Ret({3});
  FunctionBuilder& fallback = b.AddFunction(def.name + "/fallback");
  fallback.AddParam(vec);
  fallback.AddResult(vec);
  fallback.LoadConsti(1, 12);
  fallback.AllocStorage(2, 1);
  fallback.AllocTensor(3, 2, 0, DType::kF32, {3});
  fallback.InvokeKernel(k, {0, 0}, {3});
  fallback.Ret({3});
  b.SetRegionFallback(region, fallback.index());
  b.SetRegionTune(region, true, "fallback 0.5x the region");
  MetadataDef meta;
  meta.entry = "main";
  b.SetMetadata(meta);
}

void AddExpProgram(ExecutableBuilder& b, int64_t storage_bytes) {
  Kernel exp = ElementwiseUnary("exp", DType::kF32, DType::kF32, 2, [](Expr x) { return Exp(x); });
  int k = b.AddKernel(KirKernel(exp, {DType::kF32}, {DType::kF32}));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}, {-1, "m"}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{-1, "n"}, {-1, "m"}}, false});
  f.ShapeOf(1, 0);
  f.LoadConsti(2, storage_bytes);
  f.AllocStorage(3, 2);
  f.AllocTensorReg(4, 3, 0, DType::kF32, 1);
  f.InvokeKernel(k, {0}, {4});
  f.Ret({4});
}

}  // namespace kiln::jit::testing
