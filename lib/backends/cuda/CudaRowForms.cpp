// Row-wise ops' arithmetic: see CudaRowForms.h.
#include "lib/backends/cuda/CudaRowForms.h"

#include <limits>

namespace mstep::cuda::loops {

Value max_as_ref(ImplicitLocOpBuilder& b, Value m, Value v) {
  Value less = b.create<arith::CmpFOp>(arith::CmpFPredicate::OLT, m, v);
  return b.create<arith::SelectOp>(less, v, m);
}

RowForm softmax_form(Nest& nest, bool log, RowElement x) {
  ImplicitLocOpBuilder& b = nest.b;
  RowForm form;
  form.stats.push_back({-std::numeric_limits<double>::infinity(),
                        [x](Value j, ArrayRef<Value>) { return x(j); },
                        [&b](Value m, Value v) { return max_as_ref(b, m, v); }, nullptr, Type()});
  form.stats.push_back(
      {0.0,
       [&b, x](Value j, ArrayRef<Value> stats) -> Value {
         return b.create<math::ExpOp>(b.create<arith::SubFOp>(x(j), stats[0]));
       },
       [&b](Value s, Value e) -> Value { return b.create<arith::AddFOp>(s, e); },
       log ? std::function<Value(Value)>([&b](Value sum) -> Value {
         return b.create<math::LogOp>(sum);
       })
           : nullptr,
       Type()});
  form.element = [&b, x, log](Value j, ArrayRef<Value> stats) -> Value {
    Value shifted = b.create<arith::SubFOp>(x(j), stats[0]);
    return log ? b.create<arith::SubFOp>(shifted, stats[1]).getResult()
               : b.create<arith::DivFOp>(b.create<math::ExpOp>(shifted), stats[1]).getResult();
  };
  return form;
}

RowForm norm_form(Nest& nest, int64_t cols, double eps, bool rms, RowElement x,
                  RowElement weight, RowElement bias) {
  ImplicitLocOpBuilder& b = nest.b;
  auto sum = [&b](Value s, Value v) -> Value { return b.create<arith::AddFOp>(s, v); };
  // 1 / sqrt(total / cols + eps).
  auto inverse_root = [&nest, &b, cols, eps](Value total) -> Value {
    Value mean = b.create<arith::DivFOp>(total, nest.f64(static_cast<double>(cols)));
    return b.create<arith::DivFOp>(
        nest.f64(1.0), b.create<math::SqrtOp>(b.create<arith::AddFOp>(mean, nest.f64(eps))));
  };
  RowForm form;
  if (rms) {
    form.stats.push_back({0.0,
                          [&b, x](Value c, ArrayRef<Value>) -> Value {
                            Value v = x(c);
                            return b.create<arith::MulFOp>(v, v);
                          },
                          sum, inverse_root, Type()});
  } else {
    form.stats.push_back({0.0, [x](Value c, ArrayRef<Value>) { return x(c); }, sum,
                          [&nest, &b, cols](Value total) -> Value {
                            return b.create<arith::DivFOp>(total,
                                                           nest.f64(static_cast<double>(cols)));
                          },
                          Type()});
    form.stats.push_back({0.0,
                          [&b, x](Value c, ArrayRef<Value> stats) -> Value {
                            Value d = b.create<arith::SubFOp>(x(c), stats[0]);
                            return b.create<arith::MulFOp>(d, d);
                          },
                          sum, inverse_root, Type()});
  }
  form.element = [&b, x, weight, bias, rms](Value c, ArrayRef<Value> stats) -> Value {
    Value v = x(c);
    if (!rms) v = b.create<arith::SubFOp>(v, stats[0]);
    v = b.create<arith::MulFOp>(v, stats.back());
    if (weight) v = b.create<arith::MulFOp>(v, weight(c));
    if (bias) v = b.create<arith::AddFOp>(v, bias(c));
    return v;
  };
  return form;
}

} // namespace mstep::cuda::loops
