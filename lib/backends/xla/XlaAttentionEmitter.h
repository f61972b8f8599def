// The attention loops' emitter (XlaAttentionLoops.cpp has the forward and
// backward loop nests; XlaAttentionProbs.cpp the parts for nodes that
// return or read [L, S] probabilities, a dropout mask or a mask gradient):
// its tiles, element access and the vector helpers both files share.
// Library-internal (the compile half).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lib/backends/cpu/FlashAttentionParams.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"

namespace mstep::xla::attention {

using cpu::flash::AttentionParams;

constexpr int64_t kBr = 64;    // query rows per Q tile
constexpr int64_t kBc = 64;    // keys per K/V tile
constexpr int64_t kLanes = 16; // f32 lanes of one vector
static_assert(kBc % kLanes == 0);
/// Query rows whose products share each K/V vector loaded (a register
/// block: kRowGroup x kBc lanes of sums, as the cpu kernels' gemm_block
/// keeps 4 x 64); the rest of a tile's rows go one at a time.
constexpr int64_t kRowGroup = 4;
static_assert(kBr % kRowGroup == 0);
/// Vectors of a row that weighted_rows sums per pass over the keys.
constexpr int64_t kColumnChunks = 4;
/// Head dims above this stay callouts (the rows' vector code is unrolled).
constexpr int64_t kMostHeadDim = 1024;
/// Bytes of stack the function's tiles may take.
constexpr int64_t kMostStackBytes = 1 << 20;

/// f32 elements of the stack tiles a node's function takes (see
/// emit_forward, emit_backward), with the K tiles of a whole batch-head
/// transposed at once (`all_key_tiles`) or one K tile at a time.
inline int64_t stack_floats(const AttentionParams& P, bool all_key_tiles) {
  const int64_t key_tiles = all_key_tiles ? (P.S + kBc - 1) / kBc : 1;
  int64_t floats = kBr * (P.E + P.Ev + 2) + kBc * (2 + kRowGroup) + key_tiles * kBc * P.E;
  // (bf16's dq sums live in the step's scratch.)
  if (P.backward)
    floats += 2 * P.L + kBc * (2 + kRowGroup + P.E + 2 * P.Ev) +
              (P.dtype == DType::f32 ? 0 : kRowGroup * (P.E + P.Ev));
  return floats;
}

/// Whether the forward loop nest transposes a batch-head's K tiles once
/// (read by each of its Q tiles) rather than once per Q tile: when there
/// is more than one Q tile and the stack allows.
inline bool transpose_keys_once(const AttentionParams& P) {
  return P.L > kBr && stack_floats(P, true) * 4 <= kMostStackBytes;
}

class AttentionEmitter {
public:
  /// bf16 backward: `dq_sums`, one [L, E] f32 slice per batch-head, and
  /// `mask_gradient_sum`, where the mask gradient's f32 sums go (both in
  /// the step's scratch, XlaLoopScratch.h); null for f32 (dq's sums are
  /// dq itself, the mask gradient's the result).
  AttentionEmitter(LoopBuilder& lb, const AttentionParams& P, llvm::Value* dq_sums = nullptr,
                   llvm::Value* mask_gradient_sum = nullptr)
      : lb_(lb), b_(lb.b()), P_(P), f32_(lb.f32()), dq_sums_(dq_sums),
        mask_gradient_sum_(mask_gradient_sum) {}

  void emit_forward();
  void emit_backward();

private:
  // --- Element access (f32 or bf16 storage) ---------------------------

  llvm::Type* vec(unsigned width) { return llvm::FixedVectorType::get(f32_, width); }
  llvm::Type* storage(DType dt) { return storage_type(b_, dt); }

  /// `width` elements of `dt` at base[index], as f32 (a vector; a scalar
  /// when width is 0).
  llvm::Value* load(DType dt, llvm::Value* base, llvm::Value* index, unsigned width = 0) {
    llvm::Type* element = storage(dt);
    llvm::Type* type = width ? llvm::FixedVectorType::get(element, width) : element;
    llvm::Value* v = b_.CreateAlignedLoad(type, b_.CreateInBoundsGEP(element, base, index),
                                          llvm::Align(loop_float_bytes(dt)));
    return widen_to_f32(b_, dt, v);
  }

  /// Stores f32 `v` (scalar or vector) as `dt` at base[index]; bf16 rounds
  /// to nearest even and keeps a NaN quiet (mstep::BFloat16).
  void store(DType dt, llvm::Value* v, llvm::Value* base, llvm::Value* index) {
    b_.CreateAlignedStore(round_to_storage(b_, dt, v),
                          b_.CreateInBoundsGEP(storage(dt), base, index),
                          llvm::Align(loop_float_bytes(dt)));
  }

  /// Calls f(offset, width) for the vectors of a row of n elements: full
  /// ones of kLanes, then the rest.
  void chunks(int64_t n, const std::function<void(int64_t, unsigned)>& f) {
    for (int64_t off = 0; off < n; off += kLanes)
      f(off, static_cast<unsigned>(std::min(kLanes, n - off)));
  }

  llvm::Value* add(llvm::Value* a, int64_t c) { return b_.CreateAdd(a, lb_.i64(c)); }
  llvm::Value* mul(llvm::Value* a, int64_t c) { return b_.CreateMul(a, lb_.i64(c)); }
  llvm::Value* splat(llvm::Value* like, llvm::Value* scalar) {
    return lb_.splat_like(like, scalar);
  }
  llvm::Value* fma(llvm::Value* a, llvm::Value* x, llvm::Value* y) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, x, y});
  }
  /// The lanes of `v` summed in any order.
  llvm::Value* reduce_add(llvm::Value* v) {
    llvm::Value* sum = b_.CreateFAddReduce(llvm::ConstantFP::get(f32_, 0.0), v);
    llvm::FastMathFlags flags;
    flags.setAllowReassoc();
    llvm::cast<llvm::Instruction>(sum)->setFastMathFlags(flags);
    return sum;
  }
  /// e^x of f32 scalars or vectors: the cpu flash kernels' exp16
  /// (FlashAttentionTiles.h, Cephes' expf, about 2 ulp) step for step.
  /// Exactly 0 below -87.3 (an excluded -inf score gives p = 0), NaN stays
  /// NaN, x is clamped at 88.
  llvm::Value* exp(llvm::Value* x) {
    auto k = [&](float c) { return splat(x, lb_.f32(c)); };
    x = b_.CreateSelect(b_.CreateFCmpOGT(x, k(88.0f)), k(88.0f), x);
    // Adding 1.5 * 2^23 rounds x log2(e) to an integer n held in the low
    // mantissa bits.
    llvm::Value* shifted = b_.CreateFAdd(b_.CreateFMul(x, k(1.44269504088896341f)), k(12582912.0f));
    llvm::Value* n = b_.CreateFSub(shifted, k(12582912.0f));
    llvm::Value* r = b_.CreateFSub(x, b_.CreateFMul(n, k(0.693359375f)));
    r = b_.CreateFSub(r, b_.CreateFMul(n, k(-2.12194440e-4f)));
    llvm::Value* poly = k(1.9875691500e-4f);
    for (float c :
         {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
      poly = fma(poly, r, k(c));
    poly = b_.CreateFAdd(fma(poly, b_.CreateFMul(r, r), r), k(1.0f));
    llvm::Type* ints = x->getType()->getWithNewType(b_.getInt32Ty());
    llvm::Value* n_int =
        b_.CreateSub(b_.CreateBitCast(shifted, ints), b_.CreateBitCast(k(12582912.0f), ints));
    llvm::Value* power =
        b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(n_int, splat(n_int, b_.getInt32(127))),
                                      splat(n_int, b_.getInt32(23))),
                         x->getType());
    return b_.CreateSelect(b_.CreateFCmpOLT(x, k(-87.33654f)), k(0.0f), b_.CreateFMul(poly, power));
  }
  llvm::Value* neg_inf() { return lb_.f32(-std::numeric_limits<float>::infinity()); }

  /// sum_e a[ai + e] * b[bi + e] over n elements, a and b of their dtypes.
  llvm::Value* dot(DType at, llvm::Value* a, llvm::Value* ai, DType bt, llvm::Value* bp,
                   llvm::Value* bi, int64_t n) {
    llvm::Value* full = nullptr;
    llvm::Value* total = nullptr;
    chunks(n, [&](int64_t off, unsigned w) {
      llvm::Value* x = load(at, a, add(ai, off), w);
      llvm::Value* y = load(bt, bp, add(bi, off), w);
      if (w == kLanes) {
        full = full ? fma(x, y, full) : b_.CreateFMul(x, y);
      } else {
        total = reduce_add(b_.CreateFMul(x, y));
      }
    });
    llvm::Value* sum = full ? reduce_add(full) : lb_.f32(0.0f);
    return total ? b_.CreateFAdd(sum, total) : sum;
  }

  /// dst[di + e] = factor * src[si + e] over n elements (converting).
  void copy(DType dt, llvm::Value* dst, llvm::Value* di, DType st, llvm::Value* src,
            llvm::Value* si, int64_t n, llvm::Value* factor = nullptr) {
    chunks(n, [&](int64_t off, unsigned w) {
      llvm::Value* v = load(st, src, add(si, off), w);
      if (factor) v = b_.CreateFMul(v, splat(v, factor));
      store(dt, v, dst, add(di, off));
    });
  }

  /// dst[di + e] = 0 over n elements (runtime n) of `dt` (zero bits).
  void zero(DType dt, llvm::Value* dst, llvm::Value* di, llvm::Value* n) {
    const int64_t bytes = loop_float_bytes(dt);
    b_.CreateMemSet(b_.CreateInBoundsGEP(storage(dt), dst, di), b_.getInt8(0), mul(n, bytes),
                    llvm::MaybeAlign(bytes));
  }

  /// An f32 array of n elements on the stack (entry block).
  llvm::Value* tile(int64_t n) {
    llvm::BasicBlock& entry = b_.GetInsertBlock()->getParent()->getEntryBlock();
    llvm::IRBuilder<> at_entry(&entry, entry.begin());
    llvm::AllocaInst* a =
        at_entry.CreateAlloca(llvm::ArrayType::get(f32_, std::max<int64_t>(n, 1)));
    a->setAlignment(llvm::Align(64));
    return a;
  }

  llvm::Value* smin(llvm::Value* a, llvm::Value* c) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
  }
  llvm::Value* smax(llvm::Value* a, llvm::Value* c) {
    return b_.CreateSelect(b_.CreateICmpSGT(a, c), a, c);
  }

  // --- A K/V tile's rows as kBc-lane vectors ---------------------------

  /// A <kBc x float>.
  llvm::Type* tile_row() { return vec(kBc); }

  /// kt[e * kBc + c] = src[(row0 + c) * width + e] as f32 for c < nc, 0
  /// for c >= nc (so whole kBc-lane rows can be read).
  void transpose_tile(llvm::Value* kt, DType st, llvm::Value* src, llvm::Value* row0,
                      llvm::Value* nc, int64_t width) {
    lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
      llvm::Value* from = mul(b_.CreateAdd(row0, c), width);
      lb_.loop(width, [&](llvm::Value* e) {
        lb_.store(load(st, src, b_.CreateAdd(from, e)), kt, b_.CreateAdd(mul(e, kBc), c));
      });
    });
    lb_.loop(nc, lb_.i64(kBc), [&](llvm::Value* c) {
      lb_.loop(width,
               [&](llvm::Value* e) { lb_.store(lb_.f32(0.0f), kt, b_.CreateAdd(mul(e, kBc), c)); });
    });
  }

  /// <kBc x i1>: lane c set when c < n (an i64; none when n <= 0).
  llvm::Value* lanes_below(llvm::Value* n) {
    std::vector<uint32_t> numbers(kBc);
    for (int64_t c = 0; c < kBc; ++c) numbers[c] = static_cast<uint32_t>(c);
    llvm::Value* lane = llvm::ConstantDataVector::get(lb_.module().getContext(), numbers);
    return b_.CreateICmpSLT(lane, splat(lane, b_.CreateTrunc(n, b_.getInt32Ty())));
  }
  /// Elements base[index + c] of `dt` for the kBc lanes c < n as an f32
  /// vector, 0 in the other lanes (which are not read).
  llvm::Value* load_lanes(DType dt, llvm::Value* base, llvm::Value* index, llvm::Value* n) {
    return masked_load_f32(b_, dt, kBc, b_.CreateInBoundsGEP(storage(dt), base, index),
                           lanes_below(n), llvm::Constant::getNullValue(tile_row()));
  }
  /// Stores the lanes c < n of the f32 vector `v` as `dt` at base[index + c].
  void store_lanes(DType dt, llvm::Value* v, llvm::Value* base, llvm::Value* index,
                   llvm::Value* n) {
    masked_store_f32(b_, dt, v, b_.CreateInBoundsGEP(storage(dt), base, index), lanes_below(n));
  }

  /// Calls body(rows) for the rows [begin, end): kRowGroup at a time,
  /// then the rest one at a time.
  using Rows = std::vector<llvm::Value*>;
  void row_groups(llvm::Value* begin, llvm::Value* end, const std::function<void(const Rows&)>& body) {
    llvm::Value* count = smax(b_.CreateSub(end, begin), lb_.i64(0));
    llvm::Value* groups = b_.CreateSDiv(count, lb_.i64(kRowGroup));
    lb_.loop(lb_.i64(0), groups, [&](llvm::Value* g) {
      llvm::Value* first = b_.CreateAdd(begin, mul(g, kRowGroup));
      Rows rows;
      for (int64_t k = 0; k < kRowGroup; ++k) rows.push_back(add(first, k));
      body(rows);
    });
    lb_.loop(b_.CreateAdd(begin, mul(groups, kRowGroup)), end,
             [&](llvm::Value* r) { body(Rows{r}); });
  }

  /// Per row k: sum_e a[ai[k] + e] * kt[e][0..kBc), the rows against a
  /// transposed tile (each tile vector loaded once for all rows).
  Rows rows_times_tile(llvm::Value* a, const Rows& ai, llvm::Value* kt, int64_t width) {
    std::vector<llvm::AllocaInst*> sums;
    for (size_t k = 0; k < ai.size(); ++k)
      sums.push_back(lb_.local(tile_row(), llvm::Constant::getNullValue(tile_row())));
    lb_.loop(width, [&](llvm::Value* e) {
      llvm::Value* row = load(DType::f32, kt, mul(e, kBc), kBc);
      for (size_t k = 0; k < ai.size(); ++k) {
        llvm::Value* x = lb_.load(f32_, a, b_.CreateAdd(ai[k], e));
        lb_.set(sums[k], fma(splat(row, x), row, lb_.get(sums[k])));
      }
    });
    Rows result;
    for (llvm::AllocaInst* sum : sums) result.push_back(lb_.get(sum));
    return result;
  }

  /// kt[e][0..kBc) += a[ai[k] + e] * w[k] for e < width, rows k in order
  /// (w[k] kBc-lane vectors): the rows' share of a transposed tile's
  /// gradient, each tile vector loaded and stored once.
  void add_outer(llvm::Value* kt, llvm::Value* a, const Rows& ai, int64_t width, const Rows& w) {
    lb_.loop(width, [&](llvm::Value* e) {
      llvm::Value* at = mul(e, kBc);
      llvm::Value* sum = load(DType::f32, kt, at, kBc);
      for (size_t k = 0; k < ai.size(); ++k) {
        llvm::Value* x = lb_.load(f32_, a, b_.CreateAdd(ai[k], e));
        sum = fma(splat(w[k], x), w[k], sum);
      }
      store(DType::f32, sum, kt, at);
    });
  }

  /// The transposed K tile number `t` (keys j0 + c, c < nc, at flat key
  /// row key_row0) of the current batch-head, for the Q tile being
  /// attended: a slice of the tiles transpose_keys() made, or kt_ after
  /// transposing it now.
  llvm::Value* key_tile(llvm::Value* t, llvm::Value* key_row0, llvm::Value* nc) {
    if (transpose_keys_once(P_)) return b_.CreateInBoundsGEP(f32_, kt_, mul(t, P_.E * kBc));
    transpose_tile(kt_, P_.dtype, k_, key_row0, nc, P_.E);
    return kt_;
  }
  /// With transpose_keys_once: every K tile of keys [key_lo_, key_hi_) of
  /// batch-head b, transposed into kt_ (tile t at t E kBc).
  void transpose_keys(llvm::Value* b) {
    if (!transpose_keys_once(P_)) return;
    llvm::Value* keys = smax(b_.CreateSub(key_hi_, key_lo_), lb_.i64(0));
    lb_.loop(lb_.i64(0), b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc)), [&](llvm::Value* t) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(t, kBc));
      transpose_tile(b_.CreateInBoundsGEP(f32_, kt_, mul(t, P_.E * kBc)), P_.dtype, k_,
                     b_.CreateAdd(mul(b, P_.S), j0), smin(lb_.i64(kBc), b_.CreateSub(key_hi_, j0)),
                     P_.E);
    });
  }
  /// kt_: the K tile(s) key_tile() reads.
  llvm::Value* transposed_key_tiles() {
    return tile((transpose_keys_once(P_) ? (P_.S + kBc - 1) / kBc : 1) * P_.E * kBc);
  }

  /// The scores of row i against keys j0 + c (c < kBc) given their scaled
  /// products s: -inf for c >= nc and for keys the causal rule or a false
  /// bool mask excludes; a floating mask added.
  llvm::Value* mask_tile(llvm::Value* i, llvm::Value* j0, llvm::Value* nc, llvm::Value* s) {
    llvm::Value* included = lanes_below(nc);
    // Key j0 + c is above row i's diagonal when c > i - j0.
    if (P_.causal)
      included = b_.CreateAnd(included, lanes_below(add(b_.CreateSub(i, j0), 1)));
    s = b_.CreateSelect(included, s, splat(s, neg_inf()));
    if (!mask_) return s;
    if (P_.mask_col_stride == 1) return apply_mask_lanes(i, j0, nc, s);
    store(DType::f32, s, s_, lb_.i64(0));
    lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
      lb_.store(apply_mask(i, b_.CreateAdd(j0, c), lb_.load(f32_, s_, c)), s_, c);
    });
    return load(DType::f32, s_, lb_.i64(0), kBc);
  }

  /// Per row k: sum_{c < nc} w[w_at[k] + c] * x[(row0 + c) * width +
  /// (0..width)] as f32 vectors of the row's chunks. Each x vector loaded
  /// serves every row; kColumnChunks vectors per pass over the keys, and a
  /// single row sums in four interleaved ways (independent chains).
  std::vector<Rows> weighted_rows(llvm::Value* w, const Rows& w_at, DType xt, llvm::Value* x,
                                  llvm::Value* row0, llvm::Value* nc, int64_t width) {
    const size_t rows = w_at.size();
    const int ways = rows == 1 ? 4 : 1;
    std::vector<Rows> sums(rows);
    for (int64_t first = 0; first < width; first += kColumnChunks * kLanes) {
      const int64_t span = std::min(kColumnChunks * kLanes, width - first);
      // acc[way][k][chunk]
      std::vector<std::vector<std::vector<llvm::AllocaInst*>>> acc(
          ways, std::vector<std::vector<llvm::AllocaInst*>>(rows));
      for (auto& way : acc)
        for (auto& row : way)
          chunks(span, [&](int64_t, unsigned w_) {
            row.push_back(lb_.local(vec(w_), llvm::Constant::getNullValue(vec(w_))));
          });
      auto add_key = [&](int way, llvm::Value* c) {
        llvm::Value* from = add(mul(b_.CreateAdd(row0, c), width), first);
        Rows weights;
        for (size_t k = 0; k < rows; ++k)
          weights.push_back(lb_.load(f32_, w, b_.CreateAdd(w_at[k], c)));
        size_t n = 0;
        chunks(span, [&](int64_t off, unsigned w_) {
          llvm::Value* xv = load(xt, x, add(from, off), w_);
          for (size_t k = 0; k < rows; ++k)
            lb_.set(acc[way][k][n], fma(splat(xv, weights[k]), xv, lb_.get(acc[way][k][n])));
          ++n;
        });
      };
      llvm::Value* groups = b_.CreateSDiv(nc, lb_.i64(ways));
      lb_.loop(lb_.i64(0), groups, [&](llvm::Value* t) {
        for (int way = 0; way < ways; ++way) add_key(way, add(mul(t, ways), way));
      });
      if (ways > 1) lb_.loop(mul(groups, ways), nc, [&](llvm::Value* c) { add_key(0, c); });
      for (size_t k = 0; k < rows; ++k)
        for (size_t n = 0; n < acc[0][k].size(); ++n) {
          if (ways == 1) {
            sums[k].push_back(lb_.get(acc[0][k][n]));
            continue;
          }
          sums[k].push_back(
              b_.CreateFAdd(b_.CreateFAdd(lb_.get(acc[0][k][n]), lb_.get(acc[1][k][n])),
                            b_.CreateFAdd(lb_.get(acc[2][k][n]), lb_.get(acc[3][k][n]))));
        }
    }
    return sums;
  }

  // --- What both passes share -------------------------------------------

  /// Reads the per-run operands (valid_seq_len, RNG state).
  void begin_function();
  /// Sets row_lo_ ... key_hi_ for batch-head b (ValidRanges).
  void valid_ranges(llvm::Value* b);
  /// Score `s` of row i, key j with the attention mask applied: -inf
  /// where a bool mask is false, the floating mask added. Scalars.
  llvm::Value* apply_mask(llvm::Value* i, llvm::Value* j, llvm::Value* s);
  /// apply_mask on the lanes c < nc of row i's scores s of keys j0 + c at
  /// once, for a mask whose keys are contiguous (mask_col_stride 1).
  llvm::Value* apply_mask_lanes(llvm::Value* i, llvm::Value* j0, llvm::Value* nc, llvm::Value* s);
  /// Whether element `flat` of the [..., L, S] stream is kept by dropout
  /// (i1): Philox's uniform >= p, as the ref kernel draws it.
  llvm::Value* kept(llvm::Value* flat);
  /// The dropout factor (keep ? 1 / (1 - p) : 0) of element `flat` of the
  /// [..., L, S] stream.
  llvm::Value* dropout_factor(llvm::Value* flat);
  /// The dropout factors of elements flat + c of the [..., L, S] stream as
  /// a kBc-lane vector: read from the keep mask the node returns (keep_mask_;
  /// lanes c >= nc are 0), else drawn for every lane into f_t_ (a loop the
  /// vectorizer widens).
  llvm::Value* dropout_factors(llvm::Value* flat, llvm::Value* nc);

  /// The forward's loop nest over the Q tiles of batch-head b; `finish(r,
  /// i, acc_row_index, m, l)` per row of a tile once its keys are done
  /// (acc holds sum p v, unnormalized; m, l the row's max and sum), then
  /// `tile_done(first, nr, key_end)`, when given, per Q tile of rows
  /// [first, first + nr) that saw keys [key_lo_, key_end) (m_, l_ and qs_
  /// still hold the tile's final statistics and scaled rows).
  using RowDone =
      std::function<void(llvm::Value* i, llvm::Value* acc_index, llvm::Value* m, llvm::Value* l)>;
  using TileDone = std::function<void(llvm::Value* first, llvm::Value* nr, llvm::Value* key_end)>;
  /// Per K tile of keys [key_lo_, key_end) of batch-head b (j0 + c, c <
  /// nc, flat key row key_row0) and per row group rs of the Q tile's rows
  /// first + r, r < nr (scaled in qs_): body with the rows' masked scores
  /// (mask_tile of q_r k^T, the group against the transposed tile).
  using ScoresBody = std::function<void(llvm::Value* j0, llvm::Value* nc, llvm::Value* key_row0,
                                        const Rows& rs, const Rows& scores)>;
  void score_groups(llvm::Value* b, llvm::Value* first, llvm::Value* nr, llvm::Value* key_end,
                    const ScoresBody& body);
  void attend_rows(llvm::Value* b, const RowDone& finish, const TileDone& tile_done = nullptr);

  // --- Nodes with [L, S] results or operands (XlaAttentionProbs.cpp) ----

  /// keep_mask[b, i, j] = kept((b L + i) S + j) for every position of
  /// batch-head b (true everywhere without dropout), as the ref kernel
  /// returns it.
  void write_keep_mask(llvm::Value* b, llvm::Value* keep_mask);
  /// The forward's second pass over a finished Q tile (attend_rows'
  /// tile_done): the normalized probabilities e^(s - m) / l of its rows
  /// and keys [key_lo_, key_end), written before dropout to `saved` and
  /// after it to `probs` (either may be null); the caller zeroed the rest.
  void write_probabilities(llvm::Value* b, llvm::Value* first, llvm::Value* nr,
                           llvm::Value* key_end, llvm::Value* saved, llvm::Value* probs);
  /// The backward's rows pass from the forward's saved probabilities:
  /// d[i] = g_i . sum_j P_ij f_ij v_j for the valid rows of batch-head b.
  void saved_row_statistics(llvm::Value* b, llvm::Value* g, llvm::Value* d);
  /// The saved probabilities of flat row `row` and keys j0 + c as a kBc-lane
  /// vector, 0 for c >= nc.
  llvm::Value* saved_tile(llvm::Value* row, llvm::Value* j0, llvm::Value* nc);
  /// dmask at (b, i, j0 + c)'s broadcast position += ds_t[c] for c < nc.
  void add_mask_gradient(llvm::Value* i, llvm::Value* j0, llvm::Value* nc, llvm::Value* ds_t);
  /// add_mask_gradient's lanes at once where the mask's keys are
  /// contiguous: dmask[at + c] += ds_t[c] for c < nc.
  void add_mask_gradient_lanes(llvm::Value* at, llvm::Value* nc, llvm::Value* ds_t);

  LoopBuilder& lb_;
  llvm::IRBuilder<>& b_;
  const AttentionParams& P_;
  llvm::Type* f32_;
  llvm::Value *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *mask_ = nullptr;
  llvm::Value *seed_ = nullptr, *offset_ = nullptr, *valid_len_ = nullptr;
  llvm::Value* mask_base_ = nullptr; // i64 per batch-head (a constant array)
  llvm::Value *row_lo_ = nullptr, *row_hi_ = nullptr, *key_lo_ = nullptr, *key_hi_ = nullptr;
  llvm::Value* mask_b_ = nullptr; // the mask base of the current batch-head
  // The forward's tiles.
  llvm::Value *qs_ = nullptr, *acc_ = nullptr, *m_ = nullptr, *l_ = nullptr, *s_ = nullptr;
  llvm::Value* p_ = nullptr; // [kRowGroup x kBc]: a row group's probabilities
  llvm::Value* kt_ = nullptr; // [E x kBc]: the K tile transposed
  llvm::Value* vt_ = nullptr; // [Ev x kBc]: the V tile transposed (backward)
  llvm::Value* saved_in_ = nullptr; // the forward's saved probabilities (backward)
  llvm::Value* dmask_ = nullptr;    // the mask gradient's f32 sums (backward)
  llvm::Value* dq_sums_ = nullptr;
  llvm::Value* mask_gradient_sum_ = nullptr;
  llvm::Value* keep_mask_ = nullptr; // the returned dropout mask (forward), read back
  llvm::Value* f_t_ = nullptr;       // [kBc]: drawn dropout factors
};

/// `i32 (ptr operands, ptr results)` that zeroes the mask gradient's f32
/// sums and returns 0: the step runs it before the rows, which then add
/// into them. The sums are result P.dmask (f32: `scratch_at` < 0), or
/// (bf16) at float `scratch_at` of the scratch after the node's
/// `operands` (OpLoop::calls_runtime).
llvm::Function* emit_zero_mask_gradient(llvm::Module& module, const std::string& name,
                                        size_t operands, size_t results, const AttentionParams& P,
                                        int64_t scratch_at);
/// `i32 (ptr operands, ptr results)` that rounds a bf16 mask gradient's
/// f32 sums (at float `scratch_at` of the scratch after the node's
/// `operands`) into result P.dmask, once per element; the step runs it
/// after the rows (OpLoop::after_rows).
llvm::Function* emit_round_mask_gradient(llvm::Module& module, const std::string& name,
                                         size_t operands, size_t results,
                                         const AttentionParams& P, int64_t scratch_at);

} // namespace mstep::xla::attention
