// Stable 64-bit hashing. Graph keys must be equal across processes (the
// disk cache relies on it), so absl::Hash, which is seeded per process, is
// not used for them.
#pragma once

#include <cstdint>
#include <cstring>
#include "absl/strings/string_view.h"

namespace mstep {

/// splitmix64 finalizer: a cheap, well-distributed 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t hash_combine(uint64_t seed, uint64_t value) {
  return mix64(seed ^ (value + 0x9E3779B97F4A7C15ull + (seed << 6) +
                       (seed >> 2)));
}

inline uint64_t hash_double(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return mix64(bits);
}

inline uint64_t hash_string(absl::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return mix64(h);
}

}  // namespace mstep
