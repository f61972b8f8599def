// The kernels of a step's fusions as vectorized MLIR on memrefs: the loop
// nests of each fusion are planned (which results, which region ops, which
// dims collapse), then emitted as scf loops around one linalg.generic per
// tile, and the tiles are vectorized. See FusionKernelEmitter.h.
#include "lib/backends/cpu/FusionKernelEmitter.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/ir/dialect/ScalarForms.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace mstep::cpu {

namespace {

using namespace mlir;
namespace md = ::mstep::dialect;

/// Bytes of the widest value in one tile: two AVX-512 registers, so each
/// op of a tile is a couple of instructions with some independent work.
constexpr int64_t kTileBytes = 128;

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

Type elementTypeOf(Value value) { return cast<RankedTensorType>(value.getType()).getElementType(); }

int64_t numel(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

/// Bools are one byte each in memory (the runtime's layout); i1 only lives
/// in registers, converted at the loads and stores.
Type storageType(Type element) {
  return element.isInteger(1) ? IntegerType::get(element.getContext(), 8) : element;
}

/// Bytes per element as computed: bf16 and f16 compute in f32.
int64_t computeBytes(Type element) {
  if (md::isHalfFloat(element)) return 4;
  return std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
}

std::optional<DType> dtypeOf(Type element) {
  if (element.isF32()) return DType::f32;
  if (element.isF64()) return DType::f64;
  if (element.isBF16()) return DType::bf16;
  if (element.isF16()) return DType::f16;
  if (element.isInteger(1)) return DType::boolean;
  if (element.isInteger(32)) return DType::i32;
  if (element.isInteger(64)) return DType::i64;
  return std::nullopt;
}

std::optional<TensorType> tensorTypeOf(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || !ranked.hasStaticShape()) return std::nullopt;
  std::optional<DType> dtype = dtypeOf(ranked.getElementType());
  if (!dtype) return std::nullopt;
  return TensorType{Shape(absl::MakeConstSpan(ranked.getShape().data(), ranked.getRank())), *dtype};
}

/// One loop nest of a fusion (see FusionKernelEmitter.h).
struct NestPlan {
  SmallVector<int64_t> shape; // the results' shape
  SmallVector<unsigned> results;
  SmallVector<Operation*> ops;    // the region ops the results depend on, in program order
  SmallVector<unsigned> operands; // the block arguments they read, ascending
  SmallVector<int64_t> loop;      // the collapsed shape
  /// Per entry of `operands`, per dim of `loop`: read with the dim's index
  /// (true) or broadcast along it (false).
  SmallVector<SmallVector<bool>> indexed;
  int64_t vectorLength = 16;
};

/// Fills in the ops, operands, collapsed dims and tile width of `plan`,
/// whose shape and results are set.
void completePlan(md::FusionOp fusion, NestPlan& plan) {
  Block& region = fusion.getBody().front();
  Operation* yield = region.getTerminator();

  // 1. The backward slice of the results: the ops and arguments they read.
  llvm::SmallPtrSet<Operation*, 16> needed;
  SmallVector<bool> argumentRead(region.getNumArguments(), false);
  SmallVector<Value> work;
  for (unsigned r : plan.results) work.push_back(yield->getOperand(r));
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (auto argument = dyn_cast<BlockArgument>(value)) {
      argumentRead[argument.getArgNumber()] = true;
      continue;
    }
    Operation* def = value.getDefiningOp();
    if (needed.insert(def).second) llvm::append_range(work, def->getOperands());
  }
  for (Operation& op : region.without_terminator())
    if (needed.contains(&op)) plan.ops.push_back(&op);
  for (unsigned a = 0; a < region.getNumArguments(); ++a)
    if (argumentRead[a]) plan.operands.push_back(a);

  // 2. Collapse: numpy broadcasting aligns an operand's dims on the right;
  //    it is indexed by a dim where its size equals the result's. Size-1
  //    dims of the result are dropped; neighbours indexed alike merge.
  const int64_t rank = static_cast<int64_t>(plan.shape.size());
  plan.indexed.assign(plan.operands.size(), {});
  SmallVector<bool> previous;
  for (int64_t d = 0; d < rank; ++d) {
    if (plan.shape[d] == 1) continue;
    SmallVector<bool> pattern;
    for (unsigned a : plan.operands) {
      ArrayRef<int64_t> operandShape = shapeOf(region.getArgument(a));
      const int64_t offset = rank - static_cast<int64_t>(operandShape.size());
      pattern.push_back(d >= offset && operandShape[d - offset] == plan.shape[d]);
    }
    if (!plan.loop.empty() && pattern == previous) {
      plan.loop.back() *= plan.shape[d];
      continue;
    }
    plan.loop.push_back(plan.shape[d]);
    for (size_t i = 0; i < pattern.size(); ++i) plan.indexed[i].push_back(pattern[i]);
    previous = pattern;
  }

  // 3. Tile width from the widest element the nest touches.
  int64_t widest = 1;
  for (unsigned a : plan.operands)
    widest = std::max(widest, computeBytes(elementTypeOf(region.getArgument(a))));
  for (unsigned r : plan.results)
    widest = std::max(widest, computeBytes(elementTypeOf(yield->getOperand(r))));
  for (Operation* op : plan.ops)
    widest = std::max(widest, computeBytes(elementTypeOf(op->getResult(0))));
  plan.vectorLength = std::clamp<int64_t>(kTileBytes / widest, 8, 64);
}

/// The nests of `fusion`: one per distinct result shape, in run order.
/// A result the memory plan put over an operand has that operand's shape
/// (mayWriteResultOver), and every nest that reads the operand has a shape
/// it broadcasts to: more elements, or as many with more (leading 1) dims.
/// Running nests by decreasing element count, then rank, reads every
/// operand before a nest writes over it.
std::vector<NestPlan> planNests(md::FusionOp fusion) {
  std::vector<NestPlan> plans;
  Operation* yield = fusion.getBody().front().getTerminator();
  for (auto [r, value] : llvm::enumerate(yield->getOperands())) {
    ArrayRef<int64_t> shape = shapeOf(value);
    auto same = llvm::find_if(plans, [&](const NestPlan& p) { return ArrayRef(p.shape) == shape; });
    if (same != plans.end()) {
      same->results.push_back(r);
      continue;
    }
    NestPlan plan;
    plan.shape.assign(shape.begin(), shape.end());
    plan.results.push_back(r);
    plans.push_back(std::move(plan));
  }
  llvm::stable_sort(plans, [](const NestPlan& a, const NestPlan& b) {
    if (numel(a.shape) != numel(b.shape)) return numel(a.shape) > numel(b.shape);
    return a.shape.size() > b.shape.size();
  });
  for (NestPlan& plan : plans) completePlan(fusion, plan);
  return plans;
}

/// A tile's linalg.generic (of dynamic size, at most `vectorLength`),
/// vectorized once every kernel is emitted.
struct Tile {
  linalg::GenericOp generic;
  int64_t vectorLength;
};

/// Emits the kernel function of one nest.
class NestEmitter {
public:
  NestEmitter(md::FusionOp fusion, const NestPlan& plan, std::vector<Tile>& tiles)
      : fusion_(fusion), plan_(plan), tiles_(tiles) {}

  func::FuncOp emit(OpBuilder& moduleBuilder, StringRef name) {
    MLIRContext* context = moduleBuilder.getContext();
    Location loc = fusion_.getLoc();
    Block& region = fusion_.getBody().front();
    SmallVector<Type> argumentTypes;
    for (auto [i, a] : llvm::enumerate(plan_.operands)) {
      SmallVector<int64_t> dims;
      for (auto [d, size] : llvm::enumerate(plan_.loop))
        if (plan_.indexed[i][d]) dims.push_back(size);
      argumentTypes.push_back(
          MemRefType::get(dims, storageType(elementTypeOf(region.getArgument(a)))));
    }
    for (unsigned r : plan_.results)
      argumentTypes.push_back(
          MemRefType::get(plan_.loop, storageType(elementTypeOf(fusion_.getResult(r)))));
    argumentTypes.append(2, IntegerType::get(context, 64));
    auto func = moduleBuilder.create<func::FuncOp>(loc, name,
                                                   FunctionType::get(context, argumentTypes, {}));
    func_ = func;
    OpBuilder b = OpBuilder::atBlockEnd(func.addEntryBlock());
    b.create<func::ReturnOp>(loc);
    b.setInsertionPointToStart(&func.getBody().front());
    emitBody(b, loc);
    return func;
  }

private:
  Value operandMemref(size_t i) { return func_.getArgument(i); }
  Value resultMemref(size_t k) { return func_.getArgument(plan_.operands.size() + k); }

  Value index(OpBuilder& b, Location loc, int64_t value) {
    return b.create<arith::ConstantIndexOp>(loc, value);
  }

  void emitBody(OpBuilder& b, Location loc) {
    const size_t numArgs = func_.getNumArguments();
    Value begin =
        b.create<arith::IndexCastOp>(loc, b.getIndexType(), func_.getArgument(numArgs - 2));
    Value end = b.create<arith::IndexCastOp>(loc, b.getIndexType(), func_.getArgument(numArgs - 1));
    const int64_t rank = static_cast<int64_t>(plan_.loop.size());
    if (rank == 0) return emitSinglePoint(b, loc);

    // 1. The outer dims: the first over [begin, end), the others whole.
    for (int64_t d = 0; d + 1 < rank; ++d) {
      Value lower = d == 0 ? begin : index(b, loc, 0);
      Value upper = d == 0 ? end : index(b, loc, plan_.loop[d]);
      auto loop = b.create<scf::ForOp>(loc, lower, upper, index(b, loc, 1));
      b.setInsertionPointToStart(loop.getBody());
      outerIvs_.push_back(loop.getInductionVar());
    }
    // 2. One row: the operands broadcast along it are scalars.
    rowScalars_.assign(plan_.operands.size(), Value());
    for (size_t i = 0; i < plan_.operands.size(); ++i)
      if (!plan_.indexed[i].back())
        rowScalars_[i] = b.create<memref::LoadOp>(loc, operandMemref(i), outerIndices(i));
    // 3. The row in tiles of `vectorLength` elements, the last one partial.
    //    Every tile is masked: one copy of the body per nest halves the
    //    code to compile, and a masked load or store costs what a plain one
    //    does on AVX-512.
    Value lower = rank == 1 ? begin : index(b, loc, 0);
    Value upper = rank == 1 ? end : index(b, loc, plan_.loop.back());
    Value width = index(b, loc, plan_.vectorLength);
    auto tiles = b.create<scf::ForOp>(loc, lower, upper, width);
    b.setInsertionPointToStart(tiles.getBody());
    Value at = tiles.getInductionVar();
    Value size = b.create<arith::MinSIOp>(loc, b.create<arith::SubIOp>(loc, upper, at), width);
    emitTile(b, loc, at, size);
  }

  /// The outer loop indices that operand `i` is indexed by.
  SmallVector<Value> outerIndices(size_t i) {
    SmallVector<Value> indices;
    for (size_t d = 0; d < outerIvs_.size(); ++d)
      if (plan_.indexed[i][d]) indices.push_back(outerIvs_[d]);
    return indices;
  }

  /// The 1-D slice [at, at + size) of the innermost dim of `memref`, at
  /// `outer` in its other dims.
  Value rowSlice(OpBuilder& b, Location loc, Value memref, ArrayRef<Value> outer, Value at,
                 Value size) {
    auto type = cast<MemRefType>(memref.getType());
    SmallVector<OpFoldResult> offsets(outer.begin(), outer.end());
    offsets.push_back(at);
    SmallVector<OpFoldResult> sizes(outer.size(), b.getIndexAttr(1));
    sizes.push_back(size);
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    auto sliceType = cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
        {ShapedType::kDynamic}, type, offsets, sizes, strides));
    return b.create<memref::SubViewOp>(loc, sliceType, memref, offsets, sizes, strides);
  }

  void emitTile(OpBuilder& b, Location loc, Value at, Value size) {
    MLIRContext* context = b.getContext();
    AffineMap indexedMap = AffineMap::getMultiDimIdentityMap(1, context);
    AffineMap scalarMap = AffineMap::get(1, 0, {}, context);
    SmallVector<Value> inputs, outputs;
    SmallVector<AffineMap> maps;
    for (size_t i = 0; i < plan_.operands.size(); ++i) {
      if (rowScalars_[i]) {
        inputs.push_back(rowScalars_[i]);
        maps.push_back(scalarMap);
        continue;
      }
      inputs.push_back(rowSlice(b, loc, operandMemref(i), outerIndices(i), at, size));
      maps.push_back(indexedMap);
    }
    for (size_t k = 0; k < plan_.results.size(); ++k) {
      outputs.push_back(rowSlice(b, loc, resultMemref(k), outerIvs_, at, size));
      maps.push_back(indexedMap);
    }
    auto generic =
        b.create<linalg::GenericOp>(loc, TypeRange{}, inputs, outputs, maps,
                                    SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
                                    [&](OpBuilder& body, Location bodyLoc, ValueRange elements) {
                                      SmallVector<Value> results = computeElements(
                                          body, bodyLoc, elements.take_front(inputs.size()));
                                      body.create<linalg::YieldOp>(bodyLoc, results);
                                    });
    tiles_.push_back({generic, plan_.vectorLength});
  }

  /// A nest whose every dim has size 1: one element, plain loads and stores.
  void emitSinglePoint(OpBuilder& b, Location loc) {
    SmallVector<Value> elements;
    for (size_t i = 0; i < plan_.operands.size(); ++i)
      elements.push_back(b.create<memref::LoadOp>(loc, operandMemref(i)));
    SmallVector<Value> results = computeElements(b, loc, elements);
    for (auto [k, value] : llvm::enumerate(results))
      b.create<memref::StoreOp>(loc, value, resultMemref(k));
  }

  /// The nest's results at one position from its operands' elements there
  /// (in storage types): the region's ops replayed as scalar forms.
  SmallVector<Value> computeElements(OpBuilder& b, Location loc, ValueRange operandElements) {
    Block& region = fusion_.getBody().front();
    IRMapping elementOf;
    for (auto [i, a] : llvm::enumerate(plan_.operands)) {
      Value element = operandElements[i];
      if (elementTypeOf(region.getArgument(a)).isInteger(1))
        element = b.create<arith::TruncIOp>(loc, b.getI1Type(), element);
      elementOf.map(region.getArgument(a), element);
    }
    for (Operation* op : plan_.ops) {
      SmallVector<Value> operands;
      for (Value operand : op->getOperands()) operands.push_back(elementOf.lookup(operand));
      elementOf.map(op->getResult(0), md::emitScalarOp(b, op, operands));
    }
    SmallVector<Value> results;
    for (unsigned r : plan_.results) {
      Value element = elementOf.lookup(region.getTerminator()->getOperand(r));
      if (element.getType().isInteger(1))
        element = b.create<arith::ExtUIOp>(loc, b.getI8Type(), element);
      results.push_back(element);
    }
    return results;
  }

  md::FusionOp fusion_;
  const NestPlan& plan_;
  std::vector<Tile>& tiles_;
  func::FuncOp func_;
  SmallVector<Value> outerIvs_;
  SmallVector<Value> rowScalars_;
};

/// Vectorizes every tile, masked to its vector length. A tile the
/// vectorizer refuses (not expected) becomes scalar loops, so the kernel
/// stays correct.
void vectorizeTiles(MLIRContext* context, std::vector<Tile>& tiles) {
  IRRewriter rewriter(context);
  for (Tile& tile : tiles) {
    rewriter.setInsertionPoint(tile.generic);
    if (succeeded(linalg::vectorize(rewriter, tile.generic, {tile.vectorLength}, {false})))
      continue;
    if (succeeded(linalg::linalgOpToLoops(rewriter, tile.generic))) rewriter.eraseOp(tile.generic);
  }
}

/// Why `fusion` cannot be compiled, or nullopt.
std::optional<std::string> skipReason(md::FusionOp fusion) {
  for (Operation& op : fusion.getBody().front().without_terminator())
    if (!md::hasScalarForm(&op))
      return absl::StrCat("'", op.getName().getStringRef().str(), "' has no scalar form");
  for (Type type : fusion->getOperandTypes())
    if (!tensorTypeOf(type)) return "an operand is not a static tensor of a supported dtype";
  for (Type type : fusion->getResultTypes())
    if (!tensorTypeOf(type)) return "a result is not a static tensor of a supported dtype";
  return std::nullopt;
}

/// Equal for two fusions exactly when they compute the same results from
/// operands of the same types: the region's argument types, then each op's
/// name, operands (numbered), attributes and result types. A training step
/// repeats its fusions per layer and per parameter; each is compiled once.
std::string structuralKey(md::FusionOp fusion) {
  std::string key;
  llvm::raw_string_ostream os(key);
  Block& region = fusion.getBody().front();
  llvm::DenseMap<Value, unsigned> numberOf;
  for (BlockArgument argument : region.getArguments()) {
    numberOf[argument] = numberOf.size();
    os << argument.getType() << ",";
  }
  for (Operation& op : region) {
    os << op.getName() << "(";
    for (Value operand : op.getOperands()) os << numberOf.lookup(operand) << ",";
    os << ")" << op.getAttrDictionary() << ":";
    for (Value result : op.getResults()) {
      os << result.getType() << ",";
      const unsigned number = numberOf.size();
      numberOf[result] = number;
    }
    os << ";";
  }
  return key;
}

} // namespace

EmittedKernels emit_fusion_kernels(func::FuncOp step, ModuleOp kernels) {
  EmittedKernels emitted;
  std::vector<Tile> tiles;
  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(kernels.getBody());
  llvm::StringMap<size_t> firstWithKey; // structural key -> fusion number
  for (Operation& op : step.getBody().front()) {
    auto fusion = dyn_cast<md::FusionOp>(op);
    if (!fusion) continue;
    const size_t k = emitted.fusions.size();
    FusionInfo& info = emitted.fusions.emplace_back();
    if (std::optional<std::string> reason = skipReason(fusion)) {
      info.skip_reason = *reason;
      continue;
    }
    info.compiled = true;
    for (Type type : fusion->getOperandTypes()) info.operand_types.push_back(*tensorTypeOf(type));
    for (Type type : fusion->getResultTypes()) info.result_types.push_back(*tensorTypeOf(type));
    auto [first, isNew] = firstWithKey.try_emplace(structuralKey(fusion), k);
    if (!isNew) {
      info.nests = emitted.fusions[first->second].nests;
      continue;
    }
    std::vector<NestPlan> plans = planNests(fusion);
    for (auto [n, plan] : llvm::enumerate(plans)) {
      NestSignature signature;
      signature.kernel = absl::StrCat("fusion", k, "_nest", n);
      signature.entry = absl::StrCat("mstep_", signature.kernel);
      signature.operands.assign(plan.operands.begin(), plan.operands.end());
      signature.results.assign(plan.results.begin(), plan.results.end());
      NestEmitter(fusion, plan, tiles).emit(moduleBuilder, signature.kernel);

      FusionNestInfo nest;
      nest.symbol = signature.entry;
      nest.outer = plan.loop.empty() ? 1 : plan.loop.front();
      nest.elements = numel(plan.shape);
      nest.grain = plan.loop.size() == 1 ? plan.vectorLength : 1;
      info.nests.push_back(std::move(nest));
      emitted.nests.push_back(std::move(signature));
    }
  }
  vectorizeTiles(kernels.getContext(), tiles);
  return emitted;
}

} // namespace mstep::cpu
