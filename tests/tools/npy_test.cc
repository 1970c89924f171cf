// ParseNpy / EncodeNpy / ReadNpy / WriteNpy: numpy's own bytes, round trips, every bad input.
#define BOOST_TEST_MODULE npy_test
#include <boost/test/unit_test.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tools/npy.h"
#include "base/allocator.h"

namespace kiln {
namespace {

namespace data = boost::unit_test::data;

std::string Name(DType t) { return DTypeShortName(t); }

Allocator& TestAllocator() {
  static Allocator allocator;
  return allocator;
}

std::vector<uint8_t> Bytes(const char* s, size_t n) { return std::vector<uint8_t>(s, s + n); }

StatusOr<Tensor> Parse(const std::vector<uint8_t>& bytes) {
  return ParseNpy(bytes.data(), bytes.size(), TestAllocator());
}

// ---- Golden files written by numpy ---------------------------------------------------------
// Generated once with numpy 1.24.2 (each comment is the call; the literal is the file).
// np.save(f, np.array([[0, 1.5, -2], [3.25, 4, -5]], dtype='<f4'))
constexpr char kF32Matrix[] =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    "                                                          \012"
    "\000\000\000\000\000\000\300\077\000\000\000\300\000\000P@"
    "\000\000\200@\000\000\240\300";
// np.save(f, np.int64(-5))
constexpr char kI64Scalar[] =
    "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (), }"
    "                                                              \012"
    "\373\377\377\377\377\377\377\377";
// np.save(f, np.zeros((0,), np.uint8))
constexpr char kU8Empty[] =
    "\223NUMPY\001\000v\000{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }"
    "                                                            \012";
// np.save(f, np.array([True, False, True]))
constexpr char kBoolVector[] =
    "\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \012"
    "\001\000\001";
// np.save(f, np.array([-128, 127, 0, 5], np.int8).reshape(2, 1, 2))
constexpr char kI8Cube[] =
    "\223NUMPY\001\000v\000{'descr': '|i1', 'fortran_order': False, 'shape': (2, 1, 2), }"
    "                                                       \012"
    "\200\177\000\005";
// np.save(f, np.array([[1.5, -0.25]]))
constexpr char kF64Row[] =
    "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }"
    "                                                          \012"
    "\000\000\000\000\000\000\370\077\000\000\000\000\000\000\320\277";
// np.save(f, np.array([[1, -2], [70000, -2**31]], np.int32))
constexpr char kI32Square[] =
    "\223NUMPY\001\000v\000{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }"
    "                                                          \012"
    "\001\000\000\000\376\377\377\377p\021\001\000\000\000\000\200";
// np.lib.format.write_array(f, np.array([0, -1, 300], np.int16), version=(2, 0))
constexpr char kI16Version2[] =
    "\223NUMPY\002\000t\000\000\000{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }"
    "                                                          \012"
    "\000\000\377\377,\001";
// np.lib.format.write_array(f, np.array([1, -2, 0.5], np.float16), version=(3, 0))
constexpr char kF16Version3[] =
    "\223NUMPY\003\000t\000\000\000{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }"
    "                                                          \012"
    "\000<\000\300\0008";
// np.save(f, np.array([0, 2**63 + 2048, 2**64 - 2048], np.uint64))
constexpr char kU64Vector[] =
    "\223NUMPY\001\000v\000{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \012"
    "\000\000\000\000\000\000\000\000\000\010\000\000\000\000\000\200\000\370\377\377\377\377\377"
    "\377";
// np.save(f, np.array([[65535, 1]], np.uint16))
constexpr char kU16Row[] =
    "\223NUMPY\001\000v\000{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2), }"
    "                                                          \012"
    "\377\377\001\000";
// np.save(f, np.array([4294967295, 7], np.uint32))
constexpr char kU32Vector[] =
    "\223NUMPY\001\000v\000{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }"
    "                                                            \012"
    "\377\377\377\377\007\000\000\000";

struct Golden {
  const char* name;
  std::vector<uint8_t> bytes;
  int version;
  DType dtype;
  Shape shape;
  std::vector<double> values;  // row-major
};

std::ostream& operator<<(std::ostream& os, const Golden& g) { return os << g.name; }

#define KILN_GOLDEN(var) #var, Bytes(var, sizeof(var) - 1)
const std::vector<Golden> kGoldens = {
    {KILN_GOLDEN(kF32Matrix), 1, DType::kF32, {2, 3}, {0, 1.5, -2, 3.25, 4, -5}},
    {KILN_GOLDEN(kI64Scalar), 1, DType::kI64, {}, {-5}},
    {KILN_GOLDEN(kU8Empty), 1, DType::kU8, {0}, {}},
    {KILN_GOLDEN(kBoolVector), 1, DType::kBool, {3}, {1, 0, 1}},
    {KILN_GOLDEN(kI8Cube), 1, DType::kI8, {2, 1, 2}, {-128, 127, 0, 5}},
    {KILN_GOLDEN(kF64Row), 1, DType::kF64, {1, 2}, {1.5, -0.25}},
    {KILN_GOLDEN(kI32Square), 1, DType::kI32, {2, 2}, {1, -2, 70000, -2147483648.0}},
    {KILN_GOLDEN(kI16Version2), 2, DType::kI16, {3}, {0, -1, 300}},
    {KILN_GOLDEN(kF16Version3), 3, DType::kF16, {3}, {1, -2, 0.5}},
    {KILN_GOLDEN(kU64Vector), 1, DType::kU64, {3}, {0, 0x1p63 + 2048, 0x1p64 - 2048}},
    {KILN_GOLDEN(kU16Row), 1, DType::kU16, {1, 2}, {65535, 1}},
    {KILN_GOLDEN(kU32Vector), 1, DType::kU32, {2}, {4294967295.0, 7}},
};
#undef KILN_GOLDEN

std::vector<Golden> Version1Goldens() {
  std::vector<Golden> v;
  for (const Golden& g : kGoldens) {
    if (g.version == 1) v.push_back(g);
  }
  return v;
}

// IEEE half to double, written out so the test does not share code with what it checks.
double HalfToDouble(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double Element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data_as<float>()[i];
    case DType::kF16: return HalfToDouble(t.data_as<uint16_t>()[i]);
    case DType::kF64: return t.data_as<double>()[i];
    case DType::kI8: return t.data_as<int8_t>()[i];
    case DType::kU8: return t.data_as<uint8_t>()[i];
    case DType::kI16: return t.data_as<int16_t>()[i];
    case DType::kI32: return t.data_as<int32_t>()[i];
    case DType::kI64: return static_cast<double>(t.data_as<int64_t>()[i]);
    case DType::kU16:
      return t.data_as<uint16_t>()[i];
    case DType::kU32:
      return t.data_as<uint32_t>()[i];
    case DType::kU64:
      return static_cast<double>(t.data_as<uint64_t>()[i]);
    case DType::kBool: return t.data_as<uint8_t>()[i];
    default: return NAN;
  }
}

BOOST_DATA_TEST_CASE(parses_files_numpy_wrote, data::make(kGoldens), g) {
  StatusOr<Tensor> t = Parse(g.bytes);
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(Name(t->dtype()) == Name(g.dtype));
  BOOST_TEST(t->shape().ToString() == g.shape.ToString());
  BOOST_TEST(t->IsContiguous());
  BOOST_REQUIRE_EQUAL(t->NumElements(), static_cast<int64_t>(g.values.size()));
  for (size_t i = 0; i < g.values.size(); ++i) BOOST_TEST(Element(*t, i) == g.values[i]);
}

BOOST_DATA_TEST_CASE(encodes_exactly_what_numpy_saves, data::make(Version1Goldens()), g) {
  StatusOr<Tensor> t = Parse(g.bytes);
  BOOST_REQUIRE(t.ok());
  StatusOr<std::vector<uint8_t>> bytes = EncodeNpy(*t);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  BOOST_TEST(*bytes == g.bytes, boost::test_tools::per_element());
}

// ---- Round trips ---------------------------------------------------------------------------

struct RoundTrip {
  DType dtype;
  Shape shape;
};

std::ostream& operator<<(std::ostream& os, const RoundTrip& c) {
  return os << DTypeShortName(c.dtype) << c.shape.ToString();
}

std::vector<RoundTrip> RoundTrips() {
  const DType dtypes[] = {DType::kF32,  DType::kF16, DType::kF64, DType::kI8,
                          DType::kU8,   DType::kI16, DType::kI32, DType::kI64,
                          DType::kBool, DType::kU16, DType::kU32, DType::kU64};
  const Shape shapes[] = {{},           {0},          {3, 0, 2},          {5},
                          {2, 3},       {2, 1, 3},    {1, 2, 3, 2},       {2, 1, 2, 1, 2},
                          {1, 2, 1, 2, 1, 3}, {2, 1, 1, 2, 1, 1, 2}, {1, 2, 1, 2, 1, 2, 1, 2},
                          {1000000000000, 0}};
  std::vector<RoundTrip> cases;
  for (DType t : dtypes) {
    for (const Shape& s : shapes) cases.push_back({t, s});
  }
  return cases;
}

BOOST_DATA_TEST_CASE(round_trips_every_dtype_and_rank, data::make(RoundTrips()), c) {
  StatusOr<Tensor> in = Tensor::Allocate(TestAllocator(), c.dtype, c.shape);
  BOOST_REQUIRE(in.ok());
  auto* p = static_cast<uint8_t*>(in->data());
  for (size_t i = 0; i < in->NumBytes(); ++i) {
    p[i] = c.dtype == DType::kBool ? i % 3 == 0 : static_cast<uint8_t>(i * 37 + 11);
  }
  StatusOr<std::vector<uint8_t>> bytes = EncodeNpy(*in);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  size_t data_offset = bytes->size() - in->NumBytes();
  BOOST_TEST(data_offset % 64 == 0u);
  BOOST_TEST((*bytes)[6] == 1);  // format 1.0
  BOOST_TEST((*bytes)[data_offset - 1] == '\n');

  StatusOr<Tensor> out = Parse(*bytes);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(Name(out->dtype()) == Name(c.dtype));
  BOOST_TEST(out->shape().ToString() == c.shape.ToString());
  BOOST_TEST(std::memcmp(out->data(), in->data(), in->NumBytes()) == 0);
  BOOST_TEST(out->storage().get() != in->storage().get());
}

BOOST_AUTO_TEST_CASE(bool_bytes_are_normalised_to_zero_and_one) {
  std::string image(kBoolVector, sizeof(kBoolVector) - 1);
  image.replace(image.size() - 3, 3, "\x02\x00\xff", 3);
  StatusOr<Tensor> t = Parse(Bytes(image.data(), image.size()));
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(Element(*t, 0) == 1);
  BOOST_TEST(Element(*t, 1) == 0);
  BOOST_TEST(Element(*t, 2) == 1);
}

// ---- Header dicts written by hand ----------------------------------------------------------

// A .npy image: magic, version, header length, `dict` (not padded) and `data`.
std::vector<uint8_t> Image(int major, int minor, const std::string& dict, size_t data_bytes,
                           int64_t length_override = -1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major),
                              static_cast<uint8_t>(minor)};
  uint64_t length = length_override >= 0 ? length_override : dict.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) {
    out.push_back(static_cast<uint8_t>(length >> (8 * i)));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

struct Spelling {
  const char* dict;
  DType dtype;
  Shape shape;
};

std::ostream& operator<<(std::ostream& os, const Spelling& s) { return os << s.dict; }

const Spelling kSpellings[] = {
    {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", DType::kF32, {2, 3}},
    {"{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (4,)}", DType::kI32, {4}},
    {"{ 'descr' : '|u1' ,'fortran_order':False,'shape':( 2 , 2 , ) , }", DType::kU8, {2, 2}},
    {"{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }", DType::kI64, {2, 3}},
    {"{\n\t'descr': '<f2',\n\t'fortran_order': False,\n\t'shape': (),\n}\n  ", DType::kF16, {}},
    {"{'descr': '<i1', 'fortran_order': False, 'shape': (1,), }", DType::kI8, {1}},
    {"{'descr': '>u1', 'fortran_order': False, 'shape': (1,), }", DType::kU8, {1}},
    {"{'descr': '=f8', 'fortran_order': False, 'shape': (1,), }", DType::kF64, {1}},
    {"{'descr': 'i2', 'fortran_order': False, 'shape': (1,), }", DType::kI16, {1}},
    {"{'descr': '|b1', 'fortran_order': False, 'shape': (+2, 0), }", DType::kBool, {2, 0}},
};

BOOST_DATA_TEST_CASE(accepts_any_valid_dict_spelling, data::make(kSpellings), s) {
  for (int major = 1; major <= 3; ++major) {
    size_t data_bytes = s.shape.NumElements() * DTypeSize(s.dtype);
    std::vector<uint8_t> image = Image(major, 0, s.dict, data_bytes);
    StatusOr<Tensor> t = Parse(image);
    BOOST_REQUIRE_MESSAGE(t.ok(), "format " << major << ".0: " << t.status().ToString());
    BOOST_TEST(Name(t->dtype()) == Name(s.dtype));
    BOOST_TEST(t->shape().ToString() == s.shape.ToString());
  }
}

// ---- Bad input: one case per class, with the error fragment --------------------------------

struct Bad {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* fragment;
};

std::ostream& operator<<(std::ostream& os, const Bad& b) { return os << b.name; }

std::string Dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

std::vector<Bad> BadInputs() {
  const std::string f32x2x3 = Dict("'<f4'", "(2, 3)");
  std::vector<Bad> v = {
      {"empty file", {}, "truncated: 0 bytes"},
      {"bad magic", Bytes("\x93NUMPZ\x01\x00\x02\x00{}", 12), "bad magic"},
      {"not npy at all", Bytes("PK\x03\x04", 4), "bad magic"},
      {"version 4.0", Image(4, 0, f32x2x3, 24), "unsupported .npy format version 4.0"},
      {"version 0.0", Image(0, 0, f32x2x3, 24), "unsupported .npy format version 0.0"},
      {"version 1.1", Image(1, 1, f32x2x3, 24), "unsupported .npy format version 1.1"},
      {"header past the end (1.0)", Image(1, 0, f32x2x3, 0, 0xffff), "header claims 65535 bytes"},
      {"header past the end (2.0)", Image(2, 0, f32x2x3, 0, 0xffffffffLL),
       "header claims 4294967295"},
      {"no dict", Image(1, 0, "", 0), "expected '{'"},
      {"not a dict", Image(1, 0, "('<f4', False, (2, 3))", 24), "expected '{'"},
      {"unquoted key", Image(1, 0, "{descr: '<f4'}", 4), "expected a key in quotes"},
      {"missing colon", Image(1, 0, "{'descr' '<f4'}", 4), "expected ':' after 'descr'"},
      {"missing comma", Image(1, 0, "{'descr': '<f4' 'shape': ()}", 4), "expected ',' or '}'"},
      {"unclosed dict", Image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (),", 4),
       "expected a key in quotes"},
      {"quote misplaced", Image(1, 0, "{'descr: '<f4', }", 4), "unknown key 'descr: '"},
      {"unterminated value", Image(1, 0, "{'descr': '<f4", 4), "unterminated string"},
      {"unknown key",
       Image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", 4),
       "unknown key 'x'"},
      {"duplicate key", Image(1, 0, "{'descr': '<f4', 'descr': '<f4'}", 4),
       "duplicate key 'descr'"},
      {"missing key", Image(1, 0, "{'descr': '<f4', 'fortran_order': False}", 4), "no 'shape' key"},
      {"escape in string", Image(1, 0, Dict("'<f\\x34'", "()"), 4), "escapes"},
      {"descr not a string", Image(1, 0, Dict("5", "()"), 4), "expected the descr in quotes"},
      {"fortran_order not a bool", Image(1, 0, Dict("'<f4'", "()", "0"), 4), "True or False"},
      {"shape not a tuple", Image(1, 0, Dict("'<f4'", "[2, 3]"), 24), "shape must be a tuple"},
      {"shape (3) is an int", Image(1, 0, Dict("'<f4'", "(3)"), 12), "shape (3) is not a tuple"},
      {"float dim", Image(1, 0, Dict("'<f4'", "(3.0,)"), 12), "shape entries must be integers"},
      {"hex dim", Image(1, 0, Dict("'<f4'", "(0x3,)"), 12), "shape entries must be integers"},
      {"empty dim", Image(1, 0, Dict("'<f4'", "(2,,)"), 8), "shape entries must be integers"},
      {"unclosed shape", Image(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2", 8),
       "expected ',' or ')' in shape"},
      {"text after the dict", Image(1, 0, f32x2x3 + " x", 24), "unexpected text after the dict"},
      {"fortran order", Image(1, 0, Dict("'<f4'", "(2, 3)", "True"), 24), "fortran_order True"},
      {"big-endian f4", Image(1, 0, Dict("'>f4'", "(2, 3)"), 24), "big-endian dtype '>f4'"},
      {"big-endian i8", Image(1, 0, Dict("'>i8'", "()"), 8), "big-endian dtype '>i8'"},
      {"complex", Image(1, 0, Dict("'<c8'", "()"), 8), "unsupported dtype '<c8'"},
      {"unicode", Image(1, 0, Dict("'<U3'", "()"), 12), "unsupported dtype '<U3'"},
      {"object", Image(1, 0, Dict("'|O'", "()"), 8), "unsupported dtype '|O'"},
      {"timedelta", Image(1, 0, Dict("'<m8'", "()"), 8), "unsupported dtype '<m8'"},
      {"structured", Image(1, 0, Dict("[('a', '<f4')]", "()"), 4), "structured dtypes"},
      {"negative dim", Image(1, 0, Dict("'<f4'", "(2, -1)"), 0), "negative dimension (-1)"},
      {"dim overflows int64", Image(1, 0, Dict("'<f4'", "(9223372036854775808,)"), 0),
       "dimension 9223372036854775808 overflows int64"},
      {"dim overflows uint64", Image(1, 0, Dict("'<f4'", "(123456789012345678901234567890,)"), 0),
       "overflows int64"},
      {"element count overflows", Image(1, 0, Dict("'<f4'", "(4294967296, 4294967296)"), 0),
       "shape (4294967296, 4294967296) has too many elements"},
      {"rank 9", Image(1, 0, Dict("'<f4'", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4),
       "has rank 9, more than the maximum 8"},
      {"data too short", Image(1, 0, f32x2x3, 20),
       "data is 20 bytes but shape (2, 3) of '<f4' needs 24 (truncated)"},
      {"data too long", Image(1, 0, f32x2x3, 28),
       "data is 28 bytes but shape (2, 3) of '<f4' needs 24 (trailing bytes)"},
      {"no data for a scalar", Image(1, 0, Dict("'<i8'", "()"), 0),
       "data is 0 bytes but shape () of '<i8' needs 8"},
      {"data for an empty array", Image(1, 0, Dict("'<i8'", "(0,)"), 1),
       "needs 0 (trailing bytes)"},
  };
  return v;
}

BOOST_DATA_TEST_CASE(rejects_bad_input_naming_the_problem, data::make(BadInputs()), b) {
  StatusOr<Tensor> t = Parse(b.bytes);
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST_MESSAGE(b.name << ": " << t.status().message());
  BOOST_TEST(t.status().message().find(b.fragment) != std::string::npos,
             "'" << t.status().message() << "' lacks '" << b.fragment << "'");
}

// Every proper prefix of a valid file fails cleanly. Each prefix lives in a buffer of exactly its
// size, so a read past `size` is a heap overflow that ASan builds report.
BOOST_DATA_TEST_CASE(every_truncation_fails_cleanly, data::make(kGoldens), g) {
  for (size_t n = 0; n < g.bytes.size(); ++n) {
    std::unique_ptr<uint8_t[]> prefix(new uint8_t[n]);
    std::memcpy(prefix.get(), g.bytes.data(), n);
    StatusOr<Tensor> t = ParseNpy(prefix.get(), n, TestAllocator());
    BOOST_REQUIRE_MESSAGE(!t.ok(), "a prefix of " << n << " bytes parsed");
    BOOST_REQUIRE_MESSAGE(t.status().code() == StatusCode::kInvalidArgument, t.status().ToString());
  }
}

// ---- Encoding errors and files -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(encode_rejects_bf16_and_empty_tensors) {
  StatusOr<Tensor> bf16 = Tensor::Allocate(TestAllocator(), DType::kBF16, {2});
  BOOST_REQUIRE(bf16.ok());
  StatusOr<std::vector<uint8_t>> bytes = EncodeNpy(*bf16);
  BOOST_REQUIRE(!bytes.ok());
  BOOST_TEST(bytes.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(bytes.status().message().find("bfloat16") != std::string::npos);

  bytes = EncodeNpy(Tensor());
  BOOST_REQUIRE(!bytes.ok());
  BOOST_TEST(bytes.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(bytes.status().message().find("empty tensor") != std::string::npos);
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

BOOST_AUTO_TEST_CASE(write_then_read_a_file) {
  std::string path = TempDir() + "/npy_test_" + std::to_string(getpid()) + ".npy";
  StatusOr<Tensor> in = Parse(Bytes(kF32Matrix, sizeof(kF32Matrix) - 1));
  BOOST_REQUIRE(in.ok());
  Status written = WriteNpy(path, *in);
  BOOST_REQUIRE_MESSAGE(written.ok(), written.ToString());
  std::ifstream file(path, std::ios::binary);
  std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
  BOOST_TEST(on_disk == Bytes(kF32Matrix, sizeof(kF32Matrix) - 1),
             boost::test_tools::per_element());

  StatusOr<Tensor> out = ReadNpy(path, TestAllocator());
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(out->TypeString() == "f32[2, 3]");
  BOOST_TEST(Element(*out, 5) == -5);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(read_errors_name_the_path) {
  std::string missing = TempDir() + "/no_such_file.npy";
  StatusOr<Tensor> t = ReadNpy(missing, TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kNotFound);
  BOOST_TEST(t.status().message() == missing + ": no such file");

  std::string bad = TempDir() + "/bad_" + std::to_string(getpid()) + ".npy";
  std::ofstream(bad, std::ios::binary).write("\x93NUMPY\x09\x00", 8);
  t = ReadNpy(bad, TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(t.status().message() ==
             bad + ": unsupported .npy format version 9.0 (kiln reads 1.0, 2.0 and 3.0)");
  std::remove(bad.c_str());

  std::string empty = TempDir() + "/empty_" + std::to_string(getpid()) + ".npy";
  std::ofstream(empty, std::ios::binary).flush();
  t = ReadNpy(empty, TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().message().rfind(empty + ": truncated", 0) == 0u);
  std::remove(empty.c_str());

  t = ReadNpy(TempDir(), TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().message().rfind(TempDir() + ": not a regular file", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(write_errors_name_the_path) {
  StatusOr<Tensor> in = Parse(Bytes(kI64Scalar, sizeof(kI64Scalar) - 1));
  BOOST_REQUIRE(in.ok());
  std::string path = TempDir() + "/no_such_dir/out.npy";
  Status s = WriteNpy(path, *in);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().rfind(path + ": cannot open for writing", 0) == 0u);

  StatusOr<Tensor> bf16 = Tensor::Allocate(TestAllocator(), DType::kBF16, {});
  BOOST_REQUIRE(bf16.ok());
  s = WriteNpy(TempDir() + "/bf16.npy", *bf16);
  BOOST_TEST(s.code() == StatusCode::kUnsupported);
  BOOST_TEST(s.message().rfind(TempDir() + "/bf16.npy: ", 0) == 0u);
}

}  // namespace
}  // namespace kiln
