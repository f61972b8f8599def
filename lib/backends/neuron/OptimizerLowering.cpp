// multi_tensor_update as one tile program (OptimizerLowering.h).
#include "lib/backends/neuron/OptimizerLowering.h"

#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowTiling.h"
#include "mstep/ir/MultiTensorUpdate.h"

namespace mstep::neuron {

namespace {

using namespace multi_tensor_update; // the op's segments and rule codes

/// The scalars of one parameter, columns of the staged table (f32 values
/// already rounded to the parameter's dtype).
enum Scalar : int {
  kSLr,
  kSWeightDecay,
  kSEps,
  kSMomentum,
  kSDampening, ///< where(step == 1, 1, 1 - dampening)
  kSDecay,     ///< AdamW: 1 - lr * weight_decay
  kSBeta1,
  kSBeta2,
  kSOneMinusBeta1,
  kSOneMinusBeta2,
  kSStepSize, ///< lr / bias_correction1
  kSBiasCorrection2Sqrt,
  kSRho,
  kSOneMinusRho,
  kNumScalars
};

/// Operands and results by segment: the first index and the count.
struct Layout {
  std::array<std::pair<int64_t, int64_t>, kNumOperandSegments> in;
  std::array<std::pair<int64_t, int64_t>, kNumResultSegments> out;

  explicit Layout(const AttrList& attrs) {
    const IntList& i = attr_ints(attrs, AttrName::operand_segments);
    const IntList& o = attr_ints(attrs, AttrName::result_segments);
    for (int s = 0, at = 0; s < kNumOperandSegments; at += i[s], ++s) in[s] = {at, i[s]};
    for (int s = 0, at = 0; s < kNumResultSegments; at += o[s], ++s) out[s] = {at, o[s]};
  }
  int64_t count(Operand s) const { return in[s].second; }
  int64_t count(Result s) const { return out[s].second; }
  int64_t operand(Operand s, int64_t i = 0) const { return in[s].first + i; }
  int64_t result(Result s, int64_t i = 0) const { return out[s].first + i; }
};

struct Config {
  Rule rule = Rule::sgd;
  bool nesterov = false, amsgrad = false, maximize = false;
};

/// The stage: the scalar table [params, kNumScalars] and the step counts,
/// as RefOptimizer.cpp's update_parameter derives them.
auto stage_scalars(Layout lay, Config c, DType dt, int32_t table) {
  return [lay, c, dt, table](absl::Span<const host::HostBuffer* const> in,
                             absl::Span<host::HostBuffer* const> out, HbmContents& hbm) {
    auto hyper = [&](Operand s) -> std::optional<double> {
      if (!lay.count(s)) return std::nullopt;
      return in[lay.operand(s)]->data<double>()[0];
    };
    auto rnd = [dt](double v) { return round_to_dtype(v, dt); };
    const std::optional<double> lr = hyper(kLr), momentum = hyper(kMomentum),
                                dampening = hyper(kDampening), beta1 = hyper(kBeta1),
                                beta2 = hyper(kBeta2), rho = hyper(kRho), eps = hyper(kEps),
                                wd = hyper(kWeightDecay);
    auto cast = [&](std::optional<double> v) { return v ? rnd(*v) : 0.0f; };
    const int64_t n = lay.count(kParams);
    for (int64_t i = 0; i < n; ++i) {
      double step = 0;
      if (lay.count(kSteps)) {
        const int64_t next = in[lay.operand(kSteps, i)]->data<int64_t>()[0] + 1;
        out[lay.result(kNewSteps, i)]->data<int64_t>()[0] = next;
        step = static_cast<double>(next);
      }
      std::array<float, kNumScalars> s{};
      s[kSLr] = cast(lr);
      s[kSWeightDecay] = cast(wd);
      s[kSEps] = cast(eps);
      s[kSMomentum] = cast(momentum);
      s[kSDampening] = dampening ? rnd(step == 1.0 ? 1.0 : 1.0 - *dampening) : 1.0f;
      s[kSDecay] = c.rule == Rule::adamw && wd && lr ? rnd(1.0 - *lr * *wd) : 1.0f;
      if ((c.rule == Rule::adam || c.rule == Rule::adamw) && beta1 && beta2 && lr) {
        s[kSBeta1] = rnd(*beta1);
        s[kSBeta2] = rnd(*beta2);
        s[kSOneMinusBeta1] = rnd(1.0 - *beta1);
        s[kSOneMinusBeta2] = rnd(1.0 - *beta2);
        s[kSStepSize] = rnd(*lr / (1.0 - std::pow(*beta1, step)));
        s[kSBiasCorrection2Sqrt] = rnd(std::sqrt(1.0 - std::pow(*beta2, step)));
      }
      if (rho) {
        s[kSRho] = rnd(*rho);
        s[kSOneMinusRho] = rnd(1.0 - *rho);
      }
      std::memcpy(hbm[table].data() + i * kNumScalars * 4, s.data(), kNumScalars * 4);
    }
    return absl::OkStatus();
  };
}

/// Operand and temporary tiles of the update: inputs (param, grad, up to
/// three states) and kTemps temporaries, each value of ref's formula in a
/// fresh one (never overwritten within a chunk).
constexpr int kInputs = 5, kTemps = 22;

class UpdateEmitter {
public:
  UpdateEmitter(RowKit& k, const Config& c, const Layout& lay, DType dt, int64_t width)
      : k_(k), c_(c), lay_(lay), dt_(dt) {
    for (int v = 0; v < kInputs; ++v) in_[v] = k.tile(dt, width, absl::StrCat("in", v));
    for (int v = 0; v < kTemps; ++v) tmp_[v] = k.tile(dt, width, absl::StrCat("t", v));
    scalars_ = k.tile(DType::f32, kNumScalars, "scalars");
  }

  /// The per-parameter scalars, row `i` of `table`, on every partition of
  /// slot `ss`.
  void load_scalars(int32_t table, int64_t i, int ss) {
    AccessPattern src = hbm_rows(table, DType::f32, 0, 0, kPartitions, 0, kNumScalars);
    src.offset = i * kNumScalars;
    k_.load(RowKit::at(scalars_, ss, kPartitions, kNumScalars), src);
  }

  /// One chunk of parameter i: loads, ref's formula, stores. `clamp` is the
  /// clip coefficient column (nullptr without clipping); hbm[...] the
  /// tensors of this parameter.
  struct Tensors {
    int32_t param, grad;
    std::array<int32_t, 3> state{-1, -1, -1}, new_state{-1, -1, -1};
    int32_t new_param, clipped = -1;
  };
  /// The chunk's inputs into slot s (emitted a chunk ahead of chunk()).
  void load(const FlatPiece& pc, int s, const Tensors& t, int slots) {
    auto into = [&](const RowKit::Tile& tile) { return RowKit::at(tile, s, pc.parts, pc.w); };
    k_.load_split(into(in_[0]), flat_hbm(t.param, dt_, pc));
    k_.load_split(into(in_[1]), flat_hbm(t.grad, dt_, pc));
    for (int j = 0; j < slots; ++j)
      k_.load_split(into(in_[2 + j]), flat_hbm(t.state[j], dt_, pc));
  }
  /// The formula over the chunk loaded into slot s, the scalars in slot ss.
  void chunk(const FlatPiece& pc, int s, int ss, const Tensors& t, const RowKit::Tile* clamp) {
    s_ = s;
    ss_ = ss;
    pc_ = pc;
    next_ = 0;
    const AccessPattern param = value(in_[0]);
    AccessPattern g = value(in_[1]);
    if (clamp) {
      g = scaled(g, RowKit::at(*clamp, 0, pc.parts, 1));
      if (t.clipped >= 0) store(t.clipped, g);
    }
    if (c_.maximize) {
      const AccessPattern neg = fresh();
      k_.ts(neg, g, AluOp::multiply, -1.0f);
      g = neg;
    }
    auto state = [&](int j) { return value(in_[2 + j]); };
    auto decayed = [&](const AccessPattern& grad) {
      return lay_.count(kWeightDecay) ? op(grad, scaled(param, kSWeightDecay), AluOp::add) : grad;
    };
    AccessPattern new_param;
    switch (c_.rule) {
    case Rule::sgd: {
      AccessPattern d = decayed(g);
      if (lay_.count(kMomentum)) {
        const AccessPattern kept = scaled(state(0), kSMomentum);
        const AccessPattern buf =
            op(kept, lay_.count(kDampening) ? scaled(d, kSDampening) : d, AluOp::add);
        store(t.new_state[0], buf);
        d = c_.nesterov ? op(d, scaled(buf, kSMomentum), AluOp::add) : buf;
      }
      new_param = op(param, scaled(d, kSLr), AluOp::subtract);
      break;
    }
    case Rule::adam:
    case Rule::adamw: {
      const bool decoupled = c_.rule == Rule::adamw && lay_.count(kWeightDecay);
      AccessPattern base = param;
      if (decoupled)
        base = scaled(param, kSDecay);
      else
        g = decayed(g);
      const AccessPattern m =
          op(scaled(state(0), kSBeta1), scaled(g, kSOneMinusBeta1), AluOp::add);
      AccessPattern v =
          op(scaled(state(1), kSBeta2), mul(scaled(g, kSOneMinusBeta2), g), AluOp::add);
      store(t.new_state[0], m);
      store(t.new_state[1], v);
      if (c_.amsgrad) { // maximum(max_exp_avg_sq, v); NaN wins either way
        v = op(state(2), v, AluOp::max);
        store(t.new_state[2], v);
      }
      const AccessPattern denom =
          plus(op(sqrt(v), sc(kSBiasCorrection2Sqrt), AluOp::divide), kSEps);
      new_param = op(base, op(scaled(m, kSStepSize), denom, AluOp::divide), AluOp::subtract);
      break;
    }
    case Rule::adadelta: {
      g = decayed(g);
      const AccessPattern acc_delta = state(1);
      const AccessPattern square_avg =
          op(scaled(state(0), kSRho), mul(scaled(g, kSOneMinusRho), g), AluOp::add);
      const AccessPattern rms_grad = sqrt(plus(square_avg, kSEps));
      const AccessPattern delta =
          mul(op(sqrt(plus(acc_delta, kSEps)), rms_grad, AluOp::divide), g);
      store(t.new_state[0], square_avg);
      store(t.new_state[1],
            op(scaled(acc_delta, kSRho), mul(scaled(delta, kSOneMinusRho), delta), AluOp::add));
      new_param = op(param, scaled(delta, kSLr), AluOp::subtract);
      break;
    }
    }
    store(t.new_param, new_param);
  }

private:
  AccessPattern value(const RowKit::Tile& t) const { return RowKit::at(t, s_, pc_.parts, pc_.w); }
  AccessPattern fresh() {
    // kTemps covers the longest formula (Adadelta with clipping, maximize
    // and weight decay takes 20).
    return value(tmp_[next_++]);
  }
  /// Scalar `which` of this parameter along the chunk (stride 0).
  AccessPattern sc(Scalar which) const {
    return RowKit::spread(scalars_, ss_, pc_.parts, pc_.w, which);
  }
  AccessPattern op(const AccessPattern& a, const AccessPattern& b, AluOp alu) {
    const AccessPattern r = fresh();
    k_.tt(r, a, b, alu);
    return r;
  }
  AccessPattern mul(const AccessPattern& a, const AccessPattern& b) {
    return op(a, b, AluOp::multiply);
  }
  /// a * scalar `which` on the Scalar engine (activation identity with a
  /// [P, 1] scale column): the same fp32 product as the Vector multiply it
  /// replaces; the bias -0 keeps a -0 product -0 (x + -0 == x for every x,
  /// where + 0 would turn -0 into +0). Frees the Vector engine, which does
  /// the tensor-tensor operations of the formula.
  AccessPattern scaled(const AccessPattern& a, Scalar which) {
    return scaled(a, RowKit::at(scalars_, ss_, pc_.parts, 1, which));
  }
  AccessPattern scaled(const AccessPattern& a, const AccessPattern& scale_column) {
    const AccessPattern r = fresh();
    k_.act(r, a, ActivationFunction::identity, 1.0f, nullptr, -0.0f, nullptr, &scale_column);
    return r;
  }
  /// a + scalar `which` on the Scalar engine (identity, scale 1, the scalar
  /// as a [P, 1] bias column): a * 1 is a, then the one fp32 add.
  AccessPattern plus(const AccessPattern& a, Scalar which) {
    const AccessPattern r = fresh();
    const AccessPattern bias = RowKit::at(scalars_, ss_, pc_.parts, 1, which);
    k_.act(r, a, ActivationFunction::identity, 1.0f, &bias);
    return r;
  }
  AccessPattern sqrt(const AccessPattern& a) {
    const AccessPattern r = fresh();
    k_.act(r, a, ActivationFunction::sqrt);
    return r;
  }
  void store(int32_t tensor, const AccessPattern& v) { k_.store(flat_hbm(tensor, dt_, pc_), v); }

  RowKit& k_;
  const Config& c_;
  const Layout& lay_;
  DType dt_;
  std::array<RowKit::Tile, kInputs> in_;
  std::array<RowKit::Tile, kTemps> tmp_;
  RowKit::Tile scalars_;
  int ss_ = 0; ///< the scalars' slot
  int s_ = 0;
  FlatPiece pc_;
  int next_ = 0;
};

} // namespace

absl::StatusOr<LoweredOp> lower_multi_tensor_update(const GraphNode& node,
                                                    absl::Span<const TensorType> types) {
  const OpKind kind = node.op;
  const Layout lay(node.attrs);
  Config c;
  c.rule = static_cast<Rule>(attr_int(node.attrs, AttrName::kind));
  c.nesterov = attr_int(node.attrs, AttrName::nesterov) != 0;
  c.amsgrad = attr_int(node.attrs, AttrName::amsgrad) != 0;
  c.maximize = attr_int(node.attrs, AttrName::maximize) != 0;
  const int64_t n = lay.count(kParams);
  if (n < 1 || lay.count(kGrads) != n || lay.count(kStates) % n != 0 ||
      (lay.count(kSteps) != 0 && lay.count(kSteps) != n))
    return refuse(kind, "expects as many gradients (and step counts) as parameters");
  const int slots = static_cast<int>(lay.count(kStates) / n);
  const DType dt = types[lay.operand(kParams)].dtype;
  if (!tileable_dtype(dt)) return refuse(kind, absl::StrCat("parameters of ", dtype_name(dt)));
  for (int64_t i = 0; i < n; ++i) {
    const TensorType& p = types[lay.operand(kParams, i)];
    if (p.numel() == 0) return refuse(kind, absl::StrCat("parameter #", i, " has no elements"));
    bool same = p.dtype == dt && types[lay.operand(kGrads, i)] == p;
    for (int j = 0; j < slots; ++j) same = same && types[lay.operand(kStates, j * n + i)] == p;
    if (!same)
      return refuse(kind, absl::StrCat("parameter #", i, " ", p.to_string(),
                                       ": its gradient and state are not of its type, or the "
                                       "parameters are not of one dtype"));
  }
  for (int64_t i = 0; i < lay.count(kSteps); ++i)
    if (types[lay.operand(kSteps, i)] != TensorType{Shape({}), DType::i64})
      return refuse(kind, "a step count is not an i64 scalar");
  for (int s = kLr; s <= kWeightDecay; ++s)
    if (lay.count(static_cast<Operand>(s)) &&
        types[lay.operand(static_cast<Operand>(s))] != TensorType{Shape({}), DType::f64})
      return refuse(kind, "a hyperparameter is not an f64 scalar");
  const bool adam = c.rule == Rule::adam || c.rule == Rule::adamw;
  if (!lay.count(kLr) || (adam && (!lay.count(kBeta1) || !lay.count(kBeta2) || !lay.count(kEps))) ||
      (c.rule == Rule::adadelta && (!lay.count(kRho) || !lay.count(kEps))))
    return refuse(kind, "a hyperparameter the rule needs is absent");
  const bool clip = lay.count(kTotalNorm) > 0;
  if (clip) {
    const double p = attr_double(node.attrs, AttrName::grad_norm_type);
    if (p != 2) return refuse(kind, absl::StrCat("clip_grad_norm_ of norm type ", p, ": only 2"));
    if (node.results[lay.result(kTotalNorm)].dtype != dt)
      return refuse(kind, "the total norm is not of the gradients' dtype");
  }

  const int64_t esize = static_cast<int64_t>(element_size(dt));
  int64_t longest = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t numel = types[lay.operand(kParams, i)].numel();
    longest = std::max({longest, numel / kPartitions, numel % kPartitions});
  }
  const int64_t width = chunk_width(longest, 2 * (kInputs + kTemps) * esize);
  RowKit k("neuron_multi_tensor_update");
  std::vector<int32_t> binding;
  auto hbm = [&](const std::string& name, DType d, int64_t elements, int32_t bind) {
    binding.push_back(bind);
    return k.b.hbm_tensor(name, d, elements);
  };
  const int32_t table = hbm("scalars", DType::f32, n * kNumScalars, kStagedOnHost);
  std::vector<UpdateEmitter::Tensors> tensors(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t numel = types[lay.operand(kParams, i)].numel();
    auto operand = [&](const char* what, int64_t index) {
      return hbm(absl::StrCat(what, i), dt, numel, static_cast<int32_t>(index));
    };
    auto result = [&](const char* what, int64_t index) {
      return hbm(absl::StrCat(what, i), dt, numel, -1 - static_cast<int32_t>(index));
    };
    UpdateEmitter::Tensors& t = tensors[i];
    t.param = operand("param", lay.operand(kParams, i));
    t.grad = operand("grad", lay.operand(kGrads, i));
    for (int j = 0; j < slots; ++j) {
      t.state[j] = operand(absl::StrCat("state", j, "_").c_str(), lay.operand(kStates, j * n + i));
      t.new_state[j] =
          result(absl::StrCat("new_state", j, "_").c_str(), lay.result(kNewStates, j * n + i));
    }
    t.new_param = result("new_param", lay.result(kNewParams, i));
    if (lay.count(kClippedGrads)) t.clipped = result("clipped", lay.result(kClippedGrads, i));
  }

  UpdateEmitter update(k, c, lay, dt, width);
  std::optional<RowKit::Tile> clamp;
  if (clip) {
    // Pass 1: the total 2-norm and the clip coefficient, [128, 1] columns.
    const RowKit::Tile ones = k.tile(DType::f32, kPartitions, "ones", 1);
    const RowKit::Tile part = k.tile(DType::f32, 1, "partial");
    const RowKit::Tile sq = k.tile(dt, width, "squares");
    const RowKit::Tile sum = k.tile(dt, 1, "sum", 1), norm = k.tile(dt, 1, "norm", 1),
                       norm_sq = k.tile(dt, 1, "norm_sq", 1), acc = k.tile(DType::f32, 1, "acc", 1),
                       total = k.tile(dt, 1, "total", 1), denom = k.tile(dt, 1, "denom", 1),
                       max_norm = k.tile(dt, 1, "max_norm", 1), coef = k.tile(dt, 1, "coef", 1);
    clamp = k.tile(DType::f32, 1, "clamp", 1);
    const int32_t psum = k.b.allocate(BufferKind::psum, 4, "norm_sum");
    const AccessPattern sum_ps =
        tile_pattern(BufferKind::psum, psum, DType::f32, 0, kPartitions, 0, {{1, 1}});
    auto col = [](const RowKit::Tile& t) { return RowKit::at(t, 0, kPartitions, 1); };
    AffineExpr one; // iota: 1 everywhere
    one.offset = 1;
    one.steps = {0};
    k.deps.track(k.b.iota(RowKit::at(ones, 0, kPartitions, kPartitions), one));
    int s = 0, ps = 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<FlatPiece> pieces =
          flat_pieces(types[lay.operand(kGrads, i)].numel(), width);
      for (size_t q = 0; q < pieces.size(); ++q) {
        const FlatPiece& pc = pieces[q];
        const AccessPattern g = RowKit::at(sq, s, pc.parts, pc.w);
        k.load(g, flat_hbm(tensors[i].grad, dt, pc));
        // Each partition's sum of squares, then all partitions' in PSUM.
        const AccessPattern partial = RowKit::at(part, ps, pc.parts, 1);
        k.act(g, g, ActivationFunction::square, 1.0f, nullptr, 0.0f, &partial);
        const AccessPattern ones_k = tile_pattern(BufferKind::sbuf, ones.slot[0], DType::f32, 0,
                                                  pc.parts, 0, {{kPartitions, 1}});
        k.deps.track(k.b.matmul(sum_ps, ones_k, partial, /*accumulate=*/q > 0));
        s ^= 1;
        ps ^= 1;
      }
      k.copy(col(sum), sum_ps); // rounded to the dtype, as ref's sum
      k.act(col(norm), col(sum), ActivationFunction::sqrt);
      if (n > 1) {
        k.tt(col(norm_sq), col(norm), col(norm), AluOp::multiply);
        if (i == 0)
          k.copy(col(acc), col(norm_sq));
        else
          k.tt(col(acc), col(acc), col(norm_sq), AluOp::add);
      }
    }
    const RowKit::Tile& total_norm = n > 1 ? total : norm;
    if (n > 1) {
      k.copy(col(sum), col(acc));
      k.act(col(total), col(sum), ActivationFunction::sqrt);
    }
    const int32_t total_hbm =
        hbm("total_norm", dt, 1, -1 - static_cast<int32_t>(lay.result(kTotalNorm)));
    k.store(hbm_rows(total_hbm, dt, 1, 0, 1, 0, 1), RowKit::at(total_norm, 0, 1, 1));
    k.ts(col(denom), col(total_norm), AluOp::add, round_to_dtype(1e-6, dt));
    k.act(col(max_norm), RowKit::at(ones, 0, kPartitions, 1), ActivationFunction::identity,
          static_cast<float>(attr_double(node.attrs, AttrName::max_grad_norm)));
    k.tt(col(coef), col(max_norm), col(denom), AluOp::divide);
    k.ts(col(*clamp), col(coef), AluOp::min, 1.0f); // NaN stays NaN
  }
  // Pass 2: the update, parameter by parameter, chunk by chunk; each
  // chunk's loads (and its parameter's scalars) emitted before the chunk
  // before it computes, so the Sync queue has them ahead of that chunk's
  // stores (two slots: the chunk before that is all emitted).
  struct Work {
    int64_t param;
    FlatPiece pc;
    int s, ss;
    bool first; ///< the parameter's first chunk: loads its scalars
  };
  std::vector<Work> work;
  for (int64_t i = 0; i < n; ++i) {
    bool first = true;
    for (const FlatPiece& pc : flat_pieces(types[lay.operand(kParams, i)].numel(), width)) {
      work.push_back({i, pc, static_cast<int>(work.size() % 2), static_cast<int>(i % 2), first});
      first = false;
    }
  }
  auto load = [&](const Work& w) {
    if (w.first) update.load_scalars(table, w.param, w.ss);
    update.load(w.pc, w.s, tensors[w.param], slots);
  };
  if (!work.empty()) load(work[0]);
  for (size_t q = 0; q < work.size(); ++q) {
    if (q + 1 < work.size()) load(work[q + 1]);
    const Work& w = work[q];
    update.chunk(w.pc, w.s, w.ss, tensors[w.param], clamp ? &*clamp : nullptr);
  }
  LoweredOp low = k.finish(std::move(binding));
  low.stage = stage_scalars(lay, c, dt, table);
  return low;
}

} // namespace mstep::neuron
