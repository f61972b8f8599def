// The multi-tensor optimizer update's loop nest for cuda (SGD, Adam,
// AdamW, Adadelta; clip_grad_norm_ included), following RefOptimizer.cpp
// operation by operation (see CudaOpLoops.h for the scheme).
#include "lib/backends/cuda/CudaOptimizerLoops.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaColumnSums.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaOpLoops.h"
#include "mstep/ir/MultiTensorUpdate.h"

namespace mstep::cuda::loops {

namespace {

// ---- multi_tensor_update ----------------------------------------------------

using namespace multi_tensor_update; // segments and rule codes

/// One parameter's update in its storage type T, computing in C (f32 for
/// f32 and the 16-bit floats, f64 for f64) and rounding every operation
/// to T as RefOptimizer.cpp's rnd / rnd_same do.
class UpdateMath {
public:
  UpdateMath(Nest& nest, Type storage)
      : nest_(nest), b(nest.b), t_(storage),
        c_(storage.isF64() ? Type(nest.b.getF64Type()) : Type(nest.b.getF32Type())) {}

  /// rnd<T>(v): an f64 rounded to T, read back as C.
  Value rnd(Value v64) { return widen(nest_.round_to(v64, t_)); }
  /// rnd_same<T>(v): a C value rounded to T and read back.
  Value same(Value v) { return t_ == c_ ? v : widen(b.create<arith::TruncFOp>(t_, v)); }
  Value widen(Value v) {
    return v.getType() == c_ ? v : b.create<arith::ExtFOp>(c_, v).getResult();
  }
  Value narrow(Value v) { return t_ == c_ ? v : b.create<arith::TruncFOp>(t_, v).getResult(); }
  /// C, the type computed in.
  Type compute() const { return c_; }
  Value mul(Value x, Value y) { return same(b.create<arith::MulFOp>(x, y)); }
  Value add(Value x, Value y) { return same(b.create<arith::AddFOp>(x, y)); }
  Value div(Value x, Value y) { return same(b.create<arith::DivFOp>(x, y)); }
  Value sqrt(Value x) { return same(b.create<math::SqrtOp>(x)); }
  Value one() { return nest_.constant(c_, 1.0); }
  Value zero() { return nest_.constant(c_, 0.0); }

private:
  Nest& nest_;
  ImplicitLocOpBuilder& b;
  Type t_, c_;
};

/// ClipGrad.cpp's norm as RefOptimizer.cpp's p_norm computes it, in
/// pieces a lane or a split reduction (CudaColumnSums.h) puts together:
/// each value's f64 term (a C value of type T: |x|^p rounded to T as ref
/// rounds it, or |x| for the inf-norm), how terms fold (an f64 sum, or
/// the inf-norm's max where a NaN wins: both exact in any order but for
/// the sum's f64 roundings), and the norm (C) from the fold: the sum
/// rounded to T, then its root.
struct NormFold {
  Fold fold;
  std::function<Value(Value)> term, finish;
};

NormFold norm_fold(Nest& nest, UpdateMath& m, double p) {
  ImplicitLocOpBuilder& b = nest.b;
  NormFold f;
  if (std::isinf(p)) {
    f.fold.combine = [&nest, &b](Value acc, Value v) -> Value {
      Value acc_nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, acc, acc);
      Value v_nan = b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, v, v);
      Value greater = b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, v, acc);
      Value take =
          b.create<arith::AndIOp>(b.create<arith::XOrIOp>(acc_nan, nest.integer(b.getI1Type(), 1)),
                                  b.create<arith::OrIOp>(v_nan, greater));
      return b.create<arith::SelectOp>(take, v, acc);
    };
    f.term = [&nest, &b](Value x) { return nest.ext(b.create<math::AbsFOp>(x)); };
    // The max of widened C values is one of them: back to C exactly.
    f.finish = [&m, &b](Value best) -> Value {
      return m.same(m.compute() == best.getType()
                        ? best
                        : b.create<arith::TruncFOp>(m.compute(), best).getResult());
    };
    return f;
  }
  f.fold.combine = [&b](Value acc, Value v) -> Value { return b.create<arith::AddFOp>(acc, v); };
  f.term = [&nest, &m, &b, p](Value x) -> Value {
    if (p == 2) return nest.ext(m.mul(x, x));
    if (p == 1) return nest.ext(b.create<math::AbsFOp>(x));
    return nest.ext(m.same(b.create<math::PowFOp>(b.create<math::AbsFOp>(x), m.rnd(nest.f64(p)))));
  };
  f.finish = [&nest, &m, &b, p](Value acc) -> Value {
    Value sum = m.rnd(acc);
    if (p == 2) return m.sqrt(sum);
    if (p == 1) return sum;
    return m.same(b.create<math::PowFOp>(sum, m.rnd(nest.f64(1.0 / p))));
  };
  return f;
}

/// The norm of `count` values read by `at` (C values of type T) in one
/// lane, in ref's order.
Value p_norm(Nest& nest, UpdateMath& m, int64_t count, function_ref<Value(Value)> at, double p) {
  NormFold f = norm_fold(nest, m, p);
  Value acc =
      nest.loop(count, {nest.f64(f.fold.init)}, [&](Value j, ValueRange acc) -> SmallVector<Value> {
        return {f.fold.combine(acc[0], f.term(at(j)))};
      })[0];
  return f.finish(acc);
}

/// clip_grad_norm_'s norms split (MSTEP_CUDA_COLUMN_REDUCTION=split): each
/// gradient is one column of numel rows, cut into chunks of `chunk`
/// elements; pass 1 is one block-rows launch per run of gradients whose
/// buffers fit `max_buffers` kernel parameters (a block per chunk, its
/// gradient found from the chunk tables, an f64 partial per chunk); pass 2
/// is one block: thread j folds gradient j's partials in chunk order into
/// its norm (`norms`, as the one-lane form writes it), then thread 0 the
/// total from the norms in order.
void split_norms(Nest& nest, ArrayRef<Flat> grads, ArrayRef<int64_t> sizes, Type norm_dtype,
                 double p, Value norms, Value total_norm, const CudaCodegenOptions& options,
                 int64_t max_buffers) {
  ImplicitLocOpBuilder& b = nest.b;
  const int64_t n = static_cast<int64_t>(grads.size()), threads = options.threads;
  int64_t elements = 0;
  for (int64_t size : sizes) elements += size;
  const int64_t chunk = split_columns(elements, 1, threads, options.split_target_blocks).chunk_rows;
  // Gradient i's chunks are partials [first[i], first[i] + chunks[i]).
  std::vector<int64_t> first, chunks;
  int64_t blocks = 0;
  for (int64_t size : sizes) {
    first.push_back(blocks);
    chunks.push_back(std::max<int64_t>((size + chunk - 1) / chunk, 1));
    blocks += chunks.back();
  }
  Value partials = b.create<memref::AllocOp>(MemRefType::get({blocks}, b.getF64Type()));
  // Pass 1 for gradients [g0, g1): block `block` (of the run) is chunk
  // block - (first[g] - base) of gradient g = g0 + which.
  auto pass1 = [&](int64_t g0, int64_t g1) {
    const int64_t base = first[g0], count = g1 - g0;
    const int64_t run_blocks = first[g1 - 1] + chunks[g1 - 1] - base;
    std::vector<int64_t> cases(count);
    for (int64_t i = 0; i < count; ++i) cases[i] = i;
    // Thread `lane`'s partial of its block's chunk (a switch over the
    // run's gradients: each its own buffer).
    auto chunk_partial = [&](Value block, Value which, Value lane, UpdateMath& m,
                             const NormFold& f) -> Value {
      auto on = b.create<scf::IndexSwitchOp>(TypeRange{b.getF64Type()}, which, cases,
                                             static_cast<unsigned>(count));
      OpBuilder::InsertionGuard guard(b);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t g = g0 + i;
        b.setInsertionPointToStart(&on.getCaseRegions()[i].emplaceBlock());
        Value k = b.create<arith::SubIOp>(block, nest.index(first[g] - base));
        Value start = nest.affine(k, chunk, Value());
        Value end = b.create<arith::MinUIOp>(b.create<arith::AddIOp>(start, nest.index(chunk)),
                                             nest.index(sizes[g]));
        b.create<scf::YieldOp>(ValueRange{
            strided_fold(nest, b.create<arith::AddIOp>(start, lane), end, threads, f.fold,
                         [&](Value e) { return f.term(m.widen(nest.load(grads[g], e))); })});
      }
      b.setInsertionPointToStart(&on.getDefaultRegion().emplaceBlock());
      b.create<scf::YieldOp>(ValueRange{nest.f64(f.fold.init)});
      return on.getResult(0);
    };
    block_rows(nest, run_blocks, threads, [&](Value block, BlockRow& blk) {
      Value which = nest.index(0);
      for (int64_t i = 1; i < count; ++i) {
        Value past = b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, block,
                                             nest.index(first[g0 + i] - base));
        which = b.create<arith::SelectOp>(past, nest.index(i), which);
      }
      UpdateMath m(nest, norm_dtype);
      NormFold f = norm_fold(nest, m, p);
      tile_partials(
          nest, blk, /*tile=*/1, block, run_blocks, f.fold,
          [&](Value, Value lane) { return chunk_partial(block, which, lane, m, f); },
          [&](Value column, Value value) {
            Value at = b.create<arith::AddIOp>(column, nest.index(base));
            b.create<memref::StoreOp>(value, partials, ValueRange{at});
          });
    });
  };
  // The gradients in runs of at most max_buffers - 2 (partials, norms).
  const int64_t per_launch = max_buffers > 2 ? max_buffers - 2 : n;
  for (int64_t g0 = 0; g0 < n; g0 += per_launch) pass1(g0, std::min(n, g0 + per_launch));
  // Pass 2.
  block_rows(nest, 1, block_threads_for(n), [&](Value, BlockRow& blk) {
    blk.phase([&](Value t) {
      blk.strided(t, n, {}, [&](Value j, ValueRange) -> SmallVector<Value> {
        std::vector<int64_t> cases(n);
        for (int64_t i = 0; i < n; ++i) cases[i] = i;
        auto range = b.create<scf::IndexSwitchOp>(TypeRange{b.getIndexType(), b.getIndexType()}, j,
                                                  cases, static_cast<unsigned>(n));
        {
          OpBuilder::InsertionGuard guard(b);
          for (int64_t i = 0; i < n; ++i) {
            b.setInsertionPointToStart(&range.getCaseRegions()[i].emplaceBlock());
            b.create<scf::YieldOp>(
                ValueRange{nest.index(first[i]), nest.index(first[i] + chunks[i])});
          }
          b.setInsertionPointToStart(&range.getDefaultRegion().emplaceBlock());
          b.create<scf::YieldOp>(ValueRange{nest.index(0), nest.index(0)});
        }
        UpdateMath m(nest, norm_dtype);
        NormFold f = norm_fold(nest, m, p);
        Value acc = strided_fold(
            nest, range.getResult(0), range.getResult(1), 1, f.fold,
            [&](Value k) -> Value { return b.create<memref::LoadOp>(partials, ValueRange{k}); });
        b.create<memref::StoreOp>(m.narrow(f.finish(acc)), norms, ValueRange{j});
        return {};
      });
    });
    blk.phase([&](Value t) {
      Value first_thread = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, t, nest.index(0));
      auto branch = b.create<scf::IfOp>(first_thread, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(branch.thenBlock()->getTerminator());
      UpdateMath m(nest, norm_dtype);
      auto at = [&](Value j) {
        return m.widen(b.create<memref::LoadOp>(norms, ValueRange{j}).getResult());
      };
      Value total = n == 1 ? at(nest.index(0)) : p_norm(nest, m, n, at, p);
      b.create<memref::StoreOp>(m.narrow(total), total_norm, ValueRange{});
    });
  });
}

} // namespace

absl::Status multi_tensor_update_loops(dialect::MultiTensorUpdateOp op,
                                       const CudaCodegenOptions& options, Nest& nest) {
  const int64_t max_launch_buffers =
      options.multi_tensor_launch ? options.multi_tensor_max_buffers : 0;
  const int64_t block = options.threads;
  const unsigned num_operands = op->getNumOperands();
  auto operand = [&](Operand segment, int64_t i = 0) {
    return static_cast<unsigned>(op.getODSOperandIndexAndLength(segment).first + i);
  };
  auto count = [&](Operand segment) { return op.getODSOperandIndexAndLength(segment).second; };
  auto result = [&](Result segment, int64_t i = 0) {
    return num_operands + static_cast<unsigned>(op.getODSResultIndexAndLength(segment).first + i);
  };
  auto count_results = [&](Result segment) {
    return op.getODSResultIndexAndLength(segment).second;
  };
  const auto rule = static_cast<Rule>(op.getKind());
  const bool nesterov = op.getNesterov(), amsgrad = op.getAmsgrad(), maximize = op.getMaximize();
  const int64_t n = count(kParams);
  ImplicitLocOpBuilder& b = nest.b;
  // A present f64 hyperparameter (loaded in the lane), or null.
  auto hyper = [&](Operand segment) -> Value {
    return count(segment) ? nest.load0(nest.param(operand(segment))) : Value();
  };
  // Clipping (clip_grad_norm_): each gradient's norm into a temporary
  // buffer (split over blocks, or a lane of its own with
  // MSTEP_CUDA_COLUMN_REDUCTION=thread), then the total norm in one lane,
  // written to total_grad_norm, from which every update lane derives the
  // coefficient.
  const std::optional<double> max_norm =
      op.getMaxGradNorm() ? std::optional<double>(op.getMaxGradNorm()->convertToDouble())
                          : std::nullopt;
  const double norm_type = op.getGradNormType().convertToDouble();
  Value total_norm;
  if (max_norm) {
    total_norm = nest.param(result(kTotalNorm));
    Type norm_dtype = cast<MemRefType>(total_norm.getType()).getElementType();
    for (int64_t i = 0; i < n; ++i) {
      Value grad = op.getGrads()[i];
      if (cast<ShapedType>(grad.getType()).getElementType() != norm_dtype)
        return not_lowered_for_cuda(op, "clipping needs every gradient in the total norm's dtype");
      if (std::isinf(norm_type) && numel(grad) == 0)
        return not_lowered_for_cuda(op, "the inf-norm of an empty gradient");
    }
    Value norms = b.create<memref::AllocOp>(MemRefType::get({n}, norm_dtype));
    const bool split = options.column_reduction == CudaColumnReduction::split && n > 0;
    if (split) {
      std::vector<Flat> grads;
      std::vector<int64_t> sizes;
      for (int64_t i = 0; i < n; ++i) {
        grads.push_back(nest.flat(operand(kGrads, i)));
        sizes.push_back(numel(op.getGrads()[i]));
      }
      split_norms(nest, grads, sizes, norm_dtype, norm_type, norms, total_norm, options,
                  options.multi_tensor_max_buffers);
    }
    for (int64_t i = 0; i < n && !split; ++i) {
      Flat grad = nest.flat(operand(kGrads, i));
      nest.parallel(1, [&](Value) {
        UpdateMath m(nest, norm_dtype);
        Value norm = p_norm(
            nest, m, numel(op.getGrads()[i]), [&](Value j) { return m.widen(nest.load(grad, j)); },
            norm_type);
        b.create<memref::StoreOp>(m.narrow(norm), norms, ValueRange{nest.index(i)});
      });
    }
    if (!split)
      nest.parallel(1, [&](Value) {
        UpdateMath m(nest, norm_dtype);
        auto at = [&](Value j) {
          return m.widen(b.create<memref::LoadOp>(norms, ValueRange{j}).getResult());
        };
        Value total = n == 1 ? at(nest.index(0)) : p_norm(nest, m, n, at, norm_type);
        b.create<memref::StoreOp>(m.narrow(total), total_norm, ValueRange{});
      });
  }
  // Each parameter's buffers (views made at the top level, where the
  // kernels take them).
  struct Tensor {
    int64_t i = 0, size = 0;
    Flat param, grad, new_param;
    std::vector<Flat> states, new_states;
    std::optional<Flat> clipped;
  };
  std::vector<Tensor> tensors;
  for (int64_t i = 0; i < n; ++i) {
    Tensor t;
    t.i = i;
    t.size = numel(op.getParams()[i]);
    t.param = nest.flat(operand(kParams, i));
    t.grad = nest.flat(operand(kGrads, i));
    t.new_param = nest.flat(result(kNewParams, i));
    const int slots = count(kStates) / std::max<int64_t>(n, 1);
    for (int s = 0; s < slots; ++s) {
      t.states.push_back(nest.flat(operand(kStates, s * n + i)));
      t.new_states.push_back(nest.flat(result(kNewStates, s * n + i)));
    }
    if (count_results(kClippedGrads)) t.clipped = nest.flat(result(kClippedGrads, i));
    tensors.push_back(std::move(t));
  }
  // Element k of tensor t's update.
  auto update = [&](const Tensor& t, Value k) {
      const int64_t i = t.i;
      const Flat &param = t.param, &grad = t.grad, &new_param = t.new_param;
      const std::vector<Flat>&states = t.states, &new_states = t.new_states;
      const std::optional<Flat>& clipped = t.clipped;
      const Type storage = param.element();
      UpdateMath m(nest, storage);
      Value lr64 = hyper(kLr), wd64 = hyper(kWeightDecay), eps64 = hyper(kEps);
      // The advanced step count, as f64 (ref's `step`).
      Value step = nest.f64(0);
      if (count(kSteps)) {
        Value next = b.create<arith::AddIOp>(nest.load0(nest.param(operand(kSteps, i))),
                                             nest.integer(b.getI64Type(), 1));
        step = b.create<arith::SIToFPOp>(b.getF64Type(), next);
      }
      auto cast = [&](Value v64) { return v64 ? m.rnd(v64) : m.zero(); };
      const Value lr = cast(lr64), wd = cast(wd64), eps = cast(eps64);
      auto one_minus = [&](Value v64) { return b.create<arith::SubFOp>(nest.f64(1.0), v64); };
      Value p = m.widen(nest.load(param, k));
      Value g = m.widen(nest.load(grad, k));
      if (max_norm) {
        // min(max_norm / (total + 1e-6), 1), a NaN kept; the clipped
        // gradient is a result when the graph reads it.
        Value total = m.widen(nest.load0(total_norm));
        Value coef = m.div(m.rnd(nest.f64(*max_norm)), m.add(total, m.rnd(nest.f64(1e-6))));
        Value keep = b.create<arith::CmpFOp>(arith::CmpFPredicate::ULT, coef, m.one());
        g = m.mul(g, b.create<arith::SelectOp>(keep, coef, m.one()));
        if (clipped) nest.store(m.narrow(g), *clipped, k);
      }
      if (maximize) g = b.create<arith::NegFOp>(g);
      auto decayed = [&](Value gradient) {
        return wd64 ? m.add(gradient, m.mul(wd, p)) : gradient;
      };
      // The guard (CudaErrorWord.h): where a kernel before this one found
      // bad data, every result is its input unchanged, bit for bit.
      Value failed = nest.error_set();
      auto put = [&](Value v, const Flat& out, const Flat& in) {
        nest.store(b.create<arith::SelectOp>(failed, nest.load(in, k), m.narrow(v)), out, k);
      };
      switch (rule) {
      case Rule::sgd: {
        Value momentum64 = hyper(kMomentum), dampening64 = hyper(kDampening);
        Value momentum = cast(momentum64);
        Value d = decayed(g);
        if (momentum64) {
          Value kept = m.mul(m.widen(nest.load(states[0], k)), momentum);
          Value add = d;
          if (dampening64) {
            // where(step == 1, 1, 1 - dampening), cast.
            Value first = b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, step, nest.f64(1.0));
            Value coef =
                m.rnd(b.create<arith::SelectOp>(first, nest.f64(1.0), one_minus(dampening64)));
            add = m.mul(coef, d);
          }
          Value buf = m.add(kept, add);
          put(buf, new_states[0], states[0]);
          d = nesterov ? m.add(d, m.mul(momentum, buf)) : buf;
        }
        put(b.create<arith::SubFOp>(p, m.mul(lr, d)), new_param, param);
        break;
      }
      case Rule::adam:
      case Rule::adamw: {
        Value beta1_64 = hyper(kBeta1), beta2_64 = hyper(kBeta2);
        const bool decoupled = rule == Rule::adamw && wd64;
        Value beta1 = cast(beta1_64), beta2 = cast(beta2_64);
        Value omb1 = m.rnd(one_minus(beta1_64)), omb2 = m.rnd(one_minus(beta2_64));
        Value bc1 = one_minus(b.create<math::PowFOp>(beta1_64, step));
        Value bc2 = one_minus(b.create<math::PowFOp>(beta2_64, step));
        Value step_size = m.rnd(b.create<arith::DivFOp>(lr64, bc1));
        Value bc2_sqrt = m.rnd(b.create<math::SqrtOp>(bc2));
        Value base = p;
        if (decoupled)
          base = m.mul(p, m.rnd(one_minus(b.create<arith::MulFOp>(lr64, wd64))));
        else
          g = decayed(g);
        Value avg = m.add(m.mul(m.widen(nest.load(states[0], k)), beta1), m.mul(omb1, g));
        Value sq = m.add(m.mul(m.widen(nest.load(states[1], k)), beta2), m.mul(m.mul(omb2, g), g));
        put(avg, new_states[0], states[0]);
        put(sq, new_states[1], states[1]);
        if (amsgrad) { // maximum(max_exp_avg_sq, v); NaN wins
          Value previous = m.widen(nest.load(states[2], k));
          Value take = b.create<arith::OrIOp>(
              b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, previous, previous),
              b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, previous, sq));
          sq = b.create<arith::SelectOp>(take, previous, sq);
          put(sq, new_states[2], states[2]);
        }
        Value denom = m.add(m.div(m.sqrt(sq), bc2_sqrt), eps);
        put(b.create<arith::SubFOp>(base, m.div(m.mul(step_size, avg), denom)), new_param, param);
        break;
      }
      case Rule::adadelta: {
        Value rho64 = hyper(kRho);
        Value rho = cast(rho64), omr = m.rnd(one_minus(rho64));
        g = decayed(g);
        Value acc_delta = m.widen(nest.load(states[1], k));
        Value square_avg =
            m.add(m.mul(m.widen(nest.load(states[0], k)), rho), m.mul(m.mul(omr, g), g));
        Value rms_grad = m.sqrt(m.add(square_avg, eps));
        Value delta = m.mul(m.div(m.sqrt(m.add(acc_delta, eps)), rms_grad), g);
        put(square_avg, new_states[0], states[0]);
        put(m.add(m.mul(acc_delta, rho), m.mul(m.mul(omr, delta), delta)), new_states[1], states[1]);
        put(b.create<arith::SubFOp>(p, m.mul(lr, delta)), new_param, param);
        break;
      }
      }
  };
  // A launch updating tensors [first, last) (one of them: its own launch).
  auto launch = [&](size_t first, size_t last) {
    if (last - first == 1) {
      nest.parallel(tensors[first].size, [&](Value k) { update(tensors[first], k); });
      return;
    }
    // Tensor t's elements at [offset_t, offset_t + size_t) of one index
    // space whose segments start on a block (`block` lanes), so that a
    // block updates one tensor; the lane finds its tensor from the
    // offsets and switches to that tensor's update (the same operations
    // as in its own launch).
    std::vector<int64_t> offsets;
    int64_t total = 0;
    for (size_t t = first; t < last; ++t) {
      offsets.push_back(total);
      total += (tensors[t].size + block - 1) / block * block;
    }
    const int64_t count_here = static_cast<int64_t>(last - first);
    nest.parallel(total, [&](Value lane) {
      Value which = nest.index(0);
      for (int64_t i = 1; i < count_here; ++i) {
        Value past = b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, lane,
                                             nest.index(offsets[i]));
        which = b.create<arith::SelectOp>(past, nest.index(i), which);
      }
      std::vector<int64_t> cases(count_here);
      for (int64_t i = 0; i < count_here; ++i) cases[i] = i;
      auto on = b.create<scf::IndexSwitchOp>(TypeRange{}, which, cases,
                                             static_cast<unsigned>(count_here));
      OpBuilder::InsertionGuard guard(b);
      for (int64_t i = 0; i < count_here; ++i) {
        const Tensor& t = tensors[first + i];
        b.setInsertionPointToStart(&on.getCaseRegions()[i].emplaceBlock());
        Value k = b.create<arith::SubIOp>(lane, nest.index(offsets[i]));
        Value inside = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, k, nest.index(t.size));
        auto branch = b.create<scf::IfOp>(inside, /*withElseRegion=*/false);
        b.create<scf::YieldOp>();
        b.setInsertionPoint(branch.thenBlock()->getTerminator());
        update(t, k);
      }
      b.setInsertionPointToStart(&on.getDefaultRegion().emplaceBlock());
      b.create<scf::YieldOp>();
    });
  };
  // The tensors in runs whose buffers fit `max_launch_buffers` kernel
  // parameters (with the hyperparameters, the step counters and the
  // norm), or one launch each.
  const int64_t per_tensor =
      3 + 2 * (count(kStates) / std::max<int64_t>(n, 1)) + (count_results(kClippedGrads) ? 1 : 0) +
      (count(kSteps) ? 1 : 0);
  const int64_t shared_buffers = 13;  // with the error word
  size_t first = 0;
  int64_t used = shared_buffers;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (max_launch_buffers <= 0 || (t > first && used + per_tensor > max_launch_buffers)) {
      if (t > first) launch(first, t);
      first = t;
      used = shared_buffers;
    }
    used += per_tensor;
  }
  if (first < tensors.size()) launch(first, tensors.size());
  // The step counters advance after every update has read them.
  if (count(kSteps)) {
    nest.parallel(1, [&](Value) {
      Value failed = nest.error_set();  // the guard, as for the parameters
      for (int64_t i = 0; i < count(kSteps); ++i) {
        Value step = nest.load0(nest.param(operand(kSteps, i)));
        Value next = b.create<arith::AddIOp>(step, nest.integer(b.getI64Type(), 1));
        next = b.create<arith::SelectOp>(failed, step, next);
        b.create<memref::StoreOp>(next, nest.param(result(kNewSteps, i)), ValueRange{});
      }
    });
  }
  return absl::OkStatus();
}

} // namespace mstep::cuda::loops
