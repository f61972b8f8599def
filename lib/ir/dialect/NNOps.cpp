// Verifiers of the normalization, dropout, loss and attention ops.
#include <cmath>

#include "lib/ir/dialect/Verification.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::dialect {

using llvm::ArrayRef;
using llvm::LogicalResult;
using mlir::failure;
using mlir::success;
using rules::shapeString;

//===----------------------------------------------------------------------===//
// Normalization, dropout, loss
//===----------------------------------------------------------------------===//

namespace {

LogicalResult verifySoftmaxLike(mlir::Operation* op, mlir::Value input, int64_t dim) {
  // A 0-d input is softmaxed over "dim 0", as PyTorch allows.
  if (dim < std::max<int64_t>(rankOf(input), 1)) return success();
  return op->emitOpError() << "dim " << dim << " is out of range for input " << input.getType();
}

/// Norms: normalized_ndim trailing dims; the affine operands (named
/// `names`) have exactly those dims and the input's element type.
LogicalResult verifyNorm(mlir::Operation* op, mlir::Value input, int64_t normalizedNdim, double eps,
                         ArrayRef<std::pair<llvm::StringRef, mlir::Value>> affine) {
  if (normalizedNdim > rankOf(input))
    return op->emitOpError() << "normalized_ndim = " << normalizedNdim
                             << " exceeds the rank of input " << input.getType();
  ArrayRef<int64_t> trailing = dimsOf(input).take_back(normalizedNdim);
  for (auto [name, value] : affine) {
    if (!value) continue;
    if (dimsOf(value) != trailing || elementTypeOf(value) != elementTypeOf(input))
      return op->emitOpError() << name << " " << value.getType() << " must have the "
                               << "normalized shape " << shapeString(trailing)
                               << " and the element type of input " << input.getType();
  }
  if (!(eps >= 0) || !std::isfinite(eps))
    return op->emitOpError() << "eps must be finite and >= 0, got " << rules::formatDouble(eps);
  return success();
}

}  // namespace

LogicalResult SoftmaxOp::verify() { return verifySoftmaxLike(*this, getInput(), getDim()); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxLike(*this, getInput(), getDim()); }

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getNormalizedNdim(), getEps().convertToDouble(),
                    {{"weight", getWeight()}, {"bias", getBias()}});
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput(), getNormalizedNdim(), getEps().convertToDouble(),
                    {{"weight", getWeight()}});
}

LogicalResult DropoutOp::verify() {
  const double p = getP().convertToDouble();
  if (p >= 0 && p <= 1) return success();
  return emitOpError() << "probability p must be in [0, 1], got " << rules::formatDouble(p);
}

LogicalResult NllLossOp::verify() {
  ArrayRef<int64_t> logProbs = dimsOf(getLogProbs());
  if (logProbs.size() != 1 && logProbs.size() != 2)
    return emitOpError() << "log_probs " << getLogProbs().getType()
                         << " must be [N, C] or [C] (class dim last)";
  const ArrayRef<int64_t> target =
      logProbs.size() == 2 ? logProbs.take_front(1) : ArrayRef<int64_t>();
  if (dimsOf(getTarget()) != target)
    return emitOpError() << "target " << getTarget().getType() << " must have shape "
                         << shapeString(target) << " (one class index per row of log_probs "
                         << getLogProbs().getType() << ")";
  const bool none = getReduction() == LossReduction::none;
  if (dimsOf(getResult()) != (none ? target : ArrayRef<int64_t>()))
    return emitOpError() << "result " << getType() << " must have shape "
                         << shapeString(none ? target : ArrayRef<int64_t>())
                         << (none ? " (the target's) for reduction none"
                                  : " (0-d) for a mean or sum reduction");
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// What the forward and the backward share: the inputs, the optional mask,
/// valid_seq_len and RNG, and the options. Sets `scores` to [..., L, S]
/// and `out` to [..., L, Ev].
LogicalResult verifySdpaInputs(mlir::Operation* op, mlir::Value q, mlir::Value k, mlir::Value v,
                               mlir::Value mask, mlir::Value validLen, mlir::Value rng,
                               double scale, double dropoutP, bool isCausal,
                               std::optional<uint64_t> rngOffset, rules::Dims& scores,
                               rules::Dims& out) {
  if (elementTypeOf(q) != elementTypeOf(k) || elementTypeOf(q) != elementTypeOf(v))
    return op->emitOpError() << "query " << q.getType() << ", key " << k.getType() << " and value "
                             << v.getType() << " must share one element type";
  ArrayRef<int64_t> qd = dimsOf(q), kd = dimsOf(k), vd = dimsOf(v);
  if (qd.size() < 2 || qd.size() != kd.size() || qd.size() != vd.size())
    return op->emitOpError() << "query " << q.getType() << ", key " << k.getType() << " and value "
                             << v.getType()
                             << " must have one rank >= 2 ([..., L, E], [..., S, E], [..., S, Ev])";
  if (qd.drop_back(2) != kd.drop_back(2) || qd.drop_back(2) != vd.drop_back(2))
    return op->emitOpError() << "query " << q.getType() << ", key " << k.getType() << " and value "
                             << v.getType() << " must have identical leading (batch, head) dims";
  if (qd.back() != kd.back())
    return op->emitOpError() << "query's head dim E = " << qd.back() << " differs from key's "
                             << kd.back() << " (query [..., L, E], key [..., S, E])";
  if (kd[kd.size() - 2] != vd[vd.size() - 2])
    return op->emitOpError() << "key has S = " << kd[kd.size() - 2] << " positions but value has "
                             << vd[vd.size() - 2] << " (key [..., S, E], value [..., S, Ev])";
  scores.assign(qd.begin(), qd.end());
  scores.back() = kd[kd.size() - 2];
  out.assign(qd.begin(), qd.end());
  out.back() = vd.back();

  if (mask) {
    if (isCausal)
      return op->emitOpError("is_causal and a mask cannot be used together; fold the causal "
                             "pattern into the mask");
    mlir::Type et = elementTypeOf(mask);
    if (!et.isInteger(1) && et != elementTypeOf(q))
      return op->emitOpError() << "mask " << mask.getType()
                               << " must be i1 (true = attend) or the query's element type "
                               << elementTypeOf(q) << " (added to the scores)";
    ArrayRef<int64_t> md = dimsOf(mask);
    bool fits = md.size() <= scores.size();
    for (size_t i = 1; fits && i <= md.size(); ++i)
      fits = md[md.size() - i] == 1 || md[md.size() - i] == scores[scores.size() - i];
    if (!fits)
      return op->emitOpError() << "mask " << mask.getType()
                               << " does not broadcast to the scores' shape [..., L, S] = "
                               << shapeString(scores);
  }
  if (validLen) {
    if (qd.size() < 3)
      return op->emitOpError() << "valid_seq_len needs a batch dim: query " << q.getType()
                               << " must have rank >= 3 ([B, ..., L, E])";
    if (dimsOf(validLen) != ArrayRef<int64_t>{qd[0]})
      return op->emitOpError() << "valid_seq_len " << validLen.getType()
                               << " must have shape [B] = [" << qd[0] << "]";
  }
  if (!std::isfinite(scale))
    return op->emitOpError() << "scale must be finite, got " << rules::formatDouble(scale);
  if (!(dropoutP >= 0 && dropoutP <= 1))
    return op->emitOpError() << "dropout_p must be in [0, 1], got "
                             << rules::formatDouble(dropoutP);
  if ((dropoutP > 0) != static_cast<bool>(rng))
    return op->emitOpError() << "takes an RNG state exactly when dropout_p > 0; dropout_p is "
                             << rules::formatDouble(dropoutP)
                             << (rng ? " but an RNG state is given" : " and no RNG state is given");
  if (rngOffset.has_value() != static_cast<bool>(rng))
    return op->emitOpError("rng_offset must be given exactly when an RNG state is");
  return success();
}

/// An optional result or operand that must be present exactly when `flag`
/// says so, with type `expected`.
LogicalResult checkOptional(mlir::Operation* op, mlir::Value value, bool wanted,
                            llvm::StringRef name, llvm::StringRef flag,
                            mlir::RankedTensorType expected) {
  if (static_cast<bool>(value) != wanted)
    return op->emitOpError() << name << (wanted ? " is missing" : " must be absent") << " (" << flag
                             << ")";
  if (value && value.getType() != expected)
    return op->emitOpError() << name << " has type " << value.getType() << ", expected "
                             << expected;
  return success();
}

/// The checks sdpa and sdpa_backward share, on the op's own accessors.
template <typename SdpaLikeOp>
LogicalResult verifySdpaOperands(SdpaLikeOp op, rules::Dims& scores, rules::Dims& out) {
  return verifySdpaInputs(op, op.getQuery(), op.getKey(), op.getValue(), op.getMask(),
                          op.getValidSeqLen(), op.getRngState(), op.getScale().convertToDouble(),
                          op.getDropoutP().convertToDouble(), op.getIsCausal(), op.getRngOffset(),
                          scores, out);
}

}  // namespace

LogicalResult SdpaOp::verify() {
  rules::Dims scores, out;
  if (failed(verifySdpaOperands(*this, scores, out))) return failure();
  mlir::Type et = elementTypeOf(getQuery());
  auto probsType = mlir::RankedTensorType::get(scores, et);
  auto outType = mlir::RankedTensorType::get(out, et);
  if (getOut().getType() != outType)
    return emitOpError() << "out has type " << getOut().getType() << ", expected " << outType
                         << " ([..., L, Ev] in the query's element type)";
  if (failed(checkOptional(*this, getAttnProbs(), getReturnAttnProbs(), "probs",
                           "return_attn_probs", probsType)) ||
      failed(checkOptional(
          *this, getDropoutMask(), getReturnDropoutMask(), "dropout_mask", "return_dropout_mask",
          mlir::RankedTensorType::get(scores, mlir::IntegerType::get(getContext(), 1)))) ||
      failed(checkOptional(*this, getSavedProbs(), !getRecomputeMode(), "saved_probs",
                           "present iff recompute_mode = false", probsType)))
    return failure();
  return success();
}

LogicalResult SdpaBackwardOp::verify() {
  rules::Dims scores, out;
  if (failed(verifySdpaOperands(*this, scores, out))) return failure();
  mlir::Type et = elementTypeOf(getQuery());
  auto outType = mlir::RankedTensorType::get(out, et);
  if (getGradOut().getType() != outType)
    return emitOpError() << "grad_out has type " << getGradOut().getType() << ", expected "
                         << outType << " (the forward's out)";
  if (failed(checkOptional(*this, getSavedProbs(), !getRecomputeMode(), "saved_probs",
                           "present iff recompute_mode = false",
                           mlir::RankedTensorType::get(scores, et))))
    return failure();
  if (getGradMask()) {
    if (!getMask() || !llvm::isa<mlir::FloatType>(elementTypeOf(getMask())))
      return emitOpError("grad_mask needs a floating-point mask operand");
    if (getGradMask().getType() != getMask().getType())
      return emitOpError() << "grad_mask has type " << getGradMask().getType()
                           << ", expected the mask's type " << getMask().getType();
  }
  return success();
}

void MstepDialect::registerNNOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/NNOps.cpp.inc"
      >();
}

void MstepDialect::registerAttentionOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/AttentionOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect

#define GET_OP_CLASSES
#include "mstep/ir/dialect/NNOps.cpp.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/AttentionOps.cpp.inc"
