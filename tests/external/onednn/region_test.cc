// The oneDNN region blob (external/onednn/region.cc): encode/decode round trip, the version
// rule, structural validation, and decoding of corrupted blobs (every truncation, random
// mutations, random bytes): any Status is fine, a crash is not.
#define BOOST_TEST_MODULE onednn_region_test
#include "external/onednn/region.h"

#include <boost/test/unit_test.hpp>
#include <random>
#include <string>

namespace kiln::onednn {
namespace {

// x -> conv(w, b) + relu + sum(x) -> y; then softmax(y) -> z. Tensors: x0 w1 b2 y3 z4.
RegionProgram Sample() {
  RegionProgram r;
  r.tensors = {
      {DType::kF32, 4}, {DType::kF32, 4}, {DType::kF32, 1}, {DType::kF32, 4}, {DType::kF32, 4}};
  r.inputs = {{0, {-1, 8, 16, 16}}};
  r.constants = {{1, {8, 8, 3, 3}}, {2, {8}}};
  Op conv;
  conv.kind = OpKind::kConv;
  conv.inputs = {0, 1, 2};
  conv.output = 3;
  conv.strides = {1, 1};
  conv.dilations = {1, 1};
  conv.pads = {1, 1, 1, 1};
  conv.post_ops = {{PostOpKind::kSum, EltwiseAlg::kRelu, BinaryAlg::kAdd, 0, 0, 0},
                   {PostOpKind::kEltwise, EltwiseAlg::kClip, BinaryAlg::kAdd, 0.0f, 6.0f, -1}};
  Op softmax;
  softmax.kind = OpKind::kSoftmax;
  softmax.inputs = {3};
  softmax.output = 4;
  softmax.axis = 1;
  r.ops = {conv, softmax};
  r.outputs = {4, 3};
  return r;
}

BOOST_AUTO_TEST_CASE(round_trip_preserves_everything) {
  RegionProgram r = Sample();
  std::vector<uint8_t> blob = EncodeRegion(r);
  StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(EncodeRegion(*d) == blob);
  BOOST_TEST(d->inputs[0].dims == (std::vector<int64_t>{-1, 8, 16, 16}));
  BOOST_TEST(d->ops[0].post_ops[1].beta == 6.0f);
  BOOST_TEST(d->outputs == (std::vector<int32_t>{4, 3}));
}

// What kiln inspect prints under a region: names for inputs, constants, intermediates and
// outputs; attributes; post-ops with their tensors. A bad blob is the decoder's error.
BOOST_AUTO_TEST_CASE(describe_lists_inputs_constants_and_ops) {
  std::vector<uint8_t> blob = EncodeRegion(Sample());
  StatusOr<std::string> text = DescribeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(*text ==
             "inputs: in0 [?, 8, 16, 16]\n"
             "constants: const0 [8, 8, 3, 3], const1 [8]\n"
             "[0] Conv (in0, const0, const1) -> out1  kernel=[3, 3]; strides=[1, 1]; pads=[1, 1, 1, 1]; "
             "dilations=[1, 1]; post-ops: sum(in0), clip min=0 max=6\n"
             "[1] Softmax (out1) -> out0  axis=1\n");
  StatusOr<std::string> bad = DescribeRegion(blob.data(), blob.size() - 1);
  BOOST_TEST(bad.status().code() == StatusCode::kInvalidFormat);
}

BOOST_AUTO_TEST_CASE(every_truncation_is_invalid_format) {
  std::vector<uint8_t> blob = EncodeRegion(Sample());
  for (size_t n = 0; n < blob.size(); ++n) {
    StatusOr<RegionProgram> d = DecodeRegion(blob.data(), n);
    BOOST_TEST_REQUIRE(!d.ok());
    BOOST_TEST(d.status().code() == StatusCode::kInvalidFormat);
  }
  std::vector<uint8_t> longer = blob;
  longer.push_back(0);
  StatusOr<RegionProgram> d = DecodeRegion(longer.data(), longer.size());
  BOOST_TEST(d.status().message() == "region blob: 1 trailing bytes after the tuning records");
  BOOST_TEST(DecodeRegion(nullptr, 0).status().message() ==
             "region blob: truncated at byte 0 reading magic");
}

BOOST_AUTO_TEST_CASE(version_rule_same_major_older_minor) {
  std::vector<uint8_t> blob = EncodeRegion(Sample());
  blob[6] = 7;  // minor 7 > ours
  StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
  BOOST_TEST(d.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(d.status().message() ==
             "region blob: version 1.7 is not readable by this runtime (version 1." +
                 std::to_string(kRegionMinor) + ")");
  blob[6] = 0;
  blob[4] = 0;  // major 0
  BOOST_TEST(DecodeRegion(blob.data(), blob.size()).status().code() == StatusCode::kUnsupported);
}

BOOST_AUTO_TEST_CASE(validation_names_the_op) {
  auto error = [](const RegionProgram& r) { return ValidateRegion(r).message(); };
  RegionProgram r = Sample();
  r.ops[1].inputs = {4};
  BOOST_TEST(error(r) == "ops[1] (Softmax) input: tensor 4 is used before it is defined");
  r = Sample();
  r.ops[1].output = 3;
  BOOST_TEST(error(r) == "ops[1] (Softmax) output: tensor 3 is defined twice");
  r = Sample();
  r.ops[0].strides = {1, 0};
  BOOST_TEST(error(r) == "ops[0] (Conv): strides value 0 is out of range");
  r = Sample();
  r.ops[0].pads = {1, 1};
  BOOST_TEST(error(r) == "ops[0] (Conv): pads has 2 values, expected 4");
  r = Sample();
  r.ops[1].axis = 4;
  BOOST_TEST(error(r) == "ops[1] (Softmax): axis 4 for rank 4");
  r = Sample();
  r.outputs = {0};
  BOOST_TEST(error(r) == "outputs[0] is a region input or constant");
  r = Sample();
  r.outputs = {4, 4};
  BOOST_TEST(error(r) == "outputs[1] repeats tensor 4");
  r = Sample();
  r.ops[1].post_ops = r.ops[0].post_ops;
  BOOST_TEST(error(r) == "ops[1] (Softmax): only Conv and MatMul take post-ops");
  r = Sample();
  r.ops[0].post_ops[0].tensor = 4;
  BOOST_TEST(error(r) == "ops[0] (Conv) post-op: tensor 4 is used before it is defined");
  r = Sample();
  r.constants[0].dims = {8, 8, 3};
  BOOST_TEST(error(r) == "constants[0]: 3 dims for rank 4");
  r = Sample();
  r.tensors.push_back({DType::kF32, 2});
  BOOST_TEST(error(r) == "tensor 5 is never defined");
}

// kResize (format 1.4): factors round-trip and show in the description; a factor count other
// than the spatial rank, or a factor outside [1, kMaxUpsampleFactor], is named.
BOOST_AUTO_TEST_CASE(resize_factors_round_trip_and_are_checked) {
  RegionProgram r = Sample();
  r.ops[1] = Op();
  r.ops[1].kind = OpKind::kResize;
  r.ops[1].inputs = {3};
  r.ops[1].output = 4;
  r.ops[1].strides = {2, 3};
  std::vector<uint8_t> blob = EncodeRegion(r);
  StatusOr<RegionProgram> back = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(back.ok());
  BOOST_TEST((back->ops[1].kind == OpKind::kResize));
  BOOST_TEST(back->ops[1].strides == (std::vector<int64_t>{2, 3}));
  StatusOr<std::string> text = DescribeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(text->find("Resize (out1) -> out0  nearest factors=[2, 3]") != std::string::npos, *text);
  auto error = [](const RegionProgram& p) { return ValidateRegion(p).message(); };
  r.ops[1].strides = {2};
  BOOST_TEST(error(r) == "ops[1] (Resize): 1 factors for 2 spatial dims");
  r.ops[1].strides = {2, 0};
  BOOST_TEST(error(r) == "ops[1] (Resize): factor 0 is out of range");
  r.ops[1].strides = {kMaxUpsampleFactor + 1, 1};
  BOOST_TEST(error(r) == "ops[1] (Resize): factor 1025 is out of range");
}

// kDepthToSpace (format 1.6): blocksize and mode round-trip and show in the description; a
// blocksize count other than one, a blocksize out of range, a mode other than DCR / CRD and an
// input of rank other than 4 are named.
BOOST_AUTO_TEST_CASE(depth_to_space_round_trips_and_is_checked) {
  RegionProgram r = Sample();
  r.ops[1] = Op();
  r.ops[1].kind = OpKind::kDepthToSpace;
  r.ops[1].inputs = {3};
  r.ops[1].output = 4;
  r.ops[1].strides = {2};
  r.ops[1].axis = 1;
  std::vector<uint8_t> blob = EncodeRegion(r);
  StatusOr<RegionProgram> back = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(back.ok());
  BOOST_TEST((back->ops[1].kind == OpKind::kDepthToSpace));
  BOOST_TEST(back->ops[1].strides == (std::vector<int64_t>{2}));
  BOOST_TEST(back->ops[1].axis == 1);
  StatusOr<std::string> text = DescribeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(text->find("DepthToSpace (out1) -> out0  blocksize=[2] CRD") != std::string::npos,
             *text);
  auto error = [](const RegionProgram& p) { return ValidateRegion(p).message(); };
  r.ops[1].strides = {2, 2};
  BOOST_TEST(error(r) == "ops[1] (DepthToSpace): blocksize must be one factor in [1, 1024]");
  r.ops[1].strides = {0};
  BOOST_TEST(error(r) == "ops[1] (DepthToSpace): blocksize must be one factor in [1, 1024]");
  r.ops[1].strides = {2};
  r.ops[1].axis = 2;
  BOOST_TEST(error(r) == "ops[1] (DepthToSpace): mode 2 is neither DCR (0) nor CRD (1)");
  r.ops[1].axis = 0;
  BOOST_TEST(ValidateRegion(r).ok());
}

// u8 x -> QConv(w s8, out_scales f32, zero_points s32, bias s32) + relu -> u8 y (format 1.2).
RegionProgram Int8Sample() {
  RegionProgram r;
  r.tensors = {{DType::kU8, 4}, {DType::kI8, 4},  {DType::kF32, 1},
               {DType::kI32, 1}, {DType::kI32, 1}, {DType::kU8, 4}};
  r.inputs = {{0, {1, 8, 16, 16}}};
  r.constants = {{1, {4, 8, 3, 3}}, {2, {4}}, {3, {2}}, {4, {4}}};
  Op conv;
  conv.kind = OpKind::kQConv;
  conv.inputs = {0, 1, 2, 3, 4};
  conv.output = 5;
  conv.strides = {1, 1};
  conv.dilations = {1, 1};
  conv.pads = {1, 1, 1, 1};
  conv.post_ops = {{PostOpKind::kEltwise, EltwiseAlg::kRelu}};
  r.ops = {conv};
  r.outputs = {5};
  return r;
}

BOOST_AUTO_TEST_CASE(integer_ops_round_trip_and_check_dtypes) {
  RegionProgram r = Int8Sample();
  std::vector<uint8_t> blob = EncodeRegion(r);
  StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
  BOOST_TEST_REQUIRE(d.ok(), d.status().message());
  BOOST_TEST(EncodeRegion(*d) == blob);
  StatusOr<std::string> text = DescribeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(text->find("[0] QConv (in0, const0, const1, const2, const3) -> out0  "
                        "kernel=[3, 3]") != std::string::npos,
             *text);
  auto error = [](const RegionProgram& p) { return ValidateRegion(p).message(); };
  r.tensors[1].dtype = DType::kU8;
  BOOST_TEST(error(r) == "ops[0] (QConv): w is u8, expected i8");
  r = Int8Sample();
  r.tensors[5].dtype = DType::kF32;
  BOOST_TEST(error(r) == "ops[0] (QConv): the output is f32, expected u8");
  r = Int8Sample();
  r.ops[0].post_ops = {{PostOpKind::kSum, EltwiseAlg::kRelu, BinaryAlg::kAdd, 0, 0, 0}};
  BOOST_TEST(error(r) == "ops[0] (QConv): an integer op takes eltwise post-ops only");
  r = Int8Sample();
  r.ops[0].inputs.pop_back();
  r.ops[0].inputs.pop_back();
  r.constants.pop_back();
  r.constants.pop_back();
  r.tensors.resize(3);
  r.tensors.push_back({DType::kU8, 4});
  r.ops[0].output = 3;
  r.outputs = {3};
  BOOST_TEST(error(r) == "ops[0] (QConv): 3 inputs");
}

BOOST_AUTO_TEST_CASE(bad_enum_is_invalid_format) {
  std::vector<uint8_t> blob = EncodeRegion(Sample());
  // The first op's kind byte follows the header, tensors, inputs, outputs and constants.
  size_t at =
      8 + 4 + 5 * 2 + 4 + (4 + 4 + 4 * 8) + 4 + 2 * 4 + 4 + (4 + 4 + 4 * 8) + (4 + 4 + 8) + 4;
  BOOST_REQUIRE(blob[at] == static_cast<uint8_t>(OpKind::kConv));
  blob[at] = 200;
  BOOST_TEST(DecodeRegion(blob.data(), blob.size()).status().message() ==
             "region blob: op kind 200 is out of range");
}

// Sample() with tuning records: the probe's limit, one shape's Conv tile (tensors as Sample's;
// no MatMul, so no layouts).
RegionProgram Tuned() {
  RegionProgram r = Sample();
  r.tuning.probed = true;
  r.tuning.f4_from = 1;
  r.tuning.shapes.push_back({2, {{3, 8, 16, 16}}, {{0, 4}}});
  return r;
}

BOOST_AUTO_TEST_CASE(tuning_records_round_trip) {
  std::vector<uint8_t> blob = EncodeRegion(Tuned());
  StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(EncodeRegion(*d) == blob);
  const RegionTuning& t = d->tuning;
  BOOST_TEST(t.probed);
  BOOST_TEST(t.f4_from == 1);
  BOOST_REQUIRE(t.shapes.size() == 1u);
  BOOST_TEST(t.shapes[0].threads == 2);
  BOOST_TEST((t.shapes[0].inputs == std::vector<std::vector<int64_t>>{{3, 8, 16, 16}}));
  BOOST_REQUIRE(t.shapes[0].tiles.size() == 1u);
  BOOST_TEST(t.shapes[0].tiles[0].op == 0);
  BOOST_TEST(t.shapes[0].tiles[0].tile == 4);
  StatusOr<std::string> text = DescribeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(text->find("tuned: F(4x4) from ops[1]\ntuned at [3, 8, 16, 16], 2 threads: 1 Conv "
                        "tiles (F4 1, F2 0, oneDNN 0)\n") != std::string::npos);
  // Untuned: nothing recorded, nothing described.
  std::vector<uint8_t> plain = EncodeRegion(Sample());
  StatusOr<RegionProgram> p = DecodeRegion(plain.data(), plain.size());
  BOOST_REQUIRE(p.ok());
  BOOST_TEST(p->tuning.empty());
}

// A 1.4 blob (before tuning records: nothing after the ops) still decodes, untuned; a 1.4
// header over 1.5 bytes has trailing bytes.
BOOST_AUTO_TEST_CASE(a_blob_before_tuning_records_still_loads) {
  std::vector<uint8_t> blob = EncodeRegion(Sample());
  const size_t empty_tuning = 1 + 4 + 4 + 4;
  std::vector<uint8_t> old(blob.begin(), blob.end() - empty_tuning);
  old[6] = 4;  // minor
  StatusOr<RegionProgram> d = DecodeRegion(old.data(), old.size());
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(d->tuning.empty());
  BOOST_TEST(d->ops.size() == 2u);
  blob[6] = 4;
  BOOST_TEST(DecodeRegion(blob.data(), blob.size()).status().message() ==
             "region blob: 13 trailing bytes after the last op");
}

// Each corrupt record is InvalidFormat naming the record and the field.
BOOST_AUTO_TEST_CASE(corrupt_tuning_records_name_the_record) {
  auto error = [](const RegionProgram& r) {
    std::vector<uint8_t> blob = EncodeRegion(r);
    StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
    BOOST_TEST(d.status().code() == StatusCode::kInvalidFormat);
    return d.status().message();
  };
  RegionProgram r = Tuned();
  r.tuning.shapes[0].tiles[0].op = 5;
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].tiles[0]: ops[5] does not exist (2 ops)");
  r = Tuned();
  r.tuning.shapes[0].tiles[0].op = 1;
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].tiles[0]: ops[1] is Softmax, not a Conv");
  r = Tuned();
  r.tuning.shapes[0].tiles[0].tile = 3;
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].tiles[0]: tile 3 is not 0, 2 or 4");
  r = Tuned();
  r.tuning.shapes[0].tiles.push_back({0, 2});
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].tiles[1]: ops[0] again");
  r = Tuned();
  r.tuning.shapes[0].inputs[0] = {3, 9, 16, 16};
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].inputs[0]: [3, 9, 16, 16] is not a "
                         "shape of the region's input [-1, 8, 16, 16]");
  r = Tuned();
  r.tuning.shapes[0].inputs.push_back({1});
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0]: 2 inputs, the region has 1");
  r = Tuned();
  r.tuning.shapes[0].threads = 0;
  BOOST_TEST(error(r) == "region blob: tuning.shapes[0].threads: 0 < 1");
  r = Tuned();
  r.tuning.f4_from = 3;
  BOOST_TEST(error(r) == "region blob: tuning.f4_from: 3 is not in [0, 2]");
  r = Tuned();
  r.tuning.layouts.push_back({0, 1024 + 2, 1});
  BOOST_TEST(error(r) == "region blob: tuning.layouts[0]: ops[0] is Conv, not a MatMul");
  // Garbage after the ops: a probed byte that is not 0 or 1, and a truncated record.
  std::vector<uint8_t> blob = EncodeRegion(Tuned());
  std::vector<uint8_t> plain = EncodeRegion(Sample());
  const size_t at = plain.size() - 13;  // the tuning section's first byte
  blob[at] = 7;
  BOOST_TEST(DecodeRegion(blob.data(), blob.size()).status().message() ==
             "region blob: tuning probed is not 0 or 1");
  blob = EncodeRegion(Tuned());
  BOOST_TEST(DecodeRegion(blob.data(), blob.size() - 2).status().message().find(
                 "region blob: truncated at byte") == 0);
}

// No crash, no huge allocation, for mutated and random blobs (run under --config=asan for the
// full check).
BOOST_AUTO_TEST_CASE(corrupted_blobs_never_crash) {
  std::vector<uint8_t> blob = EncodeRegion(Tuned());
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> m = blob;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    StatusOr<RegionProgram> d = DecodeRegion(m.data(), m.size());
    if (d.ok()) {
      ++accepted;
      BOOST_TEST_REQUIRE(ValidateRegion(*d).ok());
      BOOST_TEST_REQUIRE(EncodeRegion(*d) == m);  // what decodes re-encodes to the same bytes
      BOOST_TEST_REQUIRE(DescribeRegion(m.data(), m.size()).ok());
    }
  }
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> m(rng() % 256);
    for (uint8_t& b : m) b = static_cast<uint8_t>(rng());
    if (m.size() >= 8 && i % 2 == 0) std::copy(blob.begin(), blob.begin() + 8, m.begin());
    (void)DecodeRegion(m.data(), m.size());
  }
  BOOST_TEST_MESSAGE("accepted mutants: " << accepted);
}

}  // namespace
}  // namespace kiln::onednn
