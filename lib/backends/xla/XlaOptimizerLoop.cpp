// mstep.multi_tensor_update (include/mstep/ir/MultiTensorUpdate.h) on f32
// parameters as one function (XlaOpLoops.h): the step counters and each
// parameter's f32 coefficients (derived in f64 and cast, as the ref kernel
// lib/backends/ref/RefOptimizer.cpp derives them), then with clipping the
// total 2-norm of the gradients and the clip coefficient, then one
// vectorized loop per parameter over its elements. It takes what the cpu
// backend's kernel (lib/backends/cpu/OptimizerKernel.cpp) takes, and
// follows it operation by operation: every f32 product and sum rounded in
// the same order, never contracted into an FMA (LLVM IR contracts only
// what is marked), so parameters and states are bitwise equal to the cpu
// backend's and ref's. The clipping norms (any norm type: 2, 1, inf, p)
// are f64 sums in another order (as on cpu).
//
// bf16 and f16 parameters (all of one dtype) follow the ref kernel's
// instantiation for the dtype: each coefficient cast f64 -> f32 -> dtype,
// and every product, sum, quotient and square root of the update rounded
// to the dtype and read back (its rnd_same), elements widened on load;
// with clipping, the norms too (each square or power rounded before the
// f64 sum; sums, roots and exponents rounded; the total norm of the
// dtype).
//
// The update is a row function over the elements of all parameters in
// turn, which the step function splits over the threads (each element
// computed as on one thread, so the split changes no bit), and the
// counters advance in a second function after it. With clipping, the
// norms come first, on one thread (OpLoop::check, which writes the total
// norm and cannot fail): their f64 sums keep one order whatever the thread
// count; each row then derives the clip coefficient from the total.
//
// A result may be its operand's memory (new_params[i] and params[i], and
// so on): each element is read before it is written, and the counters
// are read before they are written.
#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"
#include "mstep/ir/MultiTensorUpdate.h"

namespace mstep::xla {

using namespace multi_tensor_update;

std::optional<OpLoop> emit_optimizer_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.op != OpKind::multi_tensor_update) return std::nullopt;
  // The cpu kernel's conditions (OptimizerKernel.cpp's make).
  const std::optional<Layout> layout = Layout::of(nd);
  if (!layout || layout->num_params == 0) return std::nullopt;
  const auto* in = &layout->in;
  const auto* out = &layout->out;
  const Rule rule = layout->rule;
  const bool nesterov = layout->nesterov, amsgrad = layout->amsgrad, maximize = layout->maximize;
  const int n = layout->num_params, slots = layout->slots;
  auto operand_type = [&](int i) { return graph.type_of(nd.operands[i]); };
  for (int s = kLr; s < kNumOperandSegments; ++s)
    for (int i = 0; i < in->count[s]; ++i) {
      const TensorType t = operand_type(in->at(s, i));
      if (t.dtype != DType::f64 || t.numel() != 1) return std::nullopt;
    }
  for (int i = 0; i < in->count[kSteps]; ++i) {
    const TensorType t = operand_type(in->at(kSteps, i));
    if (t.dtype != DType::i64 || t.numel() != 1) return std::nullopt;
  }
  std::vector<int64_t> sizes;
  const DType dtype = operand_type(in->at(kParams, 0)).dtype;
  if (!is_loop_float(dtype)) return std::nullopt;
  for (int i = 0; i < n; ++i) {
    const TensorType p = operand_type(in->at(kParams, i));
    if (p.dtype != dtype || operand_type(in->at(kGrads, i)) != p) return std::nullopt;
    for (int s = 0; s < slots; ++s)
      if (operand_type(in->at(kStates, s * n + i)) != p) return std::nullopt;
    sizes.push_back(p.numel());
  }
  const bool clip = out->count[kTotalNorm] != 0;
  double max_norm = 0, norm_type = 2;
  if (clip) {
    if (nd.results[out->at(kTotalNorm)].dtype != dtype) return std::nullopt;
    norm_type = attr_double(nd.attrs, AttrName::grad_norm_type);
    max_norm = attr_double(nd.attrs, AttrName::max_grad_norm);
    // The inf-norm of an empty gradient is the kernels' error (a callout).
    if (std::isinf(norm_type))
      for (int64_t size : sizes)
        if (size == 0) return std::nullopt;
  }

  // The update is a row function over the elements of all parameters one
  // after another, which the step function splits over the threads
  // (OpLoop::rows); each element's arithmetic is the same whatever the
  // split. The step counters advance after it, in a function of their
  // own, since a new counter may be its old counter's memory, which every
  // row reads. The gradient norms (clipping) come before, in OpLoop::check.
  int64_t total = 0;
  std::vector<int64_t> starts;
  for (int64_t size : sizes) starts.push_back(total), total += size;
  LoopBuilder lb(module, absl::StrCat("mstep_xla_multi_tensor_update_rows_", node),
                 nd.operands.size(), nd.results.size(), LoopBuilder::Rows{});
  auto& b = lb.b();
  auto hyper = [&](Operand s) -> llvm::Value* {
    return in->count[s] ? lb.load(lb.f64(), lb.operand(in->at(s)), lb.i64(0)) : lb.f64(0);
  };
  llvm::Value* lr = hyper(kLr);
  llvm::Value* weight_decay = hyper(kWeightDecay);
  llvm::Value* momentum = hyper(kMomentum);
  llvm::Value* dampening = hyper(kDampening);
  llvm::Value* beta1 = hyper(kBeta1);
  llvm::Value* beta2 = hyper(kBeta2);
  llvm::Value* rho = hyper(kRho);
  llvm::Value* eps = hyper(kEps);
  const bool has_weight_decay = in->count[kWeightDecay] != 0;
  const bool has_momentum = in->count[kMomentum] != 0;
  const bool has_dampening = in->count[kDampening] != 0;
  const bool decoupled = rule == Rule::adamw && has_weight_decay;
  // The function being built: this one, or the per-parameter ones below.
  LoopBuilder* cur = &lb;
  // While the update loop is built for bf16: each f32 result rounded to
  // bf16 and read back (the ref's rnd_same).
  bool round_results = false;
  auto rounded = [&](llvm::Value* v) {
    if (!round_results) return v;
    return widen_to_f32(cur->b(), dtype, round_to_storage(cur->b(), dtype, v));
  };
  // An f64 scalar cast to the parameters' dtype, as f32 (the ref's rnd).
  auto f32 = [&](llvm::Value* v) {
    llvm::Value* x = cur->to_f32(v);
    if (dtype == DType::f32) return x;
    return widen_to_f32(cur->b(), dtype, round_to_storage(cur->b(), dtype, x));
  };
  auto sub = [&](llvm::Value* a, llvm::Value* c) { return rounded(cur->b().CreateFSub(a, c)); };
  auto mul = [&](llvm::Value* a, llvm::Value* c) { return rounded(cur->b().CreateFMul(a, c)); };
  auto add = [&](llvm::Value* a, llvm::Value* c) { return rounded(cur->b().CreateFAdd(a, c)); };
  auto div = [&](llvm::Value* a, llvm::Value* c) { return rounded(cur->b().CreateFDiv(a, c)); };
  auto sqrt = [&](llvm::Value* v) { return rounded(cur->call(llvm::Intrinsic::sqrt, v)); };

  // 1. Each parameter's scalars, from the step counters it reads.
  struct Coefficients {
    llvm::Value *lr, *weight_decay, *eps, *momentum, *dampening, *decay, *beta1, *beta2,
        *one_minus_beta1, *one_minus_beta2, *step_size, *bias_correction2_sqrt, *rho,
        *one_minus_rho;
  };
  std::vector<Coefficients> coefficients(n);
  llvm::Value* one = lb.f64(1.0);
  for (int i = 0; i < n; ++i) {
    llvm::Value* step = lb.f64(0);
    if (in->count[kSteps]) {
      llvm::Value* next =
          b.CreateAdd(lb.load(lb.i64(), lb.operand(in->at(kSteps, i)), lb.i64(0)), lb.i64(1));
      step = b.CreateSIToFP(next, lb.f64());
    }
    Coefficients& c = coefficients[i];
    c = {};
    c.lr = f32(lr);
    c.weight_decay = f32(weight_decay);
    c.eps = f32(eps);
    switch (rule) {
    case Rule::sgd:
      c.momentum = f32(momentum);
      c.dampening = has_dampening
                        ? f32(b.CreateSelect(b.CreateFCmpOEQ(step, one), one, sub(one, dampening)))
                        : lb.f32(1.0f);
      break;
    case Rule::adam:
    case Rule::adamw: {
      c.decay = decoupled ? f32(sub(one, mul(lr, weight_decay))) : lb.f32(1.0f);
      c.beta1 = f32(beta1);
      c.beta2 = f32(beta2);
      c.one_minus_beta1 = f32(sub(one, beta1));
      c.one_minus_beta2 = f32(sub(one, beta2));
      llvm::Value* pow1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, beta1, step);
      llvm::Value* pow2 = b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, beta2, step);
      c.step_size = f32(div(lr, sub(one, pow1)));
      c.bias_correction2_sqrt = f32(sqrt(sub(one, pow2)));
      break;
    }
    case Rule::adadelta:
      c.rho = f32(rho);
      c.one_minus_rho = f32(sub(one, rho));
      break;
    }
  }

  // 2. The clip coefficient min(max_norm / (total + 1e-6), 1) (NaN kept)
  //    from the gradients before any update: each gradient's p-norm as its
  //    own reduction rounds it, then the p-norm of the norms (the cpu
  //    kernel's p_norm): p = 2 sqrt(f32(f64 sum of f32 squares)), p = 1
  //    f32(f64 sum of |x|), p = inf the largest |x| (NaN wins), other p
  //    powf(f32(f64 sum of powf(|x|, p)), 1/p).
  //    bf16 and f16 as the ref kernel's instantiation: each square or power
  //    rounded to the dtype (its rnd_same) before the f64 sum, the exponents
  //    p and 1/p, the sums, roots, max_norm and 1e-6 rounded to it too.
  llvm::Value* clip_coef = nullptr;
  llvm::Function* norm_check = nullptr;
  if (clip) {
    round_results = dtype != DType::f32;
    const bool inf_norm = std::isinf(norm_type);
    auto* pow_f32 = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::pow, {lb.f32()});
    // |x| raised as the norm sums it (f32).
    auto power = [&](llvm::Value* x) -> llvm::Value* {
      if (norm_type == 2.0) return mul(x, x);
      llvm::Value* a = cur->call(llvm::Intrinsic::fabs, x);
      if (norm_type == 1.0) return a;
      return rounded(cur->b().CreateCall(pow_f32, {a, f32(cur->f64(norm_type))}));
    };
    // The largest of `best` and |x|, a NaN staying.
    auto larger = [&](llvm::Value* best, llvm::Value* x) {
      auto& bb = cur->b();
      llvm::Value* a = bb.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      llvm::Value* take = bb.CreateAnd(bb.CreateNot(cur->is_nan(best)),
                                       bb.CreateOr(cur->is_nan(a), bb.CreateFCmpOGT(a, best)));
      return bb.CreateSelect(take, a, best);
    };
    // One function: a gradient's f64 sum of powers, or its largest |x|
    // (inf-norm, as f64), over (grad, count).
    LoopBuilder partial(module, absl::StrCat("mstep_xla_norm_partial_", node), 2, 1);
    cur = &partial;
    {
      llvm::Value* count = partial.load(partial.i64(), partial.operand(1), partial.i64(0));
      if (inf_norm) {
        llvm::AllocaInst* best = partial.local(partial.f32(), partial.f32(0));
        partial.loop(partial.i64(0), count, [&](llvm::Value* k) {
          partial.set(best, larger(partial.get(best),
                                   load_f32(partial, dtype, partial.operand(0), k)));
        });
        partial.store(partial.to_f64(partial.get(best)), partial.result(0), partial.i64(0));
      } else {
        llvm::AllocaInst* sum = partial.local(partial.f64(), partial.f64(0));
        partial.loop(partial.i64(0), count, [&](llvm::Value* k) {
          llvm::Value* x = load_f32(partial, dtype, partial.operand(0), k);
          partial.set(sum, partial.b().CreateFAdd(partial.get(sum), partial.to_f64(power(x))));
        });
        partial.store(partial.get(sum), partial.result(0), partial.i64(0));
      }
    }
    llvm::Function* norm_partial = partial.finish();
    // The check: the norms and their total, into the total-norm result.
    LoopBuilder norm(module, absl::StrCat("mstep_xla_clip_norm_", node), nd.operands.size(),
                     nd.results.size());
    cur = &norm;
    auto& nb = norm.b();
    // A sum of powers, rounded, to the norm.
    auto root = [&](llvm::Value* sum) -> llvm::Value* {
      if (norm_type == 2.0) return sqrt(f32(sum));
      if (norm_type == 1.0) return f32(sum);
      return rounded(nb.CreateCall(pow_f32, {f32(sum), f32(norm.f64(1.0 / norm_type))}));
    };
    std::vector<llvm::Value*> norms;
    llvm::Type* ptr = nb.getPtrTy();
    for (int i = 0; i < n; ++i) {
      llvm::Value* sum = norm.array(norm.f64(), {norm.f64(0)});
      nb.CreateCall(norm_partial, {norm.array(ptr, {norm.operand(in->at(kGrads, i)),
                                                    norm.array(norm.i64(), {norm.i64(sizes[i])})}),
                                   norm.array(ptr, {sum})});
      llvm::Value* partial_value = nb.CreateLoad(norm.f64(), sum);
      norms.push_back(inf_norm ? f32(partial_value) : root(partial_value));
    }
    llvm::Value* total_norm = norms[0];
    if (n > 1 && inf_norm) {
      total_norm = norm.f32(0);
      for (llvm::Value* v : norms) total_norm = larger(total_norm, v);
    } else if (n > 1) {
      llvm::Value* acc = norm.f64(0);
      for (llvm::Value* v : norms) acc = nb.CreateFAdd(acc, norm.to_f64(power(v)));
      total_norm = root(acc);
    }
    store_f32(norm, dtype, total_norm, norm.result(out->at(kTotalNorm)), norm.i64(0));
    norm_check = norm.finish();
    // Each row: the coefficient from the total the check wrote.
    cur = &lb;
    llvm::Value* total_in = load_f32(lb, dtype, lb.result(out->at(kTotalNorm)), lb.i64(0));
    llvm::Value* coef = div(f32(lb.f64(max_norm)), add(total_in, f32(lb.f64(1e-6))));
    llvm::Value* keep = b.CreateFCmpULT(coef, lb.f32(1.0f)); // NaN or below 1
    clip_coef = b.CreateSelect(keep, coef, lb.f32(1.0f));
    round_results = false;
  }

  // 3. The updates: one function runs elements [begin, end) of a
  //    parameter (its range and coefficients passed in), called once per
  //    parameter, by the row function on the part of the parameter in its
  //    rows.
  enum CoefficientSlot {
    kSlotLr,
    kSlotWeightDecay,
    kSlotEps,
    kSlotMomentum,
    kSlotDampening,
    kSlotDecay,
    kSlotBeta1,
    kSlotBeta2,
    kSlotOneMinusBeta1,
    kSlotOneMinusBeta2,
    kSlotStepSize,
    kSlotBiasCorrection2Sqrt,
    kSlotRho,
    kSlotOneMinusRho,
    kSlotClip,
    kNumSlots
  };
  const bool has_clipped = out->count[kClippedGrads] != 0;
  // Operands: param, grad, coefficients (f32[kNumSlots]), range (i64[2]),
  // states; results: new param, new states, clipped grad.
  LoopBuilder update(module, absl::StrCat("mstep_xla_update_", node), 4 + slots,
                     1 + slots + (has_clipped ? 1 : 0));
  cur = &update;
  {
    auto slot = [&](int k) { return update.load(update.f32(), update.operand(2), update.i64(k)); };
    Coefficients c{};
    c.lr = slot(kSlotLr);
    c.weight_decay = slot(kSlotWeightDecay);
    c.eps = slot(kSlotEps);
    c.momentum = slot(kSlotMomentum);
    c.dampening = slot(kSlotDampening);
    c.decay = slot(kSlotDecay);
    c.beta1 = slot(kSlotBeta1);
    c.beta2 = slot(kSlotBeta2);
    c.one_minus_beta1 = slot(kSlotOneMinusBeta1);
    c.one_minus_beta2 = slot(kSlotOneMinusBeta2);
    c.step_size = slot(kSlotStepSize);
    c.bias_correction2_sqrt = slot(kSlotBiasCorrection2Sqrt);
    c.rho = slot(kSlotRho);
    c.one_minus_rho = slot(kSlotOneMinusRho);
    llvm::Value* clip_coef = clip ? slot(kSlotClip) : nullptr;
    llvm::Value* first = update.load(update.i64(), update.operand(3), update.i64(0));
    llvm::Value* end = update.load(update.i64(), update.operand(3), update.i64(1));
    llvm::Value* param_in = update.operand(0);
    llvm::Value* grad_in = update.operand(1);
    llvm::Value* param_out = update.result(0);
    llvm::Value* clipped_out = has_clipped ? update.result(1 + slots) : nullptr;
    std::array<llvm::Value*, 3> state{}, new_state{};
    for (int s = 0; s < slots; ++s) {
      state[s] = update.operand(4 + s);
      new_state[s] = update.result(1 + s);
    }
    round_results = dtype != DType::f32;
    update.loop(
        first, end,
        [&](llvm::Value* k) {
          auto load = [&](llvm::Value* base) { return load_f32(*cur, dtype, base, k); };
          auto store = [&](llvm::Value* v, llvm::Value* base) {
            store_f32(*cur, dtype, v, base, k);
          };
          llvm::Value* param = load(param_in);
          llvm::Value* g = load(grad_in);
          if (clip) {
            g = mul(g, clip_coef);
            if (clipped_out) store(g, clipped_out);
          }
          if (maximize) g = cur->b().CreateFNeg(g);
          auto decayed = [&](llvm::Value* v) {
            return has_weight_decay ? add(v, mul(c.weight_decay, param)) : v;
          };
          switch (rule) {
          case Rule::sgd: {
            llvm::Value* d = decayed(g);
            if (has_momentum) {
              llvm::Value* kept = mul(load(state[0]), c.momentum);
              llvm::Value* buf = add(kept, has_dampening ? mul(c.dampening, d) : d);
              store(buf, new_state[0]);
              d = nesterov ? add(d, mul(c.momentum, buf)) : buf;
            }
            store(sub(param, mul(c.lr, d)), param_out);
            break;
          }
          case Rule::adam:
          case Rule::adamw: {
            llvm::Value* base = param;
            if (decoupled)
              base = mul(param, c.decay);
            else
              g = decayed(g);
            llvm::Value* exp_avg = load(state[0]);
            llvm::Value* exp_avg_sq = load(state[1]);
            llvm::Value* max_exp_avg_sq = amsgrad ? load(state[2]) : exp_avg_sq;
            llvm::Value* mean = add(mul(exp_avg, c.beta1), mul(c.one_minus_beta1, g));
            llvm::Value* v = add(mul(exp_avg_sq, c.beta2), mul(mul(c.one_minus_beta2, g), g));
            store(mean, new_state[0]);
            store(v, new_state[1]);
            if (amsgrad) { // maximum(max_exp_avg_sq, v); NaN wins
              llvm::Value* keep = cur->b().CreateOr(cur->b().CreateFCmpOGT(max_exp_avg_sq, v),
                                                    cur->is_nan(max_exp_avg_sq));
              v = cur->b().CreateSelect(keep, max_exp_avg_sq, v);
              store(v, new_state[2]);
            }
            llvm::Value* denom = add(div(sqrt(v), c.bias_correction2_sqrt), c.eps);
            llvm::Value* step = div(mul(c.step_size, mean), denom);
            store(sub(base, step), param_out);
            break;
          }
          case Rule::adadelta: {
            g = decayed(g);
            llvm::Value* square_avg_old = load(state[0]);
            llvm::Value* acc_delta = load(state[1]);
            llvm::Value* square_avg =
                add(mul(square_avg_old, c.rho), mul(mul(c.one_minus_rho, g), g));
            llvm::Value* rms_grad = sqrt(add(square_avg, c.eps));
            llvm::Value* delta = mul(div(sqrt(add(acc_delta, c.eps)), rms_grad), g);
            store(square_avg, new_state[0]);
            store(add(mul(acc_delta, c.rho), mul(mul(c.one_minus_rho, delta), delta)),
                  new_state[1]);
            store(sub(param, mul(c.lr, delta)), param_out);
            break;
          }
          }
        },
        /*parallel=*/true);
    round_results = false;
  }
  llvm::Function* update_parameter = update.finish();
  cur = &lb;
  llvm::Type* ptr = b.getPtrTy();
  for (int i = 0; i < n; ++i) {
    const Coefficients& c = coefficients[i];
    auto value = [&](llvm::Value* v) { return v ? v : lb.f32(0.0f); };
    llvm::Value* slots_of_i =
        lb.array(lb.f32(), {value(c.lr), value(c.weight_decay), value(c.eps), value(c.momentum),
                            value(c.dampening), value(c.decay), value(c.beta1), value(c.beta2),
                            value(c.one_minus_beta1), value(c.one_minus_beta2), value(c.step_size),
                            value(c.bias_correction2_sqrt), value(c.rho), value(c.one_minus_rho),
                            value(clip_coef)});
    // The elements in the function's rows, [max(begin - start, 0),
    // min(end - start, size)) (none when the rows end before the parameter
    // or start after it).
    llvm::Value* from = b.CreateBinaryIntrinsic(
        llvm::Intrinsic::smax, b.CreateSub(lb.row_begin(), lb.i64(starts[i])), lb.i64(0));
    llvm::Value* to = b.CreateBinaryIntrinsic(
        llvm::Intrinsic::smin, b.CreateSub(lb.row_end(), lb.i64(starts[i])), lb.i64(sizes[i]));
    llvm::Value* range = lb.array(lb.i64(), {from, to});
    std::vector<llvm::Value*> operands = {lb.operand(in->at(kParams, i)),
                                          lb.operand(in->at(kGrads, i)), slots_of_i, range};
    std::vector<llvm::Value*> results = {lb.result(out->at(kNewParams, i))};
    for (int s = 0; s < slots; ++s) {
      operands.push_back(lb.operand(in->at(kStates, s * n + i)));
      results.push_back(lb.result(out->at(kNewStates, s * n + i)));
    }
    if (has_clipped) results.push_back(lb.result(out->at(kClippedGrads, i)));
    b.CreateCall(update_parameter, {lb.array(ptr, operands), lb.array(ptr, results)});
  }
  OpLoop loop{lb.finish(), false};
  loop.check = norm_check;
  loop.rows = total;
  loop.grain = 16; // a split at whole vectors
  loop.work = total;
  if (in->count[kSteps]) {
    // The counters, advanced after every row is updated.
    LoopBuilder counters(module, absl::StrCat("mstep_xla_update_steps_", node),
                         nd.operands.size(), nd.results.size());
    for (int i = 0; i < n; ++i)
      counters.store(counters.b().CreateAdd(counters.load(counters.i64(),
                                                          counters.operand(in->at(kSteps, i)),
                                                          counters.i64(0)),
                                            counters.i64(1)),
                     counters.result(out->at(kNewSteps, i)), counters.i64(0));
    loop.after_rows = counters.finish();
  }
  return loop;
}

} // namespace mstep::xla
