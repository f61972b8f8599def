// Host kernels for the f32, bf16 and f16 reductions sum, mean, max, min,
// argmax, logsumexp and var (lib/backends/ref/RefReduction.cpp gives the
// semantics: f64 accumulation, NaN wins max and min, first maximum wins
// argmax), and the i64 sum. bf16 and f16 elements are read as f32 (exact)
// and results are rounded f64 -> f32 -> the dtype, as the ref kernel
// rounds them.
//
// 1. The input is viewed as [outer, reduced, inner] after dropping size-1
//    dims and merging neighbours of the same kind, `reduced` being the
//    last block of reduced dims. Reduced dims that are not one contiguous
//    block (say dims 0 and 2 of three) leave further reduced dims in
//    front of it: each output then reduces its [reduced, inner] slab at
//    every offset those dims give (row-major, as the ref kernel reads
//    them) and merges the states, and the kept dims among them give each
//    output block's start.
// 2. A *unit* is 16 outputs' worth of lanes: with inner == 1, one output
//    whose row is read 16 elements at a time (row mode); otherwise 16
//    neighbouring outputs whose columns are read one row at a time
//    (column mode). Either way a reduction is a lane-wise state update
//    (a *policy*), and row mode merges the 16 lanes at the end.
// 3. Many units: the threads split the units. Few large units: the
//    threads split each unit's positions and merge their states in thread
//    order.
// Two-pass reductions (logsumexp: max, then sum of exp; var: mean, then
// squared deviations) run both passes per unit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "lib/backends/cpu/HostKernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

using simd::tail_mask;

// ---- Layout -----------------------------------------------------------------

/// The input as [outer, reduced, inner], row-major; with reduced dims in
/// front of the `reduced` block, [outer, reduced, inner] slabs at input
/// offsets given by the tables.
struct ReductionLayout {
  int64_t outer = 1, reduced = 1, inner = 1;
  /// Where output block o (its `inner` outputs) starts in the input, for
  /// o in [0, outer); empty when that is o * reduced * inner.
  std::vector<int64_t> outer_offsets;
  /// The offsets of the reduced dims in front of the `reduced` block, in
  /// row-major order; {0} when there are none.
  std::vector<int64_t> extra_offsets = {0};

  int64_t base(int64_t o) const {
    return outer_offsets.empty() ? o * reduced * inner : outer_offsets[o];
  }
  /// How many elements each output reduces.
  int64_t count() const { return reduced * static_cast<int64_t>(extra_offsets.size()); }
};

/// The offsets of every index over `dims` ({extent, stride} each, outer
/// first), in row-major order.
std::vector<int64_t> offsets_over(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  std::vector<int64_t> out = {0};
  for (const auto& [extent, stride] : dims) {
    std::vector<int64_t> next;
    next.reserve(out.size() * extent);
    for (int64_t base : out)
      for (int64_t i = 0; i < extent; ++i) next.push_back(base + i * stride);
    out = std::move(next);
  }
  return out;
}

/// The most entries layout_of puts in a layout's offset tables.
inline constexpr int64_t kMaxOffsets = int64_t{1} << 20;

std::optional<ReductionLayout> layout_of(const Shape& shape, const IntList& dims) {
  struct Group {
    bool reduced;
    int64_t extent;
  };
  absl::InlinedVector<Group, 6> groups;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue; // belongs to either side
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!groups.empty() && groups.back().reduced == reduced)
      groups.back().extent *= shape[d];
    else
      groups.push_back({reduced, shape[d]});
  }
  // The last reduced group and the kept one after it are [reduced,
  // inner]; the groups in front are the prefix.
  size_t last = groups.size();
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].reduced) last = g;
  ReductionLayout l;
  if (last == groups.size()) { // nothing reduced: one kept group at most
    for (const Group& g : groups) l.outer *= g.extent;
    return l;
  }
  l.reduced = groups[last].extent;
  if (last + 1 < groups.size()) l.inner = groups[last + 1].extent;
  bool prefix_reduces = false;
  for (size_t g = 0; g < last; ++g) prefix_reduces |= groups[g].reduced;
  if (!prefix_reduces) { // [kept, reduced, kept], with extent-1 padding
    if (last == 1) l.outer = groups[0].extent;
    return l;
  }
  std::vector<std::pair<int64_t, int64_t>> kept, reduced;
  int64_t stride = l.reduced * l.inner;
  int64_t kept_count = 1, reduced_count = 1;
  for (size_t g = last; g-- > 0;) {
    auto& side = groups[g].reduced ? reduced : kept;
    side.insert(side.begin(), {groups[g].extent, stride});
    (groups[g].reduced ? reduced_count : kept_count) *= groups[g].extent;
    stride *= groups[g].extent;
  }
  // Offset tables beyond a few MiB: keep the ref kernel.
  if (kept_count + reduced_count > kMaxOffsets) return std::nullopt;
  l.outer_offsets = offsets_over(kept);
  l.outer = static_cast<int64_t>(l.outer_offsets.size());
  l.extra_offsets = offsets_over(reduced);
  return l;
}

// ---- Lane states and their permutations ------------------------------------

/// Lane i of the result is lane i ^ k of `v` (k in 1, 2, 4 for f64
/// vectors; 1, 2, 4, 8 for 16-lane ones).
inline __m512d swap_pd(__m512d v, int k) {
  const __m512i idx =
      _mm512_xor_si512(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(k));
  return _mm512_permutexvar_pd(idx, v);
}
inline __m512i swap_idx16(int k) {
  return _mm512_xor_si512(simd::iota_i32(), _mm512_set1_epi32(k));
}

/// f64 sums of lanes 0-7 (lo) and 8-15 (hi).
struct SumLanes {
  __m512d lo, hi;
  SumLanes swapped(int k) const {
    if (k == 8) return {hi, lo};
    return {swap_pd(lo, k), swap_pd(hi, k)};
  }
};

/// The running maximum (or minimum) of each lane.
struct ValueLanes {
  __m512 v;
  ValueLanes swapped(int k) const { return {_mm512_permutexvar_ps(swap_idx16(k), v)}; }
};

/// Each lane's best value and the position where it was first seen.
struct ArgLanes {
  __m512 v;
  __m512i index;
  ArgLanes swapped(int k) const {
    const __m512i idx = swap_idx16(k);
    return {_mm512_permutexvar_ps(idx, v), _mm512_permutexvar_epi32(idx, index)};
  }
};

inline SumLanes add_f64(SumLanes s, __m512 x) {
  return {_mm512_add_pd(s.lo, simd::low_half_f64(x)), _mm512_add_pd(s.hi, simd::high_half_f64(x))};
}

// ---- Policies: lane-wise updates --------------------------------------------
// Each has State, init(), add(state, x, valid, position) for 16 elements
// (x is 0 outside `valid`; position is each lane's index along the reduced
// extent) and merge(a, b), lane-wise and symmetric.

/// Sum in f64 (sum, mean, var's first pass).
struct SumOf {
  using State = SumLanes;
  State init() const { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  void add(State& s, __m512 x, __mmask16, __m512i) const { s = add_f64(s, x); }
  State merge(State a, State b) const {
    return {_mm512_add_pd(a.lo, b.lo), _mm512_add_pd(a.hi, b.hi)};
  }
};

/// Sum of exp(x - shift) in f64 (logsumexp's second pass), all in f64
/// as the ref kernel computes it: an f32 exp would cost the result about
/// 1e-7 * |shift| of absolute error, a large relative one near 0.
struct SumExpOf : SumOf {
  __m512d shift_lo, shift_hi;
  void add(State& s, __m512 x, __mmask16 valid, __m512i) const {
    const __m512d elo = simd::exp(
        _mm512_maskz_sub_pd(static_cast<__mmask8>(valid), simd::low_half_f64(x), shift_lo));
    const __m512d ehi = simd::exp(
        _mm512_maskz_sub_pd(static_cast<__mmask8>(valid >> 8), simd::high_half_f64(x), shift_hi));
    s.lo = _mm512_add_pd(s.lo, _mm512_maskz_mov_pd(static_cast<__mmask8>(valid), elo));
    s.hi = _mm512_add_pd(s.hi, _mm512_maskz_mov_pd(static_cast<__mmask8>(valid >> 8), ehi));
  }
};

/// Sum of (x - mean)^2 in f64 (var's second pass).
struct SquaredDeviationOf : SumOf {
  __m512d mean_lo, mean_hi;
  void add(State& s, __m512 x, __mmask16 valid, __m512i) const {
    const __m512d dlo =
        _mm512_maskz_sub_pd(static_cast<__mmask8>(valid), simd::low_half_f64(x), mean_lo);
    const __m512d dhi =
        _mm512_maskz_sub_pd(static_cast<__mmask8>(valid >> 8), simd::high_half_f64(x), mean_hi);
    s.lo = _mm512_add_pd(s.lo, _mm512_mul_pd(dlo, dlo));
    s.hi = _mm512_add_pd(s.hi, _mm512_mul_pd(dhi, dhi));
  }
};

/// Maximum (kMax) or minimum; a NaN wins.
template <bool kMax> struct ExtremumOf {
  using State = ValueLanes;
  State init() const {
    return {_mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity()
                                : std::numeric_limits<float>::infinity())};
  }
  /// Lanes where b should replace a.
  static __mmask16 better(__m512 a, __m512 b) {
    const __mmask16 b_nan = _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
    const __mmask16 a_nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    const __mmask16 wins = _mm512_cmp_ps_mask(b, a, kMax ? _CMP_GT_OQ : _CMP_LT_OQ);
    return b_nan | (wins & ~a_nan);
  }
  void add(State& s, __m512 x, __mmask16 valid, __m512i) const {
    s.v = _mm512_mask_mov_ps(s.v, valid & better(s.v, x), x);
  }
  State merge(State a, State b) const { return {_mm512_mask_mov_ps(a.v, better(a.v, b.v), b.v)}; }
};

/// Index of the maximum: the first one, or the first NaN.
struct ArgmaxOf {
  using State = ArgLanes;
  State init() const {
    // -inf at an index past every position: any element replaces it.
    return {_mm512_set1_ps(-std::numeric_limits<float>::infinity()),
            _mm512_set1_epi32(std::numeric_limits<int32_t>::max())};
  }
  /// Lanes where b is the better candidate: a NaN beats a number, a
  /// larger value a smaller one, and between equals the smaller index.
  static __mmask16 better(const State& a, const State& b) {
    const __mmask16 b_nan = _mm512_cmp_ps_mask(b.v, b.v, _CMP_UNORD_Q);
    const __mmask16 a_nan = _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q);
    const __mmask16 earlier = _mm512_cmplt_epi32_mask(b.index, a.index);
    const __mmask16 larger = _mm512_cmp_ps_mask(b.v, a.v, _CMP_GT_OQ);
    const __mmask16 equal = _mm512_cmp_ps_mask(b.v, a.v, _CMP_EQ_OQ);
    return (b_nan & (~a_nan | earlier)) | (~b_nan & ~a_nan & (larger | (equal & earlier)));
  }
  void add(State& s, __m512 x, __mmask16 valid, __m512i position) const {
    const __mmask16 take = valid & better(s, State{x, position});
    s.v = _mm512_mask_mov_ps(s.v, take, x);
    s.index = _mm512_mask_mov_epi32(s.index, take, position);
  }
  State merge(State a, State b) const {
    const __mmask16 take = better(a, b);
    return {_mm512_mask_mov_ps(a.v, take, b.v), _mm512_mask_mov_epi32(a.index, take, b.index)};
  }
};

/// Every lane becomes the merge of all 16 (a butterfly of merges).
template <typename P> typename P::State merge_lanes(const P& p, typename P::State s) {
  for (int k : {8, 4, 2, 1}) s = p.merge(s, s.swapped(k));
  return s;
}

// ---- Units ------------------------------------------------------------------

/// Row mode: one output, its `length` elements contiguous from `base`,
/// read 16 at a time; position q is elements [16q, 16q + 16).
template <typename T> struct RowUnit {
  static constexpr bool kRow = true;
  const T* base;
  int64_t length;

  int64_t positions() const { return (length + simd::kLanes - 1) / simd::kLanes; }
  __mmask16 mask(int64_t q) const { return tail_mask(length - q * simd::kLanes); }
  __m512 load(int64_t q, __mmask16 m) const { return simd::load(base + q * simd::kLanes, m); }
  __m512i position(int64_t q) const {
    return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(q * simd::kLanes)),
                            simd::iota_i32());
  }
};

/// Column mode: the outputs of the `valid` lanes, element r of each at
/// base + r * stride + lane; position q is element q.
template <typename T> struct ColumnUnit {
  static constexpr bool kRow = false;
  const T* base;
  int64_t rows, stride;
  __mmask16 valid;

  int64_t positions() const { return rows; }
  __mmask16 mask(int64_t) const { return valid; }
  __m512 load(int64_t q, __mmask16 m) const { return simd::load(base + q * stride, m); }
  __m512i position(int64_t q) const { return _mm512_set1_epi32(static_cast<int32_t>(q)); }
};

/// The state of positions [begin, end) of `u`, four states in flight to
/// hide the latency of the dependent adds.
template <typename P, typename U>
typename P::State accumulate(const P& p, const U& u, int64_t begin, int64_t end) {
  typename P::State s0 = p.init(), s1 = p.init(), s2 = p.init(), s3 = p.init();
  int64_t q = begin;
  auto add = [&](typename P::State& s, int64_t at) {
    const __mmask16 m = u.mask(at);
    p.add(s, u.load(at, m), m, u.position(at));
  };
  for (; q + 4 <= end; q += 4) {
    add(s0, q);
    add(s1, q + 1);
    add(s2, q + 2);
    add(s3, q + 3);
  }
  for (; q < end; ++q) add(s0, q);
  return p.merge(p.merge(s0, s1), p.merge(s2, s3));
}

/// The state of all of `u`, the threads splitting its positions when
/// `split`; in row mode with every lane holding the whole row's result.
template <typename P, typename U>
typename P::State reduce_unit(const P& p, const U& u, bool split) {
  using State = typename P::State;
  State s;
  if (!split) {
    s = accumulate(p, u, 0, u.positions());
  } else {
    std::vector<State> partial(simd::max_slots(), p.init());
    simd::parallel_ranges(u.positions(), simd::kParallelWork,
                          [&](int slot, int64_t begin, int64_t end) {
                            partial[slot] = accumulate(p, u, begin, end);
                          });
    s = partial[0];
    for (size_t t = 1; t < partial.size(); ++t) s = p.merge(s, partial[t]);
  }
  if constexpr (U::kRow) s = merge_lanes(p, s);
  return s;
}

// ---- Ops: what each output is -----------------------------------------------
// unit(reduce, out, store) computes the lanes of one unit, `reduce(policy)`
// giving a policy's final state, and stores the lanes `store` at `out`.

inline __m512d div_pd(__m512d v, double d) { return _mm512_div_pd(v, _mm512_set1_pd(d)); }

// `Out` is the element type of the result: the input's (float, BFloat16
// or Float16), or int64_t for argmax (kIndexResult).

struct SumOp {
  static constexpr bool kIndexResult = false;
  template <typename Reduce, typename Out>
  void unit(const Reduce& reduce, int64_t, Out* out, __mmask16 store) const {
    const SumLanes s = reduce(SumOf{});
    simd::store(out, simd::narrow(s.lo, s.hi), store);
  }
};

struct MeanOp {
  static constexpr bool kIndexResult = false;
  template <typename Reduce, typename Out>
  void unit(const Reduce& reduce, int64_t n, Out* out, __mmask16 store) const {
    const SumLanes s = reduce(SumOf{});
    const double count = static_cast<double>(n);
    simd::store(out, simd::narrow(div_pd(s.lo, count), div_pd(s.hi, count)), store);
  }
};

template <bool kMax> struct ExtremumOp {
  static constexpr bool kIndexResult = false;
  template <typename Reduce, typename Out>
  void unit(const Reduce& reduce, int64_t, Out* out, __mmask16 store) const {
    simd::store(out, reduce(ExtremumOf<kMax>{}).v, store);
  }
};

struct ArgmaxOp {
  static constexpr bool kIndexResult = true;
  template <typename Reduce>
  void unit(const Reduce& reduce, int64_t, int64_t* out, __mmask16 store) const {
    const ArgLanes s = reduce(ArgmaxOf{});
    const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(s.index));
    const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(s.index, 1));
    _mm512_mask_storeu_epi64(out, static_cast<__mmask8>(store), lo);
    _mm512_mask_storeu_epi64(out + 8, static_cast<__mmask8>(store >> 8), hi);
  }
};

struct LogSumExpOp {
  static constexpr bool kIndexResult = false;
  template <typename Reduce, typename Out>
  void unit(const Reduce& reduce, int64_t, Out* out, __mmask16 store) const {
    // log(sum(exp(x - m))) + m with m the maximum, or 0 when m is
    // infinite (RefReduction.cpp). A NaN max makes every term NaN, as a
    // NaN element does in the ref kernel.
    const __m512 m = reduce(ExtremumOf<true>{}).v;
    const __mmask16 infinite = _mm512_fpclass_ps_mask(m, 0x08 | 0x10);
    const __m512 shift = _mm512_maskz_mov_ps(static_cast<__mmask16>(~infinite), m);
    SumExpOf sum_exp;
    sum_exp.shift_lo = simd::low_half_f64(shift);
    sum_exp.shift_hi = simd::high_half_f64(shift);
    const SumLanes s = reduce(sum_exp);
    alignas(64) double sums[16];
    alignas(64) float shifts[16];
    _mm512_store_pd(sums, s.lo);
    _mm512_store_pd(sums + 8, s.hi);
    _mm512_store_ps(shifts, shift);
    for (int lane = 0; lane < 16; ++lane)
      if (store >> lane & 1)
        out[lane] = simd::from_f32<Out>(
            static_cast<float>(std::log(sums[lane]) + static_cast<double>(shifts[lane])));
  }
};

struct VarOp {
  static constexpr bool kIndexResult = false;
  int64_t correction;
  template <typename Reduce, typename Out>
  void unit(const Reduce& reduce, int64_t n, Out* out, __mmask16 store) const {
    // Two passes in f64, as the ref kernel: the mean, then the squared
    // deviations over max(0, n - correction).
    const SumLanes s = reduce(SumOf{});
    SquaredDeviationOf deviation;
    deviation.mean_lo = div_pd(s.lo, static_cast<double>(n));
    deviation.mean_hi = div_pd(s.hi, static_cast<double>(n));
    const SumLanes ssd = reduce(deviation);
    const double divisor = static_cast<double>(std::max<int64_t>(0, n - correction));
    simd::store(out, simd::narrow(div_pd(ssd.lo, divisor), div_pd(ssd.hi, divisor)), store);
  }
};

// ---- The kernel --------------------------------------------------------------

/// Op over elements of type T (float, BFloat16 or Float16).
template <typename Op, typename T> class ReductionKernel final : public CpuKernel {
public:
  using Out = std::conditional_t<Op::kIndexResult, int64_t, T>;

  ReductionKernel(Op op, ReductionLayout layout, std::string name)
      : op_(op), layout_(std::move(layout)), name_(std::move(name)) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const T*>(operands[0]);
    auto* y = static_cast<Out*>(results[0]);
    const int64_t outer = layout_.outer, n = layout_.reduced, inner = layout_.inner;
    const std::vector<int64_t>& extra = layout_.extra_offsets;
    const int64_t count = layout_.count();
    // A policy's state over every slab of one unit (at most one slab
    // unless reduced dims are split).
    auto over_slabs = [&](const auto& p, auto make_unit, bool split) {
      auto s = reduce_unit(p, make_unit(extra[0]), split);
      for (size_t e = 1; e < extra.size(); ++e)
        s = p.merge(s, reduce_unit(p, make_unit(extra[e]), split));
      return s;
    };
    if (inner == 1) {
      for_units(outer, count, [&](int64_t o, bool split) {
        const T* base = x + layout_.base(o);
        auto unit = [&](int64_t e) { return RowUnit<T>{base + e, n}; };
        op_.unit([&](const auto& p) { return over_slabs(p, unit, split); }, count, y + o, 1);
      });
    } else {
      const int64_t blocks = (inner + simd::kLanes - 1) / simd::kLanes;
      for_units(outer * blocks, count * std::min(inner, simd::kLanes), [&](int64_t u, bool split) {
        const int64_t o = u / blocks, column = u % blocks * simd::kLanes;
        const __mmask16 valid = tail_mask(inner - column);
        const T* base = x + layout_.base(o) + column;
        auto unit = [&](int64_t e) { return ColumnUnit<T>{base + e, n, inner, valid}; };
        op_.unit([&](const auto& p) { return over_slabs(p, unit, split); }, count,
                 y + o * inner + column, valid);
      });
    }
  }
  absl::string_view name() const override { return name_; }

private:
  /// Runs `body(unit, split)` for units [0, units), each reading about
  /// `unit_work` elements: the threads share the units when there are
  /// many, else share each unit's positions (split) when it is large.
  template <typename Body> void for_units(int64_t units, int64_t unit_work, Body&& body) const {
    const int threads = simd::max_slots();
    const bool parallel = units * unit_work >= simd::kParallelWork && threads > 1;
    if (parallel && units >= 4 * threads) {
#pragma omp parallel for schedule(static)
      for (int64_t u = 0; u < units; ++u) body(u, false);
      return;
    }
    for (int64_t u = 0; u < units; ++u) body(u, parallel && unit_work >= simd::kParallelWork);
  }

  Op op_;
  ReductionLayout layout_;
  std::string name_;
};

/// i64 sum (the count of kept targets in a loss's backward, say): exact
/// in any order, so plain loops that the compiler vectorizes. Adds wrap
/// around (unsigned arithmetic) where the ref kernel's i64 sum would
/// overflow.
class IntegerSumKernel final : public CpuKernel {
public:
  explicit IntegerSumKernel(ReductionLayout layout) : layout_(std::move(layout)) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const uint64_t*>(operands[0]);
    auto* y = static_cast<uint64_t*>(results[0]);
    const int64_t outer = layout_.outer, n = layout_.reduced, inner = layout_.inner;
    for (int64_t o = 0; o < outer; ++o) {
      uint64_t* out = y + o * inner;
      std::fill(out, out + inner, uint64_t{0});
      for (int64_t e : layout_.extra_offsets)
        for (int64_t r = 0; r < n; ++r) {
          const uint64_t* row = x + layout_.base(o) + e + r * inner;
          for (int64_t i = 0; i < inner; ++i) out[i] += row[i];
        }
    }
  }
  absl::string_view name() const override { return "host.sum"; }

private:
  ReductionLayout layout_;
};

template <typename Op>
std::unique_ptr<CpuKernel> make(Op op, DType dtype, const ReductionLayout& layout,
                                absl::string_view what) {
  return simd::dispatch_f32_or_half(dtype, [&]<typename T>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<ReductionKernel<Op, T>>(op, layout, absl::StrCat("host.", what));
  });
}

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_reduction_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.operands.size() != 1 || node.results.size() != 1) return nullptr;
  const TensorType& in = request.graph.type_of(node.operands[0]);
  const TensorType& out = node.results[0];
  // Empty inputs (an error for max, min and argmax) keep the ref kernel.
  if (in.numel() == 0) return nullptr;
  std::optional<ReductionLayout> layout =
      layout_of(in.shape, attr_ints(node.attrs, AttrName::dims));
  if (!layout) return nullptr;
  // Positions count along one block of reduced dims only: argmax over
  // split dims (which the API does not make) keeps the ref kernel.
  if (node.op == OpKind::argmax && layout->extra_offsets.size() > 1) return nullptr;
  if (node.op == OpKind::sum && in.dtype == DType::i64 && out.dtype == DType::i64)
    return std::make_unique<IntegerSumKernel>(std::move(*layout));
  const DType out_dtype = node.op == OpKind::argmax ? DType::i64 : in.dtype;
  if (!simd::is_f32_or_half(in.dtype) || out.dtype != out_dtype) return nullptr;
  // Positions are i32 lanes.
  if (in.numel() > std::numeric_limits<int32_t>::max() - simd::kLanes) return nullptr;
  const absl::string_view what = op_name(node.op);
  switch (node.op) {
  case OpKind::sum:
    return make(SumOp{}, in.dtype, *layout, what);
  case OpKind::mean:
    return make(MeanOp{}, in.dtype, *layout, what);
  case OpKind::max:
    return make(ExtremumOp<true>{}, in.dtype, *layout, what);
  case OpKind::min:
    return make(ExtremumOp<false>{}, in.dtype, *layout, what);
  case OpKind::argmax:
    return make(ArgmaxOp{}, in.dtype, *layout, what);
  case OpKind::logsumexp:
    return make(LogSumExpOp{}, in.dtype, *layout, what);
  case OpKind::var:
    return make(VarOp{attr_int(node.attrs, AttrName::correction)}, in.dtype, *layout, what);
  default:
    return nullptr;
  }
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
