// Host kernel for mstep.multi_tensor_update (include/mstep/ir/dialect/
// OptimizerOps.td) on f32 parameters: one pass over every parameter, 16
// lanes at a time, the elements of all parameters split evenly over the
// OpenMP threads.
//
// It follows lib/backends/ref/RefOptimizer.cpp operation by operation: the
// derived scalars in f64 and then cast, each product and sum rounded to
// f32 in the same order (the file is compiled without contracting a * b + c
// into an FMA, as the ref kernel is). The results are then bitwise equal
// to the ref kernel's, except the clipping norms, whose f64 sums add in
// another order.
//
// A result may share memory with its operand (new_params[i] with
// params[i], new_states[j] with states[j], new_steps[k] with steps[k]):
// every 16-lane block reads all its operands before it writes, and the
// scalars are read before any step counter is written.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "lib/backends/cpu/HostKernels.h"
#include "mstep/ir/MultiTensorUpdate.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

// Keep a * b + c as two rounded operations, like the ref kernel.
#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

namespace mstep::cpu {

namespace {

using simd::tail_mask;

using namespace multi_tensor_update;  // the op's segments and rule codes


/// The per-parameter f32 scalars of the update rules, computed in f64 and
/// cast once, as lib/api/optim records them (see RefOptimizer.cpp).
struct Coefficients {
  float lr = 0, weight_decay = 0, eps = 0;
  float momentum = 0, dampening = 1;                          // sgd
  float decay = 1, beta1 = 0, beta2 = 0, one_minus_beta1 = 0; // adam, adamw
  float one_minus_beta2 = 0, step_size = 0, bias_correction2_sqrt = 0;
  float rho = 0, one_minus_rho = 0; // adadelta
};

/// One parameter's buffers for one run.
struct Buffers {
  const float* param;
  const float* grad;
  float* new_param;
  float* clipped; // nullptr unless the node returns the clipped gradients
  std::array<const float*, 3> state;
  std::array<float*, 3> new_state;
};

/// ClipGrad.cpp's norm() of `n` floats as the unfused reductions compute
/// it (RefOptimizer.cpp's p_norm): used to combine the per-parameter norms.
float p_norm(const float* x, int64_t n, double p) {
  if (std::isinf(p)) { // max(|x|); NaN wins
    float best = std::fabs(x[0]);
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::fabs(x[i]);
      if (std::isnan(v)) return v;
      if (v > best) best = v;
    }
    return best;
  }
  double acc = 0;
  const auto exponent = static_cast<float>(p);
  for (int64_t i = 0; i < n; ++i) {
    if (p == 2)
      acc += x[i] * x[i];
    else if (p == 1)
      acc += std::fabs(x[i]);
    else
      acc += std::pow(std::fabs(x[i]), exponent);
  }
  const auto sum = static_cast<float>(acc);
  if (p == 2) return std::sqrt(sum);
  if (p == 1) return sum;
  return std::pow(sum, static_cast<float>(1.0 / p));
}

/// Partial norm state of a range of one gradient: the f64 sum of the
/// rounded powers, or (inf-norm) the largest |x|, NaN winning.
struct NormPartial {
  double sum = 0;
  float max = 0;
};

NormPartial partial_norm(const float* g, int64_t begin, int64_t end, double p) {
  NormPartial out;
  if (std::isinf(p)) {
    __m512 best = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int64_t k = begin; k < end; k += simd::kLanes) {
      const __mmask16 m = tail_mask(end - k);
      const __m512 v = _mm512_abs_ps(simd::load(g + k, m));
      nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
      best = _mm512_max_ps(best, v);
    }
    out.max = nan ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(best);
    return out;
  }
  if (p != 2 && p != 1) { // rare: pow has no vector form here
    const auto exponent = static_cast<float>(p);
    for (int64_t k = begin; k < end; ++k) out.sum += std::pow(std::fabs(g[k]), exponent);
    return out;
  }
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t k = begin; k < end; k += simd::kLanes) {
    const __m512 x = simd::load(g + k, tail_mask(end - k));
    const __m512 v = p == 2 ? _mm512_mul_ps(x, x) : _mm512_abs_ps(x); // rounded to f32
    lo = _mm512_add_pd(lo, simd::low_half_f64(v));
    hi = _mm512_add_pd(hi, simd::high_half_f64(v));
  }
  out.sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
  return out;
}

/// The gradient as the rules see it: scaled by the clip coefficient (and
/// stored as the clipped gradient when asked), negated for `maximize`.
struct GradientReader {
  bool clip, maximize;
  __m512 clamped;

  __m512 operator()(const Buffers& b, int64_t k, __mmask16 m) const {
    __m512 g = simd::load(b.grad + k, m);
    if (clip) {
      g = _mm512_mul_ps(g, clamped);
      if (b.clipped) simd::store(b.clipped + k, g, m);
    }
    return maximize ? _mm512_xor_ps(g, _mm512_set1_ps(-0.0f)) : g;
  }
};

class MultiTensorUpdateKernel final : public CpuKernel {
public:
  static absl::StatusOr<std::unique_ptr<CpuKernel>> make(const KernelRequest& request);

  void run(const void* const* operands, void* const* results) override;
  absl::string_view name() const override { return "host.multi_tensor_update"; }

private:
  double hyper(const void* const* operands, Operand s) const {
    return in_.count[s] ? *static_cast<const double*>(operands[in_.at(s)]) : 0.0;
  }
  /// Writes the total norm and returns the clip coefficient
  /// min(max_norm / (total + 1e-6), 1), NaN kept.
  float clip_coefficient(void* const* results);
  void update(const Buffers& b, const Coefficients& c, const GradientReader& gradient,
              int64_t begin, int64_t end) const;

  Segments<kNumOperandSegments> in_;
  Segments<kNumResultSegments> out_;
  Rule rule_ = Rule::sgd;
  bool nesterov_ = false, amsgrad_ = false, maximize_ = false;
  double max_norm_ = 0, norm_type_ = 2;
  int64_t num_params_ = 0;
  int slots_ = 0; // state tensors per parameter
  /// Where parameter i's elements start in the concatenation of all
  /// parameters (num_params_ + 1 entries), which the threads split evenly.
  std::vector<int64_t> starts_;
  // Scratch reused by every run.
  std::vector<Buffers> buffers_;
  std::vector<Coefficients> coefficients_;
  std::vector<NormPartial> partials_; // [slot][param]
  std::vector<float> norms_;
};

absl::StatusOr<std::unique_ptr<CpuKernel>>
MultiTensorUpdateKernel::make(const KernelRequest& request) {
  const GraphNode& node = request.node();
  // The fast path: f32 tensors, f64 0-d hyperparameters, the state slots
  // the rule needs, and every operand where the ref kernel expects it.
  // Anything else stays with the ref kernel.
  const std::optional<Layout> layout = Layout::of(node);
  if (!layout) return nullptr;
  auto kernel = std::make_unique<MultiTensorUpdateKernel>();
  MultiTensorUpdateKernel& k = *kernel;
  k.in_ = layout->in;
  k.out_ = layout->out;
  k.rule_ = layout->rule;
  k.nesterov_ = layout->nesterov;
  k.amsgrad_ = layout->amsgrad;
  k.maximize_ = layout->maximize;
  k.num_params_ = layout->num_params;
  k.slots_ = layout->slots;
  const auto* in = &layout->in;
  const auto* out = &layout->out;
  const int n = layout->num_params, slots = layout->slots;
  auto operand_type = [&](int i) { return request.graph.type_of(node.operands[i]); };
  for (int s = kLr; s < kNumOperandSegments; ++s)
    for (int i = 0; i < in->count[s]; ++i) {
      const TensorType t = operand_type(in->at(s, i));
      if (t.dtype != DType::f64 || t.numel() != 1) return nullptr;
    }
  for (int i = 0; i < in->count[kSteps]; ++i) {
    const TensorType t = operand_type(in->at(kSteps, i));
    if (t.dtype != DType::i64 || t.numel() != 1) return nullptr;
  }
  k.starts_.assign(1, 0);
  for (int i = 0; i < n; ++i) {
    const TensorType p = operand_type(in->at(kParams, i));
    if (p.dtype != DType::f32 || operand_type(in->at(kGrads, i)) != p) return nullptr;
    for (int s = 0; s < slots; ++s)
      if (operand_type(in->at(kStates, s * n + i)) != p) return nullptr;
    k.starts_.push_back(k.starts_.back() + p.numel());
  }
  if (out->count[kTotalNorm]) {
    if (node.results[out->at(kTotalNorm)].dtype != DType::f32) return nullptr;
    k.max_norm_ = attr_double(node.attrs, AttrName::max_grad_norm);
    k.norm_type_ = attr_double(node.attrs, AttrName::grad_norm_type);
    // The ref kernel reports the inf-norm of an empty gradient.
    if (std::isinf(k.norm_type_))
      for (int i = 0; i < n; ++i)
        if (k.starts_[i + 1] == k.starts_[i]) return nullptr;
    if (n == 0) return nullptr;
  }
  k.buffers_.resize(n);
  k.coefficients_.resize(n);
  k.norms_.resize(n);
  return kernel;
}

float MultiTensorUpdateKernel::clip_coefficient(void* const* results) {
  const int64_t n = num_params_;
  const double p = norm_type_;
  const int slots = simd::max_slots();
  partials_.assign(static_cast<size_t>(slots) * n, NormPartial{});
  // 1. Per-thread partial norms of each gradient over the thread's share
  //    of all elements.
  simd::parallel_ranges(starts_[n], starts_[n], [&](int slot, int64_t begin, int64_t end) {
    int64_t i = std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1;
    for (; i < n && starts_[i] < end; ++i) {
      const int64_t lo = std::max(begin, starts_[i]) - starts_[i];
      const int64_t hi = std::min(end, starts_[i + 1]) - starts_[i];
      if (lo < hi) partials_[slot * n + i] = partial_norm(buffers_[i].grad, lo, hi, p);
    }
  });
  // 2. Each gradient's norm, rounded as its own reduction would be, then
  //    the norm of the norms.
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    float max = 0;
    bool nan = false;
    for (int s = 0; s < slots; ++s) {
      const NormPartial& part = partials_[s * n + i];
      sum += part.sum;
      nan |= std::isnan(part.max);
      max = std::max(max, part.max);
    }
    const auto rounded = static_cast<float>(sum);
    if (std::isinf(p))
      norms_[i] = nan ? std::numeric_limits<float>::quiet_NaN() : max;
    else if (p == 2)
      norms_[i] = std::sqrt(rounded);
    else if (p == 1)
      norms_[i] = rounded;
    else
      norms_[i] = std::pow(rounded, static_cast<float>(1.0 / p));
  }
  const float total = n == 1 ? norms_[0] : p_norm(norms_.data(), n, p);
  *static_cast<float*>(results[out_.at(kTotalNorm)]) = total;
  const float coef = static_cast<float>(max_norm_) / (total + static_cast<float>(1e-6));
  return (std::isnan(coef) || coef < 1.0f) ? coef : 1.0f;
}

void MultiTensorUpdateKernel::run(const void* const* operands, void* const* results) {
  const int64_t n = num_params_;
  const double lr = hyper(operands, kLr), weight_decay = hyper(operands, kWeightDecay);
  const double momentum = hyper(operands, kMomentum), dampening = hyper(operands, kDampening);
  const double beta1 = hyper(operands, kBeta1), beta2 = hyper(operands, kBeta2);
  const double rho = hyper(operands, kRho), eps = hyper(operands, kEps);
  const bool has_dampening = in_.count[kDampening] != 0;
  const bool decoupled = rule_ == Rule::adamw && in_.count[kWeightDecay];

  // 1. Buffers and scalars of every parameter; the step counters advance
  //    only after they are read (a new step may be its old step's memory).
  for (int64_t i = 0; i < n; ++i) {
    const int ii = static_cast<int>(i);
    Buffers& b = buffers_[i];
    b.param = static_cast<const float*>(operands[in_.at(kParams, ii)]);
    b.grad = static_cast<const float*>(operands[in_.at(kGrads, ii)]);
    b.new_param = static_cast<float*>(results[out_.at(kNewParams, ii)]);
    b.clipped = out_.count[kClippedGrads] ? static_cast<float*>(results[out_.at(kClippedGrads, ii)])
                                          : nullptr;
    for (int s = 0; s < slots_; ++s) {
      b.state[s] =
          static_cast<const float*>(operands[in_.at(kStates, s * static_cast<int>(n) + ii)]);
      b.new_state[s] =
          static_cast<float*>(results[out_.at(kNewStates, s * static_cast<int>(n) + ii)]);
    }
    double step = 0; // the advanced count, as f64
    if (in_.count[kSteps]) {
      const int64_t next = *static_cast<const int64_t*>(operands[in_.at(kSteps, ii)]) + 1;
      *static_cast<int64_t*>(results[out_.at(kNewSteps, ii)]) = next;
      step = static_cast<double>(next);
    }
    Coefficients& c = coefficients_[i];
    c.lr = static_cast<float>(lr);
    c.weight_decay = static_cast<float>(weight_decay);
    c.eps = static_cast<float>(eps);
    switch (rule_) {
    case Rule::sgd:
      c.momentum = static_cast<float>(momentum);
      c.dampening = has_dampening ? static_cast<float>(step == 1.0 ? 1.0 : 1.0 - dampening) : 1.0f;
      break;
    case Rule::adam:
    case Rule::adamw:
      c.decay = decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
      c.beta1 = static_cast<float>(beta1);
      c.beta2 = static_cast<float>(beta2);
      c.one_minus_beta1 = static_cast<float>(1.0 - beta1);
      c.one_minus_beta2 = static_cast<float>(1.0 - beta2);
      c.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
      c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
      break;
    case Rule::adadelta:
      c.rho = static_cast<float>(rho);
      c.one_minus_rho = static_cast<float>(1.0 - rho);
      break;
    }
  }

  // 2. The clip coefficient, from the gradients before any update.
  GradientReader gradient{out_.count[kTotalNorm] != 0, maximize_, _mm512_set1_ps(1.0f)};
  if (gradient.clip) gradient.clamped = _mm512_set1_ps(clip_coefficient(results));

  // 3. The update, each thread on its share of all parameters' elements.
  simd::parallel_ranges(starts_[n], starts_[n], [&](int, int64_t begin, int64_t end) {
    int64_t i = std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1;
    for (; i < n && starts_[i] < end; ++i) {
      const int64_t lo = std::max(begin, starts_[i]) - starts_[i];
      const int64_t hi = std::min(end, starts_[i + 1]) - starts_[i];
      if (lo < hi) update(buffers_[i], coefficients_[i], gradient, lo, hi);
    }
  });
}

void MultiTensorUpdateKernel::update(const Buffers& b, const Coefficients& c,
                                     const GradientReader& gradient, int64_t begin,
                                     int64_t end) const {
  const bool has_weight_decay = in_.count[kWeightDecay] != 0;
  const __m512 lr = _mm512_set1_ps(c.lr), wd = _mm512_set1_ps(c.weight_decay);
  const __m512 eps = _mm512_set1_ps(c.eps);
  // g + wd * param, when weight decay is in the graph.
  auto decayed = [&](__m512 g, __m512 param) {
    return has_weight_decay ? _mm512_add_ps(g, _mm512_mul_ps(wd, param)) : g;
  };
  switch (rule_) {
  case Rule::sgd: {
    const bool has_momentum = in_.count[kMomentum] != 0;
    const bool has_dampening = in_.count[kDampening] != 0;
    const __m512 momentum = _mm512_set1_ps(c.momentum), coef = _mm512_set1_ps(c.dampening);
    for (int64_t k = begin; k < end; k += simd::kLanes) {
      const __mmask16 m = tail_mask(end - k);
      const __m512 param = simd::load(b.param + k, m);
      __m512 d = decayed(gradient(b, k, m), param);
      if (has_momentum) {
        const __m512 kept = _mm512_mul_ps(simd::load(b.state[0] + k, m), momentum);
        const __m512 buf = _mm512_add_ps(kept, has_dampening ? _mm512_mul_ps(coef, d) : d);
        simd::store(b.new_state[0] + k, buf, m);
        d = nesterov_ ? _mm512_add_ps(d, _mm512_mul_ps(momentum, buf)) : buf;
      }
      simd::store(b.new_param + k, _mm512_sub_ps(param, _mm512_mul_ps(lr, d)), m);
    }
    break;
  }
  case Rule::adam:
  case Rule::adamw: {
    const bool decoupled = rule_ == Rule::adamw && has_weight_decay;
    const __m512 decay = _mm512_set1_ps(c.decay);
    const __m512 beta1 = _mm512_set1_ps(c.beta1), beta2 = _mm512_set1_ps(c.beta2);
    const __m512 one_minus_beta1 = _mm512_set1_ps(c.one_minus_beta1);
    const __m512 one_minus_beta2 = _mm512_set1_ps(c.one_minus_beta2);
    const __m512 step_size = _mm512_set1_ps(c.step_size);
    const __m512 bias_correction2_sqrt = _mm512_set1_ps(c.bias_correction2_sqrt);
    for (int64_t k = begin; k < end; k += simd::kLanes) {
      const __mmask16 m = tail_mask(end - k);
      const __m512 param = simd::load(b.param + k, m);
      __m512 g = gradient(b, k, m);
      __m512 base = param;
      if (decoupled)
        base = _mm512_mul_ps(param, decay);
      else
        g = decayed(g, param);
      const __m512 exp_avg = simd::load(b.state[0] + k, m);
      const __m512 exp_avg_sq = simd::load(b.state[1] + k, m);
      const __m512 max_exp_avg_sq = amsgrad_ ? simd::load(b.state[2] + k, m) : exp_avg_sq;
      const __m512 mean =
          _mm512_add_ps(_mm512_mul_ps(exp_avg, beta1), _mm512_mul_ps(one_minus_beta1, g));
      __m512 v = _mm512_add_ps(_mm512_mul_ps(exp_avg_sq, beta2),
                               _mm512_mul_ps(_mm512_mul_ps(one_minus_beta2, g), g));
      simd::store(b.new_state[0] + k, mean, m);
      simd::store(b.new_state[1] + k, v, m);
      if (amsgrad_) { // maximum(max_exp_avg_sq, v); NaN wins
        const __mmask16 keep = _mm512_cmp_ps_mask(max_exp_avg_sq, v, _CMP_GT_OQ) |
                               _mm512_cmp_ps_mask(max_exp_avg_sq, max_exp_avg_sq, _CMP_UNORD_Q);
        v = _mm512_mask_mov_ps(v, keep, max_exp_avg_sq);
        simd::store(b.new_state[2] + k, v, m);
      }
      const __m512 denom =
          _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), bias_correction2_sqrt), eps);
      const __m512 step = _mm512_div_ps(_mm512_mul_ps(step_size, mean), denom);
      simd::store(b.new_param + k, _mm512_sub_ps(base, step), m);
    }
    break;
  }
  case Rule::adadelta: {
    const __m512 rho = _mm512_set1_ps(c.rho), one_minus_rho = _mm512_set1_ps(c.one_minus_rho);
    for (int64_t k = begin; k < end; k += simd::kLanes) {
      const __mmask16 m = tail_mask(end - k);
      const __m512 param = simd::load(b.param + k, m);
      const __m512 g = decayed(gradient(b, k, m), param);
      const __m512 square_avg_old = simd::load(b.state[0] + k, m);
      const __m512 acc_delta = simd::load(b.state[1] + k, m);
      const __m512 square_avg = _mm512_add_ps(_mm512_mul_ps(square_avg_old, rho),
                                              _mm512_mul_ps(_mm512_mul_ps(one_minus_rho, g), g));
      const __m512 rms_grad = _mm512_sqrt_ps(_mm512_add_ps(square_avg, eps));
      const __m512 delta =
          _mm512_mul_ps(_mm512_div_ps(_mm512_sqrt_ps(_mm512_add_ps(acc_delta, eps)), rms_grad), g);
      simd::store(b.new_state[0] + k, square_avg, m);
      simd::store(b.new_state[1] + k,
                  _mm512_add_ps(_mm512_mul_ps(acc_delta, rho),
                                _mm512_mul_ps(_mm512_mul_ps(one_minus_rho, delta), delta)),
                  m);
      simd::store(b.new_param + k, _mm512_sub_ps(param, _mm512_mul_ps(lr, delta)), m);
    }
    break;
  }
  }
}

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_optimizer_kernel(const KernelRequest& request) {
  if (request.node().op != OpKind::multi_tensor_update) return nullptr;
  return MultiTensorUpdateKernel::make(request);
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
