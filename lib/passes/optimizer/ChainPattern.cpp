// The chain pattern language of mstep-fuse-optimizer and its matcher.
#include "lib/passes/optimizer/ChainPattern.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::passes::optimizer {

namespace {
bool isZeroD(mlir::Value v, mlir::Type element) {
  auto type = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return type && type.getRank() == 0 && type.getElementType() == element;
}
} // namespace

// ---- FunctionFacts ----------------------------------------------------------

FunctionFacts::FunctionFacts(mlir::func::FuncOp func) : func_(func) {
  mlir::Block& body = func.getBody().front();
  for (mlir::BlockArgument arg : body.getArguments())
    if (auto role = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), "mstep.role");
        role && role.getValue() == "optimizer_state")
      readsState_.insert(arg);
  // Program order is a topological order: one forward sweep suffices.
  for (mlir::Operation& op : body) {
    bool reads = false;
    op.walk([&](mlir::Operation* inner) {
      for (mlir::Value operand : inner->getOperands()) reads |= readsState_.contains(operand);
    });
    if (reads)
      for (mlir::Value result : op.getResults()) readsState_.insert(result);
  }
}

mlir::Value FunctionFacts::updatedValue(mlir::Value arg) const {
  auto blockArg = llvm::dyn_cast<mlir::BlockArgument>(arg);
  if (!blockArg || blockArg.getOwner() != &func_.getBody().front()) return {};
  auto alias =
      func_.getArgAttrOfType<mlir::IntegerAttr>(blockArg.getArgNumber(), "mstep.aliased_result");
  if (!alias) return {};
  mlir::Operation* ret = func_.getBody().front().getTerminator();
  const int64_t k = alias.getInt();
  if (k < 0 || k >= static_cast<int64_t>(ret->getNumOperands())) return {};
  return ret->getOperand(static_cast<unsigned>(k));
}

bool FunctionFacts::isUpdatedArgument(mlir::Value arg, llvm::StringRef role) const {
  auto blockArg = llvm::dyn_cast<mlir::BlockArgument>(arg);
  if (!blockArg || !updatedValue(arg)) return false;
  auto r = func_.getArgAttrOfType<mlir::StringAttr>(blockArg.getArgNumber(), "mstep.role");
  return r && r.getValue() == role;
}

// ---- PatternBuilder ---------------------------------------------------------

PatternBuilder::PatternBuilder(mlir::Type dtype) : dtype_(dtype) {
  mlir::MLIRContext* ctx = dtype.getContext();
  f64Type_ = mlir::Float64Type::get(ctx);
  i64Type_ = mlir::IntegerType::get(ctx, 64);
  PatternNode* p = make(PatternNode::Kind::param);
  p->readsTensors = true;
  param_ = p;
  PatternNode* g = make(PatternNode::Kind::grad);
  g->readsTensors = true;
  grad_ = g;
  step_ = make(PatternNode::Kind::step);
}

PatternNode* PatternBuilder::make(PatternNode::Kind kind) {
  nodes_.push_back(PatternNode{kind});
  return &nodes_.back();
}

const PatternNode* PatternBuilder::state(int slot) {
  if (!states_[slot]) {
    PatternNode* n = make(PatternNode::Kind::state);
    n->index = slot;
    n->readsTensors = true;
    states_[slot] = n;
  }
  return states_[slot];
}

const PatternNode* PatternBuilder::hyper(Hyper h) {
  const int i = static_cast<int>(h);
  if (!hypers_[i]) {
    PatternNode* n = make(PatternNode::Kind::hyper);
    n->index = i;
    hypers_[i] = n;
  }
  return hypers_[i];
}

const PatternNode* PatternBuilder::constant(double value, mlir::Type type) {
  PatternNode* n = make(PatternNode::Kind::constant);
  n->value = value;
  n->resultElement = type;
  return n;
}

const PatternNode* PatternBuilder::op(llvm::StringRef name,
                                      llvm::ArrayRef<const PatternNode*> operands,
                                      bool commutative) {
  PatternNode* n = make(PatternNode::Kind::op);
  n->opName = name;
  n->operands.assign(operands.begin(), operands.end());
  n->commutative = commutative;
  for (const PatternNode* o : operands) n->readsTensors |= o->readsTensors;
  return n;
}

const PatternNode* PatternBuilder::castTo(const PatternNode* x, mlir::Type element) {
  auto* n = const_cast<PatternNode*>(op("mstep.cast", {x}));
  n->resultElement = element;
  return n;
}

const PatternNode* PatternBuilder::advancedStep() {
  if (!advancedStep_) advancedStep_ = add(step_, constant(1, i64Type_));
  return advancedStep_;
}

const PatternNode* PatternBuilder::stepAsF64() {
  if (!stepAsF64_) stepAsF64_ = castTo(advancedStep(), f64Type_);
  return stepAsF64_;
}

const PatternNode* PatternBuilder::toParamType(const PatternNode* f64Value) {
  return dtype_ == f64Type_ ? f64Value : castTo(f64Value, dtype_);
}

// ---- ChainMatcher -----------------------------------------------------------

std::optional<std::pair<double, mlir::Type>> constantValue(mlir::Value v) {
  mlir::Operation* def = v.getDefiningOp();
  if (auto full = llvm::dyn_cast_or_null<dialect::FullOp>(def)) {
    if (!isZeroD(v, mlir::getElementTypeOrSelf(v.getType()))) return std::nullopt;
    def = full.getValue().getDefiningOp();
  }
  auto constant = llvm::dyn_cast_or_null<dialect::ConstantOp>(def);
  if (!constant) return std::nullopt;
  return std::make_pair(constant.getValue().convertToDouble(),
                        mlir::getElementTypeOrSelf(constant.getType()));
}

bool ChainMatcher::match(const PatternNode* node, mlir::Value value) {
  auto bound = bindings_.values.find(node);
  if (bound != bindings_.values.end()) return bound->second == value;
  ChainBindings saved = bindings_;
  if (matchUnbound(node, value)) {
    bindings_.values[node] = value;
    return true;
  }
  bindings_ = std::move(saved);
  return false;
}

bool ChainMatcher::matchUnbound(const PatternNode* node, mlir::Value value) {
  if (node->kind == PatternNode::Kind::constant) {
    auto c = constantValue(value);
    return c && c->first == node->value && c->second == node->resultElement;
  }
  if (node->kind != PatternNode::Kind::op) return matchLeaf(node, value);
  mlir::Operation* op = value.getDefiningOp();
  if (!op || op->getName().getStringRef() != node->opName || op->getNumResults() != 1 ||
      op->getNumOperands() != node->operands.size())
    return false;
  if (node->resultElement && mlir::getElementTypeOrSelf(value.getType()) != node->resultElement)
    return false;
  if (matchOperands(node, op, /*swapped=*/false)) return true;
  return node->commutative && matchOperands(node, op, /*swapped=*/true);
}

bool ChainMatcher::matchOperands(const PatternNode* node, mlir::Operation* op, bool swapped) {
  ChainBindings saved = bindings_;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    const unsigned j = swapped ? op->getNumOperands() - 1 - i : i;
    if (!match(node->operands[i], op->getOperand(j))) {
      bindings_ = std::move(saved);
      return false;
    }
  }
  return true;
}

bool ChainMatcher::matchLeaf(const PatternNode* node, mlir::Value value) {
  using Kind = PatternNode::Kind;
  switch (node->kind) {
  case Kind::param:
    return value == param_;
  case Kind::grad:
    // Any value of the parameter's type that reads no optimizer state
    // (a gradient never does; an intermediate of some other chain does).
    if (value.getType() != param_.getType() || value == param_ || facts_.readsOptimizerState(value))
      return false;
    bindings_.grad = value;
    return true;
  case Kind::state: {
    if (value.getType() != param_.getType() || !facts_.isUpdatedArgument(value, "optimizer_state"))
      return false;
    for (mlir::Value other : bindings_.states)
      if (other == value) return false; // each slot its own tensor
    bindings_.states[node->index] = value;
    return true;
  }
  case Kind::step:
    if (!isZeroD(value, mlir::IntegerType::get(value.getContext(), 64)) ||
        !facts_.isUpdatedArgument(value, "optimizer_state"))
      return false;
    bindings_.step = value;
    return true;
  case Kind::hyper:
    // A device scalar (or a value computed from them), never one that
    // depends on a step counter or other state.
    if (!isZeroD(value, mlir::Float64Type::get(value.getContext())) ||
        facts_.readsOptimizerState(value))
      return false;
    bindings_.hypers[node->index] = value;
    return true;
  default:
    return false;
  }
}

} // namespace mstep::passes::optimizer
