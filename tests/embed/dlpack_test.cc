// DLPack interop: zero copy both ways, deleters run exactly once, unsupported tensors refused
// without taking ownership.
#define BOOST_TEST_MODULE dlpack_test
#include <boost/test/unit_test.hpp>

#include <thread>

#include "base/allocator.h"
#include "embed/dlpack.h"

namespace kiln {
namespace {

// A producer-owned DLManagedTensor that counts deleter calls.
struct Producer {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  int deleted = 0;
  DLManagedTensor managed{};
  Producer() {
    managed.dl_tensor = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* m) { ++static_cast<Producer*>(m->manager_ctx)->deleted; };
  }
};

BOOST_AUTO_TEST_CASE(import_is_zero_copy_and_deletes_once_after_the_last_reference) {
  Producer p;
  {
    auto t = FromDLPack(&p.managed);
    BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    BOOST_TEST(t->TypeString() == "f32[2, 3]");
    BOOST_TEST(t->data() == static_cast<void*>(p.data));
    Tensor copy = *t;
    t = StatusOr<Tensor>(InvalidArgument("drop"));
    BOOST_TEST(p.deleted == 0);  // `copy` still refers to the data
    BOOST_TEST(copy.data_as<float>()[5] == 6.0f);
  }
  BOOST_TEST(p.deleted == 1);
}

BOOST_AUTO_TEST_CASE(import_with_null_strides_byte_offset_and_from_another_thread) {
  Producer p;
  p.managed.dl_tensor.strides = nullptr;
  p.managed.dl_tensor.byte_offset = 4;
  p.shape[0] = 1;
  p.shape[1] = 5;
  auto t = FromDLPack(&p.managed);
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(t->data_as<float>()[0] == 2.0f);
  std::thread([tensor = std::move(*t)]() mutable { tensor = Tensor(); }).join();
  BOOST_TEST(p.deleted == 1);
}

BOOST_AUTO_TEST_CASE(every_dtype_round_trips_through_export_and_import) {
  Allocator allocator;
  for (int raw = 1; raw < kNumDTypes; ++raw) {
    auto dtype = static_cast<DType>(raw);
    BOOST_TEST_CONTEXT(DTypeName(dtype)) {
      auto t = Tensor::Allocate(allocator, dtype, Shape{2, 3});
      BOOST_REQUIRE(t.ok());
      auto managed = ToDLPack(*t);
      BOOST_REQUIRE(managed.ok());
      BOOST_TEST((*managed)->dl_tensor.data == t->data());
      BOOST_TEST((*managed)->dl_tensor.ndim == 2);
      BOOST_TEST((*managed)->dl_tensor.dtype.bits == DTypeSize(dtype) * 8);
      auto back = FromDLPack(*managed);  // takes ownership of the export
      BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
      BOOST_TEST((back->dtype() == dtype));
      BOOST_TEST((back->shape() == t->shape()));
      BOOST_TEST(back->data() == t->data());
    }
  }
}

BOOST_AUTO_TEST_CASE(export_keeps_the_storage_alive_until_the_deleter) {
  Allocator allocator;
  DLManagedTensor* managed;
  {
    auto t = Tensor::Allocate(allocator, DType::kI32, Shape{4});
    for (int i = 0; i < 4; ++i) t->data_as<int32_t>()[i] = 10 * i;
    managed = *ToDLPack(*t);
  }
  BOOST_TEST(allocator.stats().bytes_in_use > 0u);  // still referenced by the export
  BOOST_TEST(static_cast<int32_t*>(managed->dl_tensor.data)[3] == 30);
  managed->deleter(managed);
  BOOST_TEST(allocator.stats().bytes_in_use == 0u);
}

BOOST_AUTO_TEST_CASE(refusals_leave_ownership_with_the_caller) {
  struct Case {
    const char* what;
    void (*mutate)(Producer&);
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"gpu", [](Producer& p) { p.managed.dl_tensor.device.device_type = kDLCUDA; }, StatusCode::kUnsupported,
       "device type 2 is not the CPU"},
      {"lanes", [](Producer& p) { p.managed.dl_tensor.dtype.lanes = 4; }, StatusCode::kUnsupported,
       "dtype (code 2, 32 bits, 4 lanes)"},
      {"u128", [](Producer& p) { p.managed.dl_tensor.dtype = {kDLUInt, 128, 1}; }, StatusCode::kUnsupported,
       "dtype (code 1, 128 bits, 1 lanes)"},
      {"column_major", [](Producer& p) { p.strides[0] = 1, p.strides[1] = 2; }, StatusCode::kInvalidArgument,
       "dim 1 has stride 2; only row-major contiguous data is accepted (expected 1)"},
      {"rank", [](Producer& p) { p.managed.dl_tensor.ndim = 9; }, StatusCode::kInvalidArgument, "rank 9"},
      {"negative_dim", [](Producer& p) { p.shape[0] = -2; }, StatusCode::kInvalidArgument,
       "dim 0 is negative"},
      {"null_data", [](Producer& p) { p.managed.dl_tensor.data = nullptr; }, StatusCode::kInvalidArgument,
       "null data"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      Producer p;
      c.mutate(p);
      auto t = FromDLPack(&p.managed);
      BOOST_REQUIRE(!t.ok());
      BOOST_TEST(t.status().code() == c.code);
      BOOST_TEST(t.status().message().find(c.message) != std::string::npos, t.status().message());
      BOOST_TEST(p.deleted == 0);
    }
  }
  BOOST_TEST(FromDLPack(nullptr).status().message() == "FromDLPack: null tensor");
  BOOST_TEST(ToDLPack(Tensor()).status().message() == "ToDLPack: empty tensor");
}

}  // namespace
}  // namespace kiln
