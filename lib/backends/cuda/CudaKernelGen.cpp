// generate_op_kernels: see CudaKernelGen.h for the pipeline.
#include "lib/backends/cuda/CudaKernelGen.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaBlockRows.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaMathExpansion.h"
#include "lib/backends/cuda/CudaOpLoops.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/passes/Passes.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
// mstep has a Value and a TensorType of its own.
using mlir::Value;

std::string op_name(Operation* op) { return op->getName().getStringRef().str(); }

std::string print(Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

/// The error for `op` that the pipeline could not take to the GPU.
absl::Status not_lowered(Operation* op, absl::string_view why) {
  return not_lowered_for_cuda(op, why);
}

/// func @name(params...) on memrefs of the tensor types `params`, with an
/// empty entry block.
func::FuncOp func_on_buffers(Operation* op, StringRef name, TypeRange params, ModuleOp module) {
  MLIRContext* context = op->getContext();
  SmallVector<Type> args;
  for (Type type : params) {
    auto tensor = cast<RankedTensorType>(type);
    args.push_back(MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
  OpBuilder builder(context);
  builder.setInsertionPointToEnd(module.getBody());
  auto func =
      builder.create<func::FuncOp>(op->getLoc(), name, FunctionType::get(context, args, {}));
  func.addEntryBlock();
  return func;
}

/// func @name(inputs..., outputs...) on memrefs, with an empty entry block.
func::FuncOp kernel_func_signature(Operation* op, StringRef name, ModuleOp module) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  return func_on_buffers(op, name, types, module);
}

/// func @name(inputs..., outputs...) on memrefs holding a clone of `op`:
/// its operands read from the input memrefs, its results materialized in
/// the output memrefs.
func::FuncOp build_kernel_func(Operation* op, StringRef name, ModuleOp module) {
  Location loc = op->getLoc();
  func::FuncOp func = kernel_func_signature(op, name, module);
  Block* entry = &func.getBody().front();
  OpBuilder builder(op->getContext());
  builder.setInsertionPointToStart(entry);
  IRMapping mapping;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    mapping.map(operand, builder.create<bufferization::ToTensorOp>(
                             loc, operand.getType(), entry->getArgument(i), /*restrict=*/true));
  Operation* clone = builder.clone(*op, mapping);
  const unsigned num_operands = op->getNumOperands();
  for (auto [i, result] : llvm::enumerate(clone->getResults()))
    builder.create<bufferization::MaterializeInDestinationOp>(
        loc, TypeRange{}, result, entry->getArgument(num_operands + i), /*restrict=*/true,
        /*writable=*/true);
  builder.create<func::ReturnOp>(loc);
  return func;
}

/// A result computed as tensor.expand_shape(x) (a reduction's keepdim) is
/// materialized as x into the output memref collapsed the same way, so
/// that the reduction writes the output in place (empty-tensor
/// elimination does not look through the reshape).
void write_reshapes_in_place(func::FuncOp func) {
  SmallVector<bufferization::MaterializeInDestinationOp> stores;
  func.walk([&](bufferization::MaterializeInDestinationOp store) { stores.push_back(store); });
  for (auto store : stores) {
    auto expand = store.getSource().getDefiningOp<tensor::ExpandShapeOp>();
    if (!expand || !isa<BaseMemRefType>(store.getDest().getType())) continue;
    OpBuilder builder(store);
    Value collapsed = builder.create<memref::CollapseShapeOp>(
        store.getLoc(), store.getDest(), expand.getReassociationIndices());
    builder.create<bufferization::MaterializeInDestinationOp>(
        store.getLoc(), TypeRange{}, expand.getSrc(), collapsed, /*restrict=*/true,
        /*writable=*/true);
    store.erase();
    if (expand->use_empty()) expand.erase();
  }
}

/// A buffer that is computed and then copied whole into an output
/// (`memref.copy %alloc, %out`: where empty-tensor elimination left one)
/// becomes the output itself.
void forward_result_copies(func::FuncOp func) {
  Block& entry = func.getBody().front();
  SmallVector<memref::CopyOp> copies;
  func.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
  for (memref::CopyOp copy : copies) {
    auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    Value out = copy.getTarget();
    if (!alloc || alloc.getType() != out.getType() || alloc->getBlock() != &entry) continue;
    // The output (an argument, or a view of one) must exist where the
    // buffer is created.
    if (Operation* view = out.getDefiningOp()) {
      if (view->getNumOperands() != 1 || !isa<BlockArgument>(view->getOperand(0))) continue;
      view->moveBefore(alloc);
    }
    copy.erase();
    alloc.getResult().replaceAllUsesWith(out);
    alloc.erase();
  }
}

/// Runs `pm` on `module`; an error names `op` and `stage` with the
/// diagnostics.
absl::Status run(PassManager& pm, ModuleOp module, Operation* op, absl::string_view stage,
                 const DiagnosticCollector& diagnostics) {
  if (succeeded(pm.run(module))) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuda: generating the kernels of op '", op_name(op),
                                          "' failed in ", stage, ":", diagnostics.text()));
}

/// Puts every linalg.generic's parallel dimensions before its reduction
/// dimensions (a column sum), so that its loops start with a parallel
/// loop: the GPU threads, each running the reduction alone.
void parallel_dims_first(func::FuncOp func) {
  SmallVector<linalg::GenericOp> generics;
  func.walk([&](linalg::GenericOp generic) { generics.push_back(generic); });
  IRRewriter rewriter(func.getContext());
  for (linalg::GenericOp generic : generics) {
    SmallVector<unsigned> order;
    const auto iterators = generic.getIteratorTypesArray();
    for (unsigned d = 0; d < iterators.size(); ++d)
      if (iterators[d] == utils::IteratorType::parallel) order.push_back(d);
    for (unsigned d = 0; d < iterators.size(); ++d)
      if (iterators[d] != utils::IteratorType::parallel) order.push_back(d);
    bool identity = true;
    for (unsigned d = 0; d < order.size(); ++d) identity &= order[d] == d;
    if (identity) continue;
    rewriter.setInsertionPoint(generic);
    (void)linalg::interchangeGenericOp(rewriter, generic, order);
  }
}

/// Collapses every top-level scf.parallel of `func` to one dimension and
/// tiles it by `threads`, the loop the GPU mapping turns into blocks of
/// threads. Work outside a parallel loop (a reduction to a scalar, a
/// rank-0 result) runs in a single-iteration loop: one thread.
void collapse_and_tile(func::FuncOp func, int threads) {
  Block& body = func.getBody().front();
  OpBuilder builder(func.getContext());
  Location loc = func.getLoc();
  // Runs of serial work, each moved into a loop of one iteration.
  auto serial = [](Operation& op) {
    // (An alloca: a block-rows loop's shared buffer, CudaBlockRows.h.)
    return !isa<scf::ParallelOp, arith::ConstantOp, func::ReturnOp, memref::CollapseShapeOp,
                memref::ExpandShapeOp, memref::AllocaOp>(op);
  };
  for (Operation* op = &body.front(); op != nullptr;) {
    if (!serial(*op)) {
      op = op->getNextNode();
      continue;
    }
    // The run goes on to the next loop: a constant or view between its ops
    // (the canonicalizer leaves them anywhere) moves before it rather than
    // splitting it, so that the run's values stay within one loop and the
    // constant stays visible to the later loops that use it too.
    SmallVector<Operation*> run;
    Operation* after = op;
    for (; !isa<scf::ParallelOp, func::ReturnOp>(after); after = after->getNextNode())
      if (serial(*after)) run.push_back(after);
    for (Operation* inner = op->getNextNode(); inner != after;) {
      Operation* next = inner->getNextNode();
      if (!serial(*inner)) inner->moveBefore(op);
      inner = next;
    }
    builder.setInsertionPoint(op);
    Value zero = builder.create<arith::ConstantIndexOp>(loc, 0);
    Value one = builder.create<arith::ConstantIndexOp>(loc, 1);
    auto single = builder.create<scf::ParallelOp>(loc, ValueRange{zero}, ValueRange{one},
                                                  ValueRange{one});
    Operation* terminator = single.getBody()->getTerminator();
    for (Operation* inner : run) inner->moveBefore(terminator);
    op = after;
  }
  SmallVector<scf::ParallelOp> loops;
  for (Operation& inner : body)
    if (auto loop = dyn_cast<scf::ParallelOp>(inner)) loops.push_back(loop);
  IRRewriter rewriter(func.getContext());
  for (scf::ParallelOp loop : loops) {
    const unsigned rank = loop.getNumLoops();
    // A block per row (CudaBlockRows.h): mapped as it is.
    if (loop->hasAttr(loops::kBlockThreadsAttr)) continue;
    // Serial work: one block of one thread.
    if (rank == 1 && getConstantIntValue(loop.getUpperBound()[0]) == 1 &&
        getConstantIntValue(loop.getLowerBound()[0]) == 0)
      continue;
    Operation* next = loop->getNextNode();
    if (rank > 1) {
      std::vector<unsigned> all(rank);
      for (unsigned d = 0; d < rank; ++d) all[d] = d;
      collapseParallelLoops(rewriter, loop, {all});
      loop = cast<scf::ParallelOp>(next->getPrevNode());
    }
    scf::tileParallelLoop(loop, {threads}, /*noMinMaxBounds=*/true);
  }
}

/// Bufferization turns a constant tensor (a fusion's mstep.constant) into
/// a memref.global read with memref.get_global: a host symbol the kernels
/// cannot take. Each load of a splat constant global becomes the constant
/// itself; any other use is an error.
absl::Status fold_constant_globals(Operation* op, func::FuncOp func, ModuleOp module) {
  SmallVector<memref::GetGlobalOp> reads;
  func.walk([&](memref::GetGlobalOp read) { reads.push_back(read); });
  for (memref::GetGlobalOp read : reads) {
    auto global = module.lookupSymbol<memref::GlobalOp>(read.getName());
    auto value = global ? dyn_cast_or_null<SplatElementsAttr>(global.getConstantInitValue())
                        : SplatElementsAttr();
    for (OpOperand& use : llvm::make_early_inc_range(read->getUses())) {
      auto load = dyn_cast<memref::LoadOp>(use.getOwner());
      if (!load || !value) continue;
      OpBuilder builder(load);
      Value constant = builder.create<arith::ConstantOp>(
          load.getLoc(), cast<TypedAttr>(value.getSplatValue<Attribute>()));
      load.getResult().replaceAllUsesWith(constant);
      load.erase();
    }
    if (!read->use_empty())
      return not_lowered(op, absl::StrCat("it reads the constant buffer '", read.getName().str(),
                                          "' other than element by element"));
    read.erase();
    if (global && SymbolTable::symbolKnownUseEmpty(global, module)) global.erase();
  }
  return absl::OkStatus();
}

/// Steps 1 and 2 of the pipeline for an op mstep-lower-to-linalg lowers:
/// linalg on tensors, then buffers and parallel loops writing the outputs
/// in place.
absl::Status lower_through_linalg(Operation* op, func::FuncOp func, ModuleOp module,
                                  const DiagnosticCollector& diagnostics) {
  MLIRContext* context = op->getContext();
  // 1. linalg on tensors: every mstep op must be gone.
  {
    PassManager pm(context);
    pm.nest<func::FuncOp>().addPass(passes::createLowerToLinalg());
    MSTEP_RETURN_IF_ERROR(run(pm, module, op, "mstep-lower-to-linalg", diagnostics));
  }
  Operation* left = nullptr;
  func.walk([&](Operation* inner) {
    if (!left && isa_and_nonnull<mstep::dialect::MstepDialect>(inner->getDialect())) left = inner;
  });
  if (left != nullptr)
    return not_lowered(op, left == op || op_name(left) == op_name(op)
                               ? "mstep-lower-to-linalg has no pattern for it"
                               : absl::StrCat("it holds '", op_name(left),
                                              "', which mstep-lower-to-linalg does not lower"));

  // 2. Buffers and parallel loops, written in place into the outputs.
  write_reshapes_in_place(func);
  parallel_dims_first(func);
  {
    PassManager pm(context);
    pm.addPass(bufferization::createEmptyTensorEliminationPass());
    pm.addPass(bufferization::createOneShotBufferizePass());
    pm.addPass(createCanonicalizerPass());
    pm.nest<func::FuncOp>().addPass(createConvertLinalgToParallelLoopsPass());
    pm.addPass(createCanonicalizerPass());
    MSTEP_RETURN_IF_ERROR(run(pm, module, op, "bufferization", diagnostics));
  }
  forward_result_copies(func);
  return fold_constant_globals(op, func, module);
}

/// Each buffer the lowering allocates between the op's kernels (a fusion
/// whose results differ in shape: a broadcast operand computed once)
/// becomes a parameter of the func after the outputs, so that the plan
/// gives it a device buffer of its own. Their types, in parameter order;
/// `error_word`: which is the executable's error word (-1: none).
absl::StatusOr<std::vector<mstep::TensorType>> hoist_temporaries(Operation* op, func::FuncOp func,
                                                                  int* error_word) {
  std::vector<mstep::TensorType> types;
  *error_word = -1;
  SmallVector<memref::AllocOp> allocs;
  func.walk([&](memref::AllocOp alloc) { allocs.push_back(alloc); });
  Block& entry = func.getBody().front();
  for (memref::AllocOp alloc : allocs) {
    MemRefType type = alloc.getType();
    if (alloc->getBlock() != &entry || !type.hasStaticShape() || !type.getLayout().isIdentity())
      return not_lowered(op, "it needs a temporary device buffer of dynamic shape or layout, "
                             "or inside a loop");
    MSTEP_ASSIGN_OR_RETURN(
        mstep::TensorType tensor,
        tensor_type_from_mlir(RankedTensorType::get(type.getShape(), type.getElementType())));
    if (alloc->hasAttr(loops::Nest::kErrorWordAttr)) *error_word = static_cast<int>(types.size());
    types.push_back(tensor);
    BlockArgument arg = entry.addArgument(type, alloc.getLoc());
    alloc.getResult().replaceAllUsesWith(arg);
    alloc.erase();
  }
  func.setType(FunctionType::get(func.getContext(), entry.getArgumentTypes(), {}));
  return types;
}

/// The constant `value` as unsigned, or 0 when it is not a constant.
unsigned constant_of(Value value) {
  std::optional<int64_t> constant = getConstantIntValue(value);
  return constant && *constant > 0 && *constant <= UINT32_MAX ? static_cast<unsigned>(*constant) : 0;
}

/// The tail of the pipeline from a func on buffers holding the op's
/// loops or linalg: temporaries, tiling, GPU mapping, NVVM and PTX.
absl::StatusOr<GeneratedKernels> kernels_of_func(Operation* op, func::FuncOp func, ModuleOp module,
                                                 const CudaCodegenOptions& options,
                                                 const DiagnosticCollector& diagnostics) {
  MLIRContext* context = op->getContext();
  GeneratedKernels generated;
  MSTEP_ASSIGN_OR_RETURN(generated.temporaries,
                         hoist_temporaries(op, func, &generated.error_word));
  expand_math_for_nvvm(func);
  collapse_and_tile(func, options.threads);
  generated.tiled_loops = print(module.getOperation());

  // 3. The GPU mapping, outlining and NVVM.
  loops::map_block_rows(func);
  {
    PassManager pm(context);
    OpPassManager& fpm = pm.nest<func::FuncOp>();
    fpm.addPass(createGpuMapParallelLoopsPass());
    fpm.addPass(createParallelLoopToGpuPass());
    pm.addPass(createCanonicalizerPass());
    pm.nest<func::FuncOp>().addPass(createGpuLauchSinkIndexComputationsPass());
    pm.addPass(createGpuKernelOutliningPass());
    GpuNVVMAttachTargetOptions target;
    target.chip = options.chip;
    target.features = options.ptx_features;
    target.optLevel = 3;
    pm.addPass(createGpuNVVMAttachTarget(target));
    pm.addPass(createLowerAffinePass());
    pm.addPass(createConvertSCFToCFPass());
    ConvertGpuOpsToNVVMOpsOptions nvvm;
    nvvm.useBarePtrCallConv = true;
    pm.nest<gpu::GPUModuleOp>().addPass(createConvertGpuOpsToNVVMOps(nvvm));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    MSTEP_RETURN_IF_ERROR(run(pm, module, op, "the GPU mapping and NVVM", diagnostics));
  }
  // The host function is now only launches: anything else would run on
  // the host, which the cuda executable does not do.
  for (Operation& host : func.getBody().front()) {
    // A reshape of a buffer is the same pointer (static, contiguous).
    if (isa<arith::ConstantOp, func::ReturnOp, memref::CollapseShapeOp, memref::ExpandShapeOp>(host))
      continue;
    auto launch = dyn_cast<gpu::LaunchFuncOp>(host);
    if (!launch)
      return not_lowered(op, absl::StrCat("'", op_name(&host),
                                          "' is left on the host after the GPU mapping"));
    GeneratedLaunch out;
    out.kernel = launch.getKernelName().str();
    const gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    const gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    out.grid = {constant_of(grid.x), constant_of(grid.y), constant_of(grid.z)};
    out.block = {constant_of(block.x), constant_of(block.y), constant_of(block.z)};
    for (const std::array<unsigned, 3>* sizes : {&out.grid, &out.block})
      for (unsigned size : *sizes)
        if (size == 0)
          return not_lowered(op, "a launch's grid or block size is not a positive constant");
    for (Value arg : launch.getKernelOperands()) {
      if (Operation* view = arg.getDefiningOp();
          view && isa<memref::CollapseShapeOp, memref::ExpandShapeOp>(view))
        arg = view->getOperand(0);
      auto block_arg = dyn_cast<BlockArgument>(arg);
      if (!block_arg || block_arg.getOwner() != &func.getBody().front())
        return not_lowered(op, "a kernel argument is not one of its buffers");
      out.args.push_back(block_arg.getArgNumber());
    }
    out.ptx = launch.getKernelModuleName().str();  // replaced by the PTX below
    generated.launches.push_back(std::move(out));
  }

  // 4. PTX.
  {
    PassManager pm(context);
    GpuModuleToBinaryPassOptions binary;
    binary.toolkitPath = options.toolkit;
    binary.compilationTarget = "isa";
    pm.addPass(createGpuModuleToBinaryPass(binary));
    MSTEP_RETURN_IF_ERROR(run(pm, module, op, "gpu-module-to-binary (PTX)", diagnostics));
  }
  for (GeneratedLaunch& launch : generated.launches) {
    auto binary = module.lookupSymbol<gpu::BinaryOp>(launch.ptx);
    if (!binary || binary.getObjects().empty())
      return absl::InternalError(absl::StrCat("cuda: no PTX for kernel ", launch.kernel,
                                              " of op '", op_name(op), "'"));
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    std::string ptx = object.getObject().getValue().str();
    // The PTX ends in a NUL that ptxas does not want.
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    launch.ptx = std::move(ptx);
  }
  return generated;
}

} // namespace

void declare_cuda_codegen_dialects(DialectRegistry& registry) {
  registry.insert<affine::AffineDialect, arith::ArithDialect, bufferization::BufferizationDialect,
                  cf::ControlFlowDialect, func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  linalg::LinalgDialect, math::MathDialect, memref::MemRefDialect,
                  NVVM::NVVMDialect, scf::SCFDialect, tensor::TensorDialect, ub::UBDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  // convert-gpu-to-nvvm takes its patterns from the dialects' interfaces.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  // gpu-module-to-binary: the NVVM target and the LLVM IR translations.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

absl::StatusOr<GeneratedKernels> generate_op_kernels(Operation* op, absl::string_view name,
                                                     const CudaCodegenOptions& options) {
  MLIRContext* context = op->getContext();
  DiagnosticCollector diagnostics(*context);
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type type : types)
    if (auto tensor = dyn_cast<RankedTensorType>(type); !tensor || !tensor.hasStaticShape())
      return not_lowered(op, "its operands and results must be tensors of static shape");
  OwningOpRef<ModuleOp> module = ModuleOp::create(op->getLoc());
  func::FuncOp func;
  if (builds_op_loops(op, options)) {
    // Loops built on the buffers directly (CudaOpLoops.h).
    func = kernel_func_signature(op, StringRef(name.data(), name.size()), *module);
    MSTEP_RETURN_IF_ERROR(build_op_loops(op, func, options));
  } else {
    func = build_kernel_func(op, StringRef(name.data(), name.size()), *module);
    MSTEP_RETURN_IF_ERROR(lower_through_linalg(op, func, *module, diagnostics));
  }
  return kernels_of_func(op, func, *module, options, diagnostics);
}

absl::StatusOr<GeneratedKernels>
generate_loop_kernels(Operation* op, absl::string_view name, TypeRange params,
                      function_ref<absl::Status(func::FuncOp)> build,
                      const CudaCodegenOptions& options) {
  MLIRContext* context = op->getContext();
  DiagnosticCollector diagnostics(*context);
  for (Type type : params)
    if (auto tensor = dyn_cast<RankedTensorType>(type); !tensor || !tensor.hasStaticShape())
      return not_lowered(op, "its kernels' buffers must be tensors of static shape");
  OwningOpRef<ModuleOp> module = ModuleOp::create(op->getLoc());
  func::FuncOp func = func_on_buffers(op, StringRef(name.data(), name.size()), params, *module);
  MSTEP_RETURN_IF_ERROR(build(func));
  return kernels_of_func(op, func, *module, options, diagnostics);
}

}  // namespace mstep::cuda
