// The data-movement ops permute, expand, slice, cat and slice_scatter as
// loops (XlaOpLoops.h), any dtype: each is one or more strided copies, a
// loop nest over the dims of what is written that reads element
// base + sum(index[d] * stride[d]) of its source (the ref kernels'
// for_each_strided, lib/backends/ref/RefReshape.cpp and RefShape.cpp):
// - permute: output dim d reads input dim perm[d];
// - expand: a broadcast dim reads stride 0;
// - slice: along `dim`, start + k * step;
// - cat: each input into its block of the output along `dim`;
// - slice_scatter: the input, then src over its slice (start, step).
// Elements move as integers of their size. Size-1 dims get no loop, and
// an innermost dim contiguous on both sides is one memmove per row. A
// transposing permute (the innermost written dim reads strided, the one
// above it reads contiguously: a matrix transpose) copies kTile x kTile
// blocks, as the cpu backend's transpose does, so each source cache line
// is used whole while it is loaded (a column walk missed on every read).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

/// One strided copy: `shape` elements written row-major at `out_base` of
/// the destination (with the destination's `out_strides`), each read at
/// `in_base` + sum(index[d] * in_strides[d]) of the source.
struct StridedCopy {
  size_t source = 0; // operand number
  std::vector<int64_t> shape, in_strides, out_strides;
  int64_t in_base = 0, out_base = 0;
  bool blocked = false; // a permute: its last two loops may go in tiles
};

constexpr int64_t kTile = 16;

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int64_t d = shape.rank() - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The dims of `copy` that get a loop (not size 1).
std::vector<int64_t> looped_dims(const StridedCopy& copy) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < copy.shape.size(); ++d)
    if (copy.shape[d] != 1) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

/// In a row function (`rows`), the outermost loop runs over the rows the
/// call is given.
void emit_copy(LoopBuilder& lb, const StridedCopy& copy, llvm::Type* element, bool rows_outer) {
  auto& b = lb.b();
  const std::vector<int64_t> dims = looped_dims(copy);
  llvm::Value* src = lb.operand(copy.source);
  llvm::Value* dst = lb.result(0);
  const uint64_t bytes = element->getPrimitiveSizeInBits() / 8;
  // An innermost dim contiguous on both sides is one memmove per row.
  const bool rows =
      !dims.empty() && copy.in_strides[dims.back()] == 1 && copy.out_strides[dims.back()] == 1;
  const size_t loops = rows ? dims.size() - 1 : dims.size();
  const bool transposed = copy.blocked && !rows && loops >= 2 &&
                          copy.in_strides[dims[loops - 1]] != 1 &&
                          copy.in_strides[dims[loops - 2]] == 1;
  auto smin = [&](llvm::Value* x, llvm::Value* y) {
    return b.CreateSelect(b.CreateICmpSLT(x, y), x, y);
  };
  // The last two dims (a outer, c inner) in kTile x kTile blocks; a is the
  // row range when it is the row function's outermost loop.
  auto emit_blocked = [&](size_t level, llvm::Value* in, llvm::Value* out) {
    const int64_t a = dims[level], c = dims[level + 1];
    const bool row_range = level == 0 && rows_outer;
    llvm::Value* a_begin = row_range ? lb.row_begin() : lb.i64(0);
    llvm::Value* a_end = row_range ? lb.row_end() : lb.i64(copy.shape[a]);
    llvm::Value* a_tiles =
        b.CreateSDiv(b.CreateAdd(b.CreateSub(a_end, a_begin), lb.i64(kTile - 1)), lb.i64(kTile));
    lb.loop(lb.i64(0), a_tiles, [&](llvm::Value* ta) {
      llvm::Value* a0 = b.CreateAdd(a_begin, b.CreateMul(ta, lb.i64(kTile)));
      llvm::Value* a1 = smin(a_end, b.CreateAdd(a0, lb.i64(kTile)));
      lb.loop((copy.shape[c] + kTile - 1) / kTile, [&](llvm::Value* tc) {
        llvm::Value* c0 = b.CreateMul(tc, lb.i64(kTile));
        llvm::Value* c1 = smin(lb.i64(copy.shape[c]), b.CreateAdd(c0, lb.i64(kTile)));
        lb.loop(a0, a1, [&](llvm::Value* i) {
          llvm::Value* in_a = b.CreateAdd(in, b.CreateMul(i, lb.i64(copy.in_strides[a])));
          llvm::Value* out_a = b.CreateAdd(out, b.CreateMul(i, lb.i64(copy.out_strides[a])));
          lb.loop(c0, c1, [&](llvm::Value* j) {
            lb.store(lb.load(element, src,
                             b.CreateAdd(in_a, b.CreateMul(j, lb.i64(copy.in_strides[c])))),
                     dst, b.CreateAdd(out_a, b.CreateMul(j, lb.i64(copy.out_strides[c]))));
          });
        });
      });
    });
  };
  // Nests dims[level..] at input and output positions `in` and `out`.
  std::function<void(size_t, llvm::Value*, llvm::Value*)> nest = [&](size_t level, llvm::Value* in,
                                                                     llvm::Value* out) {
    if (level == loops) {
      if (rows)
        b.CreateMemMove(b.CreateInBoundsGEP(element, dst, out), llvm::MaybeAlign(bytes),
                        b.CreateInBoundsGEP(element, src, in), llvm::MaybeAlign(bytes),
                        copy.shape[dims.back()] * bytes);
      else
        lb.store(lb.load(element, src, in), dst, out);
      return;
    }
    const int64_t d = dims[level];
    if (transposed && level + 2 == loops) {
      emit_blocked(level, in, out);
      return;
    }
    auto body = [&](llvm::Value* k) {
      nest(level + 1, b.CreateAdd(in, b.CreateMul(k, lb.i64(copy.in_strides[d]))),
           b.CreateAdd(out, b.CreateMul(k, lb.i64(copy.out_strides[d]))));
    };
    if (level == 0 && rows_outer)
      lb.loop(lb.row_begin(), lb.row_end(), body);
    else
      lb.loop(copy.shape[d], body);
  };
  nest(0, lb.i64(copy.in_base), lb.i64(copy.out_base));
}

} // namespace

std::optional<OpLoop> emit_copy_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  const OpKind op = nd.op;
  if (op != OpKind::permute && op != OpKind::expand && op != OpKind::slice && op != OpKind::cat &&
      op != OpKind::slice_scatter)
    return std::nullopt;
  if (nd.results.size() != 1 || nd.operands.empty()) return std::nullopt;
  const TensorType& out = nd.results[0];
  if (out.numel() == 0) return std::nullopt;
  for (ValueRef v : nd.operands)
    if (graph.type_of(v).dtype != out.dtype) return std::nullopt;
  const std::vector<int64_t> out_strides = row_major_strides(out.shape);
  std::vector<StridedCopy> copies;
  auto whole = [&](size_t source) {
    StridedCopy c;
    c.source = source;
    c.shape.assign(out.shape.dims().begin(), out.shape.dims().end());
    c.out_strides = out_strides;
    return c;
  };
  const Shape& in0 = graph.type_of(nd.operands[0]).shape;
  const std::vector<int64_t> in_strides = row_major_strides(in0);
  switch (op) {
  case OpKind::permute: {
    const IntList& perm = attr_ints(nd.attrs, AttrName::perm);
    if (static_cast<int64_t>(perm.size()) != out.shape.rank()) return std::nullopt;
    StridedCopy c = whole(0);
    for (size_t d = 0; d < perm.size(); ++d) c.in_strides.push_back(in_strides[perm[d]]);
    c.blocked = true;
    copies.push_back(c);
    break;
  }
  case OpKind::expand: {
    // Input dims align with the output's last ones; a size-1 one repeats.
    const int64_t lead = out.shape.rank() - in0.rank();
    if (lead < 0) return std::nullopt;
    StridedCopy c = whole(0);
    for (int64_t d = 0; d < out.shape.rank(); ++d) {
      const int64_t k = d - lead;
      c.in_strides.push_back(k < 0 || in0[k] == 1 ? 0 : in_strides[k]);
    }
    copies.push_back(c);
    break;
  }
  case OpKind::slice: {
    const int64_t dim = attr_int(nd.attrs, AttrName::dim);
    if (dim < 0 || dim >= in0.rank() || in0.rank() != out.shape.rank()) return std::nullopt;
    StridedCopy c = whole(0);
    c.in_strides = in_strides;
    c.in_base = attr_int(nd.attrs, AttrName::start) * in_strides[dim];
    c.in_strides[dim] *= attr_int(nd.attrs, AttrName::step);
    copies.push_back(c);
    break;
  }
  case OpKind::slice_scatter: {
    // The input, then src over its slice.
    const int64_t dim = attr_int(nd.attrs, AttrName::dim);
    if (nd.operands.size() != 2 || dim < 0 || dim >= out.shape.rank() || in0 != out.shape)
      return std::nullopt;
    const Shape& src = graph.type_of(nd.operands[1]).shape;
    if (src.rank() != out.shape.rank()) return std::nullopt;
    StridedCopy input = whole(0);
    input.in_strides = out_strides;
    copies.push_back(input);
    if (src.numel() > 0) {
      StridedCopy c = whole(1);
      c.shape.assign(src.dims().begin(), src.dims().end());
      c.in_strides = row_major_strides(src);
      c.out_base = attr_int(nd.attrs, AttrName::start) * out_strides[dim];
      c.out_strides[dim] *= attr_int(nd.attrs, AttrName::step);
      copies.push_back(c);
    }
    break;
  }
  default: { // cat
    const int64_t dim = attr_int(nd.attrs, AttrName::dim);
    if (dim < 0 || dim >= out.shape.rank()) return std::nullopt;
    int64_t at = 0;
    for (size_t i = 0; i < nd.operands.size(); ++i) {
      const Shape& in = graph.type_of(nd.operands[i]).shape;
      if (in.rank() != out.shape.rank()) return std::nullopt;
      if (in.numel() > 0) {
        StridedCopy c = whole(i);
        c.shape.assign(in.dims().begin(), in.dims().end());
        c.in_strides = row_major_strides(in);
        c.out_base = at * out_strides[dim];
        copies.push_back(c);
      }
      at += in[dim];
    }
    break;
  }
  }

  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_", node);
  const unsigned bits = static_cast<unsigned>(element_size(out.dtype) * 8);
  // A row function over the output's dim 0 when every copy loops over all
  // of it and writes row r of the output from its own row r: one copy
  // (permute, expand, slice), or cat and slice_scatter along another dim,
  // whose copies then run in order within each row (slice_scatter's src
  // still overwrites the input it copied). Otherwise the copies run in
  // order on one thread.
  auto row_copy = [&](const StridedCopy& c) {
    const std::vector<int64_t> dims = looped_dims(c);
    const bool contiguous_rows =
        !dims.empty() && c.in_strides[dims.back()] == 1 && c.out_strides[dims.back()] == 1;
    return !dims.empty() && dims[0] == 0 && c.shape[0] == out.shape[0] &&
           dims.size() > (contiguous_rows ? 1u : 0u);
  };
  const bool along_dim_0 =
      (op == OpKind::cat || op == OpKind::slice_scatter) && attr_int(nd.attrs, AttrName::dim) == 0;
  if (!along_dim_0 && std::all_of(copies.begin(), copies.end(), row_copy)) {
    LoopBuilder rows(module, name, nd.operands.size(), 1, LoopBuilder::Rows{});
    for (const StridedCopy& copy : copies)
      emit_copy(rows, copy, rows.b().getIntNTy(bits), /*rows_outer=*/true);
    return OpLoop{rows.finish(), false, out.shape[0], 1, out.numel()};
  }
  LoopBuilder lb(module, name, nd.operands.size(), 1);
  for (const StridedCopy& copy : copies) emit_copy(lb, copy, lb.b().getIntNTy(bits), false);
  return OpLoop{lb.finish(), false};
}

} // namespace mstep::xla
