// Ref kernel for mstep.multi_tensor_update (include/mstep/ir/dialect/
// OptimizerOps.td): an optional clip_grad_norm_ over all gradients, then
// SGD / Adam / AdamW / Adadelta on every parameter.
//
// It reproduces the unfused graph bit for bit: the same operations in the
// same order, each rounded to the parameter's dtype as the elementwise
// kernels round on store (RefElementwise.cpp), the derived scalars
// (1 - beta, bias corrections, ...) in f64 and then cast, and the norms'
// sums accumulated in double in row-major order (RefReduction.cpp). The
// file is compiled with -ffp-contract=off so that no a * b + c becomes
// one fused multiply-add.
#include <cmath>
#include <optional>

#include "lib/backends/ref/RefKernels.h"
#include "mstep/ir/MultiTensorUpdate.h"

namespace mstep::ref {

namespace {

using namespace multi_tensor_update;  // the op's segments and rule codes

/// The node's operands and results by segment.
class Segments {
public:
  explicit Segments(const KernelArgs& a) : a_(a) {
    const IntList& in = attr_ints(a.node.attrs, AttrName::operand_segments);
    const IntList& out = attr_ints(a.node.attrs, AttrName::result_segments);
    for (int s = 0, at = 0; s < kNumOperandSegments; at += in[s], ++s) in_[s] = {at, in[s]};
    for (int s = 0, at = 0; s < kNumResultSegments; at += out[s], ++s) out_[s] = {at, out[s]};
  }
  int64_t count(Operand s) const { return in_[s].second; }
  int64_t count(Result s) const { return out_[s].second; }
  const HostBuffer& in(Operand s, int64_t i = 0) const { return a_.in(in_[s].first + i); }
  HostBuffer& out(Result s, int64_t i = 0) const { return a_.out(out_[s].first + i); }
  /// A present 0-d f64 hyperparameter, or nullopt.
  std::optional<double> hyper(Operand s) const {
    if (!count(s)) return std::nullopt;
    return in(s).data<double>()[0];
  }

private:
  const KernelArgs& a_;
  std::array<std::pair<int64_t, int64_t>, kNumOperandSegments> in_;
  std::array<std::pair<int64_t, int64_t>, kNumResultSegments> out_;
};

/// A value rounded to storage type T and read back, as between two unfused
/// kernels (the identity for f32 and f64); also an f64 scalar cast to T
/// (mstep.cast) or a constant of type T (mstep.constant).
template <typename T> Compute<T> rnd(double v) {
  return static_cast<Compute<T>>(static_cast<T>(static_cast<Compute<T>>(v)));
}
template <typename T> Compute<T> rnd_same(Compute<T> v) {
  return static_cast<Compute<T>>(static_cast<T>(v));
}

// ---- clip_grad_norm_ --------------------------------------------------------

/// ClipGrad.cpp's norm() of `n` values read by `at(i)` (each already of
/// type T), as the unfused reductions compute it.
template <typename T, typename At> Compute<T> p_norm(int64_t n, At at, double p) {
  using C = Compute<T>;
  if (std::isinf(p)) { // max(|x|); NaN wins
    C best = std::fabs(at(0));
    for (int64_t i = 0; i < n; ++i) {
      const C v = std::fabs(at(i));
      if (std::isnan(v)) return v;
      if (v > best) best = v;
    }
    return rnd_same<T>(best);
  }
  double acc = 0;
  const C exponent = rnd<T>(p);
  for (int64_t i = 0; i < n; ++i) {
    const C x = at(i);
    if (p == 2)
      acc += rnd_same<T>(x * x);
    else if (p == 1)
      acc += std::fabs(x);
    else
      acc += rnd_same<T>(std::pow(std::fabs(x), exponent));
  }
  const C sum = rnd<T>(acc);
  if (p == 2) return rnd_same<T>(std::sqrt(sum));
  if (p == 1) return sum;
  return rnd_same<T>(std::pow(sum, rnd<T>(1.0 / p)));
}

/// Writes the total norm and returns min(max_norm / (total + 1e-6), 1)
/// (exactly representable in double).
template <typename T>
absl::Status clip_coefficient(const Segments& seg, double max_norm, double p, double& clamped) {
  using C = Compute<T>;
  const int64_t n = seg.count(kGrads);
  std::vector<T> norms(n);
  for (int64_t i = 0; i < n; ++i) {
    const HostBuffer& g = seg.in(kGrads, i);
    if (g.type().dtype != seg.out(kTotalNorm).type().dtype)
      return absl::InvalidArgumentError(absl::StrCat(
          "multi_tensor_update: clipping needs every gradient in the total norm's dtype; grad #", i,
          " is ", g.type().to_string()));
    if (std::isinf(p) && g.numel() == 0)
      return absl::InvalidArgumentError(absl::StrCat("multi_tensor_update: the inf-norm of grad #",
                                                     i, " (", g.type().to_string(),
                                                     ") has no elements to take the maximum of"));
    const T* x = g.data<T>();
    norms[i] = static_cast<T>(p_norm<T>(
        g.numel(), [&](int64_t k) { return C(x[k]); }, p));
  }
  const C total = n == 1 ? C(norms[0])
                         : p_norm<T>(
                               n, [&](int64_t k) { return C(norms[k]); }, p);
  seg.out(kTotalNorm).data<T>()[0] = static_cast<T>(total);
  const C coef = rnd_same<T>(rnd<T>(max_norm) / rnd_same<T>(total + rnd<T>(1e-6)));
  clamped = (std::isnan(coef) || coef < C(1)) ? coef : C(1);
  return absl::OkStatus();
}

// ---- The update rules -------------------------------------------------------

/// Hyperparameters and flags of the node.
struct Config {
  Rule rule;
  bool nesterov, amsgrad, maximize;
  std::optional<double> lr, momentum, dampening, beta1, beta2, rho, eps, weight_decay;
  std::optional<double> clamped; // the clip coefficient, when clipping
};

/// Updates parameter `i` (of storage type T) and its state, as
/// lib/api/optim's update() records it.
template <typename T> void update_parameter(const Segments& seg, const Config& c, int64_t i) {
  using C = Compute<T>;
  const int64_t n = seg.count(kParams);
  const int64_t numel = seg.in(kParams, i).numel();
  const T* p = seg.in(kParams, i).data<T>();
  const T* grad = seg.in(kGrads, i).data<T>();
  T* p_out = seg.out(kNewParams, i).data<T>();
  T* clipped = seg.count(kClippedGrads) ? seg.out(kClippedGrads, i).data<T>() : nullptr;
  auto state = [&](int slot) { return seg.in(kStates, slot * n + i).data<T>(); };
  auto state_out = [&](int slot) { return seg.out(kNewStates, slot * n + i).data<T>(); };
  double step = 0; // the advanced count, as f64
  if (seg.count(kSteps)) {
    const int64_t next = seg.in(kSteps, i).data<int64_t>()[0] + 1;
    seg.out(kNewSteps, i).data<int64_t>()[0] = next;
    step = static_cast<double>(next);
  }
  // Scalars cast once to the parameter's dtype (Optimizer::hyper_as and
  // derived_as: f64 first, then one cast).
  auto cast = [](std::optional<double> v) { return v ? rnd<T>(*v) : C(0); };
  const C lr = cast(c.lr), wd = cast(c.weight_decay), eps = cast(c.eps);

  auto gradient = [&](int64_t k) {
    C g = grad[k];
    if (c.clamped) {
      g = rnd_same<T>(g * C(*c.clamped));
      if (clipped) clipped[k] = static_cast<T>(g);
    }
    return c.maximize ? -g : g;
  };
  auto decayed = [&](C g, C param) {
    return c.weight_decay ? rnd_same<T>(g + rnd_same<T>(wd * param)) : g;
  };

  switch (c.rule) {
  case Rule::sgd: {
    const C momentum = cast(c.momentum);
    // where(step == 1, 1, 1 - dampening), cast: the buffer starts at zero.
    const C coef = c.dampening ? rnd<T>(step == 1.0 ? 1.0 : 1.0 - *c.dampening) : C(1);
    for (int64_t k = 0; k < numel; ++k) {
      const C param = p[k];
      C d = decayed(gradient(k), param);
      if (c.momentum) {
        const C kept = rnd_same<T>(C(state(0)[k]) * momentum);
        const C buf = rnd_same<T>(kept + (c.dampening ? rnd_same<T>(coef * d) : d));
        state_out(0)[k] = static_cast<T>(buf);
        d = c.nesterov ? rnd_same<T>(d + rnd_same<T>(momentum * buf)) : buf;
      }
      p_out[k] = static_cast<T>(param - rnd_same<T>(lr * d));
    }
    break;
  }
  case Rule::adam:
  case Rule::adamw: {
    const bool decoupled = c.rule == Rule::adamw && c.weight_decay;
    const C decay = decoupled ? rnd<T>(1.0 - *c.lr * *c.weight_decay) : C(1);
    const C beta1 = cast(c.beta1), beta2 = cast(c.beta2);
    const C one_minus_beta1 = rnd<T>(1.0 - *c.beta1), one_minus_beta2 = rnd<T>(1.0 - *c.beta2);
    const double bias_correction1 = 1.0 - std::pow(*c.beta1, step);
    const double bias_correction2 = 1.0 - std::pow(*c.beta2, step);
    const C step_size = rnd<T>(*c.lr / bias_correction1);
    const C bias_correction2_sqrt = rnd<T>(std::sqrt(bias_correction2));
    for (int64_t k = 0; k < numel; ++k) {
      const C param = p[k];
      C g = gradient(k);
      C base = param;
      if (decoupled)
        base = rnd_same<T>(param * decay);
      else
        g = decayed(g, param);
      const C m =
          rnd_same<T>(rnd_same<T>(C(state(0)[k]) * beta1) + rnd_same<T>(one_minus_beta1 * g));
      C v = rnd_same<T>(rnd_same<T>(C(state(1)[k]) * beta2) +
                        rnd_same<T>(rnd_same<T>(one_minus_beta2 * g) * g));
      state_out(0)[k] = static_cast<T>(m);
      state_out(1)[k] = static_cast<T>(v);
      if (c.amsgrad) { // maximum(max_exp_avg_sq, v); NaN wins
        const C previous = state(2)[k];
        v = (std::isnan(previous) || previous > v) ? previous : v;
        state_out(2)[k] = static_cast<T>(v);
      }
      const C denom =
          rnd_same<T>(rnd_same<T>(rnd_same<T>(std::sqrt(v)) / bias_correction2_sqrt) + eps);
      p_out[k] = static_cast<T>(base - rnd_same<T>(rnd_same<T>(step_size * m) / denom));
    }
    break;
  }
  case Rule::adadelta: {
    const C rho = cast(c.rho), one_minus_rho = rnd<T>(1.0 - *c.rho);
    for (int64_t k = 0; k < numel; ++k) {
      const C param = p[k];
      const C g = decayed(gradient(k), param);
      const C acc_delta = state(1)[k];
      const C square_avg = rnd_same<T>(rnd_same<T>(C(state(0)[k]) * rho) +
                                       rnd_same<T>(rnd_same<T>(one_minus_rho * g) * g));
      const C rms_grad = rnd_same<T>(std::sqrt(rnd_same<T>(square_avg + eps)));
      const C delta = rnd_same<T>(
          rnd_same<T>(rnd_same<T>(std::sqrt(rnd_same<T>(acc_delta + eps))) / rms_grad) * g);
      state_out(0)[k] = static_cast<T>(square_avg);
      state_out(1)[k] = static_cast<T>(rnd_same<T>(
          rnd_same<T>(acc_delta * rho) + rnd_same<T>(rnd_same<T>(one_minus_rho * delta) * delta)));
      p_out[k] = static_cast<T>(param - rnd_same<T>(lr * delta));
    }
    break;
  }
  }
}

absl::Status multi_tensor_update_kernel(const KernelArgs& a) {
  const Segments seg(a);
  const AttrList& attrs = a.node.attrs;
  Config c;
  c.rule = static_cast<Rule>(attr_int(attrs, AttrName::kind));
  c.nesterov = attr_int(attrs, AttrName::nesterov) != 0;
  c.amsgrad = attr_int(attrs, AttrName::amsgrad) != 0;
  c.maximize = attr_int(attrs, AttrName::maximize) != 0;
  c.lr = seg.hyper(kLr);
  c.momentum = seg.hyper(kMomentum);
  c.dampening = seg.hyper(kDampening);
  c.beta1 = seg.hyper(kBeta1);
  c.beta2 = seg.hyper(kBeta2);
  c.rho = seg.hyper(kRho);
  c.eps = seg.hyper(kEps);
  c.weight_decay = seg.hyper(kWeightDecay);
  if (seg.count(kTotalNorm)) {
    const double max_norm = attr_double(attrs, AttrName::max_grad_norm);
    const double p = attr_double(attrs, AttrName::grad_norm_type);
    double clamped = 0;
    absl::Status s = absl::OkStatus();
    dispatch_floating(seg.out(kTotalNorm).type().dtype,
                      [&]<typename T>() { s = clip_coefficient<T>(seg, max_norm, p, clamped); });
    if (!s.ok()) return s;
    c.clamped = clamped;
  }
  for (int64_t i = 0; i < seg.count(kParams); ++i)
    dispatch_floating(seg.in(kParams, i).type().dtype,
                      [&]<typename T>() { update_parameter<T>(seg, c, i); });
  return absl::OkStatus();
}

} // namespace

void register_optimizer_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::multi_tensor_update)] = multi_tensor_update_kernel;
}

} // namespace mstep::ref
