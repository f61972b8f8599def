// What mstep-fuse-attention recognises: hand-written attention
// (matmul -> scale -> mask -> softmax -> dropout -> matmul) and the
// gradient chain autograd records for it, as plain descriptions of the
// ops involved. Matching only reads the IR; FuseAttention.cpp checks the
// users of every value that would disappear and rewrites.
#pragma once

#include <optional>
#include <string>

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mstep::passes::attention {

/// One op between an attention operand and the value it was computed from:
/// a multiplication (or division) by a constant scalar, or a permute.
struct ChainStep {
  enum class Kind { scale, permute };
  Kind kind;
  mlir::Operation* op;              ///< the forward op; its result is the step's output
  mlir::Value input;                ///< the non-constant operand
  double constant = 1;              ///< scale: the constant, rounded to the element type
  bool divides = false;             ///< scale: `input / constant`, not `input * constant`
  llvm::SmallVector<int64_t> perm;  ///< permute: its perm

  /// The factor the step multiplies by (scale steps).
  double factor() const { return divides ? 1.0 / constant : constant; }
};

/// How a matmul operand (q, or k^T) was computed from its base value: the
/// steps in order from the operand down to `base`.
struct OperandChain {
  mlir::Value operand;
  mlir::Value base;
  llvm::SmallVector<ChainStep> steps;

  /// Product of the scale steps' factors.
  double scale() const;
  /// The operand's dims in terms of base's: operand dim i is base dim
  /// perm()[i] (the identity without a permute step).
  llvm::SmallVector<int64_t> perm() const;
};

/// A matched forward: out = softmax(mask(scale * (q @ kT))) [dropout] @ v.
/// (Op handles are `mutable`: their accessors are not const.)
struct AttentionForward {
  mutable dialect::MatmulOp scoresMatmul;    ///< s = query.operand @ keyT.operand
  OperandChain query, keyT;                  ///< keyT.operand is [..., E, S]
  llvm::SmallVector<ChainStep> scoreScales;  ///< from the mask back towards s
  mlir::Operation* maskOp = nullptr;         ///< where(mask, y, -inf) or add(y, mask)
  mlir::Value mask;                          ///< null without a mask or when causal
  bool causal = false;                       ///< the mask was a constant causal triangle
  mutable dialect::SoftmaxOp softmax;
  mutable dialect::DropoutOp dropout;        ///< null without dropout
  mutable dialect::MatmulOp outputMatmul;    ///< out = probs() @ value()

  mlir::Value probs() const;  ///< what the output matmul reads (after dropout)
  mlir::Value value() const { return outputMatmul.getRhs(); }
  mlir::Value out() const { return outputMatmul.getResult(); }
  double scale() const;       ///< every scale step on q, k and the scores
  double dropoutP() const;    ///< 0 without dropout
  /// The ops that must disappear when the attention is fused: all but the
  /// operand chains' (those only compute sdpa's inputs; they go when
  /// nothing else reads them).
  llvm::SmallVector<mlir::Operation*> coreOps() const;
};

/// A matched backward of one AttentionForward, as autograd records it:
///   dPd = dO @ v^T;  dP = dropout(dPd) (same rng, p, offset);
///   dX = p * (dP - sum(dP * p, last, keepdim));  dY = where(mask, dX, 0);
///   dS = dY * c ...;  dq' = dS @ kT^T;  dkT = q'^T @ dS;  dv = Pd^T @ dO;
/// then the chains of q and kT in reverse (mul by the same constant,
/// permute by the inverse perm). Any of dq, dk, dv may be absent.
struct AttentionBackward {
  mlir::Value gradOut;                   ///< dO
  llvm::SmallVector<mlir::Operation*> ops;  ///< every op of the chain
  mlir::Operation* first = nullptr;      ///< the earliest op of the chain
  mlir::Value gradQueryBase, gradKeyBase, gradValue;  ///< outputs; null if absent
};

/// Matches the forward around `softmax`. Returns std::nullopt, with the
/// reason in `why`, when the ops around it are not exactly attention.
std::optional<AttentionForward> matchForward(dialect::SoftmaxOp softmax, std::string& why);

/// Finds the backward chain of `fwd` among the users of its probabilities;
/// std::nullopt (reason in `why`) when there is none or it differs.
std::optional<AttentionBackward> matchBackward(const AttentionForward& fwd, std::string& why);

/// A value seen through permutes: value = permute(base, perm).
struct PermutedView {
  mlir::Value base;
  llvm::SmallVector<int64_t> perm;
};
PermutedView viewThroughPermutes(mlir::Value value);
/// True when `a` holds `b` with its last two dims swapped, through any
/// permutes of one base (e.g. permute(b, [0, 1, 3, 2]), or both permutes
/// of one tensor).
bool isTransposeOf(mlir::Value a, mlir::Value b);

/// The value of a uniform constant tensor (mstep.constant, possibly through
/// mstep.full or mstep.expand), rounded to its element type.
std::optional<double> uniformConstant(mlir::Value value);

/// Sets `why` and returns std::nullopt: a matcher's failure.
inline std::nullopt_t fail(std::string& why, const char* reason) {
  why = reason;
  return std::nullopt;
}

/// The inverse permutation.
llvm::SmallVector<int64_t> invertPerm(llvm::ArrayRef<int64_t> perm);
/// True for 0, 1, ..., n-1.
bool isIdentityPerm(llvm::ArrayRef<int64_t> perm);

}  // namespace mstep::passes::attention
