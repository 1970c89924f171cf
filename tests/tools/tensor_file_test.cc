// ParseTensorProto / EncodeTensorProto / ReadTensorFile / WriteTensorProto: hand-encoded protobuf
// bytes, TensorProtos built with the ONNX API (typed fields and raw data), round trips for every
// dtype, and every bad input (truncated, wrong size, unsupported type, missing file).
#define BOOST_TEST_MODULE tensor_file_test
#include "tools/tensor_file.h"

#include <onnx/onnx_pb.h>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "tools/npy.h"
#include "base/allocator.h"

namespace kiln {
std::ostream& operator<<(std::ostream& os, DType t) { return os << DTypeShortName(t); }

namespace tools {
namespace {

namespace data = boost::unit_test::data;

Allocator& TestAllocator() {
  static Allocator allocator;
  return allocator;
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string Serialize(const onnx::TensorProto& p) {
  std::string s;
  BOOST_REQUIRE(p.SerializeToString(&s));
  return s;
}

// Encoded by hand from the protobuf wire format, independent of libprotobuf:
// dims: 2 (field 1, varint), data_type: FLOAT (field 2), name: "x" (field 8),
// raw_data: {1.5f, -2.0f} (field 9, 8 bytes).
constexpr char kF32Pair[] =
    "\x08\x02\x10\x01\x42\x01x\x4a\x08"
    "\x00\x00\xc0\x3f\x00\x00\x00\xc0";

BOOST_AUTO_TEST_CASE(parses_hand_encoded_raw_data) {
  StatusOr<Tensor> t =
      ParseTensorProto(std::string(kF32Pair, sizeof(kF32Pair) - 1), TestAllocator());
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(t->TypeString() == "f32[2]");
  BOOST_TEST(t->data_as<float>()[0] == 1.5f);
  BOOST_TEST(t->data_as<float>()[1] == -2.0f);
}

BOOST_AUTO_TEST_CASE(parses_typed_fields) {
  onnx::TensorProto f;
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(2);
  f.add_dims(2);
  for (float v : {0.25f, -1.0f, 3.0f, 1e30f}) f.add_float_data(v);
  StatusOr<Tensor> t = ParseTensorProto(Serialize(f), TestAllocator());
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(t->TypeString() == "f32[2, 2]");
  BOOST_TEST(t->data_as<float>()[3] == 1e30f);

  onnx::TensorProto i;  // int64 scalar
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_int64_data(-7);
  t = ParseTensorProto(Serialize(i), TestAllocator());
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(t->TypeString() == "i64[]");
  BOOST_TEST(t->data_as<int64_t>()[0] == -7);

  onnx::TensorProto b;  // bools travel in int32_data
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {1, 0, 1}) b.add_int32_data(v);
  t = ParseTensorProto(Serialize(b), TestAllocator());
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(t->TypeString() == "bool[3]");
  BOOST_TEST(t->data_as<uint8_t>()[0] == 1);
  BOOST_TEST(t->data_as<uint8_t>()[1] == 0);
  BOOST_TEST(t->data_as<uint8_t>()[2] == 1);

  onnx::TensorProto d;  // an empty tensor
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(0);
  d.add_dims(4);
  t = ParseTensorProto(Serialize(d), TestAllocator());
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_TEST(t->TypeString() == "f64[0, 4]");
}

const DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI8,
                            DType::kU8,  DType::kI16, DType::kI32,  DType::kI64, DType::kBool};

// Encode -> parse with the ONNX API (checks the fields independently) -> ParseTensorProto.
BOOST_DATA_TEST_CASE(encode_round_trips_every_dtype, data::make(kAllDTypes), dtype) {
  StatusOr<Tensor> t = Tensor::Allocate(TestAllocator(), dtype, Shape{2, 3});
  BOOST_REQUIRE(t.ok());
  auto* bytes = static_cast<uint8_t*>(t->data());
  for (size_t i = 0; i < t->NumBytes(); ++i)
    bytes[i] = static_cast<uint8_t>(dtype == DType::kBool ? i % 2 : i * 7 + 1);
  StatusOr<std::string> encoded = EncodeTensorProto(*t, "out/0");
  BOOST_REQUIRE_MESSAGE(encoded.ok(), encoded.status().ToString());

  onnx::TensorProto p;
  BOOST_REQUIRE(p.ParseFromString(*encoded));
  BOOST_TEST(p.name() == "out/0");
  BOOST_TEST(p.data_type() == OnnxDataType(dtype));
  BOOST_TEST(p.dims_size() == 2);
  BOOST_TEST(p.dims(0) == 2);
  BOOST_TEST(p.dims(1) == 3);
  BOOST_TEST(p.raw_data() == std::string(reinterpret_cast<const char*>(bytes), t->NumBytes()));

  StatusOr<Tensor> back = ParseTensorProto(*encoded, TestAllocator());
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->TypeString() == t->TypeString());
  BOOST_TEST(std::memcmp(back->data(), t->data(), t->NumBytes()) == 0);
}

BOOST_AUTO_TEST_CASE(onnx_type_codes) {
  BOOST_TEST(OnnxDataType(DType::kF32) == 1);
  BOOST_TEST(OnnxDataType(DType::kU8) == 2);
  BOOST_TEST(OnnxDataType(DType::kI8) == 3);
  BOOST_TEST(OnnxDataType(DType::kI16) == 5);
  BOOST_TEST(OnnxDataType(DType::kI32) == 6);
  BOOST_TEST(OnnxDataType(DType::kI64) == 7);
  BOOST_TEST(OnnxDataType(DType::kBool) == 9);
  BOOST_TEST(OnnxDataType(DType::kF16) == 10);
  BOOST_TEST(OnnxDataType(DType::kF64) == 11);
  BOOST_TEST(OnnxDataType(DType::kBF16) == 16);
  BOOST_TEST(OnnxDataType(DType::kInvalid) == 0);
}

BOOST_AUTO_TEST_CASE(rejects_truncated_and_inconsistent_tensors) {
  std::string full(kF32Pair, sizeof(kF32Pair) - 1);
  // Cut inside raw_data: the length prefix promises more bytes than there are.
  StatusOr<Tensor> t = ParseTensorProto(full.substr(0, full.size() - 3), TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kInvalidFormat, t.status().ToString());

  // A well-formed message whose data does not fill its dims.
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(3);
  p.add_float_data(1.0f);
  t = ParseTensorProto(Serialize(p), TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kInvalidFormat, t.status().ToString());

  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_string_data("hello");
  t = ParseTensorProto(Serialize(s), TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kUnsupported, t.status().ToString());
  BOOST_TEST(Contains(t.status().message(), "STRING"), t.status().ToString());

  onnx::TensorProto deep;  // rank 9 > kMaxRank
  deep.set_data_type(onnx::TensorProto::FLOAT);
  for (int d = 0; d < 9; ++d) deep.add_dims(1);
  deep.add_float_data(1.0f);
  t = ParseTensorProto(Serialize(deep), TestAllocator());
  BOOST_REQUIRE(!t.ok());
  BOOST_TEST(t.status().code() == StatusCode::kUnsupported, t.status().ToString());
  BOOST_TEST(Contains(t.status().message(), "rank 9"), t.status().ToString());

  t = ParseTensorProto("\xff\xff\xff", TestAllocator());
  BOOST_TEST(!t.ok());
}

BOOST_AUTO_TEST_CASE(encode_rejects_empty_tensors) {
  StatusOr<std::string> e = EncodeTensorProto(Tensor(), "x");
  BOOST_REQUIRE(!e.ok());
  BOOST_TEST(e.status().code() == StatusCode::kInvalidArgument);
}

// Inputs must be regular files: a FIFO would block open() forever and /dev/zero would be read
// until memory ran out (`kiln run mlp.kiln /dev/zero` grew to 4 GB). Both are refused at once,
// whatever their name says.
BOOST_AUTO_TEST_CASE(pipes_and_devices_are_refused_at_once) {
  std::string fifo = TmpDir() + "/input_fifo.pb";
  ::unlink(fifo.c_str());
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), fifo + ".npy"}) {
    if (path == fifo + ".npy") {
      ::unlink(path.c_str());
      BOOST_REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    }
    StatusOr<Tensor> r = ReadTensorFile(path, TestAllocator());
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    BOOST_TEST(Contains(r.status().message(), path + ": not a regular file"),
               r.status().ToString());
  }
  ::unlink(fifo.c_str());
  ::unlink((fifo + ".npy").c_str());
}

BOOST_AUTO_TEST_CASE(read_tensor_file_picks_the_format) {
  float v[3] = {1, 2, 3};
  Tensor t = Tensor::Wrap(v, DType::kF32, Shape{3});
  std::string pb = TmpDir() + "/v.pb", npy = TmpDir() + "/v.npy";
  BOOST_REQUIRE(WriteTensorProto(pb, t, "v").ok());
  BOOST_REQUIRE(WriteNpy(npy, t).ok());
  // By extension, and by content when the name says nothing.
  std::string pb_other = TmpDir() + "/v_pb.bin", npy_other = TmpDir() + "/v_npy.bin";
  BOOST_REQUIRE(
      std::system(("cp " + pb + " " + pb_other + " && cp " + npy + " " + npy_other).c_str()) == 0);
  for (const std::string& path : {pb, npy, pb_other, npy_other}) {
    StatusOr<Tensor> r = ReadTensorFile(path, TestAllocator());
    BOOST_REQUIRE_MESSAGE(r.ok(), path + ": " + r.status().ToString());
    BOOST_TEST(r->TypeString() == "f32[3]", path);
    BOOST_TEST(r->data_as<float>()[2] == 3.0f, path);
  }
  // An .npy image named .pb is read as a TensorProto, and fails naming the file.
  std::string wrong = TmpDir() + "/npy_named.pb";
  BOOST_REQUIRE(std::system(("cp " + npy + " " + wrong).c_str()) == 0);
  StatusOr<Tensor> r = ReadTensorFile(wrong, TestAllocator());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(Contains(r.status().message(), wrong), r.status().ToString());

  r = ReadTensorFile(TmpDir() + "/missing.pb", TestAllocator());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kNotFound);
  BOOST_TEST(Contains(r.status().message(), "missing.pb"), r.status().ToString());

  // A truncated file names the path and says what is wrong.
  std::string cut = TmpDir() + "/cut.pb";
  {
    std::ofstream out(cut, std::ios::binary);
    out.write(kF32Pair, sizeof(kF32Pair) - 4);
  }
  r = ReadTensorFile(cut, TestAllocator());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(Contains(r.status().message(), "cut.pb"), r.status().ToString());
}

BOOST_AUTO_TEST_CASE(write_tensor_proto_errors_name_the_path) {
  float v = 1;
  Status s =
      WriteTensorProto(TmpDir() + "/no/such/dir/x.pb", Tensor::Wrap(&v, DType::kF32, Shape{}), "x");
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(Contains(s.message(), "no/such/dir/x.pb"), s.ToString());
}

}  // namespace
}  // namespace tools
}  // namespace kiln
