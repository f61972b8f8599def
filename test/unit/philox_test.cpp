// Known-answer test for mstep's Philox4x32-10 (include/mstep/core/Philox.h)
// against the published Random123 vectors (tests/kat_vectors of
// github.com/DEShawResearch/random123: "philox4x32 10 ctr[4] key[2] out[4]"),
// so rand, randn and dropout draw from the generator cuRAND and JAX use.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "mstep/core/Philox.h"

namespace mstep {
namespace {

struct KnownAnswer {
  std::array<uint32_t, 4> counter;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> output;
};

// Random123's kat_vectors, philox4x32 with 10 rounds.
constexpr KnownAnswer kPhilox4x32_10[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const KnownAnswer& kat : kPhilox4x32_10) {
    EXPECT_EQ(Philox::philox4x32_10(kat.counter, kat.key), kat.output)
        << "counter " << std::hex << kat.counter[0] << " key " << kat.key[0];
  }
}

TEST(Philox, BlockPutsTheCounterInTheLowWordsAndTheSeedInTheKey) {
  // block(seed, counter) is philox4x32_10({counter lo, counter hi, 0, 0},
  // {seed lo, seed hi}); the all-zero vector is block(0, 0).
  EXPECT_EQ(Philox::block(0, 0), kPhilox4x32_10[0].output);
  const uint64_t seed = 0x299f31d0a4093822ull, counter = 0x85a308d3243f6a88ull;
  EXPECT_EQ(Philox::block(seed, counter),
            Philox::philox4x32_10({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0}));
  EXPECT_NE(Philox::block(seed, counter), kPhilox4x32_10[2].output)
      << "the counter's high words are zero in block()";
}

TEST(Philox, UniformTakesTheTop24BitsOfWordZero) {
  // uniform(seed 0, offset 0, index 0) reads block(0, 0)[0] = 0x6627e8d5.
  EXPECT_EQ(Philox::uniform(0, 0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
  // index and offset address the same counter.
  EXPECT_EQ(Philox::uniform(7, 3, 4), Philox::uniform(7, 7, 0));
}

}  // namespace
}  // namespace mstep
