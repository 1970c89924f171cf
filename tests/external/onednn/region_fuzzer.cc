// libFuzzer target: DecodeRegion on arbitrary bytes must return a Status, never crash, hang or
// over-allocate; a blob it accepts must pass ValidateRegion and re-encode to the same bytes (up to
// the minor version, which becomes the current one, and an empty tuning section before 1.5).
// Build like tests/fuzz/load_fuzzer (clang-14, --config=fuzz, an output base of its own):
//   bazel --output_base=$HOME/.cache/kiln-fuzz-bazel build --config=fuzz
//       //tests/external/onednn:region_fuzzer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "external/onednn/region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::onednn;
  kiln::StatusOr<RegionProgram> region = DecodeRegion(data, size);
  if (!region.ok()) return 0;
  if (!ValidateRegion(*region).ok()) std::abort();
  // The re-encoding is byte-identical except the minor version: an older minor is readable
  // (same body layout) and EncodeRegion writes the current one. Bytes 6-7 hold the minor.
  // Before 1.5 the body ends at the ops; the re-encoding adds an empty tuning section (13
  // bytes: probed 0, f4_from 0, no shapes, no layouts).
  std::vector<uint8_t> again = EncodeRegion(*region);
  if (size < 8) std::abort();
  uint16_t old_minor;
  std::memcpy(&old_minor, data + 6, sizeof(old_minor));
  if (old_minor < 5) {
    if (!region->tuning.empty() || again.size() != size + 13) std::abort();
    if (std::any_of(again.end() - 13, again.end(), [](uint8_t b) { return b != 0; })) std::abort();
    again.resize(size);
  }
  if (again.size() != size) std::abort();
  if (!std::equal(again.begin(), again.begin() + 6, data) ||
      !std::equal(again.begin() + 8, again.end(), data + 8)) {
    std::abort();
  }
  uint16_t minor;
  std::memcpy(&minor, again.data() + 6, sizeof(minor));
  if (minor != kRegionMinor) std::abort();
  return 0;
}
