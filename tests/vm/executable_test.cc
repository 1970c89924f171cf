// Executable (vm/executable.cc): every table round-trips through ExecutableBuilder, files are
// mapped in place, unaligned buffers are copied, open errors and binding errors name the file
// or the entry, and an unbound executable loads but cannot run.
#define BOOST_TEST_MODULE executable_test
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "serializer/version.h"
#include "tests/vm/test_programs.h"
#include "vm/verifier.h"

namespace kiln::testing {
namespace {

KernelDef Kernel(std::string name, std::vector<DType> ins, std::vector<DType> outs) {
  KernelDef k;
  k.name = std::move(name);
  k.inputs = std::move(ins);
  k.outputs = std::move(outs);
  return k;
}

ExternalRegionDef Region(std::string name, std::string vendor, const std::string& blob,
                         std::vector<uint32_t> constants) {
  ExternalRegionDef r;
  r.name = std::move(name);
  r.vendor = std::move(vendor);
  r.blob.assign(blob.begin(), blob.end());
  r.constants = std::move(constants);
  r.num_inputs = r.num_outputs = 1;
  return r;
}

std::vector<uint8_t> FinishOrDie(ExecutableBuilder& b) {
  auto bytes = b.Finish();
  if (!bytes.ok()) throw std::runtime_error(bytes.status().ToString());
  return std::move(*bytes);
}

// A fresh path under the test's scratch directory.
std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_" + name;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(out.good());
}

const float kWeights[6] = {1, 2, 3, 4, 5, 6};
const float kBias[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
const int64_t kIds[3] = {7, -8, 1LL << 40};

// Every table, with a recognisable value in each field.
std::vector<uint8_t> BuildEverything() {
  ExecutableBuilder b("unit-test 1.2");
  FunctionBuilder& main = b.AddFunction("main");
  main.AddParam(ValueSpec{"input_ids", DType::kI64, {{-1, "batch"}, {-1, "seq"}}, false});
  main.AddParam(ValueSpec{"mask", DType::kF32, {{-1, "batch"}, {8, ""}}, false});
  main.AddResult(ValueSpec{"out", DType::kF32, {{-1, "batch"}, {-1, ""}}, false});
  main.set_register_count(12);
  main.SetSourceNode("Gather_3");
  main.Move(2, 1);
  main.SetSourceNode("");
  main.Ret({2});
  FunctionBuilder& helper = b.AddFunction("helper");
  helper.AddParam(ValueSpec{"t", DType::kInvalid, {}, true});
  helper.AddResult(ValueSpec{"r", DType::kBool, {}, false});
  helper.SetSourceNode("If_9");
  helper.Fatal(b.AddString("boom"));

  KernelDef add = Kernel("add", {DType::kI64, DType::kI64}, {DType::kI64});
  add.payload_format = "kiln-kir-1";
  add.payload = {1, 2, 3, 250};
  add.dispatch_hints = {{"batch", {1, 8, 32}}, {"seq", {128}}};
  b.AddKernel(add);
  b.AddKernel(Kernel("less", {DType::kI64, DType::kI64}, {DType::kBool}));
  ShapeFunctionDef shape;
  shape.name = "same_shape";
  shape.num_inputs = 1;
  shape.num_outputs = 1;
  shape.data_dependent = {true};
  shape.payload_format = "kiln-shape-1";
  shape.payload = {9, 8};
  b.AddShapeFunction(shape);

  b.AddConstant("w", DType::kF32, {2, 3}, kWeights, sizeof(kWeights));
  int bias = b.AddConstant("bias", DType::kF32, {4}, kBias, sizeof(kBias));
  b.AddConstant("ids", DType::kI64, {3}, kIds, sizeof(kIds));
  b.AddConstant("nothing", DType::kF32, {0, 5}, nullptr, 0);
  b.AddExternalRegion(Region("test_0", "test", "1.5", {static_cast<uint32_t>(bias)}));

  MetadataDef m;
  m.inputs = {ValueSpec{"input_ids", DType::kI64, {{-1, "batch"}, {-1, "seq"}}, false}};
  m.outputs = {ValueSpec{"logits", DType::kF32, {{-1, "batch"}, {2, ""}}, false}};
  m.entry = "main";
  m.opset = 17;
  m.producer_name = "pytorch";
  m.doc = "a test model";
  b.SetMetadata(m);
  return FinishOrDie(b);
}

BOOST_AUTO_TEST_CASE(every_table_round_trips) {
  std::vector<uint8_t> bytes = BuildEverything();
  LoadOptions options = TestLoadOptions();
  auto* kernels = static_cast<TestKernelProvider*>(options.kernels.get());
  auto* externals = static_cast<TestExternalProvider*>(options.externals.get());
  auto loaded = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
  const Executable& exe = **loaded;

  // Header and sizes.
  BOOST_TEST(exe.version_major() == kFormatMajor);
  BOOST_TEST(exe.version_minor() == kFormatMinor);
  BOOST_TEST(exe.producer() == "unit-test 1.2");
  BOOST_TEST(exe.file_size() == bytes.size());
  BOOST_TEST(exe.flatbuffer_size() < exe.file_size());
  BOOST_TEST(exe.bound());

  // Functions and signatures.
  BOOST_TEST(exe.num_functions() == 2);
  BOOST_TEST(exe.FindFunction("main") == 0);
  BOOST_TEST(exe.FindFunction("helper") == 1);
  BOOST_TEST(exe.FindFunction("nope") == -1);
  BOOST_TEST(exe.entry_function() == "main");
  const FunctionSignature& sig = exe.signature(0);
  BOOST_TEST(sig.name == "main");
  BOOST_REQUIRE_EQUAL(sig.params.size(), 2u);
  BOOST_TEST(sig.params[0].ToString() == "input_ids: i64[batch, seq]");
  BOOST_TEST(sig.params[1].ToString() == "mask: f32[batch, 8]");
  BOOST_TEST(sig.params[1].shape[1].value == 8);
  BOOST_TEST(sig.params[1].shape[1].fixed());
  BOOST_TEST(!sig.params[0].shape[0].fixed());
  BOOST_TEST(sig.params[0].shape[0].symbol == "batch");
  BOOST_REQUIRE_EQUAL(sig.results.size(), 1u);
  BOOST_TEST(sig.results[0].ToString() == "out: f32[batch, ?]");
  BOOST_TEST(sig.results[0].shape[1].symbol.empty());
  const FunctionSignature& helper = exe.signature(1);
  BOOST_TEST(helper.params[0].is_tuple);
  BOOST_TEST(helper.params[0].ToString() == "t: tuple");
  BOOST_TEST(helper.results[0].ToString() == "r: bool[]");
  BOOST_TEST(exe.max_registers() == 12u);
  BOOST_TEST(exe.max_list_length() == 1u);  // main's operands: the ret list {2}

  // Kernels, shape functions and regions, bound and as stored.
  BOOST_TEST(kernels->prepared == 3);
  BOOST_TEST(externals->created == 1);
  BOOST_TEST(exe.kernel(0) != nullptr);
  BOOST_TEST(exe.kernel(1) != nullptr);
  BOOST_TEST(exe.shape_function(0) != nullptr);
  BOOST_TEST(exe.external_region(0) != nullptr);
  BOOST_TEST(exe.kernel_num_inputs(0) == 2);
  BOOST_TEST((exe.kernel_dtypes(1) == std::vector<DType>{DType::kI64, DType::kI64, DType::kBool}));
  const fb::Executable& root = exe.root();
  const fb::Kernel* k = root.kernels()->Get(0);
  BOOST_TEST(k->name()->str() == "add");
  BOOST_TEST(k->payload_format()->str() == "kiln-kir-1");
  BOOST_TEST((std::vector<uint8_t>(k->payload()->begin(), k->payload()->end()) ==
              std::vector<uint8_t>{1, 2, 3, 250}));
  BOOST_REQUIRE_EQUAL(k->dispatch_hints()->size(), 2u);
  BOOST_TEST(k->dispatch_hints()->Get(0)->symbol()->str() == "batch");
  const auto* buckets = k->dispatch_hints()->Get(0)->buckets();
  BOOST_TEST(
      (std::vector<int64_t>(buckets->begin(), buckets->end()) == std::vector<int64_t>{1, 8, 32}));
  BOOST_TEST(k->dispatch_hints()->Get(1)->symbol()->str() == "seq");
  BOOST_TEST(k->dispatch_hints()->Get(1)->buckets()->Get(0) == 128);
  const fb::ShapeFunction* s = root.shape_functions()->Get(0);
  BOOST_TEST(s->name()->str() == "same_shape");
  BOOST_TEST(s->num_inputs() == 1u);
  BOOST_TEST(s->num_outputs() == 1u);
  BOOST_TEST(s->data_dependent()->Get(0) == true);
  BOOST_TEST(s->payload_format()->str() == "kiln-shape-1");
  BOOST_TEST(s->payload()->size() == 2u);
  const fb::ExternalRegion* r = root.external_regions()->Get(0);
  BOOST_TEST(r->name()->str() == "test_0");
  BOOST_TEST(r->vendor()->str() == "test");
  BOOST_TEST(std::string(r->blob()->begin(), r->blob()->end()) == "1.5");
  BOOST_TEST(r->checksum() == Fnv1a64(reinterpret_cast<const uint8_t*>("1.5"), 3));
  BOOST_TEST(r->constants()->Get(0) == 1u);
  BOOST_TEST(r->num_inputs() == 1u);
  BOOST_TEST(r->num_outputs() == 1u);

  // Constants: views of the executable's bytes, 64-byte aligned.
  BOOST_REQUIRE_EQUAL(exe.num_constants(), 4);
  BOOST_TEST(exe.constant(0).TypeString() == "f32[2, 3]");
  BOOST_TEST(std::memcmp(exe.constant(0).data(), kWeights, sizeof(kWeights)) == 0);
  BOOST_TEST(exe.constant(1).TypeString() == "f32[4]");
  BOOST_TEST(exe.constant(1).data_as<float>()[3] == 0.0625f);
  BOOST_TEST(exe.constant(2).TypeString() == "i64[3]");
  BOOST_TEST(exe.constant(2).data_as<int64_t>()[2] == (1LL << 40));
  BOOST_TEST(exe.constant(3).TypeString() == "f32[0, 5]");
  BOOST_TEST(exe.constant(3).NumBytes() == 0u);
  BOOST_TEST(root.constants()->Get(1)->name()->str() == "bias");
  for (int i = 0; i < 3; ++i) {
    auto* p = static_cast<const uint8_t*>(exe.constant(i).data());
    BOOST_TEST((p >= exe.bytes() + exe.flatbuffer_size() &&
                p + exe.constant(i).NumBytes() <= exe.bytes() + exe.file_size()));
    BOOST_TEST(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  }

  // Metadata, debug info, strings.
  const fb::ModelMetadata* m = root.metadata();
  BOOST_TEST(m->entry()->str() == "main");
  BOOST_TEST(m->opset() == 17);
  BOOST_TEST(m->producer_name()->str() == "pytorch");
  BOOST_TEST(m->doc()->str() == "a test model");
  BOOST_TEST(m->inputs()->Get(0)->name()->str() == "input_ids");
  BOOST_TEST(m->inputs()->Get(0)->shape()->Get(1)->symbol()->str() == "seq");
  BOOST_TEST(m->outputs()->Get(0)->shape()->Get(1)->value() == 2);
  BOOST_TEST(exe.SourceNode(0, 0) == "Gather_3");
  BOOST_TEST(exe.SourceNode(0, 1) == "");
  BOOST_TEST(exe.SourceNode(1, 0) == "If_9");
  BOOST_TEST(exe.SourceNode(1, 5) == "");
  BOOST_TEST(exe.SourceNode(7, 0) == "");
  BOOST_TEST(exe.String(0) == "boom");
  BOOST_TEST(exe.String(-1) == "");
  BOOST_TEST(exe.String(100) == "");
  BOOST_REQUIRE_EQUAL(root.strings()->size(), 3u);  // "boom" and the two node names
}

BOOST_AUTO_TEST_CASE(entry_defaults_to_main_without_metadata) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  auto exe = LoadOrDie(b);
  BOOST_TEST(exe->entry_function() == "main");
  BOOST_TEST(exe->root().metadata() == nullptr);
  BOOST_TEST(exe->producer() == "kiln ExecutableBuilder");
}

// The mapping of `path` in this process that contains `p`, from /proc/self/maps.
bool MappedFromFile(const void* p, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo, hi;
    char dash;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    if (addr >= lo && addr < hi)
      return line.size() >= path.size() &&
             line.compare(line.size() - path.size(), path.size(), path) == 0;
  }
  return false;
}

BOOST_AUTO_TEST_CASE(load_file_maps_the_file_and_uses_constants_in_place) {
  std::string path = TempPath("everything.kiln");
  std::vector<uint8_t> bytes = BuildEverything();
  WriteBytes(path, bytes);
  auto exe = Executable::LoadFile(path, TestLoadOptions());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->file_size() == bytes.size());
  BOOST_TEST(std::memcmp((*exe)->bytes(), bytes.data(), bytes.size()) == 0);
  BOOST_TEST(MappedFromFile((*exe)->bytes(), path));  // mmap, not a copy
  for (int i = 0; i < 3; ++i) {
    const Tensor& c = (*exe)->constant(i);
    auto* p = static_cast<const uint8_t*>(c.data());
    BOOST_TEST((p >= (*exe)->bytes() && p + c.NumBytes() <= (*exe)->bytes() + (*exe)->file_size()));
    BOOST_TEST(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    BOOST_TEST(!c.storage()->pooled());
  }
  BOOST_TEST((*exe)->constant(0).data_as<float>()[5] == 6.0f);
  ::unlink(path.c_str());
  // Still readable: the mapping outlives the directory entry.
  BOOST_TEST((*exe)->constant(1).data_as<float>()[0] == 0.5f);
}

// huge_page_constants: the file is read into an anonymous, 2 MiB-aligned copy (not the file's
// mapping) whose constants are the file's bytes; bad files fail as with the mapping.
BOOST_AUTO_TEST_CASE(load_file_into_huge_pages_copies_the_file_once) {
  std::string path = TempPath("huge.kiln");
  std::vector<uint8_t> bytes = BuildEverything();
  WriteBytes(path, bytes);
  LoadOptions options = TestLoadOptions();
  options.huge_page_constants = true;
  auto exe = Executable::LoadFile(path, options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->file_size() == bytes.size());
  BOOST_TEST(std::memcmp((*exe)->bytes(), bytes.data(), bytes.size()) == 0);
  BOOST_TEST(!MappedFromFile((*exe)->bytes(), path));
  BOOST_TEST(reinterpret_cast<uintptr_t>((*exe)->bytes()) % (2 << 20) == 0);
  for (int i = 0; i < 3; ++i) {
    const Tensor& c = (*exe)->constant(i);
    auto* p = static_cast<const uint8_t*>(c.data());
    BOOST_TEST((p >= (*exe)->bytes() && p + c.NumBytes() <= (*exe)->bytes() + (*exe)->file_size()));
  }
  BOOST_TEST((*exe)->constant(0).data_as<float>()[5] == 6.0f);
  WriteBytes(path, {});  // the copy does not depend on the file any more
  BOOST_TEST((*exe)->constant(1).data_as<float>()[0] == 0.5f);
  auto empty = Executable::LoadFile(path, options);
  BOOST_TEST(empty.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(empty.status().message() ==
             path + ": file is 0 bytes; too small to be a .kiln executable");
  bytes[8] = 'X';
  WriteBytes(path, bytes);
  auto corrupt = Executable::LoadFile(path, options);
  BOOST_TEST(corrupt.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(corrupt.status().message().rfind(path + ": ", 0) == 0);
  ::unlink(path.c_str());
  BOOST_TEST(Executable::LoadFile(path, options).status().code() == StatusCode::kNotFound);
}

BOOST_AUTO_TEST_CASE(load_bytes_copies_unaligned_or_unowned_buffers) {
  std::vector<uint8_t> bytes = BuildEverything();
  // Unaligned and owned: copied once into an aligned buffer.
  auto buffer = std::shared_ptr<uint8_t>(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes.size() + 127) / 64 * 64)), &std::free);
  uint8_t* unaligned = buffer.get() + 1;
  std::memcpy(unaligned, bytes.data(), bytes.size());
  auto exe = Executable::LoadBytes(unaligned, bytes.size(), TestLoadOptions(), buffer);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->bytes() != unaligned);
  BOOST_TEST(reinterpret_cast<uintptr_t>((*exe)->bytes()) % 64 == 0);
  BOOST_TEST(reinterpret_cast<uintptr_t>((*exe)->constant(0).data()) % 64 == 0);
  BOOST_TEST((*exe)->constant(0).data_as<float>()[1] == 2.0f);
  std::memset(unaligned, 0, bytes.size());  // the copy does not depend on the caller's bytes
  BOOST_TEST((*exe)->constant(0).data_as<float>()[1] == 2.0f);

  // Aligned and owned: used in place, and the keepalive is held.
  auto aligned = std::shared_ptr<uint8_t>(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes.size() + 127) / 64 * 64)), &std::free);
  std::memcpy(aligned.get(), bytes.data(), bytes.size());
  long uses = aligned.use_count();
  auto in_place = Executable::LoadBytes(aligned.get(), bytes.size(), TestLoadOptions(), aligned);
  BOOST_REQUIRE(in_place.ok());
  BOOST_TEST((*in_place)->bytes() == aligned.get());
  BOOST_TEST(aligned.use_count() > uses);

  // Aligned but not owned (no keepalive): copied.
  auto unowned = Executable::LoadBytes(aligned.get(), bytes.size(), TestLoadOptions());
  BOOST_REQUIRE(unowned.ok());
  BOOST_TEST((*unowned)->bytes() != aligned.get());
}

BOOST_AUTO_TEST_CASE(missing_file_is_not_found) {
  std::string path = TempPath("does_not_exist.kiln");
  auto exe = Executable::LoadFile(path);
  BOOST_TEST(exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(exe.status().message() == path + ": no such file");
}

BOOST_AUTO_TEST_CASE(directory_is_invalid_argument) {
  std::string dir = TempPath("a_directory.kiln");
  BOOST_REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
  auto exe = Executable::LoadFile(dir);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(exe.status().message().rfind(dir + ": not a regular file", 0) == 0);
  ::rmdir(dir.c_str());
}

// A FIFO would block open() until a writer came; the loader must answer at once instead.
BOOST_AUTO_TEST_CASE(fifo_is_rejected_without_blocking) {
  std::string path = TempPath("a_fifo.kiln");
  ::unlink(path.c_str());
  BOOST_REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  auto exe = Executable::LoadFile(path);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(exe.status().message().rfind(path + ": not a regular file", 0) == 0);
  ::unlink(path.c_str());
}

// The start of a real ONNX ModelProto (ir_version 8, producer_name "pytorch"): the error says
// what the file is and what to do.
BOOST_AUTO_TEST_CASE(onnx_model_is_named_with_the_command_to_compile_it) {
  std::string path = TempPath("model.onnx");
  std::vector<uint8_t> bytes = {0x08, 0x08, 0x12, 0x07, 'p', 'y', 't', 'o', 'r', 'c', 'h',
                                0x1a, 0x06, '2', '.', '0', '.', '0', '.', 0x3a, 0x00};
  bytes.resize(4096, 0);
  WriteBytes(path, bytes);
  auto exe = Executable::LoadFile(path);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(exe.status().message() ==
             path + ": not a .kiln executable: this is an ONNX model; compile it first with "
                    "`kiln compile MODEL.onnx -o MODEL.kiln`");
  ::unlink(path.c_str());
}

BOOST_AUTO_TEST_CASE(empty_and_corrupt_files_name_the_path) {
  std::string path = TempPath("empty.kiln");
  WriteBytes(path, {});
  auto exe = Executable::LoadFile(path);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(exe.status().message() ==
             path + ": file is 0 bytes; too small to be a .kiln executable");
  std::vector<uint8_t> bytes = BuildEverything();
  std::memcpy(&bytes[8], "ONNX", 4);
  WriteBytes(path, bytes);
  exe = Executable::LoadFile(path);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(exe.status().message().rfind(path + ": wrong file identifier 'ONNX'", 0) == 0);
  ::unlink(path.c_str());
}

// ---- Binding --------------------------------------------------------------------------------

std::vector<uint8_t> OneKernel(const std::string& name) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  b.AddKernel(Kernel(name, {DType::kF32}, {DType::kF32}));
  return FinishOrDie(b);
}

BOOST_AUTO_TEST_CASE(missing_kernel_provider_is_an_error) {
  std::vector<uint8_t> bytes = OneKernel("add");
  LoadOptions options = TestLoadOptions();
  options.kernels = nullptr;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(exe.status().message() ==
             "the executable has 1 kernels/shape functions but no provider was given to bind them");
}

BOOST_AUTO_TEST_CASE(missing_external_provider_is_an_error) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  b.AddExternalRegion(Region("test_0", "test", "1", {}));
  std::vector<uint8_t> bytes = FinishOrDie(b);
  LoadOptions options = TestLoadOptions();
  options.externals = nullptr;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(exe.status().message().find("1 external regions but no provider") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_kernel_name_names_the_entry) {
  std::vector<uint8_t> bytes = OneKernel("mystery");
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
  BOOST_TEST(exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(exe.status().message() == "kernels[0] 'mystery': no test kernel named 'mystery'");
}

BOOST_AUTO_TEST_CASE(unknown_shape_function_names_the_entry) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  ShapeFunctionDef s;
  s.name = "mystery_shape";
  s.num_inputs = s.num_outputs = 1;
  s.data_dependent = {false};
  b.AddShapeFunction(s);
  std::vector<uint8_t> bytes = FinishOrDie(b);
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
  BOOST_TEST(exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(exe.status().message().rfind("shape_functions[0] 'mystery_shape': ", 0) == 0);
}

BOOST_AUTO_TEST_CASE(unregistered_vendor_names_vendor_and_region) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  b.AddExternalRegion(Region("test_0", "test", "1", {}));
  b.AddExternalRegion(Region("acme_0", "acme", "opaque", {}));
  std::vector<uint8_t> bytes = FinishOrDie(b);
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
  BOOST_TEST(exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(
      exe.status().message() ==
      "external_regions[1] 'acme_0' (vendor 'acme'): no runtime registered for vendor 'acme'");
}

BOOST_AUTO_TEST_CASE(vendor_init_error_is_reported_with_the_region) {
  ExecutableBuilder b;
  b.AddFunction("main").Ret({});
  b.AddExternalRegion(Region("test_0", "test", "not-a-number", {}));
  std::vector<uint8_t> bytes = FinishOrDie(b);
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), TestLoadOptions());
  BOOST_TEST(exe.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(exe.status().message() ==
             "external_regions[0] 'test_0' (vendor 'test'): blob 'not-a-number' is not a number");
}

BOOST_AUTO_TEST_CASE(unbound_executable_loads_but_cannot_run) {
  std::vector<uint8_t> bytes = BuildEverything();
  LoadOptions options;  // no providers at all
  options.bind = false;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST(!(*exe)->bound());
  BOOST_TEST((*exe)->num_functions() == 2);
  BOOST_TEST((*exe)->constant(0).data_as<float>()[0] == 1.0f);
  BOOST_TEST((*exe)->kernel(0) == nullptr);
  BOOST_TEST((*exe)->shape_function(0) == nullptr);
  BOOST_TEST((*exe)->external_region(0) == nullptr);
  auto ctx = Context::Create(*exe);
  BOOST_TEST(ctx.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(ctx.status().message().find("LoadOptions::bind = false") != std::string::npos);
  // Verification still runs without binding.
  bytes[8] = 'X';
  auto bad = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_TEST(bad.status().code() == StatusCode::kInvalidFormat);
}

BOOST_AUTO_TEST_CASE(prefetch_off_loads_the_same_constants) {
  std::string path = TempPath("noprefetch.kiln");
  WriteBytes(path, BuildEverything());
  LoadOptions options = TestLoadOptions();
  options.prefetch_constants = false;
  auto exe = Executable::LoadFile(path, options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((*exe)->constant(2).data_as<int64_t>()[1] == -8);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// A shape function written with no data_dependent flags reads no values: it loads, and the
// provider sees one false flag per input.
BOOST_AUTO_TEST_CASE(shape_function_without_data_dependent_flags_loads) {
  struct Recorder : TestKernelProvider {
    std::vector<bool> seen;
    StatusOr<std::unique_ptr<TensorFunction>> PrepareShapeFunction(const ShapeFunctionSpec& s) override {
      seen = s.data_dependent;
      return TestKernelProvider::PrepareShapeFunction(s);
    }
  };
  ExecutableBuilder b;
  b.AddShapeFunction({"same_shape", 2, 1, {}});
  FunctionBuilder& f = b.AddFunction("main");
  f.Fatal(b.AddString("unused"));
  auto bytes = *b.Finish();
  auto recorder = std::make_shared<Recorder>();
  LoadOptions options;
  options.kernels = recorder;
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), options);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  BOOST_TEST((recorder->seen == std::vector<bool>{false, false}));
}

}  // namespace
}  // namespace kiln::testing
