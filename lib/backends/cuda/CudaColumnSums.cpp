// Split column reductions: see CudaColumnSums.h.
#include "lib/backends/cuda/CudaColumnSums.h"

#include <algorithm>

#include "lib/backends/cuda/CudaKernelGen.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda::loops {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

ColumnSplit split_columns(int64_t rows, int64_t columns, int64_t threads, int64_t target_blocks) {
  // Fewer rows per lane than this and a block's threads mostly wait on
  // its one load and the tree.
  constexpr int64_t kMinRowsPerLane = 4;
  ColumnSplit split;
  split.rows = rows;
  split.columns = columns;
  while (split.tile < columns && split.tile < 32) split.tile *= 2;
  split.row_lanes = std::max<int64_t>(threads / split.tile, 1);
  split.tiles = std::max<int64_t>(ceil_div(columns, split.tile), 1);
  const int64_t wanted = std::max<int64_t>(ceil_div(target_blocks, split.tiles), 1);
  const int64_t chunk = std::max(ceil_div(rows, wanted), split.row_lanes * kMinRowsPerLane);
  split.chunk_rows = ceil_div(chunk, split.row_lanes) * split.row_lanes;
  split.chunks = std::max<int64_t>(ceil_div(rows, split.chunk_rows), 1);
  return split;
}

Value strided_fold(Nest& nest, Value from, Value end, int64_t step, const Fold& fold,
                   function_ref<Value(Value)> term) {
  ImplicitLocOpBuilder& b = nest.b;
  auto loop =
      b.create<scf::ForOp>(from, end, nest.index(step), ValueRange{nest.f64(fold.init)},
                           [&](OpBuilder& nested, Location, Value r, ValueRange acc) {
                             OpBuilder::InsertionGuard guard(b);
                             b.setInsertionPointToEnd(nested.getInsertionBlock());
                             b.create<scf::YieldOp>(ValueRange{fold.combine(acc[0], term(r))});
                           });
  return loop.getResult(0);
}

void tile_partials(Nest& nest, BlockRow& block, int64_t tile, Value tile_index, int64_t columns,
                   const Fold& fold, function_ref<Value(Value, Value)> partial,
                   function_ref<void(Value, Value)> write) {
  ImplicitLocOpBuilder& b = nest.b;
  Value buffer = block.shared(b.getF64Type());
  auto column_of = [&](Value t) { return nest.affine(tile_index, tile, nest.rem(t, tile)); };
  auto below_end = [&](Value column) {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, column, nest.index(columns));
  };
  // Each thread's partial (a column past the end reads nothing).
  block.phase([&](Value t) {
    Value column = column_of(t);
    auto branch = b.create<scf::IfOp>(
        below_end(column),
        [&](OpBuilder& nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToEnd(nested.getInsertionBlock());
          b.create<scf::YieldOp>(ValueRange{partial(column, nest.div(t, tile))});
        },
        [&](OpBuilder& nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToEnd(nested.getInsertionBlock());
          b.create<scf::YieldOp>(ValueRange{nest.f64(fold.init)});
        });
    b.create<memref::StoreOp>(branch.getResult(0), buffer, ValueRange{t});
  });
  block.reduce(buffer, fold.combine, tile);
  // Lane 0 of each column: the tile's row 0 of the buffer.
  block.phase([&](Value t) {
    Value column = column_of(t);
    Value first_lane = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, t, nest.index(tile));
    auto branch =
        b.create<scf::IfOp>(b.create<arith::AndIOp>(first_lane, below_end(column)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(branch.thenBlock()->getTerminator());
    write(column, b.create<memref::LoadOp>(buffer, ValueRange{t}));
  });
}

std::optional<ArrayRef<int64_t>> reduced_dims(Operation* op) {
  ArrayRef<int64_t> dims;
  if (auto sum = dyn_cast<dialect::SumOp>(op))
    dims = sum.getDims();
  else if (auto mean = dyn_cast<dialect::MeanOp>(op))
    dims = mean.getDims();
  else
    return std::nullopt;
  if (dims.empty()) return std::nullopt;
  return dims;
}

std::optional<std::pair<int64_t, int64_t>> leading_columns(Operation* op) {
  std::optional<ArrayRef<int64_t>> sum_dims = reduced_dims(op);
  if (!sum_dims) return std::nullopt;
  ArrayRef<int64_t> dims = *sum_dims;
  auto type = cast<ShapedType>(op->getOperand(0).getType());
  const int64_t reduced = static_cast<int64_t>(dims.size());
  if (!isa<FloatType>(type.getElementType()) || reduced >= type.getRank()) return std::nullopt;
  for (int64_t k = 0; k < reduced; ++k)
    if (dims[k] != k) return std::nullopt;
  return std::pair{product(type.getShape().take_front(reduced)),
                   product(type.getShape().drop_front(reduced))};
}

void column_sum_loops(Operation* op, std::pair<int64_t, int64_t> shape,
                      const CudaCodegenOptions& options, Nest& nest) {
  column_sums_loops({{nest.flat(0), nest.flat(1), isa<dialect::MeanOp>(op)}}, shape, options,
                    nest);
}

void column_sums_loops(ArrayRef<ColumnSum> sums, std::pair<int64_t, int64_t> shape,
                       const CudaCodegenOptions& options, Nest& nest) {
  const auto [rows, columns] = shape;
  if (columns == 0 || sums.empty()) return;
  const int64_t count = static_cast<int64_t>(sums.size());
  const ColumnSplit split =
      split_columns(rows, columns, options.threads, options.split_target_blocks);
  ImplicitLocOpBuilder& b = nest.b;
  const Fold sum{0.0, [&b](Value s, Value v) -> Value { return b.create<arith::AddFOp>(s, v); }};
  // ref's rounding: the f64 sum (/ rows for a mean), rounded once.
  auto store_output = [&nest, &b, rows](const ColumnSum& s, Value column, Value total) {
    if (s.mean) total = b.create<arith::DivFOp>(total, nest.f64(static_cast<double>(rows)));
    nest.store(nest.round_to(total, s.y.element()), s.y, column);
  };
  // Sum s's chunk k's partial of column c at [(s · chunks + k) · columns
  // + c] (a plan temporary).
  Value partials;
  if (split.chunks > 1)
    partials = b.create<memref::AllocOp>(
        MemRefType::get({count * split.chunks * columns}, b.getF64Type()));
  block_rows(nest, split.blocks(), options.threads, [&](Value block, BlockRow& blk) {
    Value tile_index = nest.rem(block, split.tiles), chunk = nest.div(block, split.tiles);
    Value first = nest.affine(chunk, split.chunk_rows, Value());
    Value end = b.create<arith::MinUIOp>(
        b.create<arith::AddIOp>(first, nest.index(split.chunk_rows)), nest.index(rows));
    for (int64_t k = 0; k < count; ++k) {
      const ColumnSum& s = sums[k];
      tile_partials(
          nest, blk, split.tile, tile_index, columns, sum,
          [&](Value column, Value lane) {
            return strided_fold(
                nest, b.create<arith::AddIOp>(first, lane), end, split.row_lanes, sum,
                [&](Value r) { return nest.ext(nest.load(s.x, nest.affine(r, columns, column))); });
          },
          [&](Value column, Value value) {
            if (split.chunks == 1) {
              store_output(s, column, value);
              return;
            }
            Value at = nest.affine(nest.affine(chunk, columns, column), 1,
                                   nest.index(k * split.chunks * columns));
            b.create<memref::StoreOp>(value, partials, ValueRange{at});
          });
    }
  });
  if (split.chunks == 1) return;
  // The chunks' partials in order, a lane per column of each sum.
  nest.parallel(count * columns, [&](Value lane) {
    Value k = nest.div(lane, columns), column = nest.rem(lane, columns);
    Value base = nest.affine(k, split.chunks * columns, column);
    Value total =
        nest.loop(split.chunks, {nest.f64(0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
          Value at = nest.affine(c, columns, base);
          return {sum.combine(acc[0], b.create<memref::LoadOp>(partials, ValueRange{at}))};
        })[0];
    for (int64_t i = 0; i < count; ++i) {
      if (count == 1) {
        store_output(sums[i], column, total);
        break;
      }
      auto mine = b.create<scf::IfOp>(
          b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k, nest.index(i)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(mine.thenBlock()->getTerminator());
      store_output(sums[i], column, total);
    }
  });
}

} // namespace mstep::cuda::loops
