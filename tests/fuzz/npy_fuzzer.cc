// libFuzzer target: ParseNpy on arbitrary bytes, and for every image it accepts, the round
// trip EncodeNpy -> ParseNpy must give back the same dtype, shape and bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::Allocator* allocator = new kiln::Allocator(0);  // no cache: ASan sees every block
  auto t = kiln::ParseNpy(data, size, *allocator);
  if (!t.ok()) return 0;
  auto image = kiln::EncodeNpy(*t);
  if (!image.ok()) __builtin_trap();
  auto back = kiln::ParseNpy(image->data(), image->size(), *allocator);
  if (!back.ok() || back->dtype() != t->dtype() || back->shape() != t->shape() ||
      std::memcmp(back->data(), t->data(), t->NumBytes()) != 0) {
    __builtin_trap();
  }
  return 0;
}
