// The data-movement ops as strided copies and their DMA programs.
#include "lib/backends/neuron/CopyLowering.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowTiling.h"
#include "lib/backends/neuron/TransposeCopy.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

namespace {

/// SBUF bytes per partition of one staging slot (two slots): 4 KiB per
/// partition already saturates a DMA, more only saves fixed costs.
constexpr int64_t kCopySlotBytes = 16 * 1024;
/// Most DMAs one copy program may take (load + store per piece).
constexpr int64_t kMaxCopyPieces = 4096;

/// For every index i of `sizes`: out[dst_offset + sum(i[d] * dst[d])] =
/// operand[src_offset + sum(i[d] * src[d])] (elements).
struct StridedCopy {
  int32_t operand = 0;
  int64_t src_offset = 0, dst_offset = 0;
  std::vector<int64_t> sizes, src, dst;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

StridedCopy whole(int32_t operand, const Shape& out, const Shape::Dims& src) {
  StridedCopy c;
  c.operand = operand;
  c.sizes.assign(out.begin(), out.end());
  c.src.assign(src.begin(), src.end());
  const Shape::Dims dst = out.strides();
  c.dst.assign(dst.begin(), dst.end());
  return c;
}

/// The copies of `node`, one per operand it reads (none for an empty one).
absl::StatusOr<std::vector<StridedCopy>> copies_of(const GraphNode& node,
                                                   absl::Span<const TensorType> types) {
  if (node.results.size() != 1 || types.empty())
    return refuse(node.op, "expects one result and an operand");
  const Shape& out = node.results[0].shape;
  for (const TensorType& t : types)
    if (t.dtype != node.results[0].dtype)
      return refuse(node.op, absl::StrCat("operand ", t.to_string(), " and result ",
                                          node.results[0].to_string(), " differ in dtype"));
  const Shape& in = types[0].shape;
  std::vector<StridedCopy> out_copies;
  switch (node.op) {
  case OpKind::reshape:
    if (in.numel() != out.numel()) return refuse(node.op, "element counts differ");
    out_copies.push_back(whole(0, out, out.strides()));
    break;
  case OpKind::permute: {
    const IntList& perm = attr_ints(node.attrs, AttrName::perm);
    if (static_cast<int64_t>(perm.size()) != out.rank() || in.rank() != out.rank())
      return refuse(node.op, "perm does not match the rank");
    const Shape::Dims in_strides = in.strides();
    Shape::Dims src(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) src[d] = in_strides[perm[d]];
    out_copies.push_back(whole(0, out, src));
    break;
  }
  case OpKind::expand:
    out_copies.push_back(whole(0, out, ref::broadcast_strides(in, out)));
    break;
  case OpKind::slice: {
    const int64_t dim = attr_int(node.attrs, AttrName::dim);
    const int64_t start = attr_int(node.attrs, AttrName::start);
    const int64_t step = attr_int(node.attrs, AttrName::step);
    if (dim < 0 || dim >= in.rank() || in.rank() != out.rank() || start < 0 || step < 1)
      return refuse(node.op, "dim/start/step out of range");
    Shape::Dims src = in.strides();
    StridedCopy c = whole(0, out, src);
    c.src_offset = start * src[dim];
    c.src[dim] *= step;
    out_copies.push_back(std::move(c));
    break;
  }
  case OpKind::cat: {
    const int64_t dim = attr_int(node.attrs, AttrName::dim);
    if (dim < 0 || dim >= out.rank()) return refuse(node.op, "dim out of range");
    const Shape::Dims out_strides = out.strides();
    int64_t at = 0;
    for (size_t k = 0; k < types.size(); ++k) {
      const Shape& s = types[k].shape;
      if (s.rank() != out.rank()) return refuse(node.op, "operands of another rank");
      if (s.numel() > 0) {
        StridedCopy c = whole(static_cast<int32_t>(k), s, s.strides());
        c.dst.assign(out_strides.begin(), out_strides.end());
        c.dst_offset = at * out_strides[dim];
        out_copies.push_back(std::move(c));
      }
      at += s[dim];
    }
    break;
  }
  case OpKind::slice_scatter: {
    // The input where the slice does not land (disjoint regions along
    // dim: no two copies write the same bytes, so no order among them),
    // then the source into the slice.
    const int64_t dim = attr_int(node.attrs, AttrName::dim);
    const int64_t start = attr_int(node.attrs, AttrName::start);
    const int64_t step = attr_int(node.attrs, AttrName::step);
    if (types.size() != 2 || in != out || dim < 0 || dim >= out.rank() || start < 0 || step < 1 ||
        types[1].shape.rank() != out.rank())
      return refuse(node.op, "expects input, src and an in-range dim/start/step");
    const Shape::Dims strides = out.strides();
    const int64_t count = types[1].shape[dim], size = out[dim];
    // Output indices [begin, begin + len * every) along dim, from the input.
    auto from_input = [&](int64_t begin, int64_t len, int64_t every) {
      if (len <= 0) return;
      StridedCopy c = whole(0, out, strides);
      c.sizes[dim] = len;
      c.src[dim] = c.dst[dim] = strides[dim] * every;
      c.src_offset = c.dst_offset = begin * strides[dim];
      out_copies.push_back(std::move(c));
    };
    if (count == 0) {
      from_input(0, size, 1);
      break;
    }
    const int64_t last = start + (count - 1) * step;
    from_input(0, start, 1);
    for (int64_t o = 1; o < step; ++o) from_input(start + o, count - 1, step);
    from_input(last + 1, size - last - 1, 1);
    if (types[1].numel() > 0) {
      StridedCopy c = whole(1, types[1].shape, types[1].shape.strides());
      c.dst.assign(strides.begin(), strides.end());
      c.dst[dim] *= step;
      c.dst_offset = start * strides[dim];
      out_copies.push_back(std::move(c));
    }
    break;
  }
  default:
    return refuse(node.op, "not a copy op");
  }
  return out_copies;
}

/// Drops size-1 dims and merges neighbours contiguous on both sides.
void simplify(StridedCopy& c) {
  std::vector<int64_t> sizes, src, dst;
  for (size_t d = 0; d < c.sizes.size(); ++d) {
    if (c.sizes[d] == 1) continue;
    if (!sizes.empty() && src.back() == c.sizes[d] * c.src[d] &&
        dst.back() == c.sizes[d] * c.dst[d]) {
      sizes.back() *= c.sizes[d];
      src.back() = c.src[d];
      dst.back() = c.dst[d];
      continue;
    }
    sizes.push_back(c.sizes[d]);
    src.push_back(c.src[d]);
    dst.push_back(c.dst[d]);
  }
  c.sizes = std::move(sizes);
  c.src = std::move(src);
  c.dst = std::move(dst);
}

/// The simplified copies of `node`, or why not.
absl::StatusOr<std::vector<StridedCopy>> simplified(const GraphNode& node,
                                                    absl::Span<const TensorType> types) {
  absl::StatusOr<std::vector<StridedCopy>> copies = copies_of(node, types);
  if (copies.ok())
    for (StridedCopy& c : *copies) simplify(c);
  return copies;
}

/// The tile IR dtype that moves elements of `d` (bit copies), and how many
/// of its elements one element of `d` is (0: none can).
std::pair<DType, int64_t> moved_as(DType d) {
  switch (element_size(d)) {
  case 2:
    return {d == DType::f16 ? DType::f16 : DType::bf16, 1};
  case 4:
    return {d == DType::f32 ? DType::f32 : DType::i32, 1};
  case 8:
    return {DType::i32, 2};
  default:
    return {d, 0};
  }
}

/// `c` over elements `factor` times smaller: strides scaled, one more
/// innermost dim of `factor` contiguous words.
void widen(StridedCopy& c, int64_t factor) {
  if (factor == 1) return;
  c.src_offset *= factor;
  c.dst_offset *= factor;
  for (int64_t& s : c.src) s *= factor;
  for (int64_t& s : c.dst) s *= factor;
  c.sizes.push_back(factor);
  c.src.push_back(1);
  c.dst.push_back(1);
}

/// `c` with at least two dims: a flat run of n elements as [128, n/128]
/// plus a one-partition tail (or [1, n] when shorter than 128); a long
/// contiguous innermost dim under few rows split as [q, n/q].
std::vector<StridedCopy> with_partition_dim(StridedCopy c) {
  if (c.sizes.empty()) {
    c.sizes = {1};
    c.src = {1};
    c.dst = {1};
  }
  if (c.sizes.size() >= 2) {
    // Few rows and long contiguous runs (cat or slice along the last dim
    // of a [2, 5000]): the runs' outer part goes on the partitions.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < c.sizes.size(); ++d) rows = std::max(rows, c.sizes[d]);
    const int64_t n = c.sizes.back();
    if (rows < 64 && c.src.back() == 1 && c.dst.back() == 1)
      for (int64_t q = kPartitions; q > 2 * rows; --q)
        if (n % q == 0 && n / q >= 16) {
          c.sizes.back() = q;
          c.src.back() = c.dst.back() = n / q;
          c.sizes.push_back(n / q);
          c.src.push_back(1);
          c.dst.push_back(1);
          break;
        }
    return {c};
  }
  const int64_t n = c.sizes[0], a = c.src[0], b = c.dst[0];
  const int64_t f = n / kPartitions, tail = n - f * kPartitions;
  std::vector<StridedCopy> out;
  if (f > 0) {
    StridedCopy m = c;
    m.sizes = {kPartitions, f};
    m.src = {f * a, a};
    m.dst = {f * b, b};
    out.push_back(m);
  }
  if (tail > 0) {
    StridedCopy t = c;
    t.src_offset += f * kPartitions * a;
    t.dst_offset += f * kPartitions * b;
    t.sizes = {1, tail};
    t.src = {a, a};
    t.dst = {b, b};
    out.push_back(t);
  }
  return out;
}

/// How a copy is cut into DMA pairs (load, store): the partition dim in
/// row tiles of up to 128, every index of the loop dims (the free dims
/// outside the chunked one), the chunked dim in chunks; the free dims
/// inside it whole.
struct CopyPlan {
  int p = 0;             ///< partition dim
  std::vector<int> free; ///< the other dims, outer first
  size_t chunk_at = 0;   ///< index into `free` of the chunked dim
  int64_t chunk = 1;     ///< its chunk length
  int64_t inner = 1;     ///< elements of the free dims after it
  int64_t pieces = 0;
};

CopyPlan plan(const StridedCopy& c, int64_t cap) {
  CopyPlan pl;
  const int r = static_cast<int>(c.sizes.size());
  for (int d = 1; d + 1 < r; ++d)
    if (c.sizes[d] > c.sizes[pl.p]) pl.p = d;
  for (int d = 0; d < r; ++d)
    if (d != pl.p) pl.free.push_back(d);
  const size_t k = pl.free.size();
  // The chunked dim: the outermost one whose inner dims fit a slot, with
  // at most kMaxFreeDims dims in a descriptor; the dims outside it loop.
  size_t j = k > static_cast<size_t>(kMaxFreeDims) ? k - kMaxFreeDims : 0;
  auto inner_of = [&](size_t at) {
    int64_t n = 1;
    for (size_t m = at + 1; m < k; ++m) n *= c.sizes[pl.free[m]];
    return n;
  };
  while (inner_of(j) > cap) ++j;
  pl.chunk_at = j;
  pl.inner = inner_of(j);
  const int64_t len = c.sizes[pl.free[j]];
  pl.chunk = std::clamp<int64_t>(cap / pl.inner, 1, len);
  int64_t loops = 1;
  for (size_t m = 0; m < j; ++m) loops *= c.sizes[pl.free[m]];
  pl.pieces =
      (c.sizes[pl.p] + kPartitions - 1) / kPartitions * loops * ((len + pl.chunk - 1) / pl.chunk);
  return pl;
}

/// The HBM side of one piece: `strides` (src or dst of the copy) from
/// `offset`, rows [r0, r0 + parts) of the partition dim.
AccessPattern hbm_piece(int32_t tensor, DType dt, const StridedCopy& c, const CopyPlan& pl,
                        const std::vector<int64_t>& strides, int64_t offset, int64_t r0,
                        int32_t parts, int64_t c0, int64_t w) {
  AccessPattern ap;
  ap.kind = BufferKind::hbm;
  ap.buffer = tensor;
  ap.dtype = dt;
  ap.partitions = parts;
  ap.partition_stride = strides[pl.p];
  ap.offset = offset + r0 * strides[pl.p] + c0 * strides[pl.free[pl.chunk_at]];
  ap.dims.push_back({w, strides[pl.free[pl.chunk_at]]});
  for (size_t m = pl.chunk_at + 1; m < pl.free.size(); ++m)
    ap.dims.push_back({c.sizes[pl.free[m]], strides[pl.free[m]]});
  return ap;
}

} // namespace

bool is_copy_op(OpKind op) {
  return op == OpKind::reshape || op == OpKind::permute || op == OpKind::expand ||
         op == OpKind::slice || op == OpKind::cat || op == OpKind::slice_scatter;
}

bool layout_alias(const GraphNode& node, absl::Span<const TensorType> types) {
  if (!is_copy_op(node.op)) return false;
  absl::StatusOr<std::vector<StridedCopy>> copies = simplified(node, types);
  if (!copies.ok() || copies->size() != 1) return false;
  const StridedCopy& c = copies->front();
  // One contiguous run over all of operand 0, in place.
  return c.operand == 0 && c.src_offset == 0 && c.dst_offset == 0 &&
         c.numel() == types[0].numel() && c.sizes.size() <= 1 &&
         (c.sizes.empty() || (c.src[0] == 1 && c.dst[0] == 1));
}

namespace {

/// The copy as a transpose of its two minor dims when it is one: a single
/// copy whose result rows read the input down a column (element-wise on
/// both sides for the DMAs).
std::optional<MinorTranspose> minor_transpose(const GraphNode& node,
                                              absl::Span<const TensorType> types,
                                              const std::vector<StridedCopy>& copies) {
  if (copies.size() != 1) return std::nullopt;
  const StridedCopy& c = copies[0];
  const size_t r = c.sizes.size();
  if (c.operand != 0 || r < 2 || c.src[r - 2] != 1 || c.dst[r - 1] != 1 || c.sizes[r - 2] < 2 ||
      c.sizes[r - 1] < 2)
    return std::nullopt;
  MinorTranspose t;
  t.element_bytes = static_cast<int64_t>(element_size(node.results[0].dtype));
  t.batch_sizes.assign(c.sizes.begin(), c.sizes.end() - 2);
  t.batch_src.assign(c.src.begin(), c.src.end() - 2);
  t.batch_dst.assign(c.dst.begin(), c.dst.end() - 2);
  t.x = c.sizes[r - 2];
  t.y = c.sizes[r - 1];
  t.in_row = c.src[r - 1];
  t.out_row = c.dst[r - 2];
  t.src_offset = c.src_offset;
  t.dst_offset = c.dst_offset;
  t.in_elements = types[0].numel();
  t.out_elements = node.results[0].numel();
  return t;
}

/// The DMA program of the simplified `copies`.
absl::StatusOr<LoweredOp> lower_copy_dma(const GraphNode& node, absl::Span<const TensorType> types,
                                         std::vector<StridedCopy> copies) {
  const TensorType& result = node.results[0];
  const auto [dt, factor] = moved_as(result.dtype);
  if (factor == 0)
    return refuse(node.op, absl::StrCat(result.to_string(), ": ", element_size(result.dtype),
                                        "-byte elements (the tile IR has no 8-bit type)"));
  if (result.numel() == 0) return refuse(node.op, "an empty result");
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  const int64_t cap = std::min<int64_t>(kMaxSbufFreeElements, kCopySlotBytes / esize);
  std::vector<StridedCopy> parts;
  for (StridedCopy& c : copies) {
    widen(c, factor);
    simplify(c);
    for (StridedCopy& p : with_partition_dim(std::move(c))) parts.push_back(std::move(p));
  }
  std::vector<CopyPlan> plans;
  int64_t pieces = 0;
  for (const StridedCopy& c : parts) {
    plans.push_back(plan(c, cap));
    pieces += plans.back().pieces;
  }
  if (pieces > kMaxCopyPieces)
    return refuse(node.op,
                  absl::StrCat(result.to_string(), " needs ", pieces, " DMA pieces (more than ",
                               kMaxCopyPieces, "): too fragmented a layout"));

  RowKit k(absl::StrCat("neuron_", op_name(node.op)));
  std::vector<int32_t> binding, hbm(types.size(), -1);
  for (const StridedCopy& c : parts)
    if (hbm[c.operand] < 0) {
      hbm[c.operand] =
          k.b.hbm_tensor(absl::StrCat("in", c.operand), dt, types[c.operand].numel() * factor);
      binding.push_back(c.operand);
    }
  const int32_t out = k.b.hbm_tensor("out", dt, result.numel() * factor);
  binding.push_back(-1);
  for (size_t i = 0; i < parts.size(); ++i) {
    const StridedCopy& c = parts[i];
    const CopyPlan& pl = plans[i];
    // Every index of the loop dims (outside the chunked one).
    std::vector<int64_t> loop(pl.chunk_at, 0);
    for (;;) {
      int64_t src_at = c.src_offset, dst_at = c.dst_offset;
      for (size_t m = 0; m < pl.chunk_at; ++m) {
        src_at += loop[m] * c.src[pl.free[m]];
        dst_at += loop[m] * c.dst[pl.free[m]];
      }
      const int64_t len = c.sizes[pl.free[pl.chunk_at]];
      for (const RowTile& t : row_tiles(c.sizes[pl.p]))
        for (int64_t c0 = 0; c0 < len; c0 += pl.chunk) {
          const int64_t w = std::min(pl.chunk, len - c0);
          // HBM to HBM: the pieces are disjoint and independent, so they
          // spread over the DMA engines with no SBUF round trip (a staged
          // load + store pair was two DMA latencies, two in flight).
          k.deps.track(
              k.b.dma_copy(hbm_piece(out, dt, c, pl, c.dst, dst_at, t.r0, t.parts, c0, w),
                           hbm_piece(hbm[c.operand], dt, c, pl, c.src, src_at, t.r0, t.parts, c0, w)));
        }
      size_t m = pl.chunk_at;
      while (m > 0 && ++loop[m - 1] == c.sizes[pl.free[m - 1]]) loop[--m] = 0;
      if (m == 0) break;
    }
  }
  return k.finish(binding);
}

} // namespace

absl::StatusOr<LoweredOp> lower_copy(const GraphNode& node, absl::Span<const TensorType> types) {
  MSTEP_ASSIGN_OR_RETURN(std::vector<StridedCopy> copies, simplified(node, types));
  const std::optional<MinorTranspose> transpose = minor_transpose(node, types, copies);
  absl::StatusOr<LoweredOp> dma = lower_copy_dma(node, types, std::move(copies));
  if (!transpose) return dma;
  MSTEP_ASSIGN_OR_RETURN(LoweredOp on_chip, lower_minor_transpose(*transpose, node.op));
  if (!dma.ok()) return on_chip;
  // The element-wise DMAs win on small or few-row transposes (no identity,
  // no PSUM round trip): keep whichever the cost model times faster.
  MSTEP_ASSIGN_OR_RETURN(CostReport on_chip_cost, estimate_cost(on_chip.program));
  MSTEP_ASSIGN_OR_RETURN(CostReport dma_cost, estimate_cost(dma->program));
  if (on_chip_cost.total_ns < dma_cost.total_ns) return on_chip;
  return dma;
}

} // namespace mstep::neuron
