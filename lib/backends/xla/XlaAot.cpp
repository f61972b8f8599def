// compile_xla_aot (XlaCompile.h): the step function of compile_xla_program
// with the runtime table bound at compile time. The stand-alone entry
//   i32 mstep_step(ptr inputs, ptr outputs, ptr temp)
// calls the step function with a constant XlaRuntimeCalls of functions
// defined in the same object: gemm_f32 as a loop over dnnl_sgemm,
// gemm_bf16, matmul_f32 and gemm_bf16_f32 as the runtime's
// mstep_xla_gemm_bf16, mstep_xla_gemm_f32 and mstep_xla_gemm_bf16_f32 (C
// over oneDNN's C API, linked in from their static library), the parallel split as one call of
// the nest on the calling thread (no OpenMP in the object), and a callout
// that fails (never called: a step with callouts is refused). After LLVM's -O2 the table's loads
// fold and the calls are direct.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/SharedObjectLink.h"
#include "lib/backends/xla/XlaCompile.h"
#include "lib/backends/xla/XlaConvShape.h"
#include "lib/compiler/Compiler.h"
#include "mstep/core/Error.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "mlir/IR/BuiltinOps.h"

#ifndef MSTEP_DNNL_LIBRARY
#error "MSTEP_DNNL_LIBRARY: the build defines oneDNN's shared library (lib/backends/xla/CMakeLists.txt)"
#endif
#ifndef MSTEP_XLA_GEMM_LIBRARY
#error "MSTEP_XLA_GEMM_LIBRARY: the build defines the bf16 gemm's static library (lib/backends/xla/CMakeLists.txt)"
#endif

namespace mstep::xla {

namespace {

/// Refuses a step that calls out, naming each op and its node.
absl::Status check_no_callouts(const XlaProgram& program) {
  if (program.callouts.empty()) return absl::OkStatus();
  std::vector<std::string> ops;
  for (uint32_t node : program.callouts)
    ops.push_back(absl::StrCat(op_name(program.graph.nodes[node].op), " (%", node, ")"));
  return absl::FailedPreconditionError(absl::StrCat(
      "the step function calls out to the runtime for ops it does not compute itself: ",
      absl::StrJoin(ops, ", "),
      "; a stand-alone step has no runtime to call, so it cannot be written until every op is "
      "compiled into the function"));
}

/// XlaRuntimeCalls::gemm_bf16 (`dtype` bf16) or matmul_f32 (f32):
/// mstep_xla_gemm_bf16 or mstep_xla_gemm_f32 (XlaGemm.h), the
/// runtime's own definitions, linked in from their static library; null
/// for a step without matmuls of that dtype (the object then does not
/// carry it).
llvm::Constant* library_gemm(llvm::Module& module, const XlaProgram& program, DType dtype) {
  auto* ptr = llvm::PointerType::getUnqual(module.getContext());
  bool any = false;
  for (const GraphNode& node : program.graph.nodes) {
    std::optional<GemmShape> gemm = native_gemm_shape(program.graph, node);
    any |= gemm && gemm->dtype == dtype;
  }
  if (!any) return llvm::ConstantPointerNull::get(ptr);
  auto* i64 = llvm::Type::getInt64Ty(module.getContext());
  auto* type = llvm::FunctionType::get(
      llvm::Type::getVoidTy(module.getContext()),
      {i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, ptr, ptr, i64, ptr}, false);
  auto* gemm = llvm::Function::Create(
      type, llvm::GlobalValue::ExternalLinkage,
      dtype == DType::bf16 ? "mstep_xla_gemm_bf16" : "mstep_xla_gemm_f32", module);
  gemm->setVisibility(llvm::GlobalValue::HiddenVisibility); // not exported
  return gemm;
}

/// XlaRuntimeCalls::gemm_bf16_f32: mstep_xla_gemm_bf16_f32 (XlaGemm.h),
/// linked in from the gemm library; null for a step without bf16
/// convolutions on the im2col + gemm path.
llvm::Constant* library_conv_gemm(llvm::Module& module, const XlaProgram& program) {
  auto* ptr = llvm::PointerType::getUnqual(module.getContext());
  bool any = false;
  for (const GraphNode& node : program.graph.nodes) {
    std::optional<ConvGemmPlan> plan = conv_gemm_plan(program.graph, node);
    any |= plan && plan->conv.dtype == DType::bf16;
  }
  if (!any) return llvm::ConstantPointerNull::get(ptr);
  auto* i64 = llvm::Type::getInt64Ty(module.getContext());
  auto* type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(module.getContext()),
                              {i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, ptr}, false);
  auto* gemm = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                      "mstep_xla_gemm_bf16_f32", module);
  gemm->setVisibility(llvm::GlobalValue::HiddenVisibility); // not exported
  return gemm;
}

/// void gemm(batch, m, n, k, trans_a, a, a_stride, trans_b, b, b_stride, c):
/// XlaRuntimeCalls::gemm_f32's contract over dnnl_sgemm.
llvm::Function* define_gemm(llvm::Module& module) {
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  auto* ptr = llvm::PointerType::getUnqual(c);
  auto* i64 = b.getInt64Ty();
  auto* i8 = b.getInt8Ty();
  auto* f32 = b.getFloatTy();
  auto* type = llvm::FunctionType::get(b.getVoidTy(),
                                       {i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, ptr}, false);
  auto* gemm =
      llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, "mstep_aot_gemm_f32", module);
  // dnnl_status_t dnnl_sgemm(char transa, char transb, dnnl_dim_t M, N, K, float alpha,
  //   const float* A, dnnl_dim_t lda, const float* B, ldb, float beta, float* C, ldc)
  auto* sgemm_type = llvm::FunctionType::get(
      b.getInt32Ty(), {i8, i8, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64}, false);
  llvm::FunctionCallee sgemm = module.getOrInsertFunction("dnnl_sgemm", sgemm_type);
  if (auto* f = llvm::dyn_cast<llvm::Function>(sgemm.getCallee())) {
    f->addParamAttr(0, llvm::Attribute::SExt); // C's char
    f->addParamAttr(1, llvm::Attribute::SExt);
  }
  llvm::Value *batch = gemm->getArg(0), *m = gemm->getArg(1), *n = gemm->getArg(2),
              *k = gemm->getArg(3), *trans_a = gemm->getArg(4), *a = gemm->getArg(5),
              *a_stride = gemm->getArg(6), *trans_b = gemm->getArg(7), *bm = gemm->getArg(8),
              *b_stride = gemm->getArg(9), *out = gemm->getArg(10);
  auto* entry = llvm::BasicBlock::Create(c, "entry", gemm);
  auto* head = llvm::BasicBlock::Create(c, "head", gemm);
  auto* body = llvm::BasicBlock::Create(c, "body", gemm);
  auto* zero = llvm::BasicBlock::Create(c, "zero", gemm);
  auto* multiply = llvm::BasicBlock::Create(c, "multiply", gemm);
  auto* latch = llvm::BasicBlock::Create(c, "latch", gemm);
  auto* done = llvm::BasicBlock::Create(c, "done", gemm);
  b.SetInsertPoint(entry);
  auto* zero64 = b.getInt64(0);
  b.CreateCondBr(b.CreateOr(b.CreateICmpEQ(m, zero64), b.CreateICmpEQ(n, zero64)), done, head);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(i64, 2);
  i->addIncoming(zero64, entry);
  b.CreateCondBr(b.CreateICmpSLT(i, batch), body, done);
  b.SetInsertPoint(body);
  llvm::Value* mn = b.CreateMul(m, n);
  llvm::Value* c_i = b.CreateInBoundsGEP(f32, out, b.CreateMul(i, mn));
  b.CreateCondBr(b.CreateICmpEQ(k, zero64), zero, multiply);
  b.SetInsertPoint(zero); // an empty sum: zeros (sgemm wants k >= 1)
  b.CreateMemSet(c_i, b.getInt8(0), b.CreateMul(mn, b.getInt64(sizeof(float))), llvm::MaybeAlign(4));
  b.CreateBr(latch);
  b.SetInsertPoint(multiply);
  llvm::Value* ta = b.CreateICmpNE(trans_a, zero64);
  llvm::Value* tb = b.CreateICmpNE(trans_b, zero64);
  llvm::Value* t_char = b.getInt8('T');
  llvm::Value* n_char = b.getInt8('N');
  llvm::CallInst* call = b.CreateCall(
      sgemm, {b.CreateSelect(ta, t_char, n_char), b.CreateSelect(tb, t_char, n_char), m, n, k,
              llvm::ConstantFP::get(f32, 1.0), b.CreateInBoundsGEP(f32, a, b.CreateMul(i, a_stride)),
              b.CreateSelect(ta, m, k), b.CreateInBoundsGEP(f32, bm, b.CreateMul(i, b_stride)),
              b.CreateSelect(tb, k, n), llvm::ConstantFP::get(f32, 0.0), c_i, n});
  call->addParamAttr(0, llvm::Attribute::SExt);
  call->addParamAttr(1, llvm::Attribute::SExt);
  b.CreateBr(latch);
  b.SetInsertPoint(latch);
  i->addIncoming(b.CreateAdd(i, b.getInt64(1)), latch);
  b.CreateBr(head);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  return gemm;
}

/// void nest(entry, operands, results, outer, grain): the whole nest on
/// the calling thread.
llvm::Function* define_serial_nest(llvm::Module& module) {
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  auto* ptr = llvm::PointerType::getUnqual(c);
  auto* i64 = b.getInt64Ty();
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64, i64}, false);
  auto* nest =
      llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, "mstep_aot_nest", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", nest));
  auto* entry_type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64, i64}, false);
  b.CreateCall(entry_type, nest->getArg(0),
               {nest->getArg(1), nest->getArg(2), b.getInt64(0), nest->getArg(3)});
  b.CreateRetVoid();
  return nest;
}

/// i32 callout(context, k, operands, results): fails (there are none).
llvm::Function* define_no_callout(llvm::Module& module) {
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  auto* ptr = llvm::PointerType::getUnqual(c);
  auto* type = llvm::FunctionType::get(b.getInt32Ty(), {ptr, b.getInt64Ty(), ptr, ptr}, false);
  auto* callout =
      llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, "mstep_aot_callout", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", callout));
  b.CreateRet(b.getInt32(1));
  return callout;
}

// The table below binds every field of XlaRuntimeCalls, in order: a new
// field needs its stand-alone definition here too.
static_assert(sizeof(XlaRuntimeCalls) == 7 * sizeof(void*),
              "XlaRuntimeCalls changed: bind the new field in add_aot_entry");

absl::Status add_aot_entry(llvm::Module& module, const XlaProgram& program) {
  MSTEP_RETURN_IF_ERROR(check_no_callouts(program));
  llvm::Function* step = module.getFunction(kXlaStepSymbol);
  if (!step) return absl::InternalError("mstep-aot: the module has no step function");
  step->setLinkage(llvm::GlobalValue::InternalLinkage);
  // The gemm table is the runtime's (the object makes its primitives on
  // their first call): not exported, and dropped as unused.
  if (llvm::GlobalVariable* table = module.getGlobalVariable(kXlaGemmCallsSymbol))
    table->setLinkage(llvm::GlobalValue::InternalLinkage);
  llvm::LLVMContext& c = module.getContext();
  auto* ptr = llvm::PointerType::getUnqual(c);
  // XlaRuntimeCalls: its fields in order, the context last.
  auto* table_type = llvm::ArrayType::get(ptr, 7);
  auto* table = new llvm::GlobalVariable(
      module, table_type, /*isConstant=*/true, llvm::GlobalValue::InternalLinkage,
      llvm::ConstantArray::get(
          table_type,
          {define_gemm(module), define_serial_nest(module), define_no_callout(module),
           llvm::ConstantPointerNull::get(ptr), library_gemm(module, program, DType::bf16),
           library_gemm(module, program, DType::f32), library_conv_gemm(module, program)}),
      "mstep_aot_calls");
  llvm::IRBuilder<> b(c);
  auto* type = llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, ptr}, false);
  auto* entry =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, kAotStepSymbol, module);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", entry));
  b.CreateRet(b.CreateCall(step->getFunctionType(), step,
                           {entry->getArg(0), entry->getArg(1), entry->getArg(2), table}));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<XlaProgram> compile_xla_aot(mlir::ModuleOp module) {
  // The matmuls' archive (pulled in when the step has a matmul),
  // then oneDNN by path (its soname becomes the object's one NEEDED
  // library besides libc and libm); -z defs: no symbol is left for a loader.
  return compile_xla_program(module, add_aot_entry,
                             {MSTEP_XLA_GEMM_LIBRARY, MSTEP_DNNL_LIBRARY, "--as-needed", "-lm", "--no-as-needed", "-lc",
                              "-z", "defs"});
}

absl::StatusOr<XlaProgram> compile_graph_aot(const TraceGraph& graph,
                                             const RuntimeOptions& runtime) {
  XlaProgram program;
  MSTEP_RETURN_IF_ERROR(with_optimized_module(
      graph, "xla", {.dump_dir = runtime.dump_dir}, runtime,
      [&](mlir::ModuleOp module) -> absl::Status {
        MSTEP_ASSIGN_OR_RETURN(program, compile_xla_aot(module));
        return absl::OkStatus();
      }));
  return program;
}

} // namespace mstep::xla
