// The loop nests of CudaOpLoops.h, op by op; each follows its ref kernel
// (lib/backends/ref: RefNN.cpp, RefLoss.cpp, RefCreation.cpp,
// RefShape.cpp, RefScatter.cpp, RefOptimizer.cpp), whose comments give
// the formulas.
#include "lib/backends/cuda/CudaOpLoops.h"
#include "lib/backends/cuda/CudaBlockRows.h"
#include "lib/backends/cuda/CudaCatLoops.h"
#include "lib/backends/cuda/CudaColumnSums.h"
#include "lib/backends/cuda/CudaConvLoops.h"
#include "lib/backends/cuda/CudaCreationLoops.h"
#include "lib/backends/cuda/CudaIndexLoops.h"
#include "lib/backends/cuda/CudaPoolLoops.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOptimizerLoops.h"
#include "lib/backends/cuda/CudaReductionLoops.h"
#include "lib/backends/cuda/CudaRowForms.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

/// Whether rows of `n` elements reduce a block per row (CudaBlockRows.h).
bool block_per_row(const CudaCodegenOptions& options, int64_t n) {
  return options.row_reduction != CudaRowReduction::thread && n >= options.block_row_min;
}

Value add(ImplicitLocOpBuilder& b, Value x, Value y) { return b.create<arith::AddFOp>(x, y); }

// ---- softmax, log_softmax -------------------------------------------------

/// One row per (outer, inner) pair: the max, the sum of exponentials,
/// then each output, all in f64 (RefNN.cpp's softmax_kernel).
void softmax_loops(Operation* op, int64_t dim, bool log, const CudaCodegenOptions& options,
                   Nest& nest) {
  auto shape = cast<ShapedType>(op->getOperand(0).getType()).getShape();
  const int64_t outer = product(shape.take_front(dim)), n = shape[dim],
                inner = product(shape.drop_front(dim + 1));
  Flat x = nest.flat(0), y = nest.flat(1);
  row_loops(nest, block_per_row(options, n), outer * inner, n, [&](Value lane) {
    Value base = nest.affine(nest.div(lane, inner), n * inner, nest.rem(lane, inner));
    auto at = [&nest, base, inner](Value j) { return nest.affine(j, inner, base); };
    auto value = [&nest, x, at](Value j) { return nest.ext(nest.load(x, at(j))); };
    RowForm form = softmax_form(nest, log, value);
    RowSpec row;
    row.stats = std::move(form.stats);
    row.output = [&nest, at, y, element = form.element](Value j, ArrayRef<Value> stats) {
      nest.store(nest.round_to(element(j, stats), y.element()), y, at(j));
    };
    return row;
  });
}

// ---- layer_norm, rms_norm ---------------------------------------------------

/// One row of `cols` elements (the trailing normalized_ndim dims) each:
/// RefNN.cpp's two-pass f64 statistics. `weight`, `bias`: parameter
/// numbers, or -1.
void norm_loops(Operation* op, int64_t normalized_ndim, double eps, bool rms, int weight, int bias,
                const CudaCodegenOptions& options, Nest& nest) {
  auto shape = cast<ShapedType>(op->getOperand(0).getType()).getShape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t rows = product(shape.take_front(rank - normalized_ndim)),
                cols = product(shape.drop_front(rank - normalized_ndim));
  Flat x = nest.flat(0), y = nest.flat(op->getNumOperands());
  std::optional<Flat> w, bs;
  if (weight >= 0) w = nest.flat(weight);
  if (bias >= 0) bs = nest.flat(bias);
  ImplicitLocOpBuilder& b = nest.b;
  row_loops(nest, block_per_row(options, cols), rows, cols, [&](Value row) {
    Value base = nest.affine(row, cols, Value());
    auto at = [&b, base](Value c) { return b.create<arith::AddIOp>(base, c).getResult(); };
    auto read = [&nest](Flat f) { return [&nest, f](Value c) { return nest.ext(nest.load(f, c)); }; };
    RowForm form = norm_form(nest, cols, eps, rms,
                             [&nest, x, at](Value c) { return nest.ext(nest.load(x, at(c))); },
                             w ? read(*w) : RowElement(), bs ? read(*bs) : RowElement());
    RowSpec spec;
    spec.stats = std::move(form.stats);
    spec.output = [&nest, at, y, element = form.element](Value c, ArrayRef<Value> stats) {
      nest.store(nest.round_to(element(c, stats), y.element()), y, at(c));
    };
    return spec;
  });
}

// ---- nll_loss ---------------------------------------------------------------

/// RefLoss.cpp: loss i = -log_probs[i, target[i]], 0 where the target is
/// ignore_index; the mean divides by the targets not ignored. ref rejects
/// a target out of [0, C) with an error; a kernel cannot stop the step, so
/// such a row's loss is NaN (and nothing out of bounds is read), and the
/// target is reported in the executable's error word (CudaErrorWord.h),
/// which keeps the optimizer update from changing anything and is raised
/// as the error at the step's sync point.
void nll_loss_loops(dialect::NllLossOp op, const CudaCodegenOptions& options, Nest& nest) {
  auto lp_shape = cast<ShapedType>(op.getLogProbs().getType()).getShape();
  const int64_t classes = lp_shape.back(), rows = numel(op.getTarget());
  const int64_t ignore_index = static_cast<int64_t>(op.getIgnoreIndex());
  const dialect::LossReduction reduction = op.getReduction();
  Flat lp = nest.flat(0), target = nest.flat(1), out = nest.flat(2);
  ImplicitLocOpBuilder& b = nest.b;
  // (loss in f64, whether it counts) of row i.
  auto row_loss = [&](Value i) -> std::pair<Value, Value> {
    Value t = nest.load(target, i);
    Value ignored = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t,
                                            nest.integer(b.getI64Type(), ignore_index));
    Value in_range = b.create<arith::AndIOp>(
        b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, t, nest.integer(b.getI64Type(), 0)),
        b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, t,
                                nest.integer(b.getI64Type(), classes)));
    Value kept = b.create<arith::XOrIOp>(ignored, nest.integer(b.getI1Type(), 1));
    Value valid = b.create<arith::AndIOp>(in_range, kept);
    nest.report_error(
        b.create<arith::AndIOp>(kept, b.create<arith::XOrIOp>(in_range, nest.integer(b.getI1Type(), 1))),
        error_word::kNllTarget, t, i, classes, ignore_index);
    Value safe = b.create<arith::IndexCastOp>(
        b.getIndexType(), b.create<arith::SelectOp>(valid, t, nest.integer(b.getI64Type(), 0)));
    Value v = b.create<arith::NegFOp>(nest.ext(nest.load(lp, nest.affine(i, classes, safe))));
    Value other = b.create<arith::SelectOp>(ignored, nest.f64(0),
                                            nest.f64(std::numeric_limits<double>::quiet_NaN()));
    return {b.create<arith::SelectOp>(valid, v, other), ignored};
  };
  if (reduction == dialect::LossReduction::none) {
    nest.parallel(rows, [&](Value i) {
      nest.store(nest.round_to(row_loss(i).first, out.element()), out, i);
    });
    return;
  }
  // One row of all the losses: their sum (and, for the mean, the count of
  // targets not ignored, an exact f64), as ref adds them in row order or
  // a block's tree adds them.
  auto sum = [&b](Value s, Value v) { return add(b, s, v); };
  row_loops(nest, block_per_row(options, rows), 1, rows, [&](Value) {
    RowSpec spec;
    spec.stats.push_back(
        {0.0, [&](Value i, ArrayRef<Value>) { return row_loss(i).first; }, sum, nullptr});
    if (reduction == dialect::LossReduction::mean)
      spec.stats.push_back({0.0,
                            [&](Value i, ArrayRef<Value>) -> Value {
                              return b.create<arith::SelectOp>(row_loss(i).second, nest.f64(0),
                                                               nest.f64(1));
                            },
                            sum, nullptr});
    spec.row_output = [&](ArrayRef<Value> stats) {
      Value total = stats[0];
      if (reduction == dialect::LossReduction::mean)
        total = b.create<arith::DivFOp>(total, stats[1]);
      nest.store(nest.round_to(total, out.element()), out, nest.index(0));
    };
    return spec;
  });
}

// ---- sum, mean over trailing dims -----------------------------------------

/// The rows of an mstep.sum / mstep.mean over its input's trailing dims
/// (each output element one contiguous row): {rows, row length}. Float
/// inputs, and integer ones (not bool) for sum.
std::optional<std::pair<int64_t, int64_t>> trailing_rows(Operation* op) {
  std::optional<ArrayRef<int64_t>> sum_dims = reduced_dims(op);
  if (!sum_dims) return std::nullopt;
  ArrayRef<int64_t> dims = *sum_dims;
  auto type = cast<ShapedType>(op->getOperand(0).getType());
  Type element = type.getElementType();
  const bool integer_sum = isa<dialect::SumOp>(op) && element.isSignlessInteger() &&
                           !element.isInteger(1);
  if (!isa<FloatType>(element) && !integer_sum) return std::nullopt;
  const int64_t rank = type.getRank(), first = rank - static_cast<int64_t>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != first + static_cast<int64_t>(k)) return std::nullopt;
  return std::pair{product(type.getShape().take_front(first)),
                   product(type.getShape().drop_front(first))};
}

/// RefReduction.cpp's sum and mean: an f64 sum of the row (then / n),
/// rounded once; an integer sum in i64 (exact, so any order is ref's),
/// truncated to the dtype. (With one thread per row these stay on
/// mstep-lower-to-linalg's loops, the first form.)
void reduction_loops(Operation* op, std::pair<int64_t, int64_t> rows, Nest& nest) {
  const auto [count, n] = rows;
  const bool mean = isa<dialect::MeanOp>(op);
  Flat x = nest.flat(0), y = nest.flat(1);
  ImplicitLocOpBuilder& b = nest.b;
  const bool integer = !isa<FloatType>(x.element());
  row_loops(nest, /*block=*/true, count, n, [&](Value row) {
    Value base = nest.affine(row, n, Value());
    RowSpec spec;
    RowStat sum;
    if (integer) {
      sum.type = b.getI64Type();
      sum.term = [&nest, &b, x, base](Value j, ArrayRef<Value>) -> Value {
        Value v = nest.load(x, b.create<arith::AddIOp>(base, j));
        return v.getType().isInteger(64) ? v : b.create<arith::ExtSIOp>(b.getI64Type(), v);
      };
      sum.combine = [&b](Value s, Value v) -> Value { return b.create<arith::AddIOp>(s, v); };
    } else {
      sum.term = [&nest, &b, x, base](Value j, ArrayRef<Value>) {
        return nest.ext(nest.load(x, b.create<arith::AddIOp>(base, j)));
      };
      sum.combine = [&b](Value s, Value v) { return add(b, s, v); };
      if (mean)
        sum.finish = [&nest, &b, n](Value total) -> Value {
          return b.create<arith::DivFOp>(total, nest.f64(static_cast<double>(n)));
        };
    }
    spec.stats.push_back(std::move(sum));
    spec.row_output = [&nest, &b, y, row, integer](ArrayRef<Value> stats) {
      Type element = y.element();
      Value v = !integer                  ? nest.round_to(stats[0], element)
                : element.isInteger(64) ? stats[0]
                                        : b.create<arith::TruncIOp>(element, stats[0]).getResult();
      nest.store(v, y, row);
    };
    return spec;
  });
}

// ---- dropout, arange --------------------------------------------------------

/// RefNN.cpp's dropout: element i is kept iff Philox::uniform(seed,
/// state offset + op offset, i) >= p; y = x * (kept ? 1/(1-p) : 0) in f64.
void dropout_loops(dialect::DropoutOp op, Nest& nest) {
  const double p = op.getP().convertToDouble(), scale = 1.0 / (1.0 - p);
  const int64_t offset = static_cast<int64_t>(op.getOffset());
  Flat x = nest.flat(0), y = nest.flat(2);
  Value state = nest.param(1);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getInput()), [&](Value i) {
    Value seed = b.create<memref::LoadOp>(state, ValueRange{nest.index(0)});
    Value start =
        b.create<arith::AddIOp>(b.create<memref::LoadOp>(state, ValueRange{nest.index(1)}),
                                nest.integer(b.getI64Type(), offset));
    Value counter =
        b.create<arith::AddIOp>(start, b.create<arith::IndexCastUIOp>(b.getI64Type(), i));
    Value keep = b.create<arith::CmpFOp>(
        arith::CmpFPredicate::OGE, nest.ext(philox_uniform(nest, seed, counter)), nest.f64(p));
    Value factor = b.create<arith::SelectOp>(keep, nest.f64(scale), nest.f64(0.0));
    Value out = b.create<arith::MulFOp>(nest.ext(nest.load(x, i)), factor);
    nest.store(nest.round_to(out, y.element()), y, i);
  });
}

/// RefCreation.cpp: element i = start + i * step in f64, then cast.
void arange_loops(dialect::ArangeOp op, Nest& nest) {
  const double start = op.getStart().convertToDouble(), step = op.getStep().convertToDouble();
  Flat out = nest.flat(0);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value position =
        b.create<arith::SIToFPOp>(b.getF64Type(), b.create<arith::IndexCastOp>(b.getI64Type(), i));
    Value v =
        b.create<arith::AddFOp>(nest.f64(start), b.create<arith::MulFOp>(position, nest.f64(step)));
    Type element = out.element();
    Value stored = isa<FloatType>(element) ? nest.round_to(v, element)
                                           : b.create<arith::FPToSIOp>(element, v).getResult();
    nest.store(stored, out, i);
  });
}

// ---- reshape, permute -------------------------------------------------------

/// A copy kernel: the same elements in row-major order.
void reshape_loops(Operation* op, Nest& nest) {
  Flat x = nest.flat(0), y = nest.flat(1);
  nest.parallel(numel(op->getResult(0)), [&](Value i) { nest.store(nest.load(x, i), y, i); });
}


/// A copy kernel, one lane per output element: its coordinates (from the
/// output's shape) address the input's dims perm[k].
void permute_loops(dialect::PermuteOp op, Nest& nest) {
  const std::vector<int64_t> in_stride = strides_of(shape_of(op.getInput()));
  std::vector<int64_t> strides;
  for (int64_t k : op.getPerm()) strides.push_back(in_stride[k]);
  Flat x = nest.flat(0), y = nest.flat(1);
  ArrayRef<int64_t> out_shape = shape_of(op.getResult());
  nest.parallel(numel(op.getResult()), [&](Value i) {
    nest.store(nest.load(x, nest.strided(i, out_shape, strides, 0)), y, i);
  });
}

/// The input's strides with dim `dim`'s scaled by `step`, and the offset
/// of element `start` along it: where the slice's elements are.
std::pair<std::vector<int64_t>, int64_t> slice_walk(ArrayRef<int64_t> shape, int64_t dim,
                                                    int64_t start, int64_t step) {
  std::vector<int64_t> strides = strides_of(shape);
  const int64_t base = start * strides[dim];
  strides[dim] *= step;
  return {strides, base};
}

/// RefShape.cpp's slice: output element k along dim is input element
/// start + k * step.
void slice_loops(dialect::SliceOp op, Nest& nest) {
  auto [strides, base] =
      slice_walk(shape_of(op.getInput()), op.getDim(), op.getStart(), op.getStep());
  Flat x = nest.flat(0), y = nest.flat(1);
  ArrayRef<int64_t> out_shape = shape_of(op.getResult());
  nest.parallel(numel(op.getResult()), [&](Value i) {
    nest.store(nest.load(x, nest.strided(i, out_shape, strides, base)), y, i);
  });
}

/// RefScatter.cpp's slice_scatter: a copy of the input, then src's
/// elements written where the slice's are.
void slice_scatter_loops(dialect::SliceScatterOp op, Nest& nest) {
  auto [strides, base] =
      slice_walk(shape_of(op.getInput()), op.getDim(), op.getStart(), op.getStep());
  nest.copy(0, 2);
  Flat src = nest.flat(1), y = nest.flat(2);
  ArrayRef<int64_t> src_shape = shape_of(op.getSrc());
  nest.parallel(numel(op.getSrc()), [&](Value i) {
    nest.store(nest.load(src, i), y, nest.strided(i, src_shape, strides, base));
  });
}

} // namespace

absl::Status not_lowered_for_cuda(Operation* op, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("cuda: op '", op->getName().getStringRef().str(),
                                               "' is not yet lowered for cuda: ", why));
}

bool builds_op_loops(Operation* op, const CudaCodegenOptions& options) {
  // A sum or mean of rows: a block per row, when those are on.
  if (std::optional<std::pair<int64_t, int64_t>> rows = trailing_rows(op))
    return block_per_row(options, rows->second);
  if (builds_reduction_loops(op)) return true;
  // A sum or mean over leading dims: split into chunks, when those are on.
  if (leading_columns(op)) return options.column_reduction == CudaColumnReduction::split;
  if (builds_creation_loops(op) || builds_pool_loops(op) || builds_conv_loops(op)) return true;
  return isa<dialect::SoftmaxOp, dialect::LogSoftmaxOp, dialect::LayerNormOp, dialect::RmsNormOp,
             dialect::NllLossOp, dialect::DropoutOp, dialect::ArangeOp, dialect::ReshapeOp,
             dialect::PermuteOp, dialect::SliceOp, dialect::SliceScatterOp, dialect::IndexSelectOp,
             dialect::IndexAddOp, dialect::GatherOp, dialect::ScatterAddOp,
             dialect::MultiTensorUpdateOp, dialect::CatOp>(op);
}

absl::Status build_op_loops(Operation* op, func::FuncOp func,
                            const CudaCodegenOptions& options) {
  Nest nest(func);
  absl::Status status = absl::OkStatus();
  if (auto softmax = dyn_cast<dialect::SoftmaxOp>(op)) {
    softmax_loops(op, static_cast<int64_t>(softmax.getDim()), /*log=*/false, options, nest);
  } else if (auto log_softmax = dyn_cast<dialect::LogSoftmaxOp>(op)) {
    softmax_loops(op, static_cast<int64_t>(log_softmax.getDim()), /*log=*/true, options, nest);
  } else if (auto layer = dyn_cast<dialect::LayerNormOp>(op)) {
    auto [weight, has_weight] = layer.getODSOperandIndexAndLength(1);
    auto [bias, has_bias] = layer.getODSOperandIndexAndLength(2);
    norm_loops(op, static_cast<int64_t>(layer.getNormalizedNdim()),
               layer.getEps().convertToDouble(), /*rms=*/false,
               has_weight ? static_cast<int>(weight) : -1, has_bias ? static_cast<int>(bias) : -1,
               options, nest);
  } else if (auto rms = dyn_cast<dialect::RmsNormOp>(op)) {
    norm_loops(op, static_cast<int64_t>(rms.getNormalizedNdim()), rms.getEps().convertToDouble(),
               /*rms=*/true, rms.getWeight() ? 1 : -1, -1, options, nest);
  } else if (auto nll = dyn_cast<dialect::NllLossOp>(op)) {
    nll_loss_loops(nll, options, nest);
  } else if (std::optional<std::pair<int64_t, int64_t>> rows = trailing_rows(op)) {
    reduction_loops(op, *rows, nest);
  } else if (builds_reduction_loops(op)) {
    status = reduction_op_loops(op, [&](int64_t n) { return block_per_row(options, n); }, nest);
  } else if (std::optional<std::pair<int64_t, int64_t>> columns = leading_columns(op)) {
    column_sum_loops(op, *columns, options, nest);
  } else if (auto dropout = dyn_cast<dialect::DropoutOp>(op)) {
    dropout_loops(dropout, nest);
  } else if (auto arange = dyn_cast<dialect::ArangeOp>(op)) {
    arange_loops(arange, nest);
  } else if (isa<dialect::ReshapeOp>(op)) {
    reshape_loops(op, nest);
  } else if (auto permute = dyn_cast<dialect::PermuteOp>(op)) {
    permute_loops(permute, nest);
  } else if (auto slice = dyn_cast<dialect::SliceOp>(op)) {
    slice_loops(slice, nest);
  } else if (auto scatter = dyn_cast<dialect::SliceScatterOp>(op)) {
    slice_scatter_loops(scatter, nest);
  } else if (auto cat = dyn_cast<dialect::CatOp>(op)) {
    cat_loops(cat, /*ways=*/{}, nest);
  } else if (auto select = dyn_cast<dialect::IndexSelectOp>(op)) {
    build_index_select(select, nest);
  } else if (auto add = dyn_cast<dialect::IndexAddOp>(op)) {
    build_index_add(add, options, nest);
  } else if (auto gather = dyn_cast<dialect::GatherOp>(op)) {
    build_gather(gather, nest);
  } else if (auto scatter_add = dyn_cast<dialect::ScatterAddOp>(op)) {
    build_scatter_add(scatter_add, nest);
  } else if (auto update = dyn_cast<dialect::MultiTensorUpdateOp>(op)) {
    status = multi_tensor_update_loops(update, options, nest);
  } else if (builds_creation_loops(op)) {
    build_creation_loops(op, nest);
  } else if (builds_pool_loops(op)) {
    status = build_pool_loops(op, nest);
  } else if (builds_conv_loops(op)) {
    build_conv_loops(op, nest);
  } else {
    status = not_lowered_for_cuda(op, "no loop nest is built for it");
  }
  nest.b.create<func::ReturnOp>();
  return status;
}

} // namespace mstep::cuda
