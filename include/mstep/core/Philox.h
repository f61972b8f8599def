// Counter-based random numbers: Philox4x32-10 (Salmon et al., 2011), the
// generator used by cuRAND, PyTorch's CUDA RNG and JAX. A (seed, offset)
// pair fully determines the stream, so graphs take seed and offset as
// inputs and a replayed step draws fresh numbers by advancing the offset.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace mstep {

class Philox {
 public:
  /// The Philox4x32-10 bijection: 10 rounds on a 128-bit counter under a
  /// 64-bit key (Random123's philox4x32_R(10, ctr, key)).
  static std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c,
                                               std::array<uint32_t, 2> k) {
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t{0xD2511F53} * c[0];
      uint64_t p1 = uint64_t{0xCD9E8D57} * c[2];
      c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0],
           static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1],
           static_cast<uint32_t>(p0)};
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    return c;
  }

  /// Four 32-bit random words for counter `counter` under key `seed`: the
  /// counter fills the low 64 bits of Philox's 128-bit counter.
  static std::array<uint32_t, 4> block(uint64_t seed, uint64_t counter) {
    const auto lo = [](uint64_t v) { return static_cast<uint32_t>(v); };
    const auto hi = [](uint64_t v) { return static_cast<uint32_t>(v >> 32); };
    return philox4x32_10({lo(counter), hi(counter), 0, 0}, {lo(seed), hi(seed)});
  }

  /// Uniform float in [0, 1) for element `index` of the stream that starts
  /// at `offset`. Each element uses its own counter, so any subset of a
  /// tensor can be regenerated independently (dropout backward needs this).
  static float uniform(uint64_t seed, uint64_t offset, uint64_t index) {
    uint32_t w = block(seed, offset + index)[0];
    return static_cast<float>(w >> 8) * (1.0f / 16777216.0f);
  }

  /// Standard normal for element `index` (Box-Muller on two words).
  static float normal(uint64_t seed, uint64_t offset, uint64_t index) {
    auto w = block(seed, offset + index);
    float u1 = (static_cast<float>(w[0] >> 8) + 1.0f) * (1.0f / 16777217.0f);
    float u2 = static_cast<float>(w[1] >> 8) * (1.0f / 16777216.0f);
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
  }
};

}  // namespace mstep
