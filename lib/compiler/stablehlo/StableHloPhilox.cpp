// Philox4x32-10 in StableHLO (see core/Philox.h for the scalar form).
// Counters are one per element: offset + i in the low 64 bits of the
// 128-bit counter; the key is the seed. Products of 32-bit words are taken
// in ui64 and split into their high and low words; ui32 additions wrap.
#include "lib/compiler/stablehlo/StableHloPhilox.h"

#include <cmath>

namespace mstep::stablehlo {

namespace {

/// Element `i` (0-d) of a 1-d value.
Value element(FunctionText& f, const Value& v, int64_t i) {
  Value s = f.op("stablehlo.slice", {v}, {1}, v.elem,
                 "start_indices = array<i64: " + std::to_string(i) +
                     ">, limit_indices = array<i64: " + std::to_string(i + 1) +
                     ">, strides = array<i64: 1>");
  return f.reshape(s, {});
}

Value shift_right(FunctionText& f, const Value& v, int bits) {
  return f.same("stablehlo.shift_right_logical",
                {v, f.broadcast(f.constant_u64(bits, v.elem), v.shape)});
}

Value low_word(FunctionText& f, const Value& v) { return f.convert(v, "ui32"); }
Value high_word(FunctionText& f, const Value& v) { return f.convert(shift_right(f, v, 32), "ui32"); }

}  // namespace

std::array<Value, 2> philox_words(FunctionText& f, const Value& rng_state, int64_t offset,
                                  int64_t n) {
  const std::vector<int64_t> flat{n};
  const Value state = f.bitcast(rng_state, "ui64");
  const Value seed = element(f, state, 0);
  const Value base = f.same("stablehlo.add", {element(f, state, 1),
                                              f.constant_u64(static_cast<uint64_t>(offset), "ui64")});
  const Value counter =
      f.same("stablehlo.add", {f.iota(flat, 0, "ui64"), f.broadcast(base, flat)});
  Value k0 = low_word(f, seed), k1 = high_word(f, seed);
  Value c0 = low_word(f, counter), c1 = high_word(f, counter);
  Value c2 = f.broadcast(f.constant_u64(0, "ui32"), flat), c3 = c2;
  const Value m0 = f.broadcast(f.constant_u64(0xD2511F53u, "ui64"), flat);
  const Value m1 = f.broadcast(f.constant_u64(0xCD9E8D57u, "ui64"), flat);
  const Value w0 = f.constant_u64(0x9E3779B9u, "ui32"), w1 = f.constant_u64(0xBB67AE85u, "ui32");
  for (int round = 0; round < 10; ++round) {
    const Value p0 = f.same("stablehlo.multiply", {f.convert(c0, "ui64"), m0});
    const Value p1 = f.same("stablehlo.multiply", {f.convert(c2, "ui64"), m1});
    const Value n0 = f.same("stablehlo.xor", {f.same("stablehlo.xor", {high_word(f, p1), c1}),
                                              f.broadcast(k0, flat)});
    const Value n2 = f.same("stablehlo.xor", {f.same("stablehlo.xor", {high_word(f, p0), c3}),
                                              f.broadcast(k1, flat)});
    c0 = n0;
    c1 = low_word(f, p1);
    c2 = n2;
    c3 = low_word(f, p0);
    k0 = f.same("stablehlo.add", {k0, w0});
    k1 = f.same("stablehlo.add", {k1, w1});
  }
  return {c0, c1};
}

Value philox_keep_mask(FunctionText& f, const Value& rng_state, int64_t offset, double p,
                       const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::vector<int64_t> flat{n};
  const Value c0 = philox_words(f, rng_state, offset, n)[0];
  // uniform = (w >> 8) / 2^24 >= p  <=>  (w >> 8) >= ceil(p * 2^24): exact
  // in integers, so no float rounding can flip an element.
  const auto threshold = static_cast<uint64_t>(std::ceil(p * 16777216.0));
  const Value bits = shift_right(f, c0, 8);
  const Value keep = f.compare(bits, f.broadcast(f.constant_u64(threshold, "ui32"), flat), "GE");
  return f.reshape(keep, shape);
}

}  // namespace mstep::stablehlo
