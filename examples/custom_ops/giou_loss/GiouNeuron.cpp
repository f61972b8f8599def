// The GIoU ops' neuron kernels: NeuronCore tile programs written with the
// tile builder (mstep/runtime/NeuronCustomKernel.h), GiouOps.cpp's per-box
// arithmetic instruction by instruction on the Vector engine (fp32), so the
// per-box values are the cpu kernels' up to the host compiler's FMA
// contractions.
//
// Layout: the N boxes [N, 4] are viewed as [128, 4F] (partition p holds
// boxes p*F .. p*F + F - 1, F = N / 128) in chunks of up to kChunk boxes
// per partition, then the N mod 128 boxes left as one box on each of that
// many partitions. A chunk is loaded (double-buffered) as [P, 4w] and each
// coordinate read as a stride-4 view. The branches of the host code are
// masks: is_ge gives the comparisons, and a quantity that is 0 when the
// boxes do not overlap is multiplied by that mask.
//
// The reductions sum each partition's losses on Vector, then across the
// partitions on the Tensor engine: partialsᵀ[P, 1] . ones[P, 1] accumulated
// in one PSUM element over the chunks (fp32; the host kernels sum in double,
// hence the tests' tolerance); mean divides by N.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/custom_ops/giou_loss/GiouOps.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/NeuronCustomKernel.h"

namespace mstep::examples {

namespace {

/// Boxes per partition in one chunk: the backward's ~50 [P, kChunk] fp32
/// temporaries and double-buffered box tiles stay well inside SBUF.
constexpr int64_t kChunk = 256;
constexpr float kEpsF = static_cast<float>(kEps);

/// w boxes on each of `parts` partitions: columns [c0, c0 + w) of rows
/// [row0, row0 + parts) of the boxes viewed as [N / row_len, row_len].
struct Piece {
  int64_t row_len = 0, row0 = 0;
  int32_t parts = 0;
  int64_t c0 = 0, w = 0;
};

std::vector<Piece> pieces(int64_t n) {
  std::vector<Piece> out;
  const int64_t f = n / 128, r = n % 128;
  for (int64_t c0 = 0; c0 < f; c0 += kChunk)
    out.push_back({f, 0, 128, c0, std::min(kChunk, f - c0)});
  if (r > 0) out.push_back({1, 128 * f, static_cast<int32_t>(r), 0, 1});
  return out;
}

/// Boxes per partition in the widest piece of n boxes: the tiles' width.
int64_t width(int64_t n) { return std::min(kChunk, std::max<int64_t>(n / 128, 1)); }

/// The builder with the shorthands both kernels use (all on Vector).
struct Kit {
  NeuronKernelBuilder& b;
  int64_t width = 0; ///< boxes per partition the tiles hold
  Piece pc;          ///< the piece being computed

  /// A new [128, width] fp32 temporary.
  NeuronAccess temp(const std::string& name) {
    return b.tile(NeuronMemory::sbuf, DType::f32, width, name);
  }
  /// A new [128, 4 * width] fp32 tile of boxes.
  NeuronAccess box_tile_of(const std::string& name) {
    return b.tile(NeuronMemory::sbuf, DType::f32, 4 * width, name);
  }
  /// The piece's [P, w] view of a temporary.
  NeuronAccess at(const NeuronAccess& t) const { return t.part(0, pc.parts).free(0, {{pc.w, 1}}); }
  /// Coordinate k of the piece's boxes in a box tile.
  NeuronAccess coord(const NeuronAccess& boxes, int k) const {
    return boxes.part(0, pc.parts).free(k, {{pc.w, 4}});
  }
  NeuronAccess box_tile(const NeuronAccess& boxes) const {
    return boxes.part(0, pc.parts).free(0, {{4 * pc.w, 1}});
  }
  /// The piece's boxes in HBM (input or output `index`).
  NeuronAccess boxes_in(int i) {
    return b.input(i, 4 * pc.row_len, pc.row0, pc.parts, 4 * pc.c0, 4 * pc.w);
  }
  NeuronAccess boxes_out(int o) {
    return b.output(o, 4 * pc.row_len, pc.row0, pc.parts, 4 * pc.c0, 4 * pc.w);
  }
  /// One value per box in HBM ([N]: the losses, their gradients).
  NeuronAccess per_box_in(int i) { return b.input(i, pc.row_len, pc.row0, pc.parts, pc.c0, pc.w); }
  NeuronAccess per_box_out(int o) {
    return b.output(o, pc.row_len, pc.row0, pc.parts, pc.c0, pc.w);
  }

  void tt(const NeuronAccess& d, const NeuronAccess& x, const NeuronAccess& y, NeuronAlu op) {
    b.tensor_tensor(NeuronEngine::vector, d, x, y, op);
  }
  void ts(const NeuronAccess& d, const NeuronAccess& x, NeuronAlu op, float s) {
    b.tensor_scalar(NeuronEngine::vector, d, x, op, s);
  }
  /// d = -x (exact).
  void neg(const NeuronAccess& d, const NeuronAccess& x) { ts(d, x, NeuronAlu::multiply, -1.0f); }
  /// d = 1 - x (exact for a 0/0.5/1 mask: one instruction, -x then +1).
  void one_minus(const NeuronAccess& d, const NeuronAccess& x) {
    b.tensor_scalar(NeuronEngine::vector, d, x, NeuronAlu::multiply, -1.0f, NeuronAlu::add, 1.0f);
  }
};

/// The temporaries of the intersection, union and enclosing box.
struct BoxTerms {
  NeuronAccess ix1, iy1, ix2, iy2, iw, ih, inter, pw, ph, tw, th, uni, cw, ch, area_c;
};

BoxTerms box_terms(Kit& k) {
  BoxTerms t;
  const std::initializer_list<std::pair<NeuronAccess*, const char*>> named = {
      {&t.ix1, "ix1"}, {&t.iy1, "iy1"}, {&t.ix2, "ix2"},      {&t.iy2, "iy2"},
      {&t.iw, "iw"},   {&t.ih, "ih"},   {&t.inter, "inter"},  {&t.pw, "pw"},
      {&t.ph, "ph"},   {&t.tw, "tw"},   {&t.th, "th"},        {&t.uni, "uni"},
      {&t.cw, "cw"},   {&t.ch, "ch"},   {&t.area_c, "area_c"}};
  for (const auto& [v, name] : named) *v = k.temp(name);
  return t;
}

/// Computes the terms of the piece's boxes p, t; `overlap` (when given)
/// receives the 0/1 overlap mask and the intersection is masked by it
/// (else by clamping the sides at 0: the same values).
void compute_terms(Kit& k, const BoxTerms& t, const NeuronAccess& p, const NeuronAccess& q,
                   const NeuronAccess* overlap, const NeuronAccess* scratch) {
  auto c = [&](const NeuronAccess& boxes, int i) { return k.coord(boxes, i); };
  k.tt(k.at(t.ix1), c(p, 0), c(q, 0), NeuronAlu::max);
  k.tt(k.at(t.iy1), c(p, 1), c(q, 1), NeuronAlu::max);
  k.tt(k.at(t.ix2), c(p, 2), c(q, 2), NeuronAlu::min);
  k.tt(k.at(t.iy2), c(p, 3), c(q, 3), NeuronAlu::min);
  k.tt(k.at(t.iw), k.at(t.ix2), k.at(t.ix1), NeuronAlu::subtract);
  k.tt(k.at(t.ih), k.at(t.iy2), k.at(t.iy1), NeuronAlu::subtract);
  if (overlap) {
    // ix2 > ix1 && iy2 > iy1  ==  1 - max(ix1 >= ix2, iy1 >= iy2)
    k.tt(k.at(*overlap), k.at(t.ix1), k.at(t.ix2), NeuronAlu::is_ge);
    k.tt(k.at(*scratch), k.at(t.iy1), k.at(t.iy2), NeuronAlu::is_ge);
    k.tt(k.at(*overlap), k.at(*overlap), k.at(*scratch), NeuronAlu::max);
    k.one_minus(k.at(*overlap), k.at(*overlap));
    k.tt(k.at(t.inter), k.at(t.iw), k.at(t.ih), NeuronAlu::multiply);
    k.tt(k.at(t.inter), k.at(t.inter), k.at(*overlap), NeuronAlu::multiply);
  } else {
    // max(iw, 0) * max(ih, 0): iw * ih when both are positive, else 0.
    k.ts(k.at(*scratch), k.at(t.iw), NeuronAlu::max, 0.0f);
    k.ts(k.at(t.inter), k.at(t.ih), NeuronAlu::max, 0.0f);
    k.tt(k.at(t.inter), k.at(*scratch), k.at(t.inter), NeuronAlu::multiply);
  }
  k.tt(k.at(t.pw), c(p, 2), c(p, 0), NeuronAlu::subtract);
  k.tt(k.at(t.ph), c(p, 3), c(p, 1), NeuronAlu::subtract);
  k.tt(k.at(t.tw), c(q, 2), c(q, 0), NeuronAlu::subtract);
  k.tt(k.at(t.th), c(q, 3), c(q, 1), NeuronAlu::subtract);
  // uni = pw * ph + tw * th - inter
  k.tt(k.at(t.uni), k.at(t.pw), k.at(t.ph), NeuronAlu::multiply);
  k.tt(k.at(*scratch), k.at(t.tw), k.at(t.th), NeuronAlu::multiply);
  k.tt(k.at(t.uni), k.at(t.uni), k.at(*scratch), NeuronAlu::add);
  k.tt(k.at(t.uni), k.at(t.uni), k.at(t.inter), NeuronAlu::subtract);
  // area_c = (max(p2, t2) - min(p0, t0)) * (max(p3, t3) - min(p1, t1))
  k.tt(k.at(t.cw), c(p, 2), c(q, 2), NeuronAlu::max);
  k.tt(k.at(*scratch), c(p, 0), c(q, 0), NeuronAlu::min);
  k.tt(k.at(t.cw), k.at(t.cw), k.at(*scratch), NeuronAlu::subtract);
  k.tt(k.at(t.ch), c(p, 3), c(q, 3), NeuronAlu::max);
  k.tt(k.at(*scratch), c(p, 1), c(q, 1), NeuronAlu::min);
  k.tt(k.at(t.ch), k.at(t.ch), k.at(*scratch), NeuronAlu::subtract);
  k.tt(k.at(t.area_c), k.at(t.cw), k.at(t.ch), NeuronAlu::multiply);
}

absl::Status forward(NeuronKernelBuilder& b, const NeuronKernelCall& call) {
  MSTEP_ASSIGN_OR_RETURN(GiouReduction reduction, giou_reduction(call.attrs));
  const int64_t n = call.input_types[0].shape[0];
  Kit k{b, width(n), {}};
  NeuronAccess pred[2], target[2];
  for (int s = 0; s < 2; ++s) {
    pred[s] = k.box_tile_of(absl::StrCat("pred", s));
    target[s] = k.box_tile_of(absl::StrCat("target", s));
  }
  const BoxTerms t = box_terms(k);
  const NeuronAccess scratch = k.temp("scratch"), ue = k.temp("ue"), iou = k.temp("iou"),
                     loss = k.temp("loss");
  // The reductions' partial sums and the ones column they meet on the
  // Tensor engine; the total in one PSUM element.
  NeuronAccess partial, ones, total, result;
  if (reduction != GiouReduction::none) {
    partial = b.tile(NeuronMemory::sbuf, DType::f32, 1, "partial");
    ones = b.tile(NeuronMemory::sbuf, DType::f32, 1, "ones");
    total = b.tile(NeuronMemory::psum, DType::f32, 1, "total");
    result = b.tile(NeuronMemory::sbuf, DType::f32, 1, "result");
    b.iota(ones, 1, 0, {0});
  }
  const std::vector<Piece> ps = pieces(n);
  for (size_t i = 0; i < ps.size(); ++i) {
    k.pc = ps[i];
    const NeuronAccess& p = pred[i % 2];
    const NeuronAccess& q = target[i % 2];
    b.load(k.box_tile(p), k.boxes_in(0));
    b.load(k.box_tile(q), k.boxes_in(1));
    compute_terms(k, t, p, q, nullptr, &scratch);
    // loss = 1 - (inter / (uni + eps) - (area_c - uni) / (area_c + eps))
    k.ts(k.at(ue), k.at(t.uni), NeuronAlu::add, kEpsF);
    k.tt(k.at(iou), k.at(t.inter), k.at(ue), NeuronAlu::divide);
    k.ts(k.at(ue), k.at(t.area_c), NeuronAlu::add, kEpsF);
    k.tt(k.at(scratch), k.at(t.area_c), k.at(t.uni), NeuronAlu::subtract);
    k.tt(k.at(scratch), k.at(scratch), k.at(ue), NeuronAlu::divide);
    k.tt(k.at(loss), k.at(iou), k.at(scratch), NeuronAlu::subtract);
    k.one_minus(k.at(loss), k.at(loss));
    if (reduction == GiouReduction::none) {
      b.store(k.per_box_out(0), k.at(loss));
      continue;
    }
    const NeuronAccess col = partial.part(0, k.pc.parts);
    b.tensor_reduce(NeuronEngine::vector, col, k.at(loss), NeuronAlu::add);
    b.matmul(total.part(0, 1), col, ones.part(0, k.pc.parts), /*accumulate=*/i > 0);
  }
  if (reduction == GiouReduction::none) return absl::OkStatus();
  if (reduction == GiouReduction::mean)
    k.ts(result.part(0, 1), total.part(0, 1), NeuronAlu::divide, static_cast<float>(n));
  else
    b.tensor_copy(NeuronEngine::vector, result.part(0, 1), total.part(0, 1));
  b.store(b.output(0, 1, 0, 1, 0, 1), result.part(0, 1));
  return absl::OkStatus();
}

absl::Status backward(NeuronKernelBuilder& b, const NeuronKernelCall& call) {
  MSTEP_ASSIGN_OR_RETURN(GiouReduction reduction, giou_reduction(call.attrs));
  const int64_t n = call.input_types[0].shape[0];
  Kit k{b, width(n), {}};
  NeuronAccess pred[2], target[2], grad[2], gp[2], gt[2];
  for (int s = 0; s < 2; ++s) {
    pred[s] = k.box_tile_of(absl::StrCat("pred", s));
    target[s] = k.box_tile_of(absl::StrCat("target", s));
    gp[s] = k.box_tile_of(absl::StrCat("grad_pred", s));
    gt[s] = k.box_tile_of(absl::StrCat("grad_target", s));
    if (reduction == GiouReduction::none) grad[s] = k.temp(absl::StrCat("grad", s));
  }
  // A reduced loss: its one gradient on every partition (a partition
  // stride 0 load), divided by N for the mean.
  NeuronAccess g_col;
  if (reduction != GiouReduction::none) {
    g_col = b.tile(NeuronMemory::sbuf, DType::f32, 1, "g");
    NeuronAccess src = b.input(2, 1, 0, 128, 0, 1);
    src.partition_stride = 0;
    b.load(g_col, src);
    if (reduction == GiouReduction::mean)
      k.ts(g_col, g_col, NeuronAlu::divide, static_cast<float>(std::max<int64_t>(n, 1)));
  }
  const BoxTerms t = box_terms(k);
  std::vector<NeuronAccess> tmp;
  for (const char* name : {"overlap", "scratch", "ue", "ce", "a", "b", "d_uni", "g_ce", "d_inter",
                           "d_c", "d_iw", "d_ih", "d_cw", "d_ch", "e", "sum"})
    tmp.push_back(k.temp(name));
  const NeuronAccess &overlap = tmp[0], &scratch = tmp[1], &ue = tmp[2], &ce = tmp[3], &ta = tmp[4],
                     &tb = tmp[5], &d_uni = tmp[6], &g_ce = tmp[7], &d_inter = tmp[8],
                     &d_c = tmp[9], &d_iw = tmp[10], &d_ih = tmp[11], &d_cw = tmp[12],
                     &d_ch = tmp[13], &e = tmp[14], &sum = tmp[15];
  // max_share(p_k, t_k) (the gradient share of p_k in max(p_k, t_k): 1,
  // 0.5 on a tie, 0) and 1 minus it, per coordinate.
  NeuronAccess share[4], other[4];
  for (int c = 0; c < 4; ++c) {
    share[c] = k.temp(absl::StrCat("share", c));
    other[c] = k.temp(absl::StrCat("other", c));
  }
  const std::vector<Piece> ps = pieces(n);
  for (size_t i = 0; i < ps.size(); ++i) {
    k.pc = ps[i];
    const int s = static_cast<int>(i % 2);
    const NeuronAccess &p = pred[s], &q = target[s];
    b.load(k.box_tile(p), k.boxes_in(0));
    b.load(k.box_tile(q), k.boxes_in(1));
    NeuronAccess g;
    if (reduction == GiouReduction::none) {
      b.load(k.at(grad[s]), k.per_box_in(2));
      g = k.at(grad[s]);
    } else {
      g = g_col.part(0, k.pc.parts).free(0, {{k.pc.w, 0}});
    }
    compute_terms(k, t, p, q, &overlap, &scratch);
    k.ts(k.at(ue), k.at(t.uni), NeuronAlu::add, kEpsF);
    k.ts(k.at(ce), k.at(t.area_c), NeuronAlu::add, kEpsF);
    // d_uni = g * inter / (ue * ue) - g / ce
    k.tt(k.at(ta), g, k.at(t.inter), NeuronAlu::multiply);
    k.tt(k.at(tb), k.at(ue), k.at(ue), NeuronAlu::multiply);
    k.tt(k.at(ta), k.at(ta), k.at(tb), NeuronAlu::divide);
    k.tt(k.at(g_ce), g, k.at(ce), NeuronAlu::divide);
    k.tt(k.at(d_uni), k.at(ta), k.at(g_ce), NeuronAlu::subtract);
    // d_inter = -g / ue - d_uni = -(g / ue + d_uni)
    k.tt(k.at(ta), g, k.at(ue), NeuronAlu::divide);
    k.tt(k.at(ta), k.at(ta), k.at(d_uni), NeuronAlu::add);
    k.neg(k.at(d_inter), k.at(ta));
    // d_c = g / ce - g * (area_c - uni) / (ce * ce)
    k.tt(k.at(ta), k.at(t.area_c), k.at(t.uni), NeuronAlu::subtract);
    k.tt(k.at(ta), g, k.at(ta), NeuronAlu::multiply);
    k.tt(k.at(tb), k.at(ce), k.at(ce), NeuronAlu::multiply);
    k.tt(k.at(ta), k.at(ta), k.at(tb), NeuronAlu::divide);
    k.tt(k.at(d_c), k.at(g_ce), k.at(ta), NeuronAlu::subtract);
    // d_iw, d_ih: d_inter times the other side where the boxes overlap.
    k.tt(k.at(d_iw), k.at(d_inter), k.at(t.ih), NeuronAlu::multiply);
    k.tt(k.at(d_iw), k.at(d_iw), k.at(overlap), NeuronAlu::multiply);
    k.tt(k.at(d_ih), k.at(d_inter), k.at(t.iw), NeuronAlu::multiply);
    k.tt(k.at(d_ih), k.at(d_ih), k.at(overlap), NeuronAlu::multiply);
    k.tt(k.at(d_cw), k.at(d_c), k.at(t.ch), NeuronAlu::multiply);
    k.tt(k.at(d_ch), k.at(d_c), k.at(t.cw), NeuronAlu::multiply);
    for (int c = 0; c < 4; ++c) {
      // max_share = 0.5 * ((p >= t) - (t >= p)) + 0.5
      k.tt(k.at(share[c]), k.coord(p, c), k.coord(q, c), NeuronAlu::is_ge);
      k.tt(k.at(e), k.coord(q, c), k.coord(p, c), NeuronAlu::is_ge);
      k.tt(k.at(share[c]), k.at(share[c]), k.at(e), NeuronAlu::subtract);
      b.tensor_scalar(NeuronEngine::vector, k.at(share[c]), k.at(share[c]), NeuronAlu::multiply,
                      0.5f, NeuronAlu::add, 0.5f);
      k.one_minus(k.at(other[c]), k.at(share[c]));
    }
    // Coordinate c of box `which` (0 pred, 1 target): its area's side in U,
    // I's side (x1, y1 through a max, x2, y2 through a min), C's side (the
    // other way round); x1, y1 negated.
    for (int which = 0; which < 2; ++which)
      for (int c = 0; c < 4; ++c) {
        const bool x = c % 2 == 0, low = c < 2;
        const NeuronAccess& side = which == 0 ? (x ? t.ph : t.pw) : (x ? t.th : t.tw);
        // pred's x1 takes max_share of I's side; target's the rest.
        const bool pred_low = (which == 0) == low;
        const NeuronAccess& s_i = pred_low ? share[c] : other[c];
        const NeuronAccess& s_c = pred_low ? other[c] : share[c];
        k.tt(k.at(sum), k.at(d_uni), k.at(side), NeuronAlu::multiply);
        k.tt(k.at(e), k.at(x ? d_iw : d_ih), k.at(s_i), NeuronAlu::multiply);
        k.tt(k.at(sum), k.at(sum), k.at(e), NeuronAlu::add);
        k.tt(k.at(e), k.at(x ? d_cw : d_ch), k.at(s_c), NeuronAlu::multiply);
        const NeuronAccess dst = k.coord(which == 0 ? gp[s] : gt[s], c);
        if (low) {
          k.tt(k.at(sum), k.at(sum), k.at(e), NeuronAlu::add);
          k.neg(dst, k.at(sum));
        } else {
          k.tt(dst, k.at(sum), k.at(e), NeuronAlu::add);
        }
      }
    b.store(k.boxes_out(0), k.box_tile(gp[s]));
    b.store(k.boxes_out(1), k.box_tile(gt[s]));
  }
  return absl::OkStatus();
}

} // namespace

std::shared_ptr<const CustomKernel> giou_forward_neuron_kernel() { return neuron_kernel(forward); }
std::shared_ptr<const CustomKernel> giou_backward_neuron_kernel() {
  return neuron_kernel(backward);
}

} // namespace mstep::examples
