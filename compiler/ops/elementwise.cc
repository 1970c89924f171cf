// Elementwise ops: unary math and activations, broadcasting binary/variadic ops, comparisons,
// logic, Where, Cast, Clip, Dropout, Identity, Softmax family.
#include <optional>

#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// ---- Symbolic value propagation (shape arithmetic: Shape -> Gather -> Mul -> Concat) ----------

bool IsIntTensor(const InferenceContext& ctx, int i) {
  return ctx.has_input(i) && IsInteger(ctx.input_dtype(i)) && ctx.input_rank(i) <= 1;
}

// C-style integer division of constants (ONNX Div on ints truncates toward zero).
std::optional<DimExpr> DivValues(const DimExpr& a, const DimExpr& b) {
  if (a.is_const() && b.is_const()) {
    if (b.const_value() == 0 || (a.const_value() == INT64_MIN && b.const_value() == -1))
      return std::nullopt;
    return DimExpr(a.const_value() / b.const_value());
  }
  // Symbolic dims are non-negative, where truncation and floor agree.
  if (b.is_const() && b.const_value() <= 0) return std::nullopt;
  return FloorDiv(a, b);
}

// Elementwise op on the known values of two small int inputs, numpy-broadcast along one axis.
void PropagateBinaryValues(InferenceContext& ctx, const std::string& op) {
  if (!IsIntTensor(ctx, 0) || !IsIntTensor(ctx, 1)) return;
  std::optional<std::vector<DimExpr>> a = ctx.InputValues(0), b = ctx.InputValues(1);
  if (!a || !b) return;
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  std::vector<DimExpr> out;
  for (size_t i = 0; i < n; ++i) {
    const DimExpr& x = (*a)[a->size() == 1 ? 0 : i];
    const DimExpr& y = (*b)[b->size() == 1 ? 0 : i];
    if (op == "Add") {
      out.push_back(x + y);
    } else if (op == "Sub") {
      out.push_back(x - y);
    } else if (op == "Mul") {
      out.push_back(x * y);
    } else if (op == "Div") {
      std::optional<DimExpr> q = DivValues(x, y);
      if (!q) return;
      out.push_back(*q);
    } else if (op == "Min") {
      out.push_back(Min(x, y));
    } else if (op == "Max") {
      out.push_back(Max(x, y));
    } else {
      return;
    }
  }
  ctx.SetOutputValues(0, std::move(out));
}

// ---- Rules -----------------------------------------------------------------------------------

Status UnaryRule(InferenceContext& ctx) { return SameAsInput0(ctx); }

Status NegRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(SameAsInput0(ctx));
  if (!IsIntTensor(ctx, 0)) return Status::Ok();
  if (std::optional<std::vector<DimExpr>> v = ctx.InputValues(0)) {
    for (DimExpr& e : *v) e = -e;
    ctx.SetOutputValues(0, std::move(*v));
  }
  return Status::Ok();
}

Status IdentityRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(SameAsInput0(ctx));
  if (ctx.input(0).symbolic_value) ctx.SetOutputValues(0, *ctx.input(0).symbolic_value);
  if (ctx.input_data(0)) ctx.SetOutputData(0, ctx.input(0).data);
  return Status::Ok();
}

Status UnaryToBoolRule(InferenceContext& ctx) {
  ctx.SetOutput(0, DType::kBool, ctx.input_shape(0));
  return Status::Ok();
}

// Add, Sub, Mul, Div, Mod, And, Or, Xor: same dtype in, broadcast shape, that dtype out.
Status BinaryRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  ASSIGN_OR_RETURN(SymbolicShape shape, Broadcast(ctx, ctx.input_shape(0), ctx.input_shape(1)));
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  PropagateBinaryValues(ctx, ctx.node().op_type);
  return Status::Ok();
}

// Output 0 becomes the known bool `values`, a scalar or (when `vector`) a 1-D tensor.
void SetKnownBools(InferenceContext& ctx, const std::vector<uint8_t>& values, bool vector) {
  std::vector<int64_t> dims;
  if (vector) dims.push_back(static_cast<int64_t>(values.size()));
  StatusOr<TensorDataRef> data = TensorData::Copy(DType::kBool, dims, values.data(), values.size());
  if (data.ok()) ctx.SetOutputData(0, *data);
}

// A comparison of two small int inputs whose values are known at compile time (`rank(x) == 3`,
// `x.shape[1] == 1`: exporters guard branches with these) becomes a constant, so an If on it
// takes one branch at compile time. Equal also holds for the same symbolic dim on both sides.
void FoldKnownComparison(InferenceContext& ctx, const SymbolicShape& shape) {
  if (!IsIntTensor(ctx, 0) || !IsIntTensor(ctx, 1)) return;
  std::optional<std::vector<DimExpr>> a = ctx.InputValues(0), b = ctx.InputValues(1);
  if (!a || !b) return;
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  if (shape.size() > 1 || (shape.size() == 1 && shape[0] != DimExpr(static_cast<int64_t>(n))))
    return;
  const std::string& op = ctx.node().op_type;
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const DimExpr& x = (*a)[a->size() == 1 ? 0 : i];
    const DimExpr& y = (*b)[b->size() == 1 ? 0 : i];
    if (op == "Equal" && x == y) {
      out[i] = 1;
      continue;
    }
    if (!x.is_const() || !y.is_const()) return;
    int64_t u = x.const_value(), v = y.const_value();
    out[i] = op == "Equal" ? u == v : op == "Less" ? u < v : op == "Greater" ? u > v
             : op == "LessOrEqual" ? u <= v : u >= v;
  }
  SetKnownBools(ctx, out, shape.size() == 1);
}

Status ComparisonRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  ASSIGN_OR_RETURN(SymbolicShape shape, Broadcast(ctx, ctx.input_shape(0), ctx.input_shape(1)));
  FoldKnownComparison(ctx, shape);
  ctx.SetOutput(0, DType::kBool, std::move(shape));
  return Status::Ok();
}

// Pow: base and exponent may differ in dtype from opset 12; the result has the base's dtype.
Status PowRule(InferenceContext& ctx) {
  if (ctx.opset() < 12) RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  if (!(DTypeBit(ctx.input_dtype(1)) & kNumericTypes))
    return ctx.Error(std::string("exponent dtype ") + DTypeName(ctx.input_dtype(1)) +
                     " is not numeric");
  ASSIGN_OR_RETURN(SymbolicShape shape, Broadcast(ctx, ctx.input_shape(0), ctx.input_shape(1)));
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  return Status::Ok();
}

// Min, Max, Sum, Mean: one or more inputs of one dtype, broadcast together.
Status VariadicRule(InferenceContext& ctx) {
  for (int i = 1; i < ctx.num_inputs(); ++i) RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
  ASSIGN_OR_RETURN(SymbolicShape shape, BroadcastInputs(ctx));
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(shape));
  if (ctx.num_inputs() == 2) PropagateBinaryValues(ctx, ctx.node().op_type);
  if (ctx.num_inputs() == 1 && ctx.input(0).symbolic_value)
    ctx.SetOutputValues(0, *ctx.input(0).symbolic_value);
  return Status::Ok();
}

// PRelu: slope broadcasts to X (unidirectionally); the output has X's shape.
Status PReluRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckUnidirectional(ctx, ctx.input_shape(0), ctx.input_shape(1), "slope"));
  return SameAsInput0(ctx);
}

Status WhereRule(InferenceContext& ctx) {
  if (ctx.input_dtype(0) != DType::kBool)
    return ctx.Error(std::string("condition has dtype ") + DTypeName(ctx.input_dtype(0)) +
                     ", expected bool");
  RETURN_IF_ERROR(CheckSameDType(ctx, 1, 2));
  ASSIGN_OR_RETURN(SymbolicShape shape, BroadcastInputs(ctx));
  ctx.SetOutput(0, ctx.input_dtype(1), std::move(shape));
  return Status::Ok();
}

Status CastRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int64_t to, ctx.GetRequiredInt("to"));
  StatusOr<DType> dtype = DTypeFromOnnx(to);
  if (!dtype.ok()) {
    return dtype.status().code() == StatusCode::kUnsupported
               ? ctx.UnsupportedError(dtype.status().message())
               : ctx.Error(dtype.status().message());
  }
  ctx.SetOutput(0, *dtype, ctx.input_shape(0));
  if (IsInteger(*dtype) && DTypeSize(*dtype) >= 4 && IsIntTensor(ctx, 0) &&
      ctx.input(0).symbolic_value)
    ctx.SetOutputValues(0, *ctx.input(0).symbolic_value);
  // A known dim cast to bool (`if h.shape[0]:`) is a constant, like a comparison of known dims.
  if (*dtype == DType::kBool && IsIntTensor(ctx, 0)) {
    std::optional<std::vector<int64_t>> v = ctx.InputConstInts(0);
    if (v && !ctx.input_data(0)) {
      std::vector<uint8_t> out(v->size());
      for (size_t i = 0; i < v->size(); ++i) out[i] = (*v)[i] != 0;
      SetKnownBools(ctx, out, ctx.input_rank(0) == 1);
    }
  }
  return Status::Ok();
}

Status CastLikeRule(InferenceContext& ctx) {
  ctx.SetOutput(0, ctx.input_dtype(1), ctx.input_shape(0));
  return Status::Ok();
}

// Clip: min/max are attributes before opset 11 and optional scalar inputs from 11.
Status ClipRule(InferenceContext& ctx) {
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
    if (ctx.input_rank(i) > 1 || (ctx.input_rank(i) == 1 && ctx.input_shape(i)[0] != DimExpr(1)))
      return ctx.Error(std::string(i == 1 ? "min" : "max") + " must be a scalar, has shape " +
                       ShapeToString(ctx.input_shape(i)));
  }
  return SameAsInput0(ctx);
}

// Dropout (inference: identity). Mask is bool from opset 10 (before, the data's dtype).
Status DropoutRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(SameAsInput0(ctx));
  ctx.SetOutput(1, ctx.opset() < 10 ? ctx.input_dtype(0) : DType::kBool, ctx.input_shape(0));
  return Status::Ok();
}

// Softmax, LogSoftmax, Hardmax: shape unchanged; the axis must be in range. Before opset 13
// the input is coerced to 2-D at `axis` (default 1); from 13 the op works along `axis`
// (default -1). The shape rule is the same; lowering differs (hence two defs).
Status SoftmaxRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetInt("axis", ctx.opset() < 13 ? 1 : -1));
  RETURN_IF_ERROR(ctx.NormalizeAxis(axis, ctx.input_rank(0)).status());
  return SameAsInput0(ctx);
}

// An op, the opset it appears in, and the dtypes of its input 0 (unary ops, and the binary
// logic and bit ops).
struct TypedOp {
  const char* name;
  int since;
  DTypeSet types;
};

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  const TypedOp kUnary[] = {
      {"Abs", 1, kNumericTypes},      {"Neg", 1, kNumericTypes},
      {"Relu", 1, kNumericTypes},     {"Sign", 9, kNumericTypes},
      {"Sigmoid", 1, kFloatTypes},    {"Tanh", 1, kFloatTypes},
      {"Softplus", 1, kFloatTypes},   {"Softsign", 1, kFloatTypes},
      {"Erf", 9, kNumericTypes},      {"Sqrt", 1, kFloatTypes},
      {"Reciprocal", 1, kFloatTypes}, {"Exp", 1, kFloatTypes},
      {"Log", 1, kFloatTypes},        {"Floor", 1, kFloatTypes},
      {"Ceil", 1, kFloatTypes},       {"Round", 11, kFloatTypes},
      {"Sin", 7, kFloatTypes},        {"Cos", 7, kFloatTypes},
      {"Tan", 7, kFloatTypes},        {"Asin", 7, kFloatTypes},
      {"Acos", 7, kFloatTypes},       {"Atan", 7, kFloatTypes},
      {"Sinh", 9, kFloatTypes},       {"Cosh", 9, kFloatTypes},
      {"Asinh", 9, kFloatTypes},      {"Acosh", 9, kFloatTypes},
      {"Atanh", 9, kFloatTypes},      {"LeakyRelu", 1, kFloatTypes},
      {"Elu", 1, kFloatTypes},        {"Selu", 1, kFloatTypes},
      {"Celu", 12, kFloatTypes},      {"HardSigmoid", 1, kFloatTypes},
      {"HardSwish", 14, kFloatTypes}, {"ThresholdedRelu", 10, kFloatTypes},
      {"Shrink", 9, kNumericTypes},   {"Not", 1, kBoolTypes},
      {"BitwiseNot", 18, kIntTypes},
  };
  for (const TypedOp& u : kUnary) {
    OpDef d =
        MakeDef(u.name, u.since, kLatestOpset, std::string(u.name) == "Neg" ? NegRule : UnaryRule);
    d.input0_types = u.types;
    MustRegister(r, d);
  }
  for (const char* name : {"IsNaN", "IsInf"}) {
    OpDef d = MakeDef(name, name[2] == 'N' ? 9 : 10, kLatestOpset, UnaryToBoolRule);
    d.input0_types = kFloatTypes;
    MustRegister(r, d);
  }
  MustRegister(r, MakeDef("Identity", 1, kLatestOpset, IdentityRule));

  for (const char* name : {"Add", "Sub", "Mul", "Div"}) {
    OpDef d = MakeDef(name, 7, kLatestOpset, BinaryRule, 2, 2);
    d.input0_types = kNumericTypes;
    MustRegister(r, d);
  }
  OpDef mod = MakeDef("Mod", 10, kLatestOpset, BinaryRule, 2, 2);
  mod.input0_types = kNumericTypes;
  MustRegister(r, mod);
  OpDef pow = MakeDef("Pow", 7, kLatestOpset, PowRule, 2, 2);
  pow.input0_types = kNumericTypes;
  MustRegister(r, pow);
  // Logic on bool, bits of integers (BitShift: unsigned only).
  const TypedOp kBits[] = {{"And", 7, kBoolTypes},         {"Or", 7, kBoolTypes},
                           {"Xor", 7, kBoolTypes},         {"BitShift", 11, kUnsignedTypes},
                           {"BitwiseAnd", 18, kIntTypes},  {"BitwiseOr", 18, kIntTypes},
                           {"BitwiseXor", 18, kIntTypes}};
  for (const TypedOp& b : kBits) {
    OpDef d = MakeDef(b.name, b.since, kLatestOpset, BinaryRule, 2, 2);
    d.input0_types = b.types;
    MustRegister(r, d);
  }
  MustRegister(r, MakeDef("Equal", 7, kLatestOpset, ComparisonRule, 2, 2));
  for (auto [name, since] :
       {std::pair{"Less", 7}, {"Greater", 7}, {"LessOrEqual", 12}, {"GreaterOrEqual", 12}}) {
    OpDef d = MakeDef(name, since, kLatestOpset, ComparisonRule, 2, 2);
    d.input0_types = kNumericTypes;
    MustRegister(r, d);
  }
  for (const char* name : {"Min", "Max", "Sum", "Mean"}) {
    OpDef d = MakeDef(name, 6, kLatestOpset, VariadicRule, 1, kVariadic);
    d.input0_types = kNumericTypes;
    MustRegister(r, d);
  }
  OpDef prelu = MakeDef("PRelu", 7, kLatestOpset, PReluRule, 2, 2);
  prelu.input0_types = kNumericTypes;
  MustRegister(r, prelu);
  MustRegister(r, MakeDef("Where", 9, kLatestOpset, WhereRule, 3, 3));

  MustRegister(r, MakeDef("Cast", 6, kLatestOpset, CastRule));
  MustRegister(r, MakeDef("CastLike", 15, kLatestOpset, CastLikeRule, 2, 2));
  OpDef clip6 = MakeDef("Clip", 6, 10, ClipRule);
  clip6.input0_types = kFloatTypes;
  MustRegister(r, clip6);
  OpDef clip11 = MakeDef("Clip", 11, kLatestOpset, ClipRule, 1, 3);
  clip11.input0_types = kNumericTypes;
  MustRegister(r, clip11);
  MustRegister(r, MakeDef("Dropout", 7, 11, DropoutRule, 1, 1, 1, 2));
  MustRegister(r, MakeDef("Dropout", 12, kLatestOpset, DropoutRule, 1, 3, 1, 2));

  for (const char* name : {"Softmax", "LogSoftmax", "Hardmax"}) {
    OpDef pre13 = MakeDef(name, 1, 12, SoftmaxRule);
    pre13.input0_types = kFloatTypes;
    MustRegister(r, pre13);
    OpDef d13 = MakeDef(name, 13, kLatestOpset, SoftmaxRule);
    d13.input0_types = kFloatTypes;
    MustRegister(r, d13);
  }
}

}  // namespace kiln::compiler::ops
