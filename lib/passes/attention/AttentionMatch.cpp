// Forward matching for mstep-fuse-attention (AttentionMatch.h): from a
// softmax, out to the output matmul (through an optional dropout) and back
// to q @ kT (through an optional mask and scale steps), plus the helpers
// the backward matcher shares (constants, permuted views).
#include <cmath>
#include <limits>

#include "lib/passes/attention/AttentionMatch.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/Sequence.h"

namespace mstep::passes::attention {

using llvm::ArrayRef;
using llvm::SmallVector;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;
namespace md = ::mstep::dialect;

namespace {

ArrayRef<int64_t> dimsOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

/// `value * c`, `c * value` or `value / c` with c a uniform constant and the
/// result of value's type (the constant does not broadcast it).
std::optional<ChainStep> matchScaleStep(Value value) {
  Operation* op = value.getDefiningOp();
  if (auto mul = llvm::dyn_cast_or_null<md::MulOp>(op)) {
    for (unsigned side : {1u, 0u}) {
      Value input = mul->getOperand(1 - side);
      if (input.getType() != mul.getType()) continue;
      if (std::optional<double> c = uniformConstant(mul->getOperand(side)))
        return ChainStep{ChainStep::Kind::scale, op, input, *c, /*divides=*/false, {}};
    }
  } else if (auto div = llvm::dyn_cast_or_null<md::DivOp>(op)) {
    if (div.getLhs().getType() == div.getType())
      if (std::optional<double> c = uniformConstant(div.getRhs()))
        return ChainStep{ChainStep::Kind::scale, op, div.getLhs(), *c, /*divides=*/true, {}};
  }
  return std::nullopt;
}

std::optional<ChainStep> matchPermuteStep(Value value) {
  auto permute = value.getDefiningOp<md::PermuteOp>();
  if (!permute) return std::nullopt;
  return ChainStep{ChainStep::Kind::permute, permute, permute.getInput(), 1, false,
                   SmallVector<int64_t>(permute.getPerm())};
}

/// Appends the scale steps that compute `value` and moves it to their input.
void peelScales(Value& value, SmallVector<ChainStep>& steps) {
  while (std::optional<ChainStep> step = matchScaleStep(value)) {
    value = step->input;
    steps.push_back(*step);
  }
}

/// q's chain: scales, and a permute only when scales lie under it (a plain
/// permute is part of computing q, not of the attention).
OperandChain peelQuery(Value operand) {
  OperandChain chain{operand, operand, {}};
  peelScales(chain.base, chain.steps);
  if (std::optional<ChainStep> permute = matchPermuteStep(chain.base))
    if (matchScaleStep(permute->input)) {
      chain.steps.push_back(*permute);
      chain.base = permute->input;
      peelScales(chain.base, chain.steps);
    }
  return chain;
}

/// kT's chain: scales, at most one permute (the transpose, possibly composed
/// with the head split by canonicalization), scales.
OperandChain peelKeyT(Value operand) {
  OperandChain chain{operand, operand, {}};
  peelScales(chain.base, chain.steps);
  if (std::optional<ChainStep> permute = matchPermuteStep(chain.base)) {
    chain.steps.push_back(*permute);
    chain.base = permute->input;
    peelScales(chain.base, chain.steps);
  }
  return chain;
}

/// True when the bool `mask` is tril(all-true [L, S]) with diagonal 0, seen
/// through reshapes and expands that keep the last two dims [L, S].
bool isCausalTriangle(Value mask, int64_t L, int64_t S) {
  auto lastTwoAre = [&](Value v) {
    ArrayRef<int64_t> d = dimsOf(v);
    return d.size() >= 2 && d[d.size() - 2] == L && d.back() == S;
  };
  while (lastTwoAre(mask)) {
    Operation* op = mask.getDefiningOp();
    if (llvm::isa_and_nonnull<md::ReshapeOp, md::ExpandOp>(op) && lastTwoAre(op->getOperand(0))) {
      mask = op->getOperand(0);
      continue;
    }
    auto tril = llvm::dyn_cast_or_null<md::TrilOp>(op);
    std::optional<double> fill = tril ? uniformConstant(tril.getInput()) : std::nullopt;
    return tril && tril.getDiagonal() == 0 && fill && *fill != 0;
  }
  return false;
}

/// The scores side of the softmax input: peels scale steps from `scores`
/// into `fwd` and requires a matmul under them.
bool matchScores(Value scores, AttentionForward& fwd) {
  fwd.scoreScales.clear();
  peelScales(scores, fwd.scoreScales);
  fwd.scoresMatmul = scores.getDefiningOp<md::MatmulOp>();
  return static_cast<bool>(fwd.scoresMatmul);
}

}  // namespace

double OperandChain::scale() const {
  double s = 1;
  for (const ChainStep& step : steps)
    if (step.kind == ChainStep::Kind::scale) s *= step.factor();
  return s;
}

SmallVector<int64_t> OperandChain::perm() const {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, dimsOf(operand).size()));
  for (const ChainStep& step : steps)
    if (step.kind == ChainStep::Kind::permute)
      for (int64_t& p : perm) p = step.perm[p];
  return perm;
}

Value AttentionForward::probs() const {
  return dropout ? dropout.getResult() : softmax.getResult();
}

double AttentionForward::scale() const {
  double s = query.scale() * keyT.scale();
  for (const ChainStep& step : scoreScales) s *= step.factor();
  return s;
}

double AttentionForward::dropoutP() const {
  return dropout ? dropout.getP().convertToDouble() : 0.0;
}

SmallVector<Operation*> AttentionForward::coreOps() const {
  SmallVector<Operation*> ops = {scoresMatmul};
  for (const ChainStep& step : scoreScales) ops.push_back(step.op);
  if (maskOp) ops.push_back(maskOp);
  ops.push_back(softmax);
  if (dropout) ops.push_back(dropout);
  ops.push_back(outputMatmul);
  return ops;
}

std::optional<AttentionForward> matchForward(md::SoftmaxOp softmax, std::string& why) {
  AttentionForward fwd;
  fwd.softmax = softmax;
  const Value p = softmax.getResult();
  const int64_t rank = static_cast<int64_t>(dimsOf(p).size());
  if (rank < 2 || static_cast<int64_t>(softmax.getDim()) != rank - 1)
    return fail(why, "softmax is not over the last dim");

  // 1. Forward from the softmax: an optional dropout, then the output matmul
  //    reading the probabilities as its left operand.
  for (Operation* user : p.getUsers())
    if (auto dropout = llvm::dyn_cast<md::DropoutOp>(user)) {
      if (fwd.dropout) return fail(why, "two dropouts read the probabilities");
      fwd.dropout = dropout;
    }
  for (Operation* user : fwd.probs().getUsers())
    if (auto matmul = llvm::dyn_cast<md::MatmulOp>(user))
      if (matmul.getLhs() == fwd.probs() && matmul.getRhs() != fwd.probs()) {
        if (fwd.outputMatmul) return fail(why, "two matmuls read the probabilities");
        fwd.outputMatmul = matmul;
      }
  if (!fwd.outputMatmul) return fail(why, "no matmul reads the probabilities");

  // 2. Back from the softmax: the mask (bool where with -inf, or a float add).
  Value input = softmax.getInput();
  Operation* maskOp = input.getDefiningOp();
  if (auto where = llvm::dyn_cast_or_null<md::WhereOp>(maskOp)) {
    std::optional<double> fill = uniformConstant(where.getFalseValue());
    if (fill && std::isinf(*fill) && *fill < 0 &&
        where.getTrueValue().getType() == input.getType() &&
        matchScores(where.getTrueValue(), fwd)) {
      fwd.maskOp = where;
      fwd.mask = where.getCondition();
    }
  } else if (auto add = llvm::dyn_cast_or_null<md::AddOp>(maskOp)) {
    for (unsigned side : {0u, 1u}) {
      Value scores = add->getOperand(side), mask = add->getOperand(1 - side);
      if (scores.getType() == input.getType() &&
          mlir::getElementTypeOrSelf(mask) == mlir::getElementTypeOrSelf(scores) &&
          matchScores(scores, fwd)) {
        fwd.maskOp = add;
        fwd.mask = mask;
        break;
      }
    }
  }
  if (!fwd.maskOp && !matchScores(input, fwd))
    return fail(why, "the softmax input is not (masked, scaled) q @ kT");

  // 3. The operand chains of q @ kT, and the shapes: q [..., L, E],
  //    kT [..., E, S], v [..., S, Ev] with identical leading dims.
  fwd.query = peelQuery(fwd.scoresMatmul.getLhs());
  fwd.keyT = peelKeyT(fwd.scoresMatmul.getRhs());
  ArrayRef<int64_t> q = dimsOf(fwd.query.operand), kT = dimsOf(fwd.keyT.operand),
                    v = dimsOf(fwd.value()), s = dimsOf(p);
  if (static_cast<int64_t>(q.size()) != rank || kT.size() != q.size() || v.size() != q.size())
    return fail(why, "q, kT, v and the scores differ in rank");
  if (q.drop_back(2) != kT.drop_back(2) || q.drop_back(2) != v.drop_back(2) ||
      q.drop_back(2) != s.drop_back(2))
    return fail(why, "q, kT, v and the scores differ in their leading dims");
  if (!llvm::isa<mlir::FloatType>(mlir::getElementTypeOrSelf(p)))
    return fail(why, "the scores are not floating point");
  const int64_t L = q[rank - 2], S = kT[rank - 1];

  // 4. A bool mask that is a constant causal triangle becomes is_causal.
  if (llvm::isa_and_nonnull<md::WhereOp>(fwd.maskOp) && isCausalTriangle(fwd.mask, L, S)) {
    fwd.causal = true;
    fwd.mask = Value();
  }
  if (fwd.dropout) {
    const double dropP = fwd.dropoutP();
    if (!(dropP >= 0 && dropP <= 1)) return fail(why, "dropout p is outside [0, 1]");
  }
  if (!std::isfinite(fwd.scale())) return fail(why, "the scale is not finite");
  return fwd;
}

std::optional<double> uniformConstant(Value value) {
  Operation* op = value.getDefiningOp();
  while (llvm::isa_and_nonnull<md::FullOp, md::ExpandOp>(op))
    op = op->getOperand(0).getDefiningOp();
  auto constant = llvm::dyn_cast_or_null<md::ConstantOp>(op);
  if (!constant) return std::nullopt;
  llvm::APFloat v = constant.getValue();
  // The kernels see the constant in its element type: round it there.
  mlir::Type elementType = mlir::getElementTypeOrSelf(constant.getResult());
  if (auto type = llvm::dyn_cast<mlir::FloatType>(elementType)) {
    bool lost = false;
    v.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
    v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  }
  return v.convertToDouble();
}

PermutedView viewThroughPermutes(Value value) {
  PermutedView view{value, llvm::to_vector(llvm::seq<int64_t>(0, dimsOf(value).size()))};
  while (auto permute = view.base.getDefiningOp<md::PermuteOp>()) {
    for (int64_t& p : view.perm) p = permute.getPerm()[p];
    view.base = permute.getInput();
  }
  return view;
}

bool isTransposeOf(Value a, Value b) {
  PermutedView va = viewThroughPermutes(a), vb = viewThroughPermutes(b);
  const size_t rank = vb.perm.size();
  if (va.base != vb.base || rank < 2 || va.perm.size() != rank) return false;
  std::swap(vb.perm[rank - 2], vb.perm[rank - 1]);
  return va.perm == vb.perm;
}

SmallVector<int64_t> invertPerm(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm)) inverse[p] = static_cast<int64_t>(i);
  return inverse;
}

bool isIdentityPerm(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace mstep::passes::attention
