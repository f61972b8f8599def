// cat_loops: see CudaCatLoops.h.
#include "lib/backends/cuda/CudaCatLoops.h"

#include "lib/backends/cuda/CudaLoopNest.h"

#include <vector>

namespace mstep::cuda {

using namespace mlir;
using namespace loops;
// mstep has a Value of its own.
using mlir::Value;

namespace {

/// A fill operand: its first element in the result's row (the operands
/// before it along dim, times the inner extent), its elements per row,
/// and its constant.
struct FillBlock {
  int64_t at = 0, size = 0;
  double value = 0;
};

/// One launch for every fill operand: lane i of outer row o writes element
/// i - start[k] of the k-th fill, found by comparing i with each fill's
/// start among the fills' lanes (a select per fill: they are few and
/// short, DDP's padding being under 256 bytes each).
void fill_loops(const std::vector<FillBlock>& fills, int64_t outer, int64_t row, Flat y,
                Nest& nest) {
  ImplicitLocOpBuilder& b = nest.b;
  int64_t lanes_per_row = 0;
  for (const FillBlock& fill : fills) lanes_per_row += fill.size;
  nest.parallel(outer * lanes_per_row, [&](Value i) {
    Value j = nest.rem(i, lanes_per_row);
    Value shift = nest.index(fills[0].at), value = nest.constant(y.element(), fills[0].value);
    int64_t start = fills[0].size;  // of fill k among the lanes
    for (size_t k = 1; k < fills.size(); ++k) {
      Value past = b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, j, nest.index(start));
      shift = b.create<arith::SelectOp>(past, nest.index(fills[k].at - start), shift);
      if (fills[k].value != fills[k - 1].value)  // (equal: the lanes past it hold it already)
        value = b.create<arith::SelectOp>(past, nest.constant(y.element(), fills[k].value), value);
      start += fills[k].size;
    }
    Value at = b.create<arith::AddIOp>(j, shift);
    nest.store(value, y, nest.affine(nest.div(i, lanes_per_row), row, at));
  });
}

}  // namespace

void cat_loops(dialect::CatOp cat, ArrayRef<CatOperandWay> ways, Nest& nest) {
  const int64_t dim = static_cast<int64_t>(cat.getDim());
  ArrayRef<int64_t> shape = shape_of(cat.getResult());
  const int64_t outer = product(shape.take_front(dim)), total = shape[dim],
                inner = product(shape.drop_front(dim + 1));
  const unsigned n = cat.getInputs().size();
  Flat y = nest.flat(n);
  std::vector<FillBlock> fills;
  int64_t before = 0;  // elements of the operands before k along dim
  for (unsigned k = 0; k < n; ++k) {
    const CatOperandWay way = ways.empty() ? CatOperandWay{} : ways[k];
    const int64_t block = shape_of(cat.getInputs()[k])[dim] * inner;
    if (way.kind == CatOperandWay::Kind::fill) {
      if (block > 0) fills.push_back({before * inner, block, way.value});
    } else if (way.kind == CatOperandWay::Kind::copy) {
      // Operand k's block (o, r) at output block o, after the operands
      // before it along dim.
      Flat x = nest.flat(k);
      nest.parallel(outer * block, [&](Value i) {
        Value at = nest.affine(nest.rem(i, block), 1, nest.index(before * inner));
        nest.store(nest.load(x, i), y, nest.affine(nest.div(i, block), total * inner, at));
      });
    }
    before += shape_of(cat.getInputs()[k])[dim];
  }
  if (!fills.empty()) fill_loops(fills, outer, total * inner, y, nest);
}

void build_cat_func(dialect::CatOp cat, ArrayRef<CatOperandWay> ways, func::FuncOp func) {
  Nest nest(func);
  cat_loops(cat, ways, nest);
  nest.b.create<func::ReturnOp>();
}

}  // namespace mstep::cuda
