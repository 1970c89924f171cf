// Odd plugins for registry tests, selected by a macro: no entry point, a vendor built for
// another ABI, an entry point that refuses the ABI kiln offers, or a vendor built against an
// older plugin_abi.h (a version 1 struct, which ends at `destroy`, or version 2, which ends at
// `run_profiled`).
#include <cstdio>

#include "external/registry/plugin_abi.h"

#if defined(KILN_TEST_WRONG_VENDOR_ABI) || defined(KILN_TEST_REFUSES_ABI)
namespace {
void* Create(void*, const KilnRegionSpecC*, char*, size_t) { return nullptr; }
int Run(void*, const KilnTensorC*, int32_t, int32_t, char*, size_t) { return 1; }
void Destroy(void*) {}
const KilnVendorC kVendor = {99, "future", nullptr, Create, Run, Destroy};
}  // namespace

extern "C" __attribute__((visibility("default"))) int kiln_plugin_register(
    uint32_t abi_version, KilnRegisterVendorFn register_vendor, void* registry, char* error,
    size_t size) {
#ifdef KILN_TEST_REFUSES_ABI
  std::snprintf(error, size, "this plugin needs ABI 99, kiln offers %u", abi_version);
  return 1;
#else
  return register_vendor(registry, &kVendor, error, size);
#endif
}
#elif defined(KILN_TEST_V1_VENDOR) || defined(KILN_TEST_V2_VENDOR)
namespace {
// KilnVendorC as the first header declared it (no run_profiled member after destroy), or as
// the second did (no run_in_context after run_profiled).
struct VendorV1 {
  uint32_t abi_version;
  const char* name;
  void* user_data;
  void* (*create)(void*, const KilnRegionSpecC*, char*, size_t);
  int (*run)(void*, const KilnTensorC*, int32_t, int32_t, char*, size_t);
  void (*destroy)(void*);
#ifdef KILN_TEST_V2_VENDOR
  int (*run_profiled)(void*, const KilnTensorC*, int32_t, int32_t, const KilnProfilerC*, char*,
                      size_t);
#endif
};
int region_handle;
void* Create(void*, const KilnRegionSpecC*, char*, size_t) { return &region_handle; }
// y = 2 * x, f32 of any shape.
int Run(void*, const KilnTensorC* args, int32_t, int32_t, char*, size_t) {
  int64_t n = 1;
  for (int i = 0; i < args[0].rank; ++i) n *= args[0].shape[i];
  for (int64_t i = 0; i < n; ++i)
    static_cast<float*>(args[1].data)[i] = 2 * static_cast<const float*>(args[0].data)[i];
  return 0;
}
void Destroy(void*) {}
#ifdef KILN_TEST_V2_VENDOR
// Run, reporting its one step.
int RunProfiled(void* region, const KilnTensorC* args, int32_t num_inputs, int32_t num_outputs,
                const KilnProfilerC* profiler, char* error, size_t size) {
  KilnStepSampleC sample{};
  sample.kind = "double";
  sample.impl = "v2_loop";
  int rc = Run(region, args, num_inputs, num_outputs, error, size);
  if (rc == 0) profiler->record(profiler->context, &sample);
  return rc;
}
const VendorV1 kVendor = {2, "old", nullptr, Create, Run, Destroy, RunProfiled};
#else
const VendorV1 kVendor = {1, "old", nullptr, Create, Run, Destroy};
#endif
}  // namespace

extern "C" __attribute__((visibility("default"))) int kiln_plugin_register(
    uint32_t abi_version, KilnRegisterVendorFn register_vendor, void* registry, char* error,
    size_t size) {
  if (abi_version != 1) return 1;
  return register_vendor(registry, reinterpret_cast<const KilnVendorC*>(&kVendor), error, size);
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_kiln_plugin() { return 0; }
#endif
