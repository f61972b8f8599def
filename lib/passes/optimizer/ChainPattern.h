// Patterns of optimizer update chains for mstep-fuse-optimizer: a small
// DAG pattern language (ops, leaves, constants) and a matcher that binds
// a pattern to the IR, trying both operand orders of commutative ops.
// A pattern node matched twice must bind the same value, so a pattern
// written like the code in lib/api/optim (where `g` or `delta` is used
// several times) matches exactly the DAG that code records.
// Library-internal.
#pragma once

#include <array>
#include <deque>
#include <optional>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mstep::passes::optimizer {

/// The hyperparameters of mstep.multi_tensor_update, in operand order.
enum class Hyper { lr, momentum, dampening, beta1, beta2, rho, eps, weight_decay };
inline constexpr int kNumHypers = 8;
inline constexpr int kMaxStateSlots = 3;

/// What a function argument is to the optimizer (from the importer's
/// `mstep.role` and `mstep.aliased_result` attributes), and which values
/// read optimizer state (a gradient or hyperparameter never does).
class FunctionFacts {
public:
  explicit FunctionFacts(mlir::func::FuncOp func);

  /// The returned value that replaces `arg` in place, or null.
  mlir::Value updatedValue(mlir::Value arg) const;
  /// `arg` is a block argument with role `role` and an aliased result.
  bool isUpdatedArgument(mlir::Value arg, llvm::StringRef role) const;
  bool readsOptimizerState(mlir::Value v) const { return readsState_.contains(v); }
  mlir::func::FuncOp func() const { return func_; }

private:
  mutable mlir::func::FuncOp func_; // its accessors are not const
  llvm::DenseSet<mlir::Value> readsState_;
};

/// One node of a chain pattern. Nodes live in a PatternBuilder.
struct PatternNode {
  enum class Kind { op, param, grad, state, step, hyper, constant };
  Kind kind;
  llvm::StringRef opName; ///< op: "mstep.mul"
  llvm::SmallVector<const PatternNode*, 3> operands;
  bool commutative = false;
  mlir::Type resultElement;  ///< op: required result element type (casts); constant: its type
  int index = 0;             ///< state: slot; hyper: Hyper
  double value = 0;          ///< constant
  bool readsTensors = false; ///< the subtree has a param, grad or state leaf
};

/// Builds the nodes of one pattern; `dtype` is the parameter's element type.
class PatternBuilder {
public:
  explicit PatternBuilder(mlir::Type dtype);

  const PatternNode* param() { return param_; }
  const PatternNode* grad() { return grad_; }
  const PatternNode* state(int slot);
  const PatternNode* step() { return step_; }
  const PatternNode* hyper(Hyper h);
  /// A 0-d mstep.constant of element type `type` (or mstep.full of one).
  const PatternNode* constant(double value, mlir::Type type);
  const PatternNode* f64(double value) { return constant(value, f64Type_); }

  const PatternNode* add(const PatternNode* a, const PatternNode* b) {
    return op("mstep.add", {a, b}, true);
  }
  const PatternNode* mul(const PatternNode* a, const PatternNode* b) {
    return op("mstep.mul", {a, b}, true);
  }
  const PatternNode* sub(const PatternNode* a, const PatternNode* b) {
    return op("mstep.sub", {a, b});
  }
  const PatternNode* div(const PatternNode* a, const PatternNode* b) {
    return op("mstep.div", {a, b});
  }
  const PatternNode* pow(const PatternNode* a, const PatternNode* b) {
    return op("mstep.pow", {a, b});
  }
  const PatternNode* maximum(const PatternNode* a, const PatternNode* b) {
    return op("mstep.maximum", {a, b});
  }
  const PatternNode* eq(const PatternNode* a, const PatternNode* b) {
    return op("mstep.eq", {a, b});
  }
  const PatternNode* where(const PatternNode* c, const PatternNode* a, const PatternNode* b) {
    return op("mstep.where", {c, a, b});
  }
  const PatternNode* sqrt(const PatternNode* a) { return op("mstep.sqrt", {a}); }
  /// An f64 value cast to the parameter's dtype (Optimizer::hyper_as,
  /// derived_as, to(x, dt)); the value itself when the dtype is f64.
  const PatternNode* toParamType(const PatternNode* f64Value);
  /// The i64 step counter advanced by one: add(step, 1).
  const PatternNode* advancedStep();
  /// The advanced step as f64 (Optimizer::advance_step's result).
  const PatternNode* stepAsF64();

  mlir::Type dtype() const { return dtype_; }

private:
  PatternNode* make(PatternNode::Kind kind);
  const PatternNode* op(llvm::StringRef name, llvm::ArrayRef<const PatternNode*> operands,
                        bool commutative = false);
  const PatternNode* castTo(const PatternNode* x, mlir::Type element);

  std::deque<PatternNode> nodes_;
  mlir::Type dtype_, f64Type_, i64Type_;
  const PatternNode *param_, *grad_, *step_;
  const PatternNode *advancedStep_ = nullptr, *stepAsF64_ = nullptr;
  std::array<const PatternNode*, kMaxStateSlots> states_{};
  std::array<const PatternNode*, kNumHypers> hypers_{};
};

/// What a successful match bound: each pattern node's value and the
/// leaves by role.
struct ChainBindings {
  llvm::DenseMap<const PatternNode*, mlir::Value> values;
  mlir::Value grad, step;
  std::array<mlir::Value, kMaxStateSlots> states{};
  std::array<mlir::Value, kNumHypers> hypers{};
};

/// Matches patterns of one parameter's chain against the IR.
class ChainMatcher {
public:
  ChainMatcher(const FunctionFacts& facts, mlir::Value param) : facts_(facts), param_(param) {}

  /// Binds `node` to `value` (and its operands to the value's operands);
  /// on failure the bindings are as before the call.
  bool match(const PatternNode* node, mlir::Value value);
  const ChainBindings& bindings() const { return bindings_; }

private:
  bool matchUnbound(const PatternNode* node, mlir::Value value);
  bool matchOperands(const PatternNode* node, mlir::Operation* op, bool swapped);
  bool matchLeaf(const PatternNode* node, mlir::Value value);

  const FunctionFacts& facts_;
  mlir::Value param_;
  ChainBindings bindings_;
};

/// The double a 0-d mstep.constant (or mstep.full of one) holds, and its
/// element type; nullopt for any other value.
std::optional<std::pair<double, mlir::Type>> constantValue(mlir::Value v);

} // namespace mstep::passes::optimizer
