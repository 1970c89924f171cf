// The .kiln format version and identifier, shared by the writer (builder) and the reader (loader).
#ifndef KILN_SERIALIZER_VERSION_H_
#define KILN_SERIALIZER_VERSION_H_

#include <cstdint>

namespace kiln {

/// File identifier (bytes 4..7 of a size-prefixed FlatBuffer). Also in executable.fbs.
inline constexpr char kFileIdentifier[] = "KILN";
/// Format version this build writes and the newest it reads. Bump the minor when adding fields
/// at the end of a table or opcodes at the end of vm/opcodes.def; the major when anything else
/// changes.
inline constexpr uint16_t kFormatMajor = 1;
/// 1.1: 64-bit dims and byte offsets (new alloc_tensor / alloc_tensor_reg opcodes; 1.0's
/// 32-bit forms still load with their old meaning). 1.2: optional machine code compiled ahead
/// of time (Executable.aot_targets) and ExternalRegion.fallback (a VM function run when the
/// region's vendor declines it or is absent). 1.3: u16/u32/u64 dtypes and
/// TensorSpec.dtype_only. 1.4: ExternalRegion.tuned_fallback / tuned_note
/// (`kiln compile --tune` measured the fallback faster). See executable.fbs for the history.
inline constexpr uint16_t kFormatMinor = 4;
/// Alignment of every constant's bytes in the file (and in memory when mapped).
inline constexpr uint64_t kConstantAlignment = 64;

}  // namespace kiln

#endif  // KILN_SERIALIZER_VERSION_H_
