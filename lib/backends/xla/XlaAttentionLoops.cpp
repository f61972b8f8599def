// sdpa and sdpa_grad as tiled flash-style loop nests inside the xla step
// function (XlaOpLoops.h), with the cpu backend's flash kernels' numerics
// (lib/backends/cpu/FlashAttention.cpp, FlashAttentionGrad.cpp; the ref
// kernels are the oracle): scores, exp and sums in f32, an online softmax
// that never holds an [L, S] matrix, f32 or bf16 storage (bf16 computes in
// f32 and rounds to nearest even once per stored element).
//
// The node is read by the cpu kernels' own reader (read_attention_params),
// so both backends take the same operands and options. Per batch-head b,
// with [row_lo, row_hi) and [key_lo, key_hi) the rows and keys that
// valid_seq_len keeps (everything without one):
//
// Forward, per tile of kBr query rows (Q tiles) and, inside it, per tile of
// kBc keys (K/V tiles, up to the tile's last row when causal: key tiles
// wholly above the diagonal are never visited). The K tile is transposed
// once into a zero-padded [E x kBc] stack tile, so a row's kBc scores are
// one <kBc x float> value (E vector fmas). Per row r of the Q tile:
//   s = scale q_r k^T (+ floating mask; -inf where causal or a false bool
//   mask excludes the key, and past the tile's last key),
//   m' = max(m, max s), p = e^(s - m') (the cpu kernels' f32 exp),
//   l = l e^(m - m') + sum p, p *= the dropout factor (Philox, the ref
//   kernel's draws bit for bit), acc = acc e^(m - m') + p v (four
//   interleaved vector sums over the keys).
// out = acc / l (0 where l = 0: a row with every key excluded, and the
// rows outside valid_seq_len).
//
// Backward (the forward's results carry no statistics, so, as on cpu, it
// recomputes them): a rows pass (the forward's loop nest) keeps per row
// lse = m + log l and D = g . out; then per K/V tile (K and V transposed
// once), for each row that sees it, on the tile's kBc keys at once:
// p = e^(scale q k^T + mask - lse), dp = (g v^T) f, ds = p (dp - D),
// dv^T += g (p f), dk^T += q ds (transposed f32 tiles), dq += ds k (dq, dk
// scaled by `scale` when written; dq's sums in the result itself for f32,
// in an f32 stack buffer for bf16).
//
// Sums run in vector order (reassociated), as the cpu kernels' vector code
// does; values agree with ref within the cpu kernels' tolerance (1e-4 f32,
// 2e-2 bf16). Nodes that return probabilities, a dropout mask or saved
// probabilities (recompute = 0), or a mask gradient stay callouts.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FlashAttentionParams.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

using cpu::flash::AttentionParams;

constexpr int64_t kBr = 64;    // query rows per Q tile
constexpr int64_t kBc = 64;    // keys per K/V tile
constexpr int64_t kLanes = 16; // f32 lanes of one vector
static_assert(kBc % kLanes == 0);
/// Head dims above this stay callouts (the rows' vector code is unrolled).
constexpr int64_t kMostHeadDim = 1024;
/// Bytes of stack the function's tiles may take.
constexpr int64_t kMostStackBytes = 1 << 20;

class AttentionEmitter {
public:
  AttentionEmitter(LoopBuilder& lb, const AttentionParams& P)
      : lb_(lb), b_(lb.b()), P_(P), f32_(lb.f32()) {}

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
                                          llvm::Align(dt == DType::bf16 ? 2 : 4));
    return widen_to_f32(b_, dt, v);
  }

  /// Stores f32 `v` (scalar or vector) as `dt` at base[index]; bf16 rounds
  /// to nearest even and keeps a NaN quiet (mstep::BFloat16).
  void store(DType dt, llvm::Value* v, llvm::Value* base, llvm::Value* index) {
    b_.CreateAlignedStore(round_to_storage(b_, dt, v),
                          b_.CreateInBoundsGEP(storage(dt), base, index),
                          llvm::Align(dt == DType::bf16 ? 2 : 4));
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
    const int64_t bytes = dt == DType::bf16 ? 2 : 4;
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

  /// sum_e a[ai + e] * kt[e][0..kBc): one row against a transposed tile.
  llvm::Value* row_times_tile(llvm::Value* a, llvm::Value* ai, llvm::Value* kt, int64_t width) {
    llvm::AllocaInst* sum = lb_.local(tile_row(), llvm::Constant::getNullValue(tile_row()));
    lb_.loop(width, [&](llvm::Value* e) {
      llvm::Value* row = load(DType::f32, kt, mul(e, kBc), kBc);
      llvm::Value* x = lb_.load(f32_, a, b_.CreateAdd(ai, e));
      lb_.set(sum, fma(splat(row, x), row, lb_.get(sum)));
    });
    return lb_.get(sum);
  }

  /// kt[e][0..kBc) += a[ai + e] * w for e < width (w a kBc-lane vector):
  /// one row's share of a transposed tile's gradient.
  void add_outer(llvm::Value* kt, llvm::Value* a, llvm::Value* ai, int64_t width, llvm::Value* w) {
    lb_.loop(width, [&](llvm::Value* e) {
      llvm::Value* at = mul(e, kBc);
      llvm::Value* x = lb_.load(f32_, a, b_.CreateAdd(ai, e));
      store(DType::f32, fma(splat(w, x), w, load(DType::f32, kt, at, kBc)), kt, at);
    });
  }

  /// The scores of row i against keys j0 + c (c < kBc) given their scaled
  /// products s: -inf for c >= nc and for keys the causal rule or a false
  /// bool mask excludes; a floating mask added.
  llvm::Value* mask_tile(llvm::Value* i, llvm::Value* j0, llvm::Value* nc, llvm::Value* s) {
    std::vector<uint32_t> numbers(kBc);
    for (int64_t c = 0; c < kBc; ++c) numbers[c] = static_cast<uint32_t>(c);
    llvm::Value* lane = llvm::ConstantDataVector::get(lb_.module().getContext(), numbers);
    auto splat32 = [&](llvm::Value* v) { return splat(lane, b_.CreateTrunc(v, b_.getInt32Ty())); };
    llvm::Value* excluded = b_.CreateICmpSGE(lane, splat32(nc));
    // Key j0 + c is above row i's diagonal when c > i - j0.
    if (P_.causal)
      excluded = b_.CreateOr(excluded, b_.CreateICmpSGT(lane, splat32(b_.CreateSub(i, j0))));
    s = b_.CreateSelect(excluded, splat(s, neg_inf()), s);
    if (!mask_) return s;
    store(DType::f32, s, s_, lb_.i64(0));
    lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
      lb_.store(apply_mask(i, b_.CreateAdd(j0, c), lb_.load(f32_, s_, c)), s_, c);
    });
    return load(DType::f32, s_, lb_.i64(0), kBc);
  }

  /// sum_{c < nc} w[c] * x[(row0 + c) * width + (0..width)] as f32 vectors
  /// of the row's chunks; four interleaved sums (independent chains).
  std::vector<llvm::Value*> weighted_rows(llvm::Value* w, DType xt, llvm::Value* x,
                                          llvm::Value* row0, llvm::Value* nc, int64_t width) {
    constexpr int kWays = 4;
    std::vector<std::vector<llvm::AllocaInst*>> acc(kWays);
    for (auto& way : acc)
      chunks(width, [&](int64_t, unsigned w_) {
        way.push_back(lb_.local(vec(w_), llvm::Constant::getNullValue(vec(w_))));
      });
    auto add_row = [&](int way, llvm::Value* c) {
      llvm::Value* weight = lb_.load(f32_, w, c);
      llvm::Value* from = mul(b_.CreateAdd(row0, c), width);
      size_t k = 0;
      chunks(width, [&](int64_t off, unsigned w_) {
        llvm::Value* xv = load(xt, x, add(from, off), w_);
        lb_.set(acc[way][k], fma(splat(xv, weight), xv, lb_.get(acc[way][k])));
        ++k;
      });
    };
    llvm::Value* groups = b_.CreateSDiv(nc, lb_.i64(kWays));
    lb_.loop(lb_.i64(0), groups, [&](llvm::Value* t) {
      for (int way = 0; way < kWays; ++way) add_row(way, add(mul(t, kWays), way));
    });
    lb_.loop(mul(groups, kWays), nc, [&](llvm::Value* c) { add_row(0, c); });
    std::vector<llvm::Value*> sums;
    for (size_t k = 0; k < acc[0].size(); ++k)
      sums.push_back(b_.CreateFAdd(b_.CreateFAdd(lb_.get(acc[0][k]), lb_.get(acc[1][k])),
                                   b_.CreateFAdd(lb_.get(acc[2][k]), lb_.get(acc[3][k]))));
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
  /// The dropout factor (keep ? 1 / (1 - p) : 0) of element `flat` of the
  /// [..., L, S] stream.
  llvm::Value* dropout_factor(llvm::Value* flat);

  /// The forward's loop nest over the Q tiles of batch-head b; `finish(r,
  /// i, acc_row_index, m, l)` per row of a tile once its keys are done
  /// (acc holds sum p v, unnormalized; m, l the row's max and sum).
  using RowDone =
      std::function<void(llvm::Value* i, llvm::Value* acc_index, llvm::Value* m, llvm::Value* l)>;
  void attend_rows(llvm::Value* b, const RowDone& finish);

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
  llvm::Value* kt_ = nullptr; // [E x kBc]: the K tile transposed
  llvm::Value* vt_ = nullptr; // [Ev x kBc]: the V tile transposed (backward)
};

void AttentionEmitter::begin_function() {
  q_ = lb_.operand(P_.q);
  k_ = lb_.operand(P_.k);
  v_ = lb_.operand(P_.v);
  if (P_.mask >= 0) {
    mask_ = lb_.operand(P_.mask);
    std::vector<uint64_t> bases(P_.mask_base.begin(), P_.mask_base.end());
    auto* init = llvm::ConstantDataArray::get(lb_.module().getContext(), bases);
    mask_base_ = new llvm::GlobalVariable(lb_.module(), init->getType(), /*isConstant=*/true,
                                          llvm::GlobalValue::PrivateLinkage, init,
                                          "mstep_xla_sdpa_mask_base");
  }
  if (P_.valid_len >= 0) valid_len_ = lb_.operand(P_.valid_len);
  if (P_.dropout) {
    llvm::Value* state = lb_.operand(P_.rng_state);
    seed_ = lb_.load(lb_.i64(), state, lb_.i64(0));
    offset_ = add(lb_.load(lb_.i64(), state, lb_.i64(1)), P_.rng_offset);
  }
}

void AttentionEmitter::valid_ranges(llvm::Value* b) {
  if (P_.mask >= 0)
    mask_b_ = b_.CreateLoad(lb_.i64(), b_.CreateInBoundsGEP(lb_.i64(), mask_base_, b));
  if (!valid_len_) {
    row_lo_ = key_lo_ = lb_.i64(0);
    row_hi_ = lb_.i64(P_.L);
    key_hi_ = lb_.i64(P_.S);
    return;
  }
  llvm::Value* index = b_.CreateSDiv(b, lb_.i64(P_.rows_per_b0));
  llvm::Value* len = P_.len_dtype == DType::i32
                         ? b_.CreateSExt(lb_.load(b_.getInt32Ty(), valid_len_, index), lb_.i64())
                         : lb_.load(lb_.i64(), valid_len_, index);
  auto keep = [&](int64_t n, llvm::Value*& lo, llvm::Value*& hi) {
    llvm::Value* kept = smax(smin(len, lb_.i64(n)), lb_.i64(0));
    lo = P_.left_pad ? b_.CreateSub(lb_.i64(n), kept) : lb_.i64(0);
    hi = P_.left_pad ? lb_.i64(n) : kept;
  };
  keep(P_.L, row_lo_, row_hi_);
  keep(P_.S, key_lo_, key_hi_);
}

llvm::Value* AttentionEmitter::apply_mask(llvm::Value* i, llvm::Value* j, llvm::Value* s) {
  llvm::Value* at =
      b_.CreateAdd(mask_b_, b_.CreateAdd(mul(i, P_.mask_row_stride), mul(j, P_.mask_col_stride)));
  if (!P_.bool_mask) return b_.CreateFAdd(s, load(P_.dtype, mask_, at));
  llvm::Value* keep = lb_.load(b_.getInt8Ty(), mask_, at);
  return b_.CreateSelect(b_.CreateICmpEQ(keep, b_.getInt8(0)), neg_inf(), s);
}

llvm::Value* AttentionEmitter::dropout_factor(llvm::Value* flat) {
  llvm::Value* w0 = philox(lb_, seed_, b_.CreateAdd(offset_, flat)).first;
  // uniform() >= p iff (w0 >> 8) >= ceil(p 2^24) (read_dropout).
  const auto threshold = static_cast<uint32_t>(std::ceil(P_.p * 16777216.0));
  const float keep_scale = P_.p < 1 ? static_cast<float>(1.0 / (1.0 - P_.p)) : 0.0f;
  llvm::Value* keep = b_.CreateICmpUGE(b_.CreateLShr(w0, 8), b_.getInt32(threshold));
  return b_.CreateSelect(keep, lb_.f32(keep_scale), lb_.f32(0.0f));
}

void AttentionEmitter::attend_rows(llvm::Value* b, const RowDone& finish) {
  const int64_t E = P_.E, Ev = P_.Ev;
  llvm::Value* rows = b_.CreateSub(row_hi_, row_lo_);
  llvm::Value* q_tiles = b_.CreateSDiv(add(rows, kBr - 1), lb_.i64(kBr));
  lb_.loop(lb_.i64(0), q_tiles, [&](llvm::Value* t) {
    llvm::Value* first = b_.CreateAdd(row_lo_, mul(t, kBr));
    llvm::Value* nr = smin(lb_.i64(kBr), b_.CreateSub(row_hi_, first));
    llvm::Value* last = b_.CreateAdd(first, nr);
    // Key tiles past the Q tile's last row are wholly above the diagonal.
    llvm::Value* key_end = P_.causal ? smin(key_hi_, last) : key_hi_;
    llvm::Value* keys = smax(b_.CreateSub(key_end, key_lo_), lb_.i64(0));
    // The tile's rows: scale * q, and empty statistics.
    lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
      llvm::Value* row = b_.CreateAdd(mul(b, P_.L), b_.CreateAdd(first, r));
      copy(DType::f32, qs_, mul(r, E), P_.dtype, q_, mul(row, E), E,
           lb_.f32(static_cast<float>(P_.scale)));
      lb_.store(neg_inf(), m_, r);
      lb_.store(lb_.f32(0.0f), l_, r);
      chunks(Ev, [&](int64_t off, unsigned w) {
        store(DType::f32, llvm::Constant::getNullValue(vec(w)), acc_, add(mul(r, Ev), off));
      });
    });
    llvm::Value* key_tiles = b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc));
    lb_.loop(lb_.i64(0), key_tiles, [&](llvm::Value* kt) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
      llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_end, j0));
      llvm::Value* key_row0 = b_.CreateAdd(mul(b, P_.S), j0);
      transpose_tile(kt_, P_.dtype, k_, key_row0, nc, E);
      lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
        llvm::Value* i = b_.CreateAdd(first, r);
        // The online softmax on the kBc lanes of the tile.
        llvm::Value* s = mask_tile(i, j0, nc, row_times_tile(qs_, mul(r, E), kt_, E));
        llvm::Value* m_old = lb_.load(f32_, m_, r);
        llvm::Value* m_new = b_.CreateMaxNum(m_old, b_.CreateFPMaxReduce(s));
        // A row with no key yet keeps m = -inf; subtracting 0 keeps p = 0.
        llvm::Value* m_used =
            b_.CreateSelect(b_.CreateFCmpOEQ(m_new, neg_inf()), lb_.f32(0.0f), m_new);
        llvm::Value* alpha = exp(b_.CreateFSub(m_old, m_used));
        llvm::Value* p = exp(b_.CreateFSub(s, splat(s, m_used)));
        store(DType::f32, p, s_, lb_.i64(0));
        lb_.store(m_new, m_, r);
        lb_.store(fma(lb_.load(f32_, l_, r), alpha, reduce_add(p)), l_, r);
        if (P_.dropout) {
          llvm::Value* flat = b_.CreateAdd(mul(b_.CreateAdd(mul(b, P_.L), i), P_.S), j0);
          lb_.loop(
              lb_.i64(0), nc,
              [&](llvm::Value* c) {
                lb_.store(
                    b_.CreateFMul(lb_.load(f32_, s_, c), dropout_factor(b_.CreateAdd(flat, c))), s_,
                    c);
              },
              /*parallel=*/true);
        }
        // acc = acc * alpha + p v.
        std::vector<llvm::Value*> pv = weighted_rows(s_, P_.dtype, v_, key_row0, nc, Ev);
        size_t n = 0;
        chunks(Ev, [&](int64_t off, unsigned w) {
          llvm::Value* at = add(mul(r, Ev), off);
          llvm::Value* a = load(DType::f32, acc_, at, w);
          store(DType::f32, fma(a, splat(a, alpha), pv[n++]), acc_, at);
        });
      });
    });
    lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
      finish(b_.CreateAdd(first, r), mul(r, Ev), lb_.load(f32_, m_, r), lb_.load(f32_, l_, r));
    });
  });
}

void AttentionEmitter::emit_forward() {
  begin_function();
  const int64_t Ev = P_.Ev;
  qs_ = tile(kBr * P_.E);
  acc_ = tile(kBr * Ev);
  m_ = tile(kBr);
  l_ = tile(kBr);
  s_ = tile(kBc);
  kt_ = tile(P_.E * kBc);
  llvm::Value* out = lb_.result(0);
  lb_.loop(lb_.row_begin(), lb_.row_end(), [&](llvm::Value* b) {
    valid_ranges(b);
    llvm::Value* base = mul(b, P_.L * Ev);
    // Rows outside valid_seq_len are zeros.
    zero(P_.dtype, out, base, mul(row_lo_, Ev));
    zero(P_.dtype, out, b_.CreateAdd(base, mul(row_hi_, Ev)),
         mul(b_.CreateSub(lb_.i64(P_.L), row_hi_), Ev));
    attend_rows(b, [&](llvm::Value* i, llvm::Value* acc_index, llvm::Value*, llvm::Value* l) {
      llvm::Value* norm = b_.CreateSelect(b_.CreateFCmpOGT(l, lb_.f32(0.0f)),
                                          b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      copy(P_.dtype, out, b_.CreateAdd(base, mul(i, Ev)), DType::f32, acc_, acc_index, Ev, norm);
    });
  });
}

void AttentionEmitter::emit_backward() {
  begin_function();
  const int64_t E = P_.E, Ev = P_.Ev;
  qs_ = tile(kBr * E);
  acc_ = tile(kBr * Ev);
  m_ = tile(kBr);
  l_ = tile(kBr);
  s_ = tile(kBc);
  kt_ = tile(E * kBc);
  vt_ = tile(Ev * kBc);
  llvm::Value* ds_t = tile(kBc);
  llvm::Value* f_t = P_.dropout ? tile(kBc) : nullptr;
  llvm::Value* lse = tile(P_.L);
  llvm::Value* d = tile(P_.L);
  llvm::Value* dk_t = tile(E * kBc);  // dk^T of the key tile, unscaled
  llvm::Value* dv_t = tile(Ev * kBc); // dv^T
  const bool convert = P_.dtype != DType::f32;
  // bf16 rows as f32, and dq's f32 sums (the result itself for f32).
  llvm::Value* q_row = convert ? tile(E) : nullptr;
  llvm::Value* g_row = convert ? tile(Ev) : nullptr;
  llvm::Value* dq_sum = convert ? tile(P_.L * E) : nullptr;
  llvm::Value* g = lb_.operand(P_.grad_out);
  llvm::Value* dq = lb_.result(0);
  llvm::Value* dk = lb_.result(1);
  llvm::Value* dv = lb_.result(2);
  llvm::Value* scale = lb_.f32(static_cast<float>(P_.scale));
  lb_.loop(lb_.row_begin(), lb_.row_end(), [&](llvm::Value* b) {
    valid_ranges(b);
    // 1. Rows pass: lse and D per valid row (rows outside stay unread).
    attend_rows(b, [&](llvm::Value* i, llvm::Value* acc_index, llvm::Value* m, llvm::Value* l) {
      llvm::Value* positive = b_.CreateFCmpOGT(l, lb_.f32(0.0f));
      llvm::Value* norm = b_.CreateSelect(positive, b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      llvm::Value* g_index = mul(b_.CreateAdd(mul(b, P_.L), i), Ev);
      lb_.store(b_.CreateFMul(dot(P_.dtype, g, g_index, DType::f32, acc_, acc_index, Ev), norm), d,
                i);
      // A row with every key excluded: lse = +inf makes its p 0.
      llvm::Value* log_l = lb_.to_f32(lb_.call(llvm::Intrinsic::log, lb_.to_f64(l)));
      lb_.store(b_.CreateSelect(positive, b_.CreateFAdd(m, log_l),
                                lb_.f32(std::numeric_limits<float>::infinity())),
                lse, i);
    });
    // 2. Keys pass.
    llvm::Value* dq_base = convert ? lb_.i64(0) : mul(b, P_.L * E);
    llvm::Value* dq_acc = convert ? dq_sum : dq;
    zero(DType::f32, dq_acc, dq_base, lb_.i64(P_.L * E));
    llvm::Value* k_base = mul(b, P_.S);
    // Padded keys get zero gradients.
    zero(P_.dtype, dk, mul(k_base, E), mul(key_lo_, E));
    zero(P_.dtype, dk, mul(b_.CreateAdd(k_base, key_hi_), E),
         mul(b_.CreateSub(lb_.i64(P_.S), key_hi_), E));
    zero(P_.dtype, dv, mul(k_base, Ev), mul(key_lo_, Ev));
    zero(P_.dtype, dv, mul(b_.CreateAdd(k_base, key_hi_), Ev),
         mul(b_.CreateSub(lb_.i64(P_.S), key_hi_), Ev));
    llvm::Value* keys = smax(b_.CreateSub(key_hi_, key_lo_), lb_.i64(0));
    llvm::Value* key_tiles = b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc));
    lb_.loop(lb_.i64(0), key_tiles, [&](llvm::Value* kt) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
      llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_hi_, j0));
      llvm::Value* key_row0 = b_.CreateAdd(k_base, j0);
      transpose_tile(kt_, P_.dtype, k_, key_row0, nc, E);
      transpose_tile(vt_, P_.dtype, v_, key_row0, nc, Ev);
      zero(DType::f32, dk_t, lb_.i64(0), lb_.i64(kBc * E));
      zero(DType::f32, dv_t, lb_.i64(0), lb_.i64(kBc * Ev));
      // Rows before j0 see none of these keys when causal.
      llvm::Value* row_begin = P_.causal ? smax(row_lo_, j0) : row_lo_;
      lb_.loop(row_begin, row_hi_, [&](llvm::Value* i) {
        llvm::Value* row = b_.CreateAdd(mul(b, P_.L), i);
        // q and g rows as f32 (in place for f32 data).
        llvm::Value *qp = q_, *qi = mul(row, E), *gp = g, *gi = mul(row, Ev);
        if (convert) {
          copy(DType::f32, q_row, lb_.i64(0), P_.dtype, q_, qi, E);
          copy(DType::f32, g_row, lb_.i64(0), P_.dtype, g, gi, Ev);
          qp = q_row, qi = lb_.i64(0), gp = g_row, gi = lb_.i64(0);
        }
        // The tile's kBc keys at once (p = 0 past nc: -inf scores, zero v).
        llvm::Value* s = row_times_tile(qp, qi, kt_, E);
        s = mask_tile(i, j0, nc, b_.CreateFMul(s, splat(s, scale)));
        llvm::Value* p = exp(b_.CreateFSub(s, splat(s, lb_.load(f32_, lse, i))));
        llvm::Value* dp = row_times_tile(gp, gi, vt_, Ev);
        llvm::Value* pf = p;
        if (P_.dropout) {
          llvm::Value* flat = b_.CreateAdd(mul(row, P_.S), j0);
          lb_.loop(
              kBc,
              [&](llvm::Value* c) { lb_.store(dropout_factor(b_.CreateAdd(flat, c)), f_t, c); },
              /*parallel=*/true);
          llvm::Value* f = load(DType::f32, f_t, lb_.i64(0), kBc);
          dp = b_.CreateFMul(dp, f);
          pf = b_.CreateFMul(p, f);
        }
        llvm::Value* ds = b_.CreateFMul(p, b_.CreateFSub(dp, splat(dp, lb_.load(f32_, d, i))));
        store(DType::f32, ds, ds_t, lb_.i64(0));
        // dv^T += g (p f), dk^T += q ds (transposed tiles: whole key rows).
        add_outer(dv_t, gp, gi, Ev, pf);
        add_outer(dk_t, qp, qi, E, ds);
        // dq_i += ds k.
        std::vector<llvm::Value*> dsk = weighted_rows(ds_t, P_.dtype, k_, key_row0, nc, E);
        llvm::Value* dq_row = b_.CreateAdd(dq_base, mul(i, E));
        size_t n = 0;
        chunks(E, [&](int64_t off, unsigned w) {
          llvm::Value* at = add(dq_row, off);
          store(DType::f32, b_.CreateFAdd(load(DType::f32, dq_acc, at, w), dsk[n++]), dq_acc, at);
        });
      });
      lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
        llvm::Value* key = b_.CreateAdd(key_row0, c);
        lb_.loop(E, [&](llvm::Value* e) {
          llvm::Value* x = lb_.load(f32_, dk_t, b_.CreateAdd(mul(e, kBc), c));
          store(P_.dtype, b_.CreateFMul(x, scale), dk, b_.CreateAdd(mul(key, E), e));
        });
        lb_.loop(Ev, [&](llvm::Value* e) {
          store(P_.dtype, lb_.load(f32_, dv_t, b_.CreateAdd(mul(e, kBc), c)), dv,
                b_.CreateAdd(mul(key, Ev), e));
        });
      });
    });
    // 3. dq = scale * the sums (zero outside the valid rows).
    lb_.loop(P_.L, [&](llvm::Value* i) {
      copy(P_.dtype, dq, mul(b_.CreateAdd(mul(b, P_.L), i), E), DType::f32, dq_acc,
           b_.CreateAdd(dq_base, mul(i, E)), E, scale);
    });
  });
}

} // namespace

std::optional<OpLoop> emit_attention_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.op != OpKind::sdpa && nd.op != OpKind::sdpa_grad) return std::nullopt;
  // A node the reader rejects stays a callout, whose kernel reports it.
  absl::StatusOr<AttentionParams> read =
      cpu::flash::read_attention_params(cpu::KernelRequest{graph, node});
  if (!read.ok()) return std::nullopt;
  const AttentionParams& P = *read;
  if (P.dtype != DType::f32 && P.dtype != DType::bf16) return std::nullopt;
  if (P.probs >= 0 || P.dropout_mask >= 0 || P.saved_probs_out >= 0 || P.saved_probs_in >= 0 ||
      P.dmask >= 0)
    return std::nullopt;
  if (P.E > kMostHeadDim || P.Ev > kMostHeadDim || P.L == 0 || P.S == 0 || P.batch == 0)
    return std::nullopt;
  int64_t stack = kBr * (P.E + P.Ev + 2) + kBc * (1 + P.E);
  if (P.backward)
    stack +=
        2 * P.L + kBc * (3 + P.E + 2 * P.Ev) + (P.dtype == DType::f32 ? 0 : P.E + P.Ev + P.L * P.E);
  if (stack * 4 > kMostStackBytes) return std::nullopt;

  // A row function over the batch-heads: each writes only its own rows of
  // out (dq, dk, dv) and keeps its tiles on its own stack, so the step
  // function may split them over the threads without changing a bit.
  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(nd.op), "_", node), nd.operands.size(),
                 nd.results.size(), LoopBuilder::Rows{});
  AttentionEmitter emitter(lb, P);
  if (P.backward)
    emitter.emit_backward();
  else
    emitter.emit_forward();
  return OpLoop{lb.finish(), false, P.batch, 1, P.batch * P.L * P.S};
}

} // namespace mstep::xla
