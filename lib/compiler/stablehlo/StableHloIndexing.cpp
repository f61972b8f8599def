// gather and scatter_add on any dim (torch.gather / torch.scatter_add),
// pad (negative pads crop) and triu/tril.
//
// gather and scatter_add address one element per index position: the
// full coordinate of position i is i itself with dim `dim` replaced by
// index[i], built as [*index.shape, rank] from iotas and the index, and
// stablehlo.gather / scatter move single elements (slice sizes 1, every
// dim collapsed / inserted). scatter_add reads src at the index's
// positions (src may be larger) and adds duplicates (bool: or); the order
// of duplicate additions is the consumer's, so floats may differ from
// ref's index order by rounding. An out-of-range index is an error on ref
// and clamped (gather) or dropped (scatter) by StableHLO: the export does
// not check indices.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/stablehlo/StableHloOpFamilies.h"

namespace mstep::stablehlo {

namespace {

std::vector<int64_t> iota_list(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

/// [*index.shape, rank] i64: each index position's full coordinate.
Value coordinates(FunctionText& f, const Value& index, int64_t dim) {
  const size_t rank = index.shape.size();
  std::vector<int64_t> one = index.shape;
  one.push_back(1);
  Values parts;
  for (size_t d = 0; d < rank; ++d) {
    const Value c = static_cast<int64_t>(d) == dim ? f.convert(index, "i64")
                                                   : f.iota(index.shape, static_cast<int64_t>(d), "i64");
    parts.push_back(f.reshape(c, one));
  }
  std::vector<int64_t> shape = index.shape;
  shape.push_back(static_cast<int64_t>(rank));
  if (parts.size() == 1) return parts[0];
  return f.op("stablehlo.concatenate", parts, shape, "i64",
              absl::StrCat("dimension = ", rank, " : i64"));
}

absl::Status check_rank(mlir::Operation* op, const Value& x) {
  if (x.shape.empty())
    return absl::UnimplementedError(absl::StrCat(
        "op '", op->getName().getStringRef().str(),
        "' on a 0-d input has no StableHLO export yet; reshape the input to [1] first"));
  return absl::OkStatus();
}

template <bool kUpper>
absl::StatusOr<Values> triangle(FunctionText& f, mlir::Operation* op, const Values& in) {
  const Value& x = in[0];
  const auto r = static_cast<int64_t>(x.shape.size());
  const Value row = f.iota(x.shape, r - 2, "i64"), col = f.iota(x.shape, r - 1, "i64");
  const Value offset = f.same("stablehlo.subtract", {col, row});
  const Value diagonal = f.splat(static_cast<double>(i64_attr(op, "diagonal")), x.shape, "i64");
  const Value keep = f.compare(offset, diagonal, kUpper ? "GE" : "LE");
  return Values{f.select(keep, x, f.splat(0, x.shape, x.elem))};
}

}  // namespace

absl::StatusOr<Values> lower_gather(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out) {
  const Value &x = in[0], &index = in[1];
  if (absl::Status s = check_rank(op, x); !s.ok()) return s;
  const int64_t dim = i64_attr(op, "dim");
  const std::string all = absl::StrJoin(iota_list(x.shape.size()), ", ");
  return Values{f.op("stablehlo.gather", {x, coordinates(f, index, dim)}, out[0].shape, x.elem,
                     absl::StrCat("dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [", all,
                                  "], start_index_map = [", all, "], index_vector_dim = ",
                                  x.shape.size(), ">, indices_are_sorted = false, slice_sizes = ",
                                  i64_array(std::vector<int64_t>(x.shape.size(), 1))))};
}

absl::StatusOr<Values> lower_scatter_add(FunctionText& f, mlir::Operation* op, const Values& in,
                                         const Values& out) {
  const Value &x = in[0], &index = in[1];
  if (absl::Status s = check_rank(op, x); !s.ok()) return s;
  const int64_t dim = i64_attr(op, "dim");
  const Value src = f.slice(in[2], std::vector<int64_t>(index.shape.size(), 0), index.shape);
  const std::string all = absl::StrJoin(iota_list(x.shape.size()), ", ");
  return f.op_results(
      "stablehlo.scatter", {x, coordinates(f, index, dim), src}, {out[0]},
      absl::StrCat("indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
                   "inserted_window_dims = [", all, "], scatter_dims_to_operand_dims = [", all,
                   "], index_vector_dim = ", x.shape.size(), ">, unique_indices = false"),
      x.elem == "i1" ? FunctionText::region("stablehlo.or", x.elem)
                     : FunctionText::region(Reducer::add, x.elem));
}

absl::StatusOr<Values> lower_pad(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values&) {
  // torch order: (before, after) pairs, last dim first. Negative pads
  // crop: a slice first, then a pad with what is left (all >= 0).
  const Value& x = in[0];
  const std::vector<int64_t> pads = array_attr(op, "pads");
  const size_t rank = x.shape.size();
  std::vector<int64_t> start(rank, 0), limit = x.shape, low(rank, 0), high(rank, 0);
  for (size_t k = 0; 2 * k < pads.size() && k < rank; ++k) {
    const size_t d = rank - 1 - k;
    const int64_t before = pads[2 * k];
    const int64_t after = 2 * k + 1 < pads.size() ? pads[2 * k + 1] : 0;
    if (before < 0) start[d] = -before; else low[d] = before;
    if (after < 0) limit[d] += after; else high[d] = after;
  }
  const Value cropped = f.slice(x, start, limit);
  return Values{f.pad(cropped, in[1], low, high, std::vector<int64_t>(rank, 0))};
}

absl::StatusOr<Values> lower_triu(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values&) {
  return triangle<true>(f, op, in);
}

absl::StatusOr<Values> lower_tril(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values&) {
  return triangle<false>(f, op, in);
}

}  // namespace mstep::stablehlo
