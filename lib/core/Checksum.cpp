// XXH64, as specified in xxHash's doc/xxhash_spec.md: four lanes over
// 32-byte stripes, then the tail in 8-, 4- and 1-byte steps, then an
// avalanche. Input words are read little-endian on every host.
#include "mstep/core/Checksum.h"

namespace mstep {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  return rotl(acc, 31) * kPrime1;
}

uint64_t merge_round(uint64_t acc, uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

uint64_t xxhash64(absl::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned char* const end = p + bytes.size();
  uint64_t h;
  // 1. Stripes of 32 bytes, one 8-byte word per lane.
  if (bytes.size() >= 32) {
    uint64_t v1 = kPrime1 + kPrime2, v2 = kPrime2, v3 = 0, v4 = 0 - kPrime1;
    for (; end - p >= 32; p += 32) {
      v1 = round(v1, read_le(p, 8));
      v2 = round(v2, read_le(p + 8, 8));
      v3 = round(v3, read_le(p + 16, 8));
      v4 = round(v4, read_le(p + 24, 8));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge_round(merge_round(merge_round(merge_round(h, v1), v2), v3), v4);
  } else {
    h = kPrime5;
  }
  h += bytes.size();
  // 2. The tail: 8-byte words, one 4-byte word, single bytes.
  for (; end - p >= 8; p += 8) h = rotl(h ^ round(0, read_le(p, 8)), 27) * kPrime1 + kPrime4;
  if (end - p >= 4) {
    h = rotl(h ^ (read_le(p, 4) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * kPrime5), 11) * kPrime1;
  // 3. Avalanche.
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  return h ^ (h >> 32);
}

}  // namespace mstep
