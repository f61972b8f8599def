// VerifyBackendContractPass (mstep-verify-backend-contract): checks the
// normalized form every backend may assume, rules C1-C8 of
// docs/backend-contract.md, with one located error per violation.
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/Passes.h"
#include "llvm/ADT/DenseSet.h"

namespace mstep::passes {
#define GEN_PASS_DEF_VERIFYBACKENDCONTRACT
#include "mstep/passes/Passes.h.inc"

namespace {

using mlir::Operation;

constexpr llvm::StringLiteral kRoles[] = {"input", "parameter", "optimizer_state", "rng_state",
                                          "device_scalar"};
constexpr llvm::StringLiteral kRoleList =
    "input, parameter, optimizer_state, rng_state or device_scalar";

/// What breaks C3 in `type`, or an empty string when it is allowed.
std::string typeViolation(mlir::Type type) {
  if (llvm::isa<mlir::BaseMemRefType>(type))
    return "is a memref; values have value semantics (tensors only, no buffers)";
  auto tensor = llvm::dyn_cast<mlir::TensorType>(type);
  if (!tensor) return "is not a tensor; a device scalar is a 0-d tensor";
  if (!tensor.hasRank()) return "is unranked; every tensor has a static rank";
  if (!tensor.hasStaticShape())
    return "has a dynamic dimension; shapes are static (a new shape is a new trace)";
  mlir::Type element = tensor.getElementType();
  if (element.isF32() || element.isF64() || element.isBF16() || element.isF16() ||
      element.isSignlessInteger(32) || element.isSignlessInteger(64) ||
      element.isSignlessInteger(1))
    return "";
  return "has an element type other than f32, f64, bf16, f16, i32, i64 and i1";
}

/// Checks one module and records whether anything failed.
class ContractChecker {
public:
  bool failed() const { return failed_; }

  void checkModule(mlir::ModuleOp module) {
    for (Operation& op : module.getBody()->getOperations()) {
      auto func = llvm::dyn_cast<mlir::func::FuncOp>(op);
      if (!func) {
        error(op.getLoc()) << "'" << op.getName()
                           << "' at module level; a module holds only func.func ops, one per "
                              "graph (C1)";
        continue;
      }
      checkFunction(func);
    }
  }

private:
  mlir::InFlightDiagnostic error(mlir::Location loc) {
    failed_ = true;
    return mlir::emitError(loc) << "backend contract: ";
  }

  void checkFunction(mlir::func::FuncOp func) {
    llvm::StringRef name = func.getSymName();
    if (func.isExternal()) {
      error(func.getLoc()) << "@" << name << " has no body; every func.func defines its graph (C1)";
      return;
    }
    if (!func.getBody().hasOneBlock()) {
      error(func.getLoc()) << "@" << name << " has " << func.getBody().getBlocks().size()
                           << " blocks; a graph is one block of ops in program order (C1)";
      return;
    }
    checkSignature(func);
    for (Operation& op : func.getBody().front()) checkTopLevelOp(func, op);
    checkMemoryPlan(func);
  }

  /// C3 on the signature, C6 roles and C7 donations.
  void checkSignature(mlir::func::FuncOp func) {
    llvm::StringRef name = func.getSymName();
    auto results = func.getFunctionType().getResults();
    for (auto [i, type] : llvm::enumerate(results))
      if (std::string why = typeViolation(type); !why.empty())
        error(func.getLoc()) << "result #" << i << " of @" << name << " has type " << type
                             << ", which " << why << " (C3)";
    llvm::DenseMap<int64_t, unsigned> donorOf; // result index -> argument
    for (mlir::BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (std::string why = typeViolation(arg.getType()); !why.empty())
        error(arg.getLoc()) << "argument #" << i << " of @" << name << " has type " << arg.getType()
                            << ", which " << why << " (C3)";
      mlir::Attribute role = func.getArgAttr(i, "mstep.role");
      auto roleName = llvm::dyn_cast_or_null<mlir::StringAttr>(role);
      if (!role)
        error(arg.getLoc()) << "argument #" << i << " of @" << name
                            << " has no mstep.role; the importer gives every argument one of "
                            << kRoleList << " (C6)";
      else if (!roleName || !llvm::is_contained(kRoles, roleName.getValue()))
        error(arg.getLoc()) << "argument #" << i << " of @" << name << " has mstep.role " << role
                            << "; it must be the string " << kRoleList << " (C6)";
      mlir::Attribute aliased = func.getArgAttr(i, "mstep.aliased_result");
      if (!aliased) continue;
      auto index = llvm::dyn_cast<mlir::IntegerAttr>(aliased);
      if (!index || index.getInt() < 0 || index.getInt() >= int64_t(results.size())) {
        error(arg.getLoc()) << "argument #" << i << " of @" << name
                            << " has mstep.aliased_result = " << aliased << " but @" << name
                            << " has " << results.size()
                            << " results; it must be the index of the result that is the "
                               "argument's new value (C7)";
        continue;
      }
      int64_t r = index.getInt();
      if (results[r] != arg.getType())
        error(arg.getLoc()) << "argument #" << i << " of @" << name << " (" << arg.getType()
                            << ") is donated to result #" << r << " of type " << results[r]
                            << "; a donated buffer only takes a result of its own type (C7)";
      auto [it, inserted] = donorOf.try_emplace(r, i);
      if (!inserted)
        error(arg.getLoc()) << "arguments #" << it->second << " and #" << i << " of @" << name
                            << " are both donated to result #" << r
                            << "; a result is written into at most one donated argument (C7)";
    }
  }

  /// C2, C4 and C5 for one top-level op (C3 for mstep ops' own values).
  void checkTopLevelOp(mlir::func::FuncOp func, Operation& op) {
    if (llvm::isa<mlir::func::ReturnOp>(op)) return;
    if (!llvm::isa<dialect::MstepDialect>(op.getDialect())) {
      error(op.getLoc()) << "'" << op.getName() << "' at the top level of @" << func.getSymName()
                         << " is not an mstep op; a graph holds only mstep ops and func.return "
                            "(express it as mstep ops in the importer) (C2)";
      return;
    }
    checkValueTypes(op);
    if (op.hasTrait<dialect::OpTrait::Fusible>() && !llvm::isa<dialect::ConstantOp>(op))
      error(op.getLoc()) << "'" << op.getName() << "' at the top level of @" << func.getSymName()
                         << " is fusible but not inside an mstep.fusion; run "
                            "-mstep-fuse-elementwise first (C4)";
    auto fusion = llvm::dyn_cast<dialect::FusionOp>(op);
    if (!fusion) return;
    for (Operation& inner : fusion.getBody().front()) {
      checkValueTypes(inner);
      if (llvm::isa<dialect::YieldOp>(inner) || inner.hasTrait<dialect::OpTrait::Fusible>())
        continue;
      error(inner.getLoc()) << "'" << inner.getName()
                            << "' inside an mstep.fusion is not fusible; a fusion holds only "
                               "fusible ops and mstep.yield, and fusions do not nest; rebuild "
                               "it with -mstep-fuse-elementwise (C5)";
    }
  }

  /// C3 for the results and region arguments of one op.
  void checkValueTypes(Operation& op) {
    for (mlir::OpResult result : op.getResults())
      if (std::string why = typeViolation(result.getType()); !why.empty())
        error(op.getLoc()) << "result #" << result.getResultNumber() << " of '" << op.getName()
                           << "' has type " << result.getType() << ", which " << why << " (C3)";
    for (mlir::Region& region : op.getRegions())
      for (mlir::BlockArgument arg : region.getArguments())
        if (std::string why = typeViolation(arg.getType()); !why.empty())
          error(arg.getLoc()) << "block argument #" << arg.getArgNumber() << " of '" << op.getName()
                              << "' has type " << arg.getType() << ", which " << why << " (C3)";
  }

  /// C8: with `mstep.arena_size`, every top-level result has a place.
  void checkMemoryPlan(mlir::func::FuncOp func) {
    mlir::Attribute sizeAttr = func->getAttr("mstep.arena_size");
    if (!sizeAttr) return;
    llvm::StringRef name = func.getSymName();
    auto arenaSize = llvm::dyn_cast<mlir::IntegerAttr>(sizeAttr);
    if (!arenaSize) {
      error(func.getLoc()) << "@" << name << " has mstep.arena_size = " << sizeAttr
                           << "; it must be the arena's size in bytes, an i64 (C8)";
      return;
    }
    mlir::Block& body = func.getBody().front();
    auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(body.getTerminator());
    const char* rerun = "; run -mstep-plan-memory after every pass that changes the graph (C8)";
    for (Operation& op : body) {
      if (op.getNumResults() == 0) continue;
      auto offsets = op.getAttrOfType<mlir::DenseI64ArrayAttr>("mstep.arena_offsets");
      if (!offsets || offsets.size() != int64_t(op.getNumResults())) {
        error(op.getLoc()) << "'" << op.getName() << "' in planned @" << name
                           << " has no mstep.arena_offsets with one entry per result ("
                           << op.getNumResults() << ")" << rerun;
        continue;
      }
      auto aliases = op.getAttrOfType<mlir::DenseI64ArrayAttr>("mstep.aliases_arg");
      for (mlir::OpResult result : op.getResults()) {
        unsigned i = result.getResultNumber();
        int64_t offset = offsets[i];
        if (offset >= 0) {
          auto type = llvm::cast<mlir::ShapedType>(result.getType());
          int64_t bytes =
              type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
          if (offset + bytes > arenaSize.getInt())
            error(op.getLoc()) << "result #" << i << " of '" << op.getName() << "' occupies ["
                               << offset << ", " << offset + bytes << ") beyond the "
                               << arenaSize.getInt() << "-byte arena of @" << name << rerun;
          continue;
        }
        int64_t arg =
            aliases && int64_t(aliases.size()) == int64_t(op.getNumResults()) ? aliases[i] : -1;
        auto donated = arg >= 0 && arg < int64_t(func.getNumArguments())
                           ? func.getArgAttrOfType<mlir::IntegerAttr>(arg, "mstep.aliased_result")
                           : nullptr;
        bool aliasOk = ret && donated && donated.getInt() >= 0 &&
                       donated.getInt() < int64_t(ret.getNumOperands()) &&
                       ret.getOperand(donated.getInt()) == result;
        if (!aliasOk)
          error(op.getLoc()) << "result #" << i << " of '" << op.getName() << "' has arena offset "
                             << offset
                             << " but no mstep.aliases_arg entry naming an argument donated to "
                                "it"
                             << rerun;
      }
    }
  }

  bool failed_ = false;
};

struct VerifyBackendContractPass : impl::VerifyBackendContractBase<VerifyBackendContractPass> {
  void runOnOperation() override {
    ContractChecker checker;
    checker.checkModule(getOperation());
    if (checker.failed()) return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace mstep::passes
