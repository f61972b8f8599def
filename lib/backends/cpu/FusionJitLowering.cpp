// From vectorized kernels on memrefs to one object file:
// 1. Math: integer pow expanded (no division by zero), sin/cos to libm
//    calls, the other f32 transcendentals to polynomials, bf16 conversions
//    to integer ops (round to nearest even, like mstep's BFloat16), the f64
//    transcendentals LLVM has no exact intrinsic for to libm calls.
// 2. The MLIR lowering tail of MLIR_NOTES.md, with bare-pointer memrefs.
// 3. LLVM IR plus one entry per nest that unpacks the pointer arrays.
// 4. LLVM -O2 (no unrolling) and codegen for the host CPU (AVX-512 where
//    it has it), position-independent, for a shared object.
#include "lib/backends/cpu/FusionJitLowering.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "lib/backends/cpu/HostCpuFeatures.h"
#include "lib/passes/IntegerPowExpansion.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"
#include "mstep/ir/MlirParse.h"

namespace mstep::cpu {

namespace {

using namespace mlir;

/// Rewrites the ops `select` picks into libm calls (vector ops unrolled).
LogicalResult callLibm(ModuleOp kernels, llvm::function_ref<bool(Operation*)> select) {
  SmallVector<Operation*> ops;
  kernels.walk([&](Operation* op) {
    if (select(op)) ops.push_back(op);
  });
  if (ops.empty()) return success();
  RewritePatternSet libm(kernels.getContext());
  populateMathToLibmConversionPatterns(libm);
  GreedyRewriteConfig config;
  config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
  return applyOpPatternsAndFold(ops, std::move(libm), config);
}

LogicalResult rewriteMath(ModuleOp kernels) {
  MLIRContext* context = kernels.getContext();
  // 1. sin and cos: libm, whose range reduction stays exact for large
  //    arguments (the polynomial forms reduce in f32).
  if (failed(callLibm(kernels, [](Operation* op) { return isa<math::SinOp, math::CosOp>(op); })))
    return failure();
  // 2. The rest in one greedy walk.
  RewritePatternSet patterns(context);
  passes::populate_integer_pow_expansion(patterns);
  populateMathPolynomialApproximationPatterns(patterns);
  arith::populateExpandBFloat16Patterns(patterns);
  if (failed(applyPatternsAndFoldGreedily(kernels, std::move(patterns)))) return failure();
  // 3. What is left without a polynomial (f64) and without an exact LLVM
  //    intrinsic: libm. (convert-math-to-llvm has log1p as log(1 + x).)
  return callLibm(kernels, [](Operation* op) {
    return isa<math::ErfOp, math::TanhOp, math::Log1pOp, math::ExpM1Op>(op);
  });
}

void buildLoweringPipeline(PassManager& pm) {
  pm.addNestedPass<func::FuncOp>(vector::createLowerVectorMaskPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// Adds `void entry(ptr operands, ptr results, i64 begin, i64 end)` for
/// each nest: it loads the pointers the kernel takes and calls it. The
/// kernel becomes internal, so the optimizer inlines it into its entry.
absl::Status addEntries(llvm::Module& module, const std::vector<NestSignature>& nests) {
  llvm::LLVMContext& context = module.getContext();
  llvm::Type* ptr = llvm::PointerType::getUnqual(context);
  llvm::Type* i64 = llvm::Type::getInt64Ty(context);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, ptr, i64, i64}, false);
  for (const NestSignature& nest : nests) {
    llvm::Function* kernel = module.getFunction(nest.kernel);
    if (!kernel || kernel->arg_size() != nest.operands.size() + nest.results.size() + 2)
      return absl::InternalError(absl::StrCat("fusion JIT: kernel '", nest.kernel,
                                              "' is missing or has an unexpected signature"));
    kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto* entry =
        llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, nest.entry, module);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", entry));
    llvm::SmallVector<llvm::Value*> arguments;
    auto load = [&](llvm::Value* array, unsigned position) {
      arguments.push_back(b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, array, position)));
    };
    for (unsigned operand : nest.operands) load(entry->getArg(0), operand);
    for (unsigned result : nest.results) load(entry->getArg(1), result);
    arguments.push_back(entry->getArg(2));
    arguments.push_back(entry->getArg(3));
    b.CreateCall(kernel, arguments);
    b.CreateRetVoid();
  }
  return absl::OkStatus();
}

/// LLVM's -O2 function pipeline without its loop unroller and vectorizers:
/// the kernels are vector code already, and unrolling only grows what
/// codegen must compile (a third more time, no faster kernel).
void optimize(llvm::Module& module, llvm::TargetMachine& machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, modules);
}

} // namespace

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

void declare_kernel_dialects(DialectRegistry& registry) {
  registry.insert<affine::AffineDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, linalg::LinalgDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect, ub::UBDialect, vector::VectorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

FusionTarget host_target() {
  FusionTarget target;
  target.arch = llvm::Triple(llvm::sys::getProcessTriple()).getArchName().str();
  target.cpu = llvm::sys::getHostCPUName().str();
  for (const auto& feature : llvm::sys::getHostCPUFeatures())
    if (feature.getValue() && knows_cpu_feature(feature.getKey().str()))
      target.features.push_back(feature.getKey().str());
  std::sort(target.features.begin(), target.features.end());
  return target;
}

absl::StatusOr<std::string> generate_object(ModuleOp kernels,
                                            const std::vector<NestSignature>& nests,
                                            const FusionTarget& target,
                                            const ExtendLlvmModule& extend) {
  MLIRContext* context = kernels.getContext();
  DiagnosticCollector diagnostics(*context);

  // 1-2. MLIR.
  if (failed(rewriteMath(kernels)))
    return absl::InternalError(
        absl::StrCat("fusion JIT: rewriting math ops failed:", diagnostics.text()));
  if (failed(verify(kernels)))
    return absl::InternalError(
        absl::StrCat("fusion JIT: the emitted kernels do not verify:", diagnostics.text()));
  PassManager pm(context);
  // Verified once above: checking after every pass doubles the time.
  pm.enableVerifier(false);
  buildLoweringPipeline(pm);
  if (failed(pm.run(kernels)))
    return absl::InternalError(
        absl::StrCat("fusion JIT: lowering the kernels to LLVM failed:", diagnostics.text()));

  // 3. LLVM IR for the target: its features on, every other feature LLVM
  //    detects on this host off (what the runtime cannot check).
  initialize_native_target();
  const std::string triple = llvm::sys::getProcessTriple();
  std::string lookupError;
  const llvm::Target* llvmTarget = llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!llvmTarget)
    return absl::InternalError(
        absl::StrCat("fusion JIT: no target for this host (", triple, "): ", lookupError));
  llvm::SubtargetFeatures features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature.getKey(),
                        std::binary_search(target.features.begin(), target.features.end(),
                                           feature.getKey().str()));
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, target.cpu, features.getString(), llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!machine)
    return absl::InternalError(absl::StrCat("fusion JIT: no target machine for ", triple));
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "mstep_fusions");
  if (!module)
    return absl::InternalError(
        absl::StrCat("fusion JIT: translation to LLVM IR failed:", diagnostics.text()));
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(machine->getTargetTriple().getTriple());
  if (absl::Status status = addEntries(*module, nests); !status.ok()) return status;
  if (extend)
    if (absl::Status status = extend(*module); !status.ok()) return status;

  // 4. Optimize and emit.
  optimize(*module, *machine);
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return absl::InternalError("fusion JIT: the host target cannot emit object files");
  codegen.run(*module);
  return std::string(buffer.data(), buffer.size());
}

} // namespace mstep::cpu
