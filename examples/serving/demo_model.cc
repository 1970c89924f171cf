// The demo models: bytecode from vm/builder.h, kernels and shape functions as kernel IR.
#include "examples/serving/demo_model.h"

#include <cstdio>

#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"
#include "vm/builder.h"

namespace kiln::serving {

namespace {

using jit::Buffer;
using jit::Expr;
using jit::Kernel;

constexpr int64_t kRowWidth = 4;

KernelDef KirKernel(const Kernel& k, std::vector<DType> ins, std::vector<DType> outs) {
  return KernelDef{
      k.name, std::move(ins), std::move(outs), jit::kPayloadFormat, jit::SerializeKernel(k), {}};
}

ShapeFunctionDef KirShapeFunction(const Kernel& k, int ins, int outs) {
  return ShapeFunctionDef{k.name, ins, outs, {}, jit::kPayloadFormat, jit::SerializeKernel(k)};
}

// A shape function over x: f32 of `rank` writing one i64 value computed from its dims.
Kernel XShapeFunction(const char* name, int rank, Expr (*value)(const Buffer& x)) {
  Buffer x = Buffer::Param("x", DType::kF32, rank), out = Buffer::Param("out", DType::kI64, 1);
  return Kernel{name, {x, out}, {}, jit::Store(out, {jit::IntImm(0)}, value(x))};
}

// dst := a fresh i64[1] (scratch registers s, s + 1).
void AllocI64Vector(FunctionBuilder& f, int dst, int s) {
  f.LoadConsti(s, 8);
  f.AllocStorage(s + 1, s);
  f.AllocTensor(dst, s + 1, 0, DType::kI64, {1});
}

// dst := a fresh scalar of `dtype` (scratch registers s, s + 1).
void AllocScalar(FunctionBuilder& f, int dst, int s, DType dtype) {
  f.LoadConsti(s, 8);
  f.AllocStorage(s + 1, s);
  f.AllocTensor(dst, s + 1, 0, dtype, {});
}

}  // namespace

StatusOr<std::vector<uint8_t>> BuildAffineModel() {
  ExecutableBuilder b("kiln serving demo");
  Kernel add = jit::ElementwiseBinary("add_bias", {DType::kF32, 2, {}}, {DType::kF32, 1, {}},
                                      DType::kF32, [](Expr x, Expr y) { return x + y; });
  ASSIGN_OR_RETURN(Kernel row_sum,
                   jit::ReduceKernel("row_sum", jit::Reduction::kSum, DType::kF32, 2, {1}, false));
  int k_add = b.AddKernel(KirKernel(add, {DType::kF32, DType::kF32}, {DType::kF32}));
  int k_sum = b.AddKernel(KirKernel(row_sum, {DType::kF32}, {DType::kF32}));
  int s_bytes = b.AddShapeFunction(KirShapeFunction(
      XShapeFunction("x_bytes", 2,
                     [](const Buffer& x) {
                       return jit::DimOf(x, 0) * jit::DimOf(x, 1) * jit::IntImm(sizeof(float));
                     }),
      1, 1));
  int s_rows = b.AddShapeFunction(KirShapeFunction(
      XShapeFunction("rows", 2, [](const Buffer& x) { return jit::DimOf(x, 0); }), 1, 1));

  std::vector<DimSpec> x_shape = {DimSpec{-1, "batch"}, DimSpec{kRowWidth, ""}};
  ValueSpec x{"x", DType::kF32, x_shape, false};
  ValueSpec bias{"b", DType::kF32, {DimSpec{kRowWidth, ""}}, false};
  ValueSpec y{"y", DType::kF32, x_shape, false};
  ValueSpec s{"s", DType::kF32, {DimSpec{-1, "batch"}}, false};

  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(x);     // r0
  f.AddParam(bias);  // r1
  f.AddResult(y);
  f.AddResult(s);
  f.SetSourceNode("add_bias");
  f.ShapeOf(2, 0);           // r2 = shape(x)
  AllocI64Vector(f, 3, 20);  // r3 = [bytes of x]
  f.InvokeShapeFunc(s_bytes, {0}, {3});
  f.AllocStorage(4, 3);
  f.AllocTensorReg(5, 4, 0, DType::kF32, 2);  // r5 = y
  f.InvokeKernel(k_add, {0, 1}, {5});
  f.SetSourceNode("row_sum");
  AllocI64Vector(f, 6, 20);  // r6 = [batch]
  f.InvokeShapeFunc(s_rows, {0}, {6});
  f.AllocStorage(7, 3);                       // batch * 4 floats >= batch floats
  f.AllocTensorReg(8, 7, 0, DType::kF32, 6);  // r8 = s
  f.InvokeKernel(k_sum, {0}, {8});
  f.Ret({5, 8});

  MetadataDef meta;
  meta.entry = "main";
  meta.inputs = {x, bias};
  meta.outputs = {y, s};
  meta.producer_name = "examples/serving";
  b.SetMetadata(meta);
  return b.Finish();
}

StatusOr<std::vector<uint8_t>> BuildAddModel() {
  ExecutableBuilder b("kiln serving demo");
  Kernel add = jit::ElementwiseBinary("add", {DType::kF32, 1, {}}, {DType::kF32, 1, {}},
                                      DType::kF32, [](Expr x, Expr y) { return x + y; });
  int k_add = b.AddKernel(KirKernel(add, {DType::kF32, DType::kF32}, {DType::kF32}));
  int s_bytes = b.AddShapeFunction(KirShapeFunction(
      XShapeFunction("a_bytes", 1,
                     [](const Buffer& a) { return jit::DimOf(a, 0) * jit::IntImm(sizeof(float)); }),
      1, 1));
  std::vector<DimSpec> n_shape = {DimSpec{-1, "n"}};
  ValueSpec a{"a", DType::kF32, n_shape, false};
  ValueSpec bv{"b", DType::kF32, n_shape, false};
  ValueSpec c{"c", DType::kF32, n_shape, false};
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(a);
  f.AddParam(bv);
  f.AddResult(c);
  f.ShapeOf(2, 0);
  AllocI64Vector(f, 3, 20);
  f.InvokeShapeFunc(s_bytes, {0}, {3});
  f.AllocStorage(4, 3);
  f.AllocTensorReg(5, 4, 0, DType::kF32, 2);
  f.InvokeKernel(k_add, {0, 1}, {5});
  f.Ret({5});
  MetadataDef meta;
  meta.entry = "main";
  meta.inputs = {a, bv};
  meta.outputs = {c};
  meta.producer_name = "examples/serving";
  b.SetMetadata(meta);
  return b.Finish();
}

StatusOr<std::vector<uint8_t>> BuildSpinModel() {
  ExecutableBuilder b("kiln serving demo");
  Kernel add = jit::ElementwiseBinary("add", {DType::kI64, 0, {}}, {DType::kI64, 0, {}},
                                      DType::kI64, [](Expr x, Expr y) { return x + y; });
  Kernel less = jit::ElementwiseBinary("less", {DType::kI64, 0, {}}, {DType::kI64, 0, {}},
                                       DType::kBool, [](Expr x, Expr y) { return jit::Lt(x, y); });
  int k_add = b.AddKernel(KirKernel(add, {DType::kI64, DType::kI64}, {DType::kI64}));
  int k_less = b.AddKernel(KirKernel(less, {DType::kI64, DType::kI64}, {DType::kBool}));

  ValueSpec n{"n", DType::kI64, {}, false};
  ValueSpec total{"total", DType::kI64, {}, false};
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(n);  // r0
  f.AddResult(total);
  Label loop = f.NewLabel(), body = f.NewLabel(), done = f.NewLabel();
  f.LoadConsti(1, 0);  // acc
  f.LoadConsti(2, 0);  // i
  f.LoadConsti(3, 1);
  f.Bind(loop);
  AllocScalar(f, 4, 20, DType::kBool);
  f.InvokeKernel(k_less, {2, 0}, {4});
  f.If(4, body, done);
  f.Bind(body);
  AllocScalar(f, 5, 20, DType::kI64);
  f.InvokeKernel(k_add, {1, 2}, {5});
  f.Move(1, 5);
  AllocScalar(f, 6, 20, DType::kI64);
  f.InvokeKernel(k_add, {2, 3}, {6});
  f.Move(2, 6);
  f.Goto(loop);
  f.Bind(done);
  f.Ret({1});

  MetadataDef meta;
  meta.entry = "main";
  meta.inputs = {n};
  meta.outputs = {total};
  meta.producer_name = "examples/serving";
  b.SetMetadata(meta);
  return b.Finish();
}

Status WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return InvalidArgument("cannot open '" + path + "' for writing");
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return InvalidArgument("cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace kiln::serving
