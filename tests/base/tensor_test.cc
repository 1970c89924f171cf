// Shape, Tensor, DType and Status (vm/tensor.cc, vm/dtype.cc, vm/status.cc): checked
// construction of untrusted shapes, view bounds, reshape, strides, zero-copy wrapping, dtype
// tables and status formatting.
#define BOOST_TEST_MODULE tensor_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "base/dtype.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln {
namespace {

namespace data = boost::unit_test::data;

StorageRef Bytes(Allocator& a, size_t n) {
  StatusOr<StorageRef> s = a.Allocate(n);
  if (!s.ok()) throw std::runtime_error(s.status().ToString());
  return std::move(*s);
}

// ---- Shape ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(shape_make_accepts_up_to_rank_8) {
  const int64_t dims[8] = {1, 2, 3, 4, 5, 6, 7, 0};
  for (int rank = 0; rank <= 8; ++rank) {
    StatusOr<Shape> s = Shape::Make(dims, rank);
    BOOST_REQUIRE(s.ok());
    BOOST_TEST(s->rank() == rank);
    for (int i = 0; i < rank; ++i) BOOST_TEST((*s)[i] == dims[i]);
  }
  BOOST_TEST(Shape::Make(dims, 3)->ToString() == "[1, 2, 3]");
  BOOST_TEST(Shape::Make(nullptr, 0)->ToString() == "[]");
}

BOOST_AUTO_TEST_CASE(shape_make_rejects_rank_above_8_and_negative_rank) {
  const int64_t dims[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  StatusOr<Shape> s = Shape::Make(dims, 9);
  BOOST_TEST(s.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(s.status().message() == "rank 9 exceeds the maximum 8");
  s = Shape::Make(dims, -1);
  BOOST_TEST(s.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(s.status().message() == "rank -1 exceeds the maximum 8");
}

BOOST_AUTO_TEST_CASE(shape_make_rejects_negative_dims) {
  const int64_t dims[3] = {2, -2, 3};
  StatusOr<Shape> s = Shape::Make(dims, 3);
  BOOST_TEST(s.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.status().message() == "dim 1 is negative (-2)");
  const int64_t min[1] = {INT64_MIN};
  BOOST_TEST(Shape::Make(min, 1).status().message() ==
             "dim 0 is negative (" + std::to_string(INT64_MIN) + ")");
}

BOOST_AUTO_TEST_CASE(checked_num_elements) {
  BOOST_TEST(*Shape().CheckedNumElements() == 1);
  BOOST_TEST(*Shape({2, 3, 4}).CheckedNumElements() == 24);
  BOOST_TEST(*Shape({5, 0, 7}).CheckedNumElements() == 0);
  // A zero dim empties the product even when the other dims would overflow it.
  BOOST_TEST(*Shape({int64_t{1} << 62, 4, 0}).CheckedNumElements() == 0);
  BOOST_TEST(*Shape({int64_t{1} << 47}).CheckedNumElements() == (int64_t{1} << 47));
  BOOST_TEST(Shape({2, 3, 4}).NumElements() == 24);
  BOOST_TEST(Shape().NumElements() == 1);
}

BOOST_AUTO_TEST_CASE(checked_num_elements_refuses_overflow) {
  const Shape cases[] = {
      Shape{int64_t{1} << 40, int64_t{1} << 40},  // 2^80: overflows int64
      Shape{int64_t{1} << 62, 4},                 // exactly 2^64
      Shape{INT64_MAX, 2},
      Shape{(int64_t{1} << 47) + 1},     // fits int64 but above the 2^47 limit
      Shape{1 << 16, 1 << 16, 1 << 16},  // 2^48
  };
  for (const Shape& s : cases) {
    StatusOr<int64_t> n = s.CheckedNumElements();
    BOOST_TEST_INFO(s.ToString());
    BOOST_TEST(n.status().code() == StatusCode::kOutOfRange);
    BOOST_TEST(n.status().message() == "shape " + s.ToString() + " has too many elements");
  }
}

BOOST_AUTO_TEST_CASE(shape_equality) {
  BOOST_TEST((Shape{2, 3} == Shape{2, 3}));
  BOOST_TEST((Shape{2, 3} != Shape{3, 2}));
  BOOST_TEST((Shape{2, 3} != Shape{2, 3, 1}));
  BOOST_TEST((Shape() == Shape{}));
}

// ---- Tensor ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(view_inside_the_storage) {
  Allocator a;
  StorageRef s = Bytes(a, 64);
  StatusOr<Tensor> t = Tensor::View(s, 0, DType::kF32, Shape{16});
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(t->data() == s->data());
  BOOST_TEST(t->NumBytes() == 64u);
  t = Tensor::View(s, 32, DType::kF64, Shape{2, 2});
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(t->data() == static_cast<char*>(s->data()) + 32);
  BOOST_TEST(t->byte_offset() == 32);
  BOOST_TEST(s->ref_count() == 2);                              // the view holds the storage
  BOOST_TEST(Tensor::View(s, 64, DType::kF32, Shape{0}).ok());  // empty view at the very end
}

BOOST_AUTO_TEST_CASE(view_bounds_are_checked) {
  Allocator a;
  StorageRef s = Bytes(a, 64);
  struct Bad {
    int64_t offset;
    DType dtype;
    Shape shape;
    const char* message;
  };
  const Bad cases[] = {
      {0, DType::kF32, Shape{17}, "tensor f32[17] at offset 0 does not fit in storage of 64 bytes"},
      {4, DType::kF32, Shape{16}, "tensor f32[16] at offset 4 does not fit in storage of 64 bytes"},
      {65, DType::kU8, Shape{0}, "tensor u8[0] at offset 65 does not fit in storage of 64 bytes"},
      {-8, DType::kI64, Shape{1}, "tensor i64[1] at offset -8 does not fit in storage of 64 bytes"},
      {INT64_MAX, DType::kI8, Shape{1}, "at offset 9223372036854775807 does not fit"},
      {8, DType::kI64, Shape{int64_t{1} << 46, 2},
       "tensor i64[70368744177664, 2] at offset 8 does not fit"},
  };
  for (const Bad& c : cases) {
    StatusOr<Tensor> t = Tensor::View(s, c.offset, c.dtype, c.shape);
    BOOST_TEST_INFO(c.message);
    BOOST_TEST(t.status().code() == StatusCode::kInvalidArgument);
    BOOST_TEST(t.status().message().find(c.message) != std::string::npos);
  }
  StatusOr<Tensor> t = Tensor::View(StorageRef(), 0, DType::kF32, Shape{1});
  BOOST_TEST(t.status().message() == "tensor view of a null storage");
  t = Tensor::View(s, 0, DType::kInvalid, Shape{1});
  BOOST_TEST(t.status().message() == "invalid dtype");
  t = Tensor::View(s, 0, DType::kF32, Shape{int64_t{1} << 40, int64_t{1} << 40});
  BOOST_TEST(t.status().code() == StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(strides_are_row_major) {
  Allocator a;
  StatusOr<Tensor> t = Tensor::Allocate(a, DType::kF32, Shape{2, 3, 4});
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(t->stride(0) == 12);
  BOOST_TEST(t->stride(1) == 4);
  BOOST_TEST(t->stride(2) == 1);
  BOOST_TEST(t->IsContiguous());
  BOOST_TEST(t->TypeString() == "f32[2, 3, 4]");
  BOOST_TEST(t->NumBytes() == 96u);
  BOOST_TEST(reinterpret_cast<uintptr_t>(t->data()) % 64 == 0);
  // Element [1, 2, 3] is at 1*12 + 2*4 + 3 = 23.
  float* p = t->data_as<float>();
  for (int i = 0; i < 24; ++i) p[i] = static_cast<float>(i);
  BOOST_TEST(p[1 * t->stride(0) + 2 * t->stride(1) + 3 * t->stride(2)] == 23.0f);
  StatusOr<Tensor> scalar = Tensor::Allocate(a, DType::kI64, Shape());
  BOOST_TEST(scalar->rank() == 0);
  BOOST_TEST(scalar->NumElements() == 1);
  BOOST_TEST(scalar->IsContiguous());
}

BOOST_AUTO_TEST_CASE(reshape_keeps_storage_and_checks_the_element_count) {
  Allocator a;
  Tensor t = *Tensor::Allocate(a, DType::kI32, Shape{2, 6});
  StatusOr<Tensor> r = t.Reshape(Shape{3, 2, 2});
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->data() == t.data());
  BOOST_TEST(r->TypeString() == "i32[3, 2, 2]");
  BOOST_TEST(r->stride(0) == 4);
  BOOST_TEST(r->stride(1) == 2);
  BOOST_TEST(r->stride(2) == 1);
  BOOST_TEST(t.TypeString() == "i32[2, 6]");  // the original is unchanged
  r = t.Reshape(Shape{4, 2});
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(r.status().message() == "cannot reshape i32[2, 6] to [4, 2]");
  r = t.Reshape(Shape{int64_t{1} << 40, int64_t{1} << 40});
  BOOST_TEST(r.status().code() == StatusCode::kOutOfRange);
}

BOOST_AUTO_TEST_CASE(wrap_is_zero_copy) {
  double buffer[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::Wrap(buffer, DType::kF64, Shape{2, 3});
  BOOST_TEST(t.data() == static_cast<void*>(buffer));
  BOOST_TEST(t.NumBytes() == sizeof(buffer));
  BOOST_TEST(t.storage()->size() == sizeof(buffer));
  BOOST_TEST(!t.storage()->pooled());
  buffer[4] = 42;  // the tensor sees the caller's writes ...
  BOOST_TEST(t.data_as<double>()[4] == 42.0);
  t.data_as<double>()[0] = -1;  // ... and the caller sees the tensor's
  BOOST_TEST(buffer[0] == -1.0);
  Tensor copy = t;
  BOOST_TEST(copy.data() == t.data());
  BOOST_TEST(t.storage()->ref_count() == 2);
  BOOST_TEST(Tensor().empty());
  BOOST_TEST(!t.empty());
}

// ---- DType ----------------------------------------------------------------------------------

struct DTypeRow {
  DType dtype;
  const char* name;
  const char* short_name;
  size_t size;
  bool is_float, is_integer, is_unsigned;
};

std::ostream& operator<<(std::ostream& os, const DTypeRow& r) { return os << r.name; }

const std::vector<DTypeRow> kDTypes = {
    {DType::kF32, "float32", "f32", 4, true, false, false},
    {DType::kF16, "float16", "f16", 2, true, false, false},
    {DType::kBF16, "bfloat16", "bf16", 2, true, false, false},
    {DType::kF64, "float64", "f64", 8, true, false, false},
    {DType::kI8, "int8", "i8", 1, false, true, false},
    {DType::kU8, "uint8", "u8", 1, false, true, true},
    {DType::kI16, "int16", "i16", 2, false, true, false},
    {DType::kI32, "int32", "i32", 4, false, true, false},
    {DType::kI64, "int64", "i64", 8, false, true, false},
    {DType::kBool, "bool", "bool", 1, false, false, false},
    {DType::kU16, "uint16", "u16", 2, false, true, true},
    {DType::kU32, "uint32", "u32", 4, false, true, true},
    {DType::kU64, "uint64", "u64", 8, false, true, true},
};

BOOST_DATA_TEST_CASE(dtype_names_sizes_and_parsing, data::make(kDTypes), row) {
  BOOST_TEST(DTypeName(row.dtype) == std::string(row.name));
  BOOST_TEST(DTypeShortName(row.dtype) == std::string(row.short_name));
  BOOST_TEST(DTypeSize(row.dtype) == row.size);
  BOOST_TEST(IsValidDType(static_cast<uint8_t>(row.dtype)));
  BOOST_TEST(IsFloat(row.dtype) == row.is_float);
  BOOST_TEST(IsInteger(row.dtype) == row.is_integer);
  BOOST_TEST(IsUnsignedInteger(row.dtype) == row.is_unsigned);
  BOOST_TEST((ParseDType(row.name) == row.dtype));
  BOOST_TEST((ParseDType(row.short_name) == row.dtype));
  BOOST_TEST((ParseDType(DTypeName(row.dtype)) == row.dtype));  // round trip
}

BOOST_AUTO_TEST_CASE(dtype_table_covers_every_valid_value) {
  BOOST_TEST(kDTypes.size() == static_cast<size_t>(kNumDTypes - 1));
  for (size_t i = 0; i < kDTypes.size(); ++i)
    BOOST_TEST(static_cast<int>(kDTypes[i].dtype) == static_cast<int>(i) + 1);
}

BOOST_AUTO_TEST_CASE(invalid_dtypes) {
  BOOST_TEST(!IsValidDType(0));
  BOOST_TEST(!IsValidDType(kNumDTypes));
  BOOST_TEST(!IsValidDType(255));
  BOOST_TEST(DTypeSize(DType::kInvalid) == 0u);
  BOOST_TEST(DTypeName(static_cast<DType>(200)) == std::string("invalid"));
  BOOST_TEST(DTypeShortName(static_cast<DType>(200)) == std::string("invalid"));
  BOOST_TEST(DTypeSize(static_cast<DType>(200)) == 0u);
  for (const char* s : {"", "invalid", "float", "F32", "f32 ", "int128"}) {
    BOOST_TEST_INFO("'" << s << "'");
    BOOST_TEST(!ParseDType(s).has_value());
  }
}

// ---- Status ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(status_to_string_and_context) {
  Status ok;
  BOOST_TEST(ok.ok());
  BOOST_TEST(ok.ToString() == "OK");
  BOOST_TEST(ok.WithContext("model.kiln").ok());
  BOOST_TEST(ok.WithContext("model.kiln").message().empty());
  Status bad = InvalidFormat("functions[3].code[17]: register 40 >= 32");
  BOOST_TEST(bad.ToString() == "INVALID_FORMAT: functions[3].code[17]: register 40 >= 32");
  Status wrapped = bad.WithContext("model.kiln");
  BOOST_TEST(wrapped.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(wrapped.message() == "model.kiln: functions[3].code[17]: register 40 >= 32");
  BOOST_TEST(wrapped.WithContext("load").ToString() ==
             "INVALID_FORMAT: load: model.kiln: functions[3].code[17]: register 40 >= 32");
  BOOST_TEST(bad.message() == "functions[3].code[17]: register 40 >= 32");  // unchanged
}

BOOST_AUTO_TEST_CASE(status_code_names) {
  const std::pair<Status, const char*> cases[] = {
      {InvalidArgument("m"), "INVALID_ARGUMENT: m"},
      {InvalidFormat("m"), "INVALID_FORMAT: m"},
      {Unsupported("m"), "UNSUPPORTED: m"},
      {NotFound("m"), "NOT_FOUND: m"},
      {OutOfRange("m"), "OUT_OF_RANGE: m"},
      {DeadlineExceeded("m"), "DEADLINE_EXCEEDED: m"},
      {ResourceExhausted("m"), "RESOURCE_EXHAUSTED: m"},
      {Internal("m"), "INTERNAL: m"},
      {Aborted("m"), "ABORTED: m"},
  };
  for (const auto& [status, text] : cases) {
    BOOST_TEST(!status.ok());
    BOOST_TEST(status.ToString() == text);
  }
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

BOOST_AUTO_TEST_CASE(status_or_and_the_propagation_macros) {
  int out = 0;
  BOOST_TEST(Quarter(12, &out).ok());
  BOOST_TEST(out == 3);
  Status s = Quarter(6, &out);
  BOOST_TEST(s.ToString() == "INVALID_ARGUMENT: 3 is odd");
  auto check = [](int x) -> Status {
    RETURN_IF_ERROR(Half(x).status());
    return Internal("reached");
  };
  BOOST_TEST(check(5).message() == "5 is odd");
  BOOST_TEST(check(4).message() == "reached");
  StatusOr<std::string> v = std::string("value");
  StatusOr<std::string> copy = v;
  BOOST_TEST(*copy == "value");
  copy = StatusOr<std::string>(NotFound("gone"));
  BOOST_TEST(!copy.ok());
  BOOST_TEST(copy.status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
