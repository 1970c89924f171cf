// libFuzzer target: DecodeRegion on arbitrary bytes must return a Status, never crash, hang or
// over-allocate; a blob it accepts must pass ValidateRegion and re-encode to the same bytes.
// Build like tests/fuzz/load_fuzzer (clang-14, --config=fuzz, an output base of its own):
//   bazel --output_base=$HOME/.cache/kiln-fuzz-bazel build --config=fuzz
//       //tests/external/onednn:region_fuzzer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "external/onednn/region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::onednn;
  kiln::StatusOr<RegionProgram> region = DecodeRegion(data, size);
  if (!region.ok()) return 0;
  if (!ValidateRegion(*region).ok()) std::abort();
  std::vector<uint8_t> again = EncodeRegion(*region);
  if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  return 0;
}
