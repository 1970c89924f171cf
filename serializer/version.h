// The .kiln format version and identifier, shared by the writer (builder) and the reader (loader).
#ifndef KILN_SERIALIZER_VERSION_H_
#define KILN_SERIALIZER_VERSION_H_

#include <cstdint>

namespace kiln {

/// File identifier (bytes 4..7 of a size-prefixed FlatBuffer). Also in executable.fbs.
inline constexpr char kFileIdentifier[] = "KILN";
/// Format version this build writes and the newest it reads. Bump the minor when adding fields
/// at the end of a table; the major when anything else changes.
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;
/// Alignment of every constant's bytes in the file (and in memory when mapped).
inline constexpr uint64_t kConstantAlignment = 64;

}  // namespace kiln

#endif  // KILN_SERIALIZER_VERSION_H_
