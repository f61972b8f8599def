// The loop nests of CudaReductionLoops.h; RefReduction.cpp's kernels give
// the formulas.
#include "lib/backends/cuda/CudaReductionLoops.h"

#include <limits>
#include <vector>

#include "lib/backends/cuda/CudaBlockRows.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpLoops.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

/// Where a reduction's rows are: output o (row-major over the kept dims)
/// reduces the `n` elements at strided(o, kept) + strided(j, reduced).
struct Rows {
  std::vector<int64_t> kept_shape, kept_strides, reduced_shape, reduced_strides;
  int64_t count = 1, n = 1;
  bool trailing = true;  // the reduced dims are the last ones: row o is [o n, o n + n)
};

Rows rows_of(Operation* op, ArrayRef<int64_t> dims) {
  ArrayRef<int64_t> shape = shape_of(op->getOperand(0));
  const int64_t rank = static_cast<int64_t>(shape.size());
  const std::vector<int64_t> strides = strides_of(shape);
  Rows rows;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = llvm::is_contained(dims, d);
    (reduced ? rows.reduced_shape : rows.kept_shape).push_back(shape[d]);
    (reduced ? rows.reduced_strides : rows.kept_strides).push_back(strides[d]);
    (reduced ? rows.n : rows.count) *= shape[d];
    if (!reduced && !rows.reduced_shape.empty()) rows.trailing = false;
  }
  return rows;
}

/// Builds one reduction: its rows, and for each the element loads.
struct Reduction {
  Nest& nest;
  Rows rows;
  Flat x, y;

  /// Element j of the row starting at `base`, as loaded.
  Value element(Value base, Value j) {
    Value at = rows.trailing ? nest.b.create<arith::AddIOp>(base, j).getResult()
                             : nest.strided(j, rows.reduced_shape, rows.reduced_strides, 0);
    if (!rows.trailing) at = nest.b.create<arith::AddIOp>(base, at);
    return nest.load(x, at);
  }
  /// Where output o's row starts.
  Value base(Value o) {
    return rows.trailing ? nest.affine(o, rows.n, Value())
                         : nest.strided(o, rows.kept_shape, rows.kept_strides, 0);
  }
};

RowStat f64_sum(ImplicitLocOpBuilder& b, std::function<Value(Value, ArrayRef<Value>)> term,
                std::function<Value(Value)> finish) {
  return {0.0, std::move(term),
          [&b](Value s, Value v) -> Value { return b.create<arith::AddFOp>(s, v); },
          std::move(finish), Type()};
}

/// RefReduction.cpp's var_kernel: the mean, then the sum of squared
/// deviations over max(0, n - correction) (inf or NaN at 0, as ref).
void var_loops(dialect::VarOp op, Reduction& r, bool block) {
  Nest& nest = r.nest;
  ImplicitLocOpBuilder& b = nest.b;
  const int64_t n = r.rows.n;
  const double divisor =
      static_cast<double>(std::max<int64_t>(0, n - static_cast<int64_t>(op.getCorrection())));
  row_loops(nest, block, r.rows.count, n, [&](Value o) {
    Value base = r.base(o);
    auto value = [&r, &nest, base](Value j) { return nest.ext(r.element(base, j)); };
    RowSpec spec;
    spec.stats.push_back(f64_sum(
        b, [value](Value j, ArrayRef<Value>) { return value(j); },
        [&nest, &b, n](Value sum) -> Value {
          return b.create<arith::DivFOp>(sum, nest.f64(static_cast<double>(n)));
        }));
    spec.stats.push_back(f64_sum(
        b,
        [&b, value](Value j, ArrayRef<Value> stats) -> Value {
          Value d = b.create<arith::SubFOp>(value(j), stats[0]);
          return b.create<arith::MulFOp>(d, d);
        },
        [&nest, &b, divisor](Value ssd) -> Value {
          return b.create<arith::DivFOp>(ssd, nest.f64(divisor));
        }));
    spec.row_output = [&nest, &r, o](ArrayRef<Value> stats) {
      nest.store(nest.round_to(stats[1], r.y.element()), r.y, o);
    };
    return spec;
  });
}

/// RefReduction.cpp's logsumexp_kernel: m the row's max (std::max: a NaN
/// is skipped), 0 instead when infinite; log(sum(exp(x - m))) + m.
void logsumexp_loops(Reduction& r, bool block) {
  Nest& nest = r.nest;
  ImplicitLocOpBuilder& b = nest.b;
  const double inf = std::numeric_limits<double>::infinity();
  row_loops(nest, block, r.rows.count, r.rows.n, [&](Value o) {
    Value base = r.base(o);
    auto value = [&r, &nest, base](Value j) { return nest.ext(r.element(base, j)); };
    RowSpec spec;
    spec.stats.push_back(
        {-inf, [value](Value j, ArrayRef<Value>) { return value(j); },
         [&b](Value m, Value v) -> Value {
           return b.create<arith::SelectOp>(
               b.create<arith::CmpFOp>(arith::CmpFPredicate::OLT, m, v), v, m);
         },
         [&nest, &b, inf](Value m) -> Value {
           Value infinite = b.create<arith::OrIOp>(
               b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, m, nest.f64(inf)),
               b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, m, nest.f64(-inf)));
           return b.create<arith::SelectOp>(infinite, nest.f64(0), m);
         },
         Type()});
    spec.stats.push_back(f64_sum(
        b,
        [&b, value](Value j, ArrayRef<Value> stats) -> Value {
          return b.create<math::ExpOp>(b.create<arith::SubFOp>(value(j), stats[0]));
        },
        nullptr));
    spec.row_output = [&nest, &b, &r, o](ArrayRef<Value> stats) {
      Value out = b.create<arith::AddFOp>(b.create<math::LogOp>(stats[1]), stats[0]);
      nest.store(nest.round_to(out, r.y.element()), r.y, o);
    };
    return spec;
  });
}

/// RefReduction.cpp's argmax_kernel: the first index of the maximum, or
/// of the first NaN. Two statistics, both exact and order-free: M, the
/// maximum with NaN propagating (in f64 for floats, i64 for integers);
/// then the smallest j whose element is M (a NaN when M is).
void argmax_loops(Reduction& r, bool block) {
  Nest& nest = r.nest;
  ImplicitLocOpBuilder& b = nest.b;
  const int64_t n = r.rows.n;
  const bool floating = isa<FloatType>(r.x.element());
  Type i64 = b.getI64Type();
  row_loops(nest, block, r.rows.count, n, [&](Value o) {
    Value base = r.base(o);
    auto value = [&r, &nest, &b, floating, i64, base](Value j) -> Value {
      Value v = r.element(base, j);
      if (floating) return nest.ext(v);
      if (v.getType().isInteger(64)) return v;
      if (v.getType().isInteger(1)) return b.create<arith::ExtUIOp>(i64, v);
      return b.create<arith::ExtSIOp>(i64, v);
    };
    auto is_nan = [&b](Value v) -> Value {
      return b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, v, v);
    };
    RowSpec spec;
    RowStat maximum;
    maximum.init = floating ? -std::numeric_limits<double>::infinity()
                            : static_cast<double>(std::numeric_limits<int64_t>::min());
    maximum.type = floating ? Type() : i64;
    maximum.term = [value](Value j, ArrayRef<Value>) { return value(j); };
    maximum.combine = [&b, floating, is_nan](Value m, Value v) -> Value {
      if (!floating)
        return b.create<arith::SelectOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::sgt, v, m),
                                         v, m);
      // v when it is greater or a NaN, unless m is a NaN already.
      Value take = b.create<arith::AndIOp>(
          b.create<arith::CmpFOp>(arith::CmpFPredicate::UGT, v, m),
          b.create<arith::XOrIOp>(is_nan(m), b.create<arith::ConstantIntOp>(1, 1)));
      return b.create<arith::SelectOp>(take, v, m);
    };
    spec.stats.push_back(std::move(maximum));
    RowStat index;
    index.init = static_cast<double>(n);  // none yet
    index.type = i64;
    index.term = [&nest, &b, value, is_nan, floating, i64, n](Value j,
                                                             ArrayRef<Value> stats) -> Value {
      Value v = value(j), m = stats[0];
      Value holds =
          floating ? b.create<arith::SelectOp>(is_nan(m), is_nan(v),
                                               b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ,
                                                                       v, m))
                         .getResult()
                   : b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, v, m).getResult();
      return b.create<arith::SelectOp>(holds, b.create<arith::IndexCastOp>(i64, j),
                                       nest.integer(i64, n));
    };
    index.combine = [&b](Value a, Value c) -> Value {
      return b.create<arith::SelectOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, c, a),
                                       c, a);
    };
    spec.stats.push_back(std::move(index));
    spec.row_output = [&nest, &r, o](ArrayRef<Value> stats) { nest.store(stats[1], r.y, o); };
    return spec;
  });
}

} // namespace

bool builds_reduction_loops(Operation* op) {
  return isa<dialect::VarOp, dialect::LogsumexpOp, dialect::ArgmaxOp>(op);
}

absl::Status reduction_op_loops(Operation* op, function_ref<bool(int64_t)> block_rows,
                                Nest& nest) {
  ArrayRef<int64_t> dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  Reduction r{nest, rows_of(op, dims), nest.flat(0), nest.flat(1)};
  if (r.rows.count == 0) return absl::OkStatus();  // no output
  if (r.rows.n == 0)
    return not_lowered_for_cuda(op, "it reduces rows of no elements");
  const bool block = r.rows.trailing && block_rows(r.rows.n);
  if (auto var = dyn_cast<dialect::VarOp>(op))
    var_loops(var, r, block);
  else if (isa<dialect::LogsumexpOp>(op))
    logsumexp_loops(r, block);
  else
    argmax_loops(r, block);
  return absl::OkStatus();
}

} // namespace mstep::cuda
