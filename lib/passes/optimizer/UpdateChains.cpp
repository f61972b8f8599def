// The update rules of lib/api/optim as chain patterns, and the matchers of
// one parameter's update chain and of clip_grad_norm_.
#include "lib/passes/optimizer/UpdateChains.h"

#include <cmath>
#include <limits>

#include "mlir/IR/BuiltinTypes.h"

namespace mstep::passes::optimizer {

using dialect::OptimizerKind;

// ---- Rule variants ----------------------------------------------------------

int RuleVariant::stateSlots() const {
  return static_cast<int>(dialect::optimizerStateSlots(kind, momentum, amsgrad));
}

bool RuleVariant::countsSteps() const { return kind != OptimizerKind::sgd || momentum; }

bool RuleVariant::readsStep() const {
  return kind == OptimizerKind::adam || kind == OptimizerKind::adamw || dampening;
}

bool RuleVariant::takes(Hyper h) const {
  const bool adam = kind == OptimizerKind::adam || kind == OptimizerKind::adamw;
  switch (h) {
  case Hyper::lr:
    return true;
  case Hyper::momentum:
    return momentum;
  case Hyper::dampening:
    return dampening;
  case Hyper::beta1:
  case Hyper::beta2:
    return adam;
  case Hyper::rho:
    return kind == OptimizerKind::adadelta;
  case Hyper::eps:
    return adam || kind == OptimizerKind::adadelta;
  case Hyper::weight_decay:
    return weightDecay;
  }
  return false;
}

bool RuleVariant::operator==(const RuleVariant& o) const {
  return kind == o.kind && weightDecay == o.weightDecay && momentum == o.momentum &&
         dampening == o.dampening && nesterov == o.nesterov && amsgrad == o.amsgrad;
}

namespace {

/// Every variant lib/api/optim records. Adam and AdamW differ only in how
/// they apply weight decay, so AdamW without it is listed as Adam.
std::vector<RuleVariant> allVariants() {
  std::vector<RuleVariant> v;
  for (bool wd : {false, true}) {
    v.push_back({OptimizerKind::sgd, wd});
    v.push_back({OptimizerKind::sgd, wd, /*momentum=*/true});
    v.push_back({OptimizerKind::sgd, wd, true, /*dampening=*/true});
    v.push_back({OptimizerKind::sgd, wd, true, false, /*nesterov=*/true});
    for (bool amsgrad : {false, true}) {
      v.push_back({OptimizerKind::adam, wd, false, false, false, amsgrad});
      if (wd) v.push_back({OptimizerKind::adamw, wd, false, false, false, amsgrad});
    }
    v.push_back({OptimizerKind::adadelta, wd});
  }
  return v;
}

/// The pattern of one variant: what replaces the param, each state slot
/// and (when the chain reads it) the step counter.
struct RulePattern {
  const PatternNode* newParam = nullptr;
  std::array<const PatternNode*, kMaxStateSlots> newStates{};
  const PatternNode* newStep = nullptr;
};

/// optim::SGD::update.
RulePattern sgdRule(PatternBuilder& b, const RuleVariant& v) {
  RulePattern r;
  const PatternNode* p = b.param();
  const PatternNode* d = b.grad();
  if (v.weightDecay) d = b.add(d, b.mul(b.toParamType(b.hyper(Hyper::weight_decay)), p));
  if (v.momentum) {
    const PatternNode* momentum = b.toParamType(b.hyper(Hyper::momentum));
    const PatternNode* buf = b.mul(b.state(0), momentum);
    const PatternNode* newBuf;
    if (v.dampening) {
      // where(step == 1, 1, 1 - dampening), in f64, then to the dtype.
      const PatternNode* coef = b.where(b.eq(b.stepAsF64(), b.f64(1)), b.f64(1),
                                        b.sub(b.f64(1), b.hyper(Hyper::dampening)));
      newBuf = b.add(buf, b.mul(b.toParamType(coef), d));
      r.newStep = b.advancedStep();
    } else {
      newBuf = b.add(buf, d);
    }
    r.newStates[0] = newBuf;
    d = v.nesterov ? b.add(d, b.mul(momentum, newBuf)) : newBuf;
  }
  r.newParam = b.sub(p, b.mul(b.toParamType(b.hyper(Hyper::lr)), d));
  return r;
}

/// optim::Adam::update (Adam and AdamW).
RulePattern adamRule(PatternBuilder& b, const RuleVariant& v) {
  RulePattern r;
  const PatternNode* p = b.param();
  const PatternNode* g = b.grad();
  const PatternNode* base = p;
  const PatternNode* lr = b.hyper(Hyper::lr);
  if (v.weightDecay) {
    const PatternNode* wd = b.hyper(Hyper::weight_decay);
    if (v.kind == OptimizerKind::adamw)
      base = b.mul(p, b.toParamType(b.sub(b.f64(1), b.mul(lr, wd))));
    else
      g = b.add(g, b.mul(b.toParamType(wd), p));
  }
  const PatternNode* beta1 = b.hyper(Hyper::beta1);
  const PatternNode* beta2 = b.hyper(Hyper::beta2);
  auto oneMinus = [&](const PatternNode* beta) { return b.toParamType(b.sub(b.f64(1), beta)); };
  const PatternNode* m = b.add(b.mul(b.state(0), b.toParamType(beta1)), b.mul(oneMinus(beta1), g));
  const PatternNode* vNew =
      b.add(b.mul(b.state(1), b.toParamType(beta2)), b.mul(b.mul(oneMinus(beta2), g), g));
  r.newStates[0] = m;
  r.newStates[1] = vNew;
  if (v.amsgrad) {
    vNew = b.maximum(b.state(2), vNew);
    r.newStates[2] = vNew;
  }
  const PatternNode* step = b.stepAsF64();
  r.newStep = b.advancedStep();
  const PatternNode* bc1 = b.sub(b.f64(1), b.pow(beta1, step));
  const PatternNode* bc2 = b.sub(b.f64(1), b.pow(beta2, step));
  const PatternNode* stepSize = b.toParamType(b.div(lr, bc1));
  const PatternNode* bc2Sqrt = b.toParamType(b.sqrt(bc2));
  const PatternNode* denom =
      b.add(b.div(b.sqrt(vNew), bc2Sqrt), b.toParamType(b.hyper(Hyper::eps)));
  r.newParam = b.sub(base, b.div(b.mul(stepSize, m), denom));
  return r;
}

/// optim::Adadelta::update.
RulePattern adadeltaRule(PatternBuilder& b, const RuleVariant& v) {
  RulePattern r;
  const PatternNode* p = b.param();
  const PatternNode* g = b.grad();
  if (v.weightDecay) g = b.add(g, b.mul(b.toParamType(b.hyper(Hyper::weight_decay)), p));
  const PatternNode* rho = b.toParamType(b.hyper(Hyper::rho));
  const PatternNode* oneMinusRho = b.toParamType(b.sub(b.f64(1), b.hyper(Hyper::rho)));
  const PatternNode* eps = b.toParamType(b.hyper(Hyper::eps));
  const PatternNode* squareAvg = b.state(0);
  const PatternNode* accDelta = b.state(1);
  const PatternNode* sq = b.add(b.mul(squareAvg, rho), b.mul(b.mul(oneMinusRho, g), g));
  const PatternNode* rmsGrad = b.sqrt(b.add(sq, eps));
  const PatternNode* delta = b.mul(b.div(b.sqrt(b.add(accDelta, eps)), rmsGrad), g);
  r.newStates[0] = sq;
  r.newStates[1] = b.add(b.mul(accDelta, rho), b.mul(b.mul(oneMinusRho, delta), delta));
  r.newParam = b.sub(p, b.mul(b.toParamType(b.hyper(Hyper::lr)), delta));
  return r;
}

RulePattern buildRule(PatternBuilder& b, const RuleVariant& v) {
  switch (v.kind) {
  case OptimizerKind::sgd:
    return sgdRule(b, v);
  case OptimizerKind::adam:
  case OptimizerKind::adamw:
    return adamRule(b, v);
  case OptimizerKind::adadelta:
    return adadeltaRule(b, v);
  }
  return {};
}

/// Matches every output of `rule` for `param`: the new param first (which
/// binds the state arguments), then each state's and the step's new value.
std::optional<ChainBindings> matchRule(const FunctionFacts& facts, mlir::Value param,
                                       const RuleVariant& variant, const RulePattern& rule) {
  ChainMatcher matcher(facts, param);
  if (!matcher.match(rule.newParam, facts.updatedValue(param))) return std::nullopt;
  for (int s = 0; s < variant.stateSlots(); ++s) {
    mlir::Value state = matcher.bindings().states[s];
    if (!state || !matcher.match(rule.newStates[s], facts.updatedValue(state))) return std::nullopt;
  }
  if (rule.newStep) {
    mlir::Value step = matcher.bindings().step;
    if (!step || !matcher.match(rule.newStep, facts.updatedValue(step))) return std::nullopt;
  }
  return matcher.bindings();
}

/// Whether every user of `value` is one of `ops`.
bool onlyReadBy(mlir::Value value, const llvm::SetVector<mlir::Operation*>& ops) {
  return llvm::all_of(value.getUsers(), [&](mlir::Operation* user) { return ops.contains(user); });
}

} // namespace

std::optional<UpdateChain> matchUpdateChain(const FunctionFacts& facts, mlir::Value param) {
  if (!facts.isUpdatedArgument(param, "parameter")) return std::nullopt;
  const mlir::Type dtype = mlir::getElementTypeOrSelf(param.getType());
  // 1. The variant whose pattern binds the most ops: a rule with weight
  //    decay also matches the plain rule (taking the decayed gradient for
  //    the gradient), momentum also matches plain SGD, and so on.
  std::optional<UpdateChain> best;
  bool bestIsExclusive = false;
  for (const RuleVariant& variant : allVariants()) {
    PatternBuilder builder(dtype);
    const RulePattern rule = buildRule(builder, variant);
    std::optional<ChainBindings> bound = matchRule(facts, param, variant, rule);
    if (!bound) continue;
    UpdateChain chain{variant, param, bound->grad};
    if (variant.readsStep()) chain.step = bound->step;
    chain.states = bound->states;
    chain.hypers = bound->hypers;
    chain.newParam = bound->values.lookup(rule.newParam);
    if (rule.newStep) chain.newStep = bound->values.lookup(rule.newStep);
    llvm::DenseSet<mlir::Value> outputs = {chain.newParam};
    for (int s = 0; s < variant.stateSlots(); ++s) {
      chain.newStates[s] = bound->values.lookup(rule.newStates[s]);
      outputs.insert(chain.newStates[s]);
    }
    llvm::SmallVector<mlir::Value> fromTensors;
    for (auto [node, value] : bound->values) {
      if (node->kind != PatternNode::Kind::op) continue;
      chain.ops.insert(value.getDefiningOp());
      if (node->readsTensors && !outputs.contains(value)) fromTensors.push_back(value);
    }
    if (best && chain.ops.size() <= best->ops.size()) continue;
    // 2. Nothing outside the chain may read what it computes from the
    //    tensors, except the new param and state; otherwise the chain is
    //    not fused at all (its ops would run twice).
    bestIsExclusive =
        llvm::all_of(fromTensors, [&](mlir::Value v) { return onlyReadBy(v, chain.ops); });
    best = std::move(chain);
  }
  if (!best || !bestIsExclusive) return std::nullopt;
  return best;
}

std::optional<mlir::Value> advancedOnlyStep(const FunctionFacts& facts, mlir::BlockArgument arg) {
  auto type = llvm::dyn_cast<mlir::RankedTensorType>(arg.getType());
  if (!type || type.getRank() != 0 || !type.getElementType().isInteger(64) ||
      !facts.isUpdatedArgument(arg, "optimizer_state"))
    return std::nullopt;
  mlir::Value next = facts.updatedValue(arg);
  auto add = next.getDefiningOp<dialect::AddOp>();
  if (!add) return std::nullopt;
  mlir::Value other = add.getLhs() == arg   ? add.getRhs()
                      : add.getRhs() == arg ? add.getLhs()
                                            : nullptr;
  auto one = other ? constantValue(other) : std::nullopt;
  if (!one || one->first != 1) return std::nullopt;
  return next;
}

// ---- clip_grad_norm_ --------------------------------------------------------

namespace {

/// A matched p-norm of every element of `x` (ClipGrad.cpp's norm()).
struct NormMatch {
  double p;
  mlir::Value x;
  llvm::SmallVector<mlir::Operation*, 4> ops;
};

/// `op` reduces every dim of its input without keepdim; returns the input.
template <typename ReductionOp> mlir::Value reducedOverAll(mlir::Value v) {
  auto op = v.getDefiningOp<ReductionOp>();
  if (!op || op.getKeepdim()) return {};
  const int64_t rank = llvm::cast<mlir::RankedTensorType>(op.getInput().getType()).getRank();
  llvm::ArrayRef<int64_t> dims = op.getDims();
  if (static_cast<int64_t>(dims.size()) != rank) return {};
  for (int64_t d = 0; d < rank; ++d)
    if (dims[d] != d) return {};
  return op.getInput();
}

/// The value of a constant of `x`'s element type, or nullopt.
std::optional<double> constantOfType(mlir::Value c, mlir::Value x) {
  auto v = constantValue(c);
  if (!v || v->second != mlir::getElementTypeOrSelf(x.getType())) return std::nullopt;
  return v->first;
}

std::optional<NormMatch> matchNorm(mlir::Value norm) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  mlir::Operation* top = norm.getDefiningOp();
  if (!top) return std::nullopt;
  // p = 2: sqrt(sum(x * x)).
  if (auto sqrt = llvm::dyn_cast<dialect::SqrtOp>(top)) {
    mlir::Value squares = reducedOverAll<dialect::SumOp>(sqrt.getInput());
    auto mul = squares ? squares.getDefiningOp<dialect::MulOp>() : nullptr;
    if (!mul || mul.getLhs() != mul.getRhs()) return std::nullopt;
    return NormMatch{2, mul.getLhs(), {sqrt, sqrt.getInput().getDefiningOp(), mul}};
  }
  // p = 1: sum(|x|); p = inf: max(|x|).
  for (double p : {1.0, kInf}) {
    mlir::Value abs =
        p == 1 ? reducedOverAll<dialect::SumOp>(norm) : reducedOverAll<dialect::MaxOp>(norm);
    if (auto absOp = abs ? abs.getDefiningOp<dialect::AbsOp>() : nullptr)
      return NormMatch{p, absOp.getInput(), {top, absOp}};
  }
  // Any other p: sum(|x| ^ p) ^ (1 / p).
  auto outer = llvm::dyn_cast<dialect::PowOp>(top);
  if (!outer) return std::nullopt;
  mlir::Value powers = reducedOverAll<dialect::SumOp>(outer.getLhs());
  auto inner = powers ? powers.getDefiningOp<dialect::PowOp>() : nullptr;
  auto abs = inner ? inner.getLhs().getDefiningOp<dialect::AbsOp>() : nullptr;
  if (!abs) return std::nullopt;
  std::optional<double> p = constantOfType(inner.getRhs(), norm);
  std::optional<double> inverse = constantOfType(outer.getRhs(), norm);
  if (!p || !inverse || !(*p > 0) || *p == 1 || *p == 2 || std::isinf(*p) || *inverse != 1.0 / *p)
    return std::nullopt;
  return NormMatch{*p, abs.getInput(), {outer, outer.getLhs().getDefiningOp(), inner, abs}};
}

} // namespace

std::optional<ClipChain> matchClipChain(llvm::ArrayRef<mlir::Value> grads) {
  if (grads.empty()) return std::nullopt;
  ClipChain clip;
  // 1. clipped_i = raw_i * clamped, one clamped for all.
  mlir::Value clamped;
  llvm::DenseMap<mlir::Value, mlir::Value> clippedOf; // raw -> clipped
  for (mlir::Value g : grads) {
    auto mul = g.getDefiningOp<dialect::MulOp>();
    if (!mul) return std::nullopt;
    if (!clamped)
      clamped = mul.getLhs().getDefiningOp<dialect::MinimumOp>() ? mul.getLhs() : mul.getRhs();
    mlir::Value raw = mul.getLhs() == clamped   ? mul.getRhs()
                      : mul.getRhs() == clamped ? mul.getLhs()
                                                : nullptr;
    if (!raw || raw.getType() != g.getType() || !clippedOf.insert({raw, g}).second)
      return std::nullopt;
    clip.ops.insert(mul);
  }
  // 2. clamped = minimum(max_norm / (total + 1e-6), 1).
  auto minimum = clamped.getDefiningOp<dialect::MinimumOp>();
  if (!minimum || constantOfType(minimum.getRhs(), clamped) != 1.0) return std::nullopt;
  auto div = minimum.getLhs().getDefiningOp<dialect::DivOp>();
  auto add = div ? div.getRhs().getDefiningOp<dialect::AddOp>() : nullptr;
  if (!add) return std::nullopt;
  std::optional<double> maxNorm = constantOfType(div.getLhs(), clamped);
  std::optional<double> eps = constantOfType(add.getRhs(), clamped);
  if (!maxNorm || !std::isfinite(*maxNorm) || *maxNorm < 0 || eps != 1e-6) return std::nullopt;
  clip.maxNorm = *maxNorm;
  clip.total = add.getLhs();
  clip.ops.insert(minimum);
  clip.ops.insert(div);
  clip.ops.insert(add);
  // 3. total = norm(stack(norm(raw_i))), or norm(raw_0) for one gradient.
  std::optional<NormMatch> total = matchNorm(clip.total);
  if (!total) return std::nullopt;
  clip.normType = total->p;
  clip.ops.insert(total->ops.begin(), total->ops.end());
  auto cat = total->x.getDefiningOp<dialect::CatOp>();
  if (grads.size() == 1) {
    clip.rawGrads.push_back(total->x);
  } else {
    if (!cat || cat.getDim() != 0 || cat.getInputs().size() != grads.size()) return std::nullopt;
    clip.ops.insert(cat);
    for (mlir::Value piece : cat.getInputs()) {
      auto reshape = piece.getDefiningOp<dialect::ReshapeOp>();
      std::optional<NormMatch> norm = reshape ? matchNorm(reshape.getInput()) : std::nullopt;
      if (!norm || norm->p != clip.normType) return std::nullopt;
      clip.ops.insert(reshape);
      clip.ops.insert(norm->ops.begin(), norm->ops.end());
      clip.rawGrads.push_back(norm->x);
    }
  }
  // 4. The norms cover exactly the gradients clipped, all of one dtype.
  for (mlir::Value raw : clip.rawGrads) {
    auto it = clippedOf.find(raw);
    if (it == clippedOf.end() || mlir::getElementTypeOrSelf(raw.getType()) !=
                                     mlir::getElementTypeOrSelf(clip.total.getType()))
      return std::nullopt;
    clip.clippedGrads.push_back(it->second);
    clippedOf.erase(it);
  }
  if (!clippedOf.empty()) return std::nullopt;
  // 5. Nothing else reads the intermediates (the total and the clipped
  //    gradients may be read anywhere: the fused op returns them).
  for (mlir::Operation* op : clip.ops) {
    mlir::Value result = op->getResult(0);
    if (result == clip.total || llvm::is_contained(clip.clippedGrads, result)) continue;
    if (!onlyReadBy(result, clip.ops)) return std::nullopt;
  }
  return clip;
}

} // namespace mstep::passes::optimizer
