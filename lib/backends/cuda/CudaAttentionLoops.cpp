// The composed attention's loop nests: see CudaAttentionLoops.h. The
// rules are RefAttention.cpp's (steps 2-4) and RefAttentionGrad.cpp's
// (steps 2-4), whose comments they follow.
#include "lib/backends/cuda/CudaAttentionLoops.h"

#include <array>
#include <limits>
#include <optional>
#include <tuple>

#include "lib/backends/cuda/CudaLoopNest.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// ref's 1 / (1 - p) for a kept element (0 when p = 1: nothing is kept).
double keep_scale(const AttentionRows& rows) {
  return rows.dropout_p < 1 ? 1.0 / (1.0 - rows.dropout_p) : 0.0;
}

/// The buffers, as the kernel takes them (views made at the top level).
struct Buffers {
  std::optional<Flat> mask, lens;
  Value rng;
};

Buffers buffers_of(Nest& nest, const AttentionParams& params) {
  Buffers buffers;
  if (params.mask >= 0) buffers.mask = nest.flat(params.mask);
  if (params.valid_seq_len >= 0) buffers.lens = nest.flat(params.valid_seq_len);
  if (params.rng >= 0) buffers.rng = nest.param(params.rng);
  return buffers;
}

/// One score row r = (batch-head b, query row i): where it starts in the
/// [..., L, S] matrix and which keys valid_seq_len leaves it.
struct Row {
  Value base;           ///< r * S
  Value i;              ///< the query row
  Value valid;          ///< i1: the row is inside valid_seq_len (null: no lengths)
  Value key_lo, key_hi; ///< the keys valid_seq_len keeps (null: no lengths)
};

Row row_of(Nest& nest, const AttentionRows& rows, const Buffers& buffers, Value r) {
  ImplicitLocOpBuilder& b = nest.b;
  Row row;
  row.base = nest.affine(r, rows.S, Value());
  row.i = nest.rem(r, rows.L);
  if (!buffers.lens) return row;
  // RefAttention.cpp's valid_range: the length clamped to [0, n]; the
  // last n - len positions are padding (right) or the first (left).
  Value len = nest.load(*buffers.lens, nest.div(nest.div(r, rows.L), rows.rows_per_b0));
  len = b.create<arith::IndexCastOp>(b.getIndexType(), len);
  auto range = [&](int64_t n) -> std::pair<Value, Value> {
    Value clamped =
        b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(len, nest.index(0)), nest.index(n));
    if (rows.left_padding) return {b.create<arith::SubIOp>(nest.index(n), clamped), nest.index(n)};
    return {nest.index(0), clamped};
  };
  auto [row_lo, row_hi] = range(rows.L);
  row.valid =
      b.create<arith::AndIOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, row.i, row_lo),
                              b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, row.i, row_hi));
  std::tie(row.key_lo, row.key_hi) = range(rows.S);
  return row;
}

/// Score j of `row` in f64, as ref's step 2: -inf where the key is
/// excluded (the row outside valid_seq_len, the key outside it, j > i
/// under the causal rule, a false boolean mask), else scale * q·k + the
/// additive mask.
Value score(Nest& nest, const AttentionRows& rows, const Buffers& buffers, const Flat& scores,
            const Row& row, Value j) {
  ImplicitLocOpBuilder& b = nest.b;
  Value flat = b.create<arith::AddIOp>(row.base, j);
  Value excluded = nest.integer(b.getI1Type(), 0);
  auto exclude_if = [&](Value condition) {
    excluded = b.create<arith::OrIOp>(excluded, condition);
  };
  if (row.valid) {
    exclude_if(b.create<arith::XOrIOp>(row.valid, nest.integer(b.getI1Type(), 1)));
    exclude_if(b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, j, row.key_lo));
    exclude_if(b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, j, row.key_hi));
  }
  if (rows.causal) exclude_if(b.create<arith::CmpIOp>(arith::CmpIPredicate::sgt, j, row.i));
  Value s = b.create<arith::MulFOp>(nest.f64(rows.scale), nest.ext(nest.load(scores, flat)));
  if (buffers.mask) {
    // The mask element broadcast onto (b, i, j).
    Value at = nest.strided(flat, rows.scores_shape, rows.mask_strides, 0);
    Value m = nest.load(*buffers.mask, at);
    if (rows.boolean_mask)
      exclude_if(b.create<arith::XOrIOp>(m, nest.integer(b.getI1Type(), 1)));
    else
      s = b.create<arith::AddFOp>(s, nest.ext(m));
  }
  return b.create<arith::SelectOp>(excluded, nest.f64(kNegInf), s);
}

/// dropout's keep decision for element `flat` of [..., L, S]:
/// Philox::uniform(seed, state offset + rng_offset, flat) >= p.
Value dropout_keep(Nest& nest, const AttentionRows& rows, Value rng, Value flat) {
  ImplicitLocOpBuilder& b = nest.b;
  Value seed = b.create<memref::LoadOp>(rng, ValueRange{nest.index(0)});
  Value start = b.create<arith::AddIOp>(b.create<memref::LoadOp>(rng, ValueRange{nest.index(1)}),
                                        nest.integer(b.getI64Type(), rows.rng_offset));
  Value counter =
      b.create<arith::AddIOp>(start, b.create<arith::IndexCastUIOp>(b.getI64Type(), flat));
  return b.create<arith::CmpFOp>(arith::CmpFPredicate::OGE,
                                nest.ext(philox_uniform(nest, seed, counter)),
                                nest.f64(rows.dropout_p));
}

/// dropout's factor for element `flat`: keep / (1 - p).
Value dropout_factor(Nest& nest, const AttentionRows& rows, Value rng, Value flat) {
  return nest.b.create<arith::SelectOp>(dropout_keep(nest, rows, rng, flat),
                                        nest.f64(keep_scale(rows)), nest.f64(0));
}

} // namespace

void build_attention_probs(func::FuncOp func, const AttentionRows& rows,
                           const AttentionParams& params, bool dropout) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  const Buffers buffers = buffers_of(nest, params);
  const Flat scores = nest.flat(params.scores);
  std::optional<Flat> saved, returned, keep_mask;
  if (params.saved >= 0) saved = nest.flat(params.saved);
  if (params.returned >= 0) returned = nest.flat(params.returned);
  if (params.dropout_mask >= 0) keep_mask = nest.flat(params.dropout_mask);
  nest.parallel(rows.rows(), [&](Value r) {
    const Row row = row_of(nest, rows, buffers, r);
    auto s = [&](Value j) { return score(nest, rows, buffers, scores, row, j); };
    // ref's max: the first NaN sticks; -inf keys never raise it.
    Value m =
        nest.loop(rows.S, {nest.f64(kNegInf)}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
          Value v = s(j), current = acc[0];
          Value is_nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, v, v);
          Value take = b.create<arith::OrIOp>(
              b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, v, current), is_nan);
          Value m_nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, current, current);
          return {b.create<arith::SelectOp>(m_nan, current,
                                            b.create<arith::SelectOp>(take, v, current))};
        })[0];
    // A row with every key excluded (max -inf) is all zeros; m != -inf
    // holds for NaN as in C++, so a NaN row stays NaN.
    Value live = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNE, m, nest.f64(kNegInf));
    Value shift = b.create<arith::SelectOp>(live, m, nest.f64(0));
    auto e = [&](Value j) { return b.create<math::ExpOp>(b.create<arith::SubFOp>(s(j), shift)); };
    Value sum =
        nest.loop(rows.S, {nest.f64(0)}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
          return {b.create<arith::AddFOp>(acc[0], e(j))};
        })[0];
    nest.loop(rows.S, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      Value p = b.create<arith::SelectOp>(live, b.create<arith::DivFOp>(e(j), sum), nest.f64(0));
      Value flat = b.create<arith::AddIOp>(row.base, j);
      if (saved) nest.store(nest.round_to(p, saved->element()), *saved, flat);
      Value keep = nest.integer(b.getI1Type(), 1);
      if (dropout && buffers.rng) {
        keep = dropout_keep(nest, rows, buffers.rng, flat);
        p = b.create<arith::SelectOp>(keep, b.create<arith::MulFOp>(p, nest.f64(keep_scale(rows))),
                                      nest.f64(0));
      }
      if (keep_mask) nest.store(keep, *keep_mask, flat);
      Value stored = nest.round_to(p, scores.element());
      nest.store(stored, scores, flat);
      if (returned) nest.store(stored, *returned, flat);
      return {};
    });
  });
  b.create<func::ReturnOp>();
}

void build_attention_probs_grad(func::FuncOp func, const AttentionRows& rows,
                                const AttentionParams& params) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  const Buffers buffers = buffers_of(nest, params);
  const Flat probs = nest.flat(params.probs), dprobs = nest.flat(params.dprobs);
  std::optional<Flat> ds_out;
  if (params.ds >= 0) ds_out = nest.flat(params.ds);
  nest.parallel(rows.rows(), [&](Value r) {
    Value base = nest.affine(r, rows.S, Value());
    // (P, dropout's factor, dP) of key j; dP is 0 for a key with P = 0 or
    // dropped, as ref skips them (so a NaN there does not spread).
    auto at = [&](Value j) -> std::array<Value, 3> {
      Value flat = b.create<arith::AddIOp>(base, j);
      Value p = nest.ext(nest.load(probs, flat));
      Value factor = buffers.rng ? dropout_factor(nest, rows, buffers.rng, flat) : nest.f64(1);
      Value skip = b.create<arith::OrIOp>(
          b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, p, nest.f64(0)),
          b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, factor, nest.f64(0)));
      Value dp = b.create<arith::SelectOp>(
          skip, nest.f64(0), b.create<arith::MulFOp>(nest.ext(nest.load(dprobs, flat)), factor));
      return {p, factor, dp};
    };
    // d = sum_k P[k] dP[k] (ref's step 3).
    Value d = nest.loop(rows.S, {nest.f64(0)}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
      auto [p, factor, dp] = at(j);
      return {b.create<arith::AddFOp>(acc[0], b.create<arith::MulFOp>(p, dp))};
    })[0];
    nest.loop(rows.S, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      auto [p, factor, dp] = at(j);
      Value flat = b.create<arith::AddIOp>(base, j);
      Value zero = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, p, nest.f64(0));
      Value ds = b.create<arith::SelectOp>(
          zero, nest.f64(0), b.create<arith::MulFOp>(p, b.create<arith::SubFOp>(dp, d)));
      if (ds_out) nest.store(ds, *ds_out, flat);
      nest.store(nest.round_to(b.create<arith::MulFOp>(nest.f64(rows.scale), ds), dprobs.element()),
                 dprobs, flat);
      nest.store(nest.round_to(b.create<arith::MulFOp>(p, factor), probs.element()), probs, flat);
      return {};
    });
  });
  b.create<func::ReturnOp>();
}

void build_attention_mask_grad(func::FuncOp func, const AttentionRows& rows,
                               const AttentionParams& params) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  const Flat ds = nest.flat(params.ds), out = nest.flat(params.grad_mask);
  const std::vector<int64_t>& shape = rows.scores_shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  // The scores' row-major strides; the dims the mask broadcasts over
  // (stride 0 in mask_strides) are summed, the others fixed by the lane.
  std::vector<int64_t> strides(rank, 1), summed_dims, summed_strides;
  for (int64_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  int64_t terms = 1, elements = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (rows.mask_strides[d] == 0) {
      summed_dims.push_back(shape[d]);
      summed_strides.push_back(strides[d]);
      terms *= shape[d];
    } else {
      elements *= shape[d];
    }
  }
  nest.parallel(elements, [&](Value m) {
    // The lane's fixed coordinates: mask element m's, placed at the
    // scores' strides.
    Value base = nest.index(0);
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t stride = rows.mask_strides[d];
      if (stride == 0) continue;
      base = nest.affine(nest.rem(nest.div(m, stride), shape[d]), strides[d], base);
    }
    Value sum = nest.loop(terms, {nest.f64(0)}, [&](Value t, ValueRange acc) -> SmallVector<Value> {
      Value flat = nest.strided(t, summed_dims, summed_strides, 0);
      return {b.create<arith::AddFOp>(
          acc[0], nest.load(ds, b.create<arith::AddIOp>(base, flat)))};
    })[0];
    nest.store(nest.round_to(sum, out.element()), out, m);
  });
  b.create<func::ReturnOp>();
}

void build_lengths_as_i32(func::FuncOp func) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  const Flat in = nest.flat(0), out = nest.flat(1);
  nest.parallel(numel(nest.param(0)), [&](Value i) {
    Value len = nest.load(in, i);
    Value zero = b.create<arith::ConstantIntOp>(0, 64);
    Value most = b.create<arith::ConstantIntOp>(std::numeric_limits<int32_t>::max(), 64);
    Value clamped = b.create<arith::MinSIOp>(b.create<arith::MaxSIOp>(len, zero), most);
    nest.store(b.create<arith::TruncIOp>(b.getI32Type(), clamped), out, i);
  });
  b.create<func::ReturnOp>();
}

} // namespace mstep::cuda
