// The dropout mask as StableHLO: mstep's Philox4x32-10 stream
// (core/Philox.h) written out in 32- and 64-bit integer ops, so that an
// exported step drops exactly the elements mstep's backends drop.
// Library-internal. No MLIR headers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lib/compiler/stablehlo/StableHloText.h"

namespace mstep::stablehlo {

/// The first two words (ui32 [n]) of Philox4x32-10 for counters
/// state offset + offset + i, i < n, under the key `rng_state`'s seed
/// (Philox::block).
std::array<Value, 2> philox_words(FunctionText& f, const Value& rng_state, int64_t offset,
                                  int64_t n);

/// i1 mask of `shape`: element i is kept iff Philox::uniform(seed,
/// state offset + offset, i) >= p, where `rng_state` (i64[2]) holds
/// (seed, offset) as the dropout op reads it.
Value philox_keep_mask(FunctionText& f, const Value& rng_state, int64_t offset, double p,
                       const std::vector<int64_t>& shape);

}  // namespace mstep::stablehlo
