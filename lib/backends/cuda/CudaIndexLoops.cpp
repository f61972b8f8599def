// CudaIndexLoops: see CudaIndexLoops.h.
#include "lib/backends/cuda/CudaIndexLoops.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "lib/backends/cuda/CudaErrorWord.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda::loops {

namespace {

using namespace mlir;

/// The outer (before dim), size and inner (after dim) extents of `shape`.
std::array<int64_t, 3> around(ArrayRef<int64_t> shape, int64_t dim) {
  return {product(shape.take_front(dim)), shape[dim], product(shape.drop_front(dim + 1))};
}

/// Index value j of `index` (i32 or i64) as an index, whether it is in
/// [0, size) (ref checks and fails; a kernel cannot), and the value
/// clamped to 0 when it is not, so nothing is read or written out of
/// bounds. Only lanes where `reporting` holds report (null: every lane).
std::pair<Value, Value> checked_index(Nest& nest, const Flat& index, Value j, int64_t size,
                                      int64_t dim, Value reporting = Value()) {
  ImplicitLocOpBuilder& b = nest.b;
  Value v = nest.load(index, j);
  Type type = v.getType();
  Value valid = b.create<arith::AndIOp>(
      b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, v, nest.integer(type, 0)),
      b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, v, nest.integer(type, size)));
  // Reported in the error word (CudaErrorWord.h): the step then fails at
  // its sync point and its optimizer update changes nothing.
  Value wide = type.isInteger(64) ? v : b.create<arith::ExtSIOp>(b.getI64Type(), v).getResult();
  Value bad = b.create<arith::XOrIOp>(valid, nest.integer(b.getI1Type(), 1));
  if (reporting) bad = b.create<arith::AndIOp>(reporting, bad);
  nest.report_error(bad, error_word::kIndex, wide, j, size, dim);
  Value safe = b.create<arith::SelectOp>(valid, v, nest.integer(type, 0));
  return {b.create<arith::IndexCastOp>(b.getIndexType(), safe), valid};
}

/// RefShape.cpp's index_select (embedding): one lane per output element,
/// block (o, j) of `inner` elements read from input block (o, index[j]).
/// An index out of range gives NaN (zero for integers) and is reported in
/// the error word instead of ref's error.
void index_select_loops(dialect::IndexSelectOp op, Nest& nest) {
  const auto [outer, size, inner] = around(shape_of(op.getInput()), op.getDim());
  const int64_t n = numel(op.getIndex());
  Flat x = nest.flat(0), index = nest.flat(1), y = nest.flat(2);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value k = nest.rem(i, inner), block = nest.div(i, inner);
    Value j = nest.rem(block, n), o = nest.div(block, n);
    auto [at, valid] = checked_index(nest, index, j, size, op.getDim());
    Value row = b.create<arith::AddIOp>(nest.affine(o, size, Value()), at);
    Value v = nest.load(x, nest.affine(row, inner, k));
    nest.store(b.create<arith::SelectOp>(valid, v, nest.poison(y.element())), y, i);
  });
}

/// a + b as ref's add_into: in f32 for the 16-bit floats, "or" for bool.
Value add_as_ref(Nest& nest, Value a, Value b_value) {
  ImplicitLocOpBuilder& b = nest.b;
  Type type = a.getType();
  if (type.isInteger(1)) return b.create<arith::OrIOp>(a, b_value);
  if (!isa<FloatType>(type)) return b.create<arith::AddIOp>(a, b_value);
  if (type.isF32() || type.isF64()) return b.create<arith::AddFOp>(a, b_value);
  Value sum = b.create<arith::AddFOp>(b.create<arith::ExtFOp>(b.getF32Type(), a),
                                      b.create<arith::ExtFOp>(b.getF32Type(), b_value));
  return b.create<arith::TruncFOp>(type, sum);
}

/// RefScatter.cpp's index_add (embedding backward) in one of two forms
/// that both add duplicates in ref's order with no atomics, so the result
/// is ref's, the same every run. An index out of range adds nothing and
/// is reported in the error word (ref: an error).
///
/// Sequential: a copy of the input, then one lane per (outer, inner)
/// column adding source block (o, j) into output block (o, index[j]) for
/// j in order. Only outer * inner lanes, each a chain of n dependent
/// read-modify-writes through global memory: GPT-mini's token embedding
/// gradient is 256 lanes walking 2048 tokens.
void index_add_sequential(dialect::IndexAddOp op, Nest& nest) {
  const auto [outer, size, inner] = around(shape_of(op.getInput()), op.getDim());
  const int64_t n = numel(op.getIndex());
  nest.copy(0, 3);
  Flat index = nest.flat(1), source = nest.flat(2), y = nest.flat(3);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(outer * inner, [&](Value lane) {
    Value k = nest.rem(lane, inner), o = nest.div(lane, inner);
    nest.loop(n, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      auto [at, valid] = checked_index(nest, index, j, size, op.getDim());
      Value row = b.create<arith::AddIOp>(nest.affine(o, size, Value()), at);
      Value dst = nest.affine(row, inner, k);
      Value from = nest.affine(b.create<arith::AddIOp>(nest.affine(o, n, Value()), j), inner, k);
      Value current = nest.load(y, dst);
      Value sum = add_as_ref(nest, current, nest.load(source, from));
      nest.store(b.create<arith::SelectOp>(valid, sum, current), y, dst);
      return {};
    });
  });
}

/// Owner: one lane per output element (o, r, k), walking the whole index
/// and adding source (o, j, k) wherever index[j] == r, in j order, into a
/// register that starts at the input's element; one launch, no copy. Every
/// lane reads all n indices (the same address across a warp: cached), so
/// its cost grows with the output's size times n; lane 0 reports a bad
/// index.
void index_add_owner(dialect::IndexAddOp op, Nest& nest) {
  const auto [outer, size, inner] = around(shape_of(op.getInput()), op.getDim());
  const int64_t n = numel(op.getIndex());
  Flat input = nest.flat(0), index = nest.flat(1), source = nest.flat(2), y = nest.flat(3);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(outer * size * inner, [&](Value lane) {
    Value k = nest.rem(lane, inner), r = nest.rem(nest.div(lane, inner), size),
          o = nest.div(lane, size * inner);
    Value first_lane = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, lane, nest.index(0));
    Value start = nest.load(input, lane);
    SmallVector<Value> sum = nest.loop(n, start, [&](Value j, ValueRange acc) -> SmallVector<Value> {
      auto [at, valid] = checked_index(nest, index, j, size, op.getDim(), first_lane);
      Value mine = b.create<arith::AndIOp>(
          valid, b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, at, r));
      auto branch = b.create<scf::IfOp>(TypeRange{acc[0].getType()}, mine, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(branch.thenBlock());
        Value from = nest.affine(b.create<arith::AddIOp>(nest.affine(o, n, Value()), j), inner, k);
        b.create<scf::YieldOp>(ValueRange{add_as_ref(nest, acc[0], nest.load(source, from))});
        b.setInsertionPointToStart(branch.elseBlock());
        b.create<scf::YieldOp>(ValueRange{acc[0]});
      }
      return {branch.getResult(0)};
    });
    nest.store(sum[0], y, lane);
  });
}

/// Whether the owner form is expected to be faster: its lanes' total
/// index walk, spread over a GPU's lanes, against the sequential form's
/// chain of n global read-modify-writes (each ~1 µs of latency). The
/// constants are an H100's order of magnitude (16896 FP32 lanes, a few
/// cycles per cached index read and compare, ~800 cycles per dependent
/// global round trip), not a measurement; the choice is a compile-time
/// one (CudaCodegenOptions::index_add_owner_max_ratio overrides it).
bool index_add_by_owner(dialect::IndexAddOp op, const CudaCodegenOptions& options) {
  const auto [outer, size, inner] = around(shape_of(op.getInput()), op.getDim());
  const double n = static_cast<double>(numel(op.getIndex()));
  const double lanes = 16896.0;
  const double owner_cycles = static_cast<double>(outer * size * inner) * n * 4.0 / lanes;
  const double sequential_cycles =
      n * 800.0 * std::max(1.0, static_cast<double>(outer * inner) / lanes);
  return owner_cycles <= sequential_cycles * options.index_add_owner_max_ratio;
}

/// `shape`, or [1] for a 0-d one (RefShape.cpp's gather: a 0-d input
/// acts as a [1] tensor).
std::vector<int64_t> at_least_1d(ArrayRef<int64_t> shape) {
  return shape.empty() ? std::vector<int64_t>{1} : std::vector<int64_t>(shape.begin(), shape.end());
}

/// RefShape.cpp's gather: one lane per output (= index) element i, reading
/// the input at i's coordinates with dim `dim` replaced by index[i]. An
/// index out of range gives NaN (zero for integers) and is reported in the
/// error word instead of ref's error.
void gather_loops(dialect::GatherOp op, Nest& nest) {
  const std::vector<int64_t> in_shape = at_least_1d(shape_of(op.getInput()));
  const std::vector<int64_t> index_shape = at_least_1d(shape_of(op.getIndex()));
  const int64_t dim = static_cast<int64_t>(op.getDim());
  std::vector<int64_t> strides = strides_of(in_shape);
  const int64_t dim_stride = strides[dim];
  strides[dim] = 0;  // the index value's instead
  Flat x = nest.flat(0), index = nest.flat(1), y = nest.flat(2);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getIndex()), [&](Value i) {
    auto [at, valid] = checked_index(nest, index, i, in_shape[dim], dim);
    Value v = nest.load(x, nest.affine(at, dim_stride, nest.strided(i, index_shape, strides, 0)));
    nest.store(b.create<arith::SelectOp>(valid, v, nest.poison(y.element())), y, i);
  });
}

/// RefScatter.cpp's scatter_add: a copy of the input, then one lane per
/// index position off dim `dim` (the index's other coordinates), walking
/// the index along `dim` in order and adding src at each position into
/// the output at that position with dim `dim` replaced by the index value.
/// A lane owns the output elements it adds to, so duplicates add in ref's
/// order with no atomics. An index out of range adds nothing and is
/// reported in the error word (ref: an error).
void scatter_add_loops(dialect::ScatterAddOp op, Nest& nest) {
  nest.copy(0, 3);
  if (numel(op.getIndex()) == 0) return;  // writes nothing
  const std::vector<int64_t> in_shape = at_least_1d(shape_of(op.getInput()));
  const std::vector<int64_t> index_shape = at_least_1d(shape_of(op.getIndex()));
  const int64_t dim = static_cast<int64_t>(op.getDim());
  const std::vector<int64_t> out_strides = strides_of(in_shape);
  const std::vector<int64_t> index_strides = strides_of(index_shape);
  const std::vector<int64_t> src_strides = strides_of(at_least_1d(shape_of(op.getSrc())));
  // The lanes: the index's coordinates other than dim's, and where each
  // starts in the index, src and the output.
  std::vector<int64_t> lanes, in_index, in_src, in_out;
  for (size_t k = 0; k < index_shape.size(); ++k) {
    if (static_cast<int64_t>(k) == dim) continue;
    lanes.push_back(index_shape[k]);
    in_index.push_back(index_strides[k]);
    in_src.push_back(src_strides[k]);
    in_out.push_back(out_strides[k]);
  }
  const int64_t n = index_shape[dim];
  Flat index = nest.flat(1), src = nest.flat(2), y = nest.flat(3);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getIndex()) / n, [&](Value lane) {
    Value index_base = nest.strided(lane, lanes, in_index, 0);
    Value src_base = nest.strided(lane, lanes, in_src, 0);
    Value out_base = nest.strided(lane, lanes, in_out, 0);
    nest.loop(n, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
      Value position = nest.affine(j, index_strides[dim], index_base);
      auto [at, valid] = checked_index(nest, index, position, in_shape[dim], dim);
      Value dst = nest.affine(at, out_strides[dim], out_base);
      Value current = nest.load(y, dst);
      Value sum = add_as_ref(nest, current, nest.load(src, nest.affine(j, src_strides[dim], src_base)));
      nest.store(b.create<arith::SelectOp>(valid, sum, current), y, dst);
      return {};
    });
  });
}

} // namespace

void build_index_select(dialect::IndexSelectOp op, Nest& nest) { index_select_loops(op, nest); }

void build_index_add(dialect::IndexAddOp op, const CudaCodegenOptions& options, Nest& nest) {
  if (index_add_by_owner(op, options))
    index_add_owner(op, nest);
  else
    index_add_sequential(op, nest);
}

void build_gather(dialect::GatherOp op, Nest& nest) { gather_loops(op, nest); }

void build_scatter_add(dialect::ScatterAddOp op, Nest& nest) { scatter_add_loops(op, nest); }

} // namespace mstep::cuda::loops
