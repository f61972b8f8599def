// Checksums of stored bytes (the disk cache, serialized graphs and
// executables). No LLVM: the runtime that loads them has none.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace mstep {

/// XXH64 (xxHash, 64-bit, seed 0): fast, and equal across processes and
/// machines, so a checksum written by one process is checked by another.
/// Not cryptographic: it detects corruption, not tampering.
uint64_t xxhash64(absl::string_view bytes);

}  // namespace mstep
