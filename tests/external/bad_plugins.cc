// Broken plugins for registry tests, selected by a macro: no entry point, a vendor built for
// another ABI, or an entry point that refuses the ABI kiln offers.
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
#else
extern "C" __attribute__((visibility("default"))) int not_a_kiln_plugin() { return 0; }
#endif
