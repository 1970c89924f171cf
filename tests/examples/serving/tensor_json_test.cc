// Tests for examples/serving/tensor_json: datatype names, element conversion and range checks,
// 16-bit float conversions, output encoding.
#define BOOST_TEST_MODULE tensor_json_test
#include "examples/serving/tensor_json.h"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace kiln::serving {
namespace {

Json Parse(const std::string& text) {
  auto j = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  return std::move(*j);
}

StatusOr<Tensor> Decode(const std::string& data, DType dtype, Shape shape) {
  return DecodeTensorData(Parse(data), dtype, shape, "inputs[0] 'x'");
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = t.data_as<T>();
  return std::vector<T>(p, p + t.NumElements());
}

void ExpectError(const std::string& data, DType dtype, Shape shape, const std::string& fragment) {
  auto t = Decode(data, dtype, shape);
  BOOST_TEST_CONTEXT(data << " as " << KServeDatatype(dtype)) {
    BOOST_REQUIRE(!t.ok());
    BOOST_TEST(t.status().code() == StatusCode::kInvalidArgument);
    BOOST_TEST(t.status().message().find("inputs[0] 'x'") == 0u, t.status().message());
    BOOST_TEST(t.status().message().find(fragment) != std::string::npos, t.status().message());
  }
}

std::string Encode(const Tensor& t) {
  std::string out;
  JsonWriter w(&out);
  EncodeTensorData(t, w);
  return out;
}

BOOST_AUTO_TEST_CASE(datatype_names_round_trip) {
  const std::pair<DType, const char*> expected[] = {
      {DType::kF32, "FP32"},  {DType::kF16, "FP16"},   {DType::kBF16, "BF16"},
      {DType::kF64, "FP64"},  {DType::kI8, "INT8"},    {DType::kU8, "UINT8"},
      {DType::kI16, "INT16"}, {DType::kI32, "INT32"},  {DType::kI64, "INT64"},
      {DType::kBool, "BOOL"}, {DType::kU16, "UINT16"}, {DType::kU32, "UINT32"},
      {DType::kU64, "UINT64"}};
  for (const auto& [dtype, name] : expected) {
    BOOST_TEST(KServeDatatype(dtype) == std::string(name));
    BOOST_TEST((ParseKServeDatatype(name) == dtype));
  }
  BOOST_TEST(KServeDatatype(DType::kInvalid) == std::string("INVALID"));
  for (const char* other : {"fp32", "UINT128", "BYTES", "FLOAT", ""}) {
    BOOST_TEST(!ParseKServeDatatype(other).has_value());
  }
}

BOOST_AUTO_TEST_CASE(decodes_flat_and_nested_lists) {
  auto flat = Decode("[1, 2.5, -3, 4e1]", DType::kF32, Shape({2, 2}));
  BOOST_REQUIRE(flat.ok());
  BOOST_TEST((flat->shape() == Shape({2, 2})));
  BOOST_TEST(Values<float>(*flat) == (std::vector<float>{1, 2.5f, -3, 40}),
             boost::test_tools::per_element());
  auto nested = Decode("[[1, 2.5], [-3, 4e1]]", DType::kF32, Shape({2, 2}));
  BOOST_REQUIRE(nested.ok());
  BOOST_TEST(Values<float>(*nested) == Values<float>(*flat), boost::test_tools::per_element());
  auto scalar = Decode("[7]", DType::kI64, Shape());
  BOOST_REQUIRE(scalar.ok());
  BOOST_TEST(Values<int64_t>(*scalar) == std::vector<int64_t>{7});
  auto empty = Decode("[]", DType::kF32, Shape({0, 4}));
  BOOST_REQUIRE(empty.ok());
  BOOST_TEST(empty->NumElements() == 0);
}

BOOST_AUTO_TEST_CASE(element_count_must_match_the_shape) {
  ExpectError("[1, 2, 3]", DType::kF32, Shape({2, 2}),
              "'data' has 3 elements but shape [2, 2] needs 4");
  ExpectError("[[1, 2], [3, 4, 5]]", DType::kF32, Shape({2, 2}), "has 5 elements");
  ExpectError("{\"a\": 1}", DType::kF32, Shape({1}), "'data' must be a list");
  // A shape far larger than the data is refused before anything is allocated.
  ExpectError("[1]", DType::kF32, Shape({1000000, 1000000}), "has 1 elements");
}

BOOST_AUTO_TEST_CASE(integer_types_check_range_and_integrality) {
  auto i8 = Decode("[-128, 127, 0, 2.0, 1e2]", DType::kI8, Shape({5}));
  BOOST_REQUIRE(i8.ok());
  BOOST_TEST(Values<int8_t>(*i8) == (std::vector<int8_t>{-128, 127, 0, 2, 100}),
             boost::test_tools::per_element());
  ExpectError("[128]", DType::kI8, Shape({1}), "data[0] = 128 is outside [-128, 127]");
  ExpectError("[0, -1]", DType::kU8, Shape({2}), "data[1] = -1 is outside [0, 255]");
  ExpectError("[256]", DType::kU8, Shape({1}), "outside [0, 255]");
  ExpectError("[40000]", DType::kI16, Shape({1}), "outside [-32768, 32767]");
  ExpectError("[2147483648]", DType::kI32, Shape({1}), "outside");
  ExpectError("[1.5]", DType::kI32, Shape({1}), "data[0] is not an integer");
  ExpectError("[\"1\"]", DType::kI32, Shape({1}), "data[0] is not a number");
  ExpectError("[true]", DType::kI64, Shape({1}), "is not a number");
  ExpectError("[9223372036854775808]", DType::kI64, Shape({1}), "out of range");
  ExpectError("[1e300]", DType::kI64, Shape({1}), "out of range");
  auto i64 = Decode("[9223372036854775807, -9223372036854775808, -9.2233720368547758e18]",
                    DType::kI64, Shape({3}));
  BOOST_REQUIRE(i64.ok());
  BOOST_TEST(Values<int64_t>(*i64) == (std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                                            std::numeric_limits<int64_t>::min(),
                                                            std::numeric_limits<int64_t>::min()}),
             boost::test_tools::per_element());
  auto u8 = Decode("[0, 255]", DType::kU8, Shape({2}));
  BOOST_REQUIRE(u8.ok());
  BOOST_TEST(Values<uint8_t>(*u8) == (std::vector<uint8_t>{0, 255}),
             boost::test_tools::per_element());
  ExpectError("[65536]", DType::kU16, Shape({1}), "outside [0, 65535]");
  ExpectError("[-1]", DType::kU32, Shape({1}), "outside [0, 4294967295]");
  // UINT64 in JSON: exact up to 2^63 - 1 (larger values go as binary data).
  ExpectError("[-1]", DType::kU64, Shape({1}), "outside [0, 9223372036854775807]");
  ExpectError("[9223372036854775808]", DType::kU64, Shape({1}), "out of range");
  auto u32 = Decode("[4294967295, 0]", DType::kU32, Shape({2}));
  BOOST_REQUIRE(u32.ok());
  BOOST_TEST(Values<uint32_t>(*u32) == (std::vector<uint32_t>{4294967295u, 0}),
             boost::test_tools::per_element());
  auto u64 = Decode("[9223372036854775807, 1]", DType::kU64, Shape({2}));
  BOOST_REQUIRE(u64.ok());
  BOOST_TEST(Values<uint64_t>(*u64) == (std::vector<uint64_t>{9223372036854775807u, 1}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bool_takes_only_booleans) {
  auto b = Decode("[true, false, true]", DType::kBool, Shape({3}));
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(Values<uint8_t>(*b) == (std::vector<uint8_t>{1, 0, 1}),
             boost::test_tools::per_element());
  ExpectError("[1]", DType::kBool, Shape({1}), "data[0] is not true or false");
  ExpectError("[null]", DType::kBool, Shape({1}), "not true or false");
}

BOOST_AUTO_TEST_CASE(floats_accept_non_finite_spellings_and_check_range) {
  auto f = Decode("[\"NaN\", \"Infinity\", \"-Infinity\", 3.4028235e38, 1e-50]", DType::kF32,
                  Shape({5}));
  BOOST_REQUIRE(f.ok());
  std::vector<float> v = Values<float>(*f);
  BOOST_TEST(std::isnan(v[0]));
  BOOST_TEST(v[1] == std::numeric_limits<float>::infinity());
  BOOST_TEST(v[2] == -std::numeric_limits<float>::infinity());
  BOOST_TEST(v[3] == std::numeric_limits<float>::max());
  BOOST_TEST(v[4] == 0.0f);
  ExpectError("[3.5e38]", DType::kF32, Shape({1}), "data[0] is out of range for FP32");
  ExpectError("[\"nan\"]", DType::kF32, Shape({1}), "is the string \"nan\"");
  ExpectError("[null]", DType::kF64, Shape({1}), "is not a number");
  auto d = Decode("[1e308, 0.1]", DType::kF64, Shape({2}));
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(Values<double>(*d) == (std::vector<double>{1e308, 0.1}),
             boost::test_tools::per_element());
  ExpectError("[65520]", DType::kF16, Shape({1}), "out of range for FP16");
  ExpectError("[3.4e38]", DType::kBF16, Shape({1}), "out of range for BF16");
  auto h = Decode("[1, 65504, -2, 0.5]", DType::kF16, Shape({4}));
  BOOST_REQUIRE(h.ok());
  BOOST_TEST(Values<uint16_t>(*h) == (std::vector<uint16_t>{0x3C00, 0x7BFF, 0xC000, 0x3800}),
             boost::test_tools::per_element());
  auto bf = Decode("[1, -2, 0.5]", DType::kBF16, Shape({3}));
  BOOST_REQUIRE(bf.ok());
  BOOST_TEST(Values<uint16_t>(*bf) == (std::vector<uint16_t>{0x3F80, 0xC000, 0x3F00}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(half_conversion_round_trips_every_value) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = HalfToFloat(h);
    if (std::isnan(f)) {
      BOOST_REQUIRE((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);
      BOOST_REQUIRE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    BOOST_REQUIRE_MESSAGE(FloatToHalf(f) == h, "half bits " << bits);
  }
  // Known values, and round to nearest even at the halfway points.
  BOOST_TEST(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));             // smallest subnormal
  BOOST_TEST(HalfToFloat(0x0400) == std::ldexp(1.0f, -14));             // smallest normal
  BOOST_TEST(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie: to even (down)
  BOOST_TEST(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie: to even (up)
  BOOST_TEST(FloatToHalf(std::ldexp(1.0f, -25)) == 0x0000);             // tie: to even (zero)
  BOOST_TEST(FloatToHalf(std::ldexp(3.0f, -25)) == 0x0002);
  BOOST_TEST(FloatToHalf(65519.0f) == 0x7BFF);
  BOOST_TEST(FloatToHalf(65520.0f) == 0x7C00);
  BOOST_TEST(FloatToHalf(-0.0f) == 0x8000);
}

BOOST_AUTO_TEST_CASE(bfloat16_conversion_round_trips_every_value) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    float f = Bf16ToFloat(b);
    if (std::isnan(f)) {
      BOOST_REQUIRE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    BOOST_REQUIRE_MESSAGE(FloatToBf16(f) == b, "bf16 bits " << bits);
  }
  BOOST_TEST(FloatToBf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie: to even (down)
  BOOST_TEST(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie: to even (up)
}

BOOST_AUTO_TEST_CASE(encodes_every_dtype) {
  auto f32 = Decode("[0.1, -2, 1e30, \"NaN\"]", DType::kF32, Shape({2, 2}));
  BOOST_REQUIRE(f32.ok());
  BOOST_TEST(Encode(*f32) == "[0.1,-2,1e+30,\"NaN\"]");
  auto f16 = Decode("[0.1, 65504]", DType::kF16, Shape({2}));
  BOOST_REQUIRE(f16.ok());
  // 0.1 in half is 0.0999755859375; written as the shortest float that holds that value.
  BOOST_TEST(Encode(*f16) == "[0.099975586,65504]");
  auto i64 = Decode("[-9223372036854775808, 5]", DType::kI64, Shape({2}));
  BOOST_REQUIRE(i64.ok());
  BOOST_TEST(Encode(*i64) == "[-9223372036854775808,5]");
  auto u8 = Decode("[255, 0]", DType::kU8, Shape({2}));
  BOOST_REQUIRE(u8.ok());
  BOOST_TEST(Encode(*u8) == "[255,0]");
  auto u16 = Decode("[65535, 1]", DType::kU16, Shape({2}));
  BOOST_REQUIRE(u16.ok());
  BOOST_TEST(Encode(*u16) == "[65535,1]");
  uint64_t big[] = {18446744073709551615u, 0};  // above int64: written as an unsigned number
  BOOST_TEST(Encode(Tensor::Wrap(big, DType::kU64, Shape({2}))) == "[18446744073709551615,0]");
  auto b = Decode("[true, false]", DType::kBool, Shape({1, 2}));
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(Encode(*b) == "[true,false]");
  auto d = Decode("[0.1]", DType::kF64, Shape());
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(Encode(*d) == "[0.1]");
  BOOST_TEST(Encode(Tensor()) == "[]");
}

BOOST_AUTO_TEST_CASE(encoded_values_decode_to_the_same_bits) {
  std::vector<float> values;
  for (int i = -200; i <= 200; ++i) values.push_back(std::ldexp(1.0f + i / 401.0f, i % 120));
  Tensor t = Tensor::Wrap(values.data(), DType::kF32, Shape({static_cast<int64_t>(values.size())}));
  auto back = Decode(Encode(t), DType::kF32, t.shape());
  BOOST_REQUIRE(back.ok());
  BOOST_TEST(std::memcmp(back->data(), values.data(), values.size() * sizeof(float)) == 0);
}

}  // namespace
}  // namespace kiln::serving
