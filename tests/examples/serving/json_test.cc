// Tests for examples/serving/json: valid and invalid documents, limits, numbers, random bytes.
#define BOOST_TEST_MODULE json_test
#include "examples/serving/json.h"

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::serving {
namespace {

namespace data = boost::unit_test::data;

Json MustParse(const std::string& text) {
  auto j = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(j.ok(), text << ": " << j.status().ToString());
  return std::move(*j);
}

BOOST_AUTO_TEST_CASE(parses_scalars_and_containers) {
  Json j = MustParse(R"( {"a": [1, -2.5, true, false, null, "s"], "b": {}, "c": []} )");
  BOOST_REQUIRE(j.is_object());
  BOOST_TEST(j.size() == 3u);
  const Json* a = j.Find("a");
  BOOST_REQUIRE(a && a->is_array() && a->size() == 6u);
  BOOST_TEST(a->items()[0].is_int());
  BOOST_TEST(a->items()[0].int_value() == 1);
  BOOST_TEST(!a->items()[1].is_int());
  BOOST_TEST(a->items()[1].double_value() == -2.5);
  BOOST_TEST(a->items()[2].bool_value() == true);
  BOOST_TEST(a->items()[3].bool_value() == false);
  BOOST_TEST(a->items()[4].is_null());
  BOOST_TEST(a->items()[5].string_value() == "s");
  BOOST_TEST(j.Find("b")->is_object());
  BOOST_TEST(j.Find("c")->size() == 0u);
  BOOST_TEST(j.Find("missing") == nullptr);
  BOOST_TEST(MustParse("42").int_value() == 42);
  BOOST_TEST(MustParse("\"x\"").string_value() == "x");
}

BOOST_AUTO_TEST_CASE(duplicate_keys_find_returns_first) {
  Json j = MustParse(R"({"k": 1, "k": 2})");
  BOOST_TEST(j.size() == 2u);
  BOOST_TEST(j.Find("k")->int_value() == 1);
}

BOOST_AUTO_TEST_CASE(decodes_string_escapes_and_utf8) {
  Json j = MustParse(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")");
  BOOST_TEST(j.string_value() == "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  // Raw UTF-8 passes through unchanged.
  BOOST_TEST(MustParse("\"\xC3\xA9\xF0\x9F\x98\x80\"").string_value() ==
             "\xC3\xA9\xF0\x9F\x98\x80");
}

// Invalid documents and a fragment of the error each must produce.
const std::vector<std::pair<std::string, std::string>> kInvalid = {
    {"", "expected a value"},
    {"   ", "expected a value"},
    {"{", "expected a string key"},
    {"[1,]", "expected a value"},
    {"[1 2]", "expected ',' or ']'"},
    {"{\"a\" 1}", "expected ':'"},
    {"{\"a\":1,}", "expected a string key"},
    {"{a:1}", "expected a string key"},
    {"[1] x", "unexpected data after"},
    {"01", "leading zero"},
    {"-", "expected a digit after '-'"},
    {"1.", "expected a digit after '.'"},
    {".5", "expected a value"},
    {"1e", "expected a digit in an exponent"},
    {"+1", "expected a value"},
    {"NaN", "expected a value"},
    {"Infinity", "expected a value"},
    {"tru", "invalid literal"},
    {"nul", "invalid literal"},
    {"\"abc", "unterminated string"},
    {"\"a\nb\"", "control character"},
    {"\"\\x\"", "invalid escape"},
    {"\"\\u12x4\"", "invalid hex digit"},
    {"\"\\u12", "truncated"},
    {"\"\\ud800\"", "high surrogate without a low surrogate"},
    {"\"\\ud800\\u0041\"", "high surrogate without a low surrogate"},
    {"\"\\udc00\"", "unpaired low surrogate"},
    {"\"\xC0\xAF\"", "invalid UTF-8"},          // overlong '/'
    {"\"\xED\xA0\x80\"", "invalid UTF-8"},      // encoded surrogate
    {"\"\xF4\x90\x80\x80\"", "invalid UTF-8"},  // past U+10FFFF
    {"\"\xE2\x82\"", "invalid UTF-8"},          // truncated sequence
    {"\"\x80\"", "invalid UTF-8"},              // stray continuation byte
    {"1e400", "out of the range of a double"},
    {"-1e400", "out of the range of a double"},
    {"[1]//", "unexpected data after"},
    {std::string("[1,\0]", 5), "expected a value"},
};

BOOST_DATA_TEST_CASE(rejects_invalid_documents, data::xrange(kInvalid.size()), i) {
  const auto& [text, fragment] = kInvalid[i];
  auto j = ParseJson(text);
  BOOST_TEST_CONTEXT("input: " << text) {
    BOOST_REQUIRE(!j.ok());
    BOOST_TEST(j.status().code() == StatusCode::kInvalidArgument);
    BOOST_TEST(j.status().message().find(fragment) != std::string::npos, j.status().message());
    BOOST_TEST(j.status().message().find("JSON byte ") == 0u);
  }
}

BOOST_AUTO_TEST_CASE(error_names_the_byte_offset) {
  auto j = ParseJson("[1, 2, x]");
  BOOST_REQUIRE(!j.ok());
  BOOST_TEST(j.status().message().find("JSON byte 7:") == 0u, j.status().message());
}

BOOST_AUTO_TEST_CASE(depth_limit_is_exact) {
  JsonLimits limits;
  limits.max_depth = 8;
  std::string ok = std::string(8, '[') + std::string(8, ']');
  std::string deep = std::string(9, '[') + std::string(9, ']');
  BOOST_TEST(ParseJson(ok, limits).ok());
  auto j = ParseJson(deep, limits);
  BOOST_REQUIRE(!j.ok());
  BOOST_TEST(j.status().message().find("nesting deeper than 8") != std::string::npos);
  std::string objects;
  for (int i = 0; i < 9; ++i) objects += "{\"a\":";
  objects += "1" + std::string(9, '}');
  BOOST_TEST(!ParseJson(objects, limits).ok());
}

BOOST_AUTO_TEST_CASE(very_deep_nesting_does_not_overflow_the_stack) {
  for (std::string open : {"[", "{\"a\":"}) {
    std::string text;
    for (int i = 0; i < 200000; ++i) text += open;
    auto j = ParseJson(text);  // default max_depth 64
    BOOST_REQUIRE(!j.ok());
    BOOST_TEST(j.status().message().find("nesting deeper than 64") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(size_limit) {
  JsonLimits limits;
  limits.max_bytes = 10;
  BOOST_TEST(ParseJson("[1,2,3,4]", limits).ok());
  auto j = ParseJson("[1,2,3,4,5]", limits);
  BOOST_REQUIRE(!j.ok());
  BOOST_TEST(j.status().message().find("exceeds the limit of 10") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(integers_are_exact_within_int64) {
  BOOST_TEST(MustParse("9223372036854775807").int_value() == std::numeric_limits<int64_t>::max());
  BOOST_TEST(MustParse("-9223372036854775808").int_value() == std::numeric_limits<int64_t>::min());
  BOOST_TEST(MustParse("-0").is_int());
  // One past int64: a double, as strtod reads it.
  Json big = MustParse("9223372036854775808");
  BOOST_TEST(!big.is_int());
  BOOST_TEST(big.double_value() == 9223372036854775808.0);
  Json huge = MustParse("123456789012345678901234567890");
  BOOST_TEST(huge.double_value() == 123456789012345678901234567890.0);
  BOOST_TEST(!MustParse("1.0").is_int());
  BOOST_TEST(!MustParse("1e2").is_int());
  BOOST_TEST(MustParse("1e2").double_value() == 100.0);
}

BOOST_AUTO_TEST_CASE(huge_and_tiny_doubles) {
  BOOST_TEST(MustParse("1.7976931348623157e308").double_value() ==
             std::numeric_limits<double>::max());
  BOOST_TEST(MustParse("-1.7976931348623157e308").double_value() ==
             -std::numeric_limits<double>::max());
  BOOST_TEST(MustParse("4.9406564584124654e-324").double_value() ==
             std::numeric_limits<double>::denorm_min());
  BOOST_TEST(MustParse("1e-400").double_value() == 0.0);  // underflow rounds, not an error
  std::string long_digits = "0." + std::string(5000, '3');
  BOOST_TEST(MustParse(long_digits).double_value() == 1.0 / 3.0);
}

BOOST_AUTO_TEST_CASE(writer_round_trips_doubles_and_floats) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (!std::isfinite(d)) continue;
    std::string out;
    JsonWriter(&out).Double(d);
    BOOST_REQUIRE_MESSAGE(MustParse(out).double_value() == d, out);
    uint32_t fbits = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &fbits, sizeof(f));
    if (!std::isfinite(f)) continue;
    out.clear();
    JsonWriter(&out).Float(f);
    BOOST_REQUIRE_MESSAGE(static_cast<float>(MustParse(out).double_value()) == f, out);
  }
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Float(0.1f);
  w.Double(0.1);
  w.Float(std::numeric_limits<float>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity());
  w.Int(std::numeric_limits<int64_t>::min());
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.EndArray();
  BOOST_TEST(out ==
             "[0.1,0.1,\"NaN\",\"Infinity\",\"-Infinity\",-9223372036854775808,"
             "18446744073709551615]");
}

BOOST_AUTO_TEST_CASE(writer_escapes_and_repairs_strings) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("k\"\\");
  w.String(std::string("a\x01\n\t\xC3\xA9\xFF\xE2\x82", 9));
  w.Key("n");
  w.Null();
  w.EndObject();
  BOOST_TEST(out == "{\"k\\\"\\\\\":\"a\\u0001\\n\\t\xC3\xA9\\ufffd\\ufffd\\ufffd\",\"n\":null}");
  BOOST_TEST(ParseJson(out).ok());
}

BOOST_AUTO_TEST_CASE(serialize_is_a_fixed_point) {
  const std::string text = R"({"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32",)"
                           R"("data":[[1,2.5],[-3e-7,4]]}],"e":{},"f":[],"t":true,"n":null})";
  std::string once = MustParse(text).Serialize();
  // The same document, compact; the double -3e-7 in its shortest form.
  BOOST_TEST(once == R"({"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32",)"
                     R"("data":[[1,2.5],[-3e-07,4]]}],"e":{},"f":[],"t":true,"n":null})");
  BOOST_TEST(MustParse(once).Serialize() == once);
}

// Whatever the bytes, the parser returns (no crash, no hang); what it accepts re-serializes to
// a document that parses back to the same serialization.
void CheckArbitrary(const std::string& bytes) {
  JsonLimits limits;
  limits.max_depth = 16;
  auto j = ParseJson(bytes, limits);
  if (!j.ok()) {
    BOOST_REQUIRE(j.status().code() == StatusCode::kInvalidArgument);
    return;
  }
  std::string once = j->Serialize();
  auto again = ParseJson(once, limits);
  BOOST_REQUIRE_MESSAGE(again.ok(), once);
  BOOST_REQUIRE(again->Serialize() == once);
}

BOOST_AUTO_TEST_CASE(random_bytes_never_crash) {
  std::mt19937 rng(1234);
  const std::string alphabet = "[]{}\",:0123456789-+.eEtrufalsn \\u\t\n\xC3\xA9\xF0\x80\x00";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 64, '\0');
    bool structured = i % 2 == 0;
    for (char& c : s) {
      c = structured ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    }
    CheckArbitrary(s);
  }
}

BOOST_AUTO_TEST_CASE(mutated_documents_never_crash) {
  const std::string seed =
      R"({"id":"a\u00e9","inputs":[{"name":"x","shape":[2,4],"datatype":"FP32",)"
      R"("data":[[1,2,3,4],[5e3,-6.25,7,8]]}],"outputs":[{"name":"y"}],"ok":[true,false,null]})";
  BOOST_REQUIRE(ParseJson(seed).ok());
  std::mt19937 rng(99);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (pos < s.size()) s[pos] = static_cast<char>(rng());
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1 + rng() % 8);
          break;
        case 2:
          s.insert(pos, 1, static_cast<char>(rng()));
          break;
      }
    }
    auto j = ParseJson(s);
    accepted += j.ok();
    CheckArbitrary(s);
  }
  BOOST_TEST(accepted > 0);  // some mutations (inside strings, digits) stay valid
}

}  // namespace
}  // namespace kiln::serving
