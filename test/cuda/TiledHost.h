// Host runs of the cuda compile half's tiled loop nests (issue 21 §3):
// each op's loop nest, taken right before the GPU mapping, lowered for
// this CPU and run by MLIR's ExecutionEngine on host buffers, one per plan
// value, and whole plans run in order with the cuBLASLt steps as host
// GEMMs. Shared by the host-numerics tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lib/backends/cuda/CudaCompiler.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mstep/core/HalfTypes.h"
#include "test/cuda/HostElements.h"
#include "test/cuda/HostSdpa.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/SubtargetFeature.h"

namespace mstep::cuda::testing {

/// Where value `v`'s bytes are on the host: its own buffer, or (an alias
/// of `plan`, CudaPlan::aliases) its root's at the alias's offset, as the
/// executable resolves device addresses.
inline char* host_bytes(const CudaPlan* plan, std::vector<std::vector<char>>& values, int v) {
  if (plan != nullptr)
    if (const CudaAlias* alias = plan->alias_of(v))
      return values[alias->root].data() + alias->byte_offset;
  return values[v].data();
}

/// Target features the host runs change from this CPU's, while one of
/// these lives: {"f16c", false} compiles as for a CPU without F16C, where
/// LLVM turns every f16 <-> f32 conversion into a call of libgcc's
/// __extendhfsf2 / __truncsfhf2 (resolved in this process, which links
/// libgcc_s).
class ScopedHostFeature {
public:
  ScopedHostFeature(const std::string& feature, bool enable) {
    features().AddFeature(feature, enable);
  }
  ~ScopedHostFeature() { features() = llvm::SubtargetFeatures(); }
  ScopedHostFeature(const ScopedHostFeature&) = delete;
  ScopedHostFeature& operator=(const ScopedHostFeature&) = delete;

  static llvm::SubtargetFeatures& features() {
    static llvm::SubtargetFeatures changed;
    return changed;
  }
};

/// While one lives, host runs iterate every scf.parallel loop backwards
/// (each induction variable from its last value to its first). The
/// iterations of a parallel loop run concurrently on the GPU (threads,
/// blocks, a block-rows phase's threads), so a kernel whose results
/// depend on their order races there: its bytes differ between the two
/// orders here.
class ScopedReversedParallelLoops {
public:
  ScopedReversedParallelLoops() { on() = true; }
  ~ScopedReversedParallelLoops() { on() = false; }
  ScopedReversedParallelLoops(const ScopedReversedParallelLoops&) = delete;
  ScopedReversedParallelLoops& operator=(const ScopedReversedParallelLoops&) = delete;

  static bool& on() {
    static bool reversed = false;
    return reversed;
  }
};

/// Rewrites each scf.parallel of `module` to visit its iterations in the
/// reverse order: i = lb + k * step becomes lb + (n - 1 - k) * step.
inline void reverse_parallel_loops(mlir::ModuleOp module) {
  namespace arith = mlir::arith;
  module.walk([](mlir::scf::ParallelOp loop) {
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(loop.getBody());
    const mlir::Location loc = loop.getLoc();
    for (auto [iv, lb, ub, step] : llvm::zip(loop.getInductionVars(), loop.getLowerBound(),
                                             loop.getUpperBound(), loop.getStep())) {
      mlir::Value one = b.create<arith::ConstantIndexOp>(loc, 1);
      auto offset = b.create<arith::SubIOp>(loc, iv, lb);
      mlir::Value k = b.create<arith::DivSIOp>(loc, offset, step);
      mlir::Value span = b.create<arith::SubIOp>(loc, ub, lb);
      mlir::Value rounded = b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, span, step), one);
      mlir::Value n = b.create<arith::DivSIOp>(loc, rounded, step);
      mlir::Value back = b.create<arith::SubIOp>(loc, b.create<arith::SubIOp>(loc, n, one), k);
      mlir::Value reversed = b.create<arith::AddIOp>(loc, lb, b.create<arith::MulIOp>(loc, back, step));
      iv.replaceAllUsesExcept(reversed, offset);
    }
  });
}

/// The machine the host runs compile for: this CPU's, with the changes of
/// a live ScopedHostFeature (none: the engine's own choice, this CPU).
inline std::unique_ptr<llvm::TargetMachine> host_target_machine() {
  if (ScopedHostFeature::features().getFeatures().empty()) return nullptr;
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> builder =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    ADD_FAILURE() << llvm::toString(builder.takeError());
    return nullptr;
  }
  builder->addFeatures(ScopedHostFeature::features().getFeatures());
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine = builder->createTargetMachine();
  if (!machine) {
    ADD_FAILURE() << llvm::toString(machine.takeError());
    return nullptr;
  }
  return std::move(*machine);
}

/// Runs the tiled loop nest of `op` on host buffers (one std::vector<char>
/// per plan value; `plan`'s aliases in their roots' bytes).
inline void run_tiled_op_on_host(mlir::MLIRContext& context, const TiledOp& op,
                                 std::vector<std::vector<char>>& values,
                                 const CudaPlan* plan = nullptr) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(op.module, &context);
  ASSERT_TRUE(module) << op.module;
  {
    // math.rsqrt (a layer_norm backward's fusion) has no host lowering:
    // 1 / sqrt. (On the GPU, convert-gpu-to-nvvm lowers it.)
    mlir::RewritePatternSet patterns(&context);
    mlir::populateExpandRsqrtPattern(patterns);
    ASSERT_TRUE(mlir::succeeded(mlir::applyPatternsAndFoldGreedily(*module, std::move(patterns))));
  }
  if (ScopedReversedParallelLoops::on())
    reverse_parallel_loops(*module);
  mlir::PassManager pm(&context);
  pm.addPass(mlir::createConvertSCFToCFPass());
  pm.addPass(mlir::createConvertMathToLibmPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  // Reshapes of the outputs (a keepdim) become pointer arithmetic.
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createLowerAffinePass());
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass());
  mlir::ConvertFuncToLLVMPassOptions func;
  func.useBarePtrCallConv = true; // one pointer per buffer, as the kernels take them
  pm.addPass(mlir::createConvertFuncToLLVMPass(func));
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << op.module;
  auto engine = mlir::ExecutionEngine::create(*module, {}, host_target_machine());
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  std::vector<void*> pointers, args;
  for (int value : op.params) pointers.push_back(host_bytes(plan, values, value));
  for (void*& pointer : pointers) args.push_back(&pointer);
  llvm::Error error = (*engine)->invokePacked(op.name, args);
  ASSERT_FALSE(static_cast<bool>(error)) << llvm::toString(std::move(error));
}

/// Zeroes the plan's error word in `values`, as the executable does
/// before each run (CudaErrorWord.h).
inline void reset_error_word(const CudaPlan& plan, std::vector<std::vector<char>>& values) {
  if (plan.error_word >= 0)
    std::fill(values[plan.error_word].begin(), values[plan.error_word].end(), char{0});
}

/// Runs every tiled op of `compiled` in program order on host buffers
/// (but epilogue fallbacks', which a plan runs only where it takes them).
inline void run_tiled_on_host(mlir::MLIRContext& context, const CompiledCudaStep& compiled,
                              std::vector<std::vector<char>>& values) {
  reset_error_word(compiled.plan, values);
  for (const TiledOp& op : compiled.tiled)
    if (!op.fallback)
      ASSERT_NO_FATAL_FAILURE(run_tiled_op_on_host(context, op, values, &compiled.plan));
}

/// A cuBLASLt step on host buffers: `batch` row-major products
/// C = epilogue(op(A) op(B) + bias) ([m, k] x [k, n]; A stored [k, m] when
/// transposed, B [n, k]; bias [n] shared by the batch), each dot product
/// accumulated in double and rounded once to f32, then the bias added and
/// ReLU or GELU (tanh form, cuBLASLt's) applied in f32, and C rounded to
/// the dtype (f32, bf16 or f16, cuBLASLt's f32 accumulation; f32 with
/// shape.f32_result); and the bias
/// gradient (shape.bias_grad, into `grad`): op(A) or op(B) summed over k
/// in double, rounded once.
inline void host_matmul(const CudaMatmulInfo& info, const char* a, const char* b, const char* bias,
                        char* c, char* grad = nullptr) {
  const MatmulShape& s = info.shape;
  ASSERT_TRUE(s.dtype == DType::f32 || s.dtype == DType::bf16 || s.dtype == DType::f16)
      << dtype_name(s.dtype);
  ASSERT_EQ(s.bias, bias != nullptr);
  ASSERT_EQ(s.bias_grad != MatmulBiasGrad::none, grad != nullptr);
  auto load = [&](const char* p, int64_t i) { return load_element(p, i, s.dtype); };
  auto store = [&](char* p, int64_t i, float v) { store_element(p, i, s.dtype, v); };
  auto at_a = [&](int64_t t, int64_t i, int64_t l) {
    return load(a, t * info.a_stride + (s.transpose_a ? l * s.m + i : i * s.k + l));
  };
  auto at_b = [&](int64_t t, int64_t l, int64_t j) {
    return load(b, t * info.b_stride + (s.transpose_b ? j * s.k + l : l * s.n + j));
  };
  for (int64_t t = 0; t < info.batch; ++t)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double dot = 0;
        for (int64_t l = 0; l < s.k; ++l) dot += double(at_a(t, i, l)) * at_b(t, l, j);
        float out = static_cast<float>(dot);
        if (bias != nullptr) out += load(bias, j);
        if (s.epilogue == MatmulEpilogue::relu) out = out > 0 ? out : 0.f;
        if (s.epilogue == MatmulEpilogue::gelu)
          out = 0.5f * out *
                (1.f + std::tanh(0.7978845608f * (out + 0.044715f * out * out * out)));
        if (s.f32_result)
          reinterpret_cast<float*>(c)[t * info.c_stride + i * s.n + j] = out;
        else
          store(c, t * info.c_stride + i * s.n + j, out);
      }
  if (grad == nullptr) return;
  ASSERT_EQ(info.batch, 1);
  const bool lhs = s.bias_grad == MatmulBiasGrad::lhs;
  for (int64_t x = 0; x < (lhs ? s.m : s.n); ++x) {
    double sum = 0;
    for (int64_t l = 0; l < s.k; ++l) sum += lhs ? at_a(0, x, l) : at_b(0, l, x);
    store(grad, x, static_cast<float>(sum));
  }
}

/// Runs `compiled`'s plan on host buffers in plan order: each cuBLASLt
/// step as host_matmul, each collective of a world of one as a copy, each
/// func of kernels' whole tiled loop nest at its first launch (a func's
/// launches are consecutive), each cuDNN SDPA step as run_sdpa_on_host
/// (HostSdpa.h: mstep's semantics, not cuDNN's own arithmetic); aliases
/// in their roots' bytes.
inline void run_plan_on_host(mlir::MLIRContext& context, const CompiledCudaStep& compiled,
                             std::vector<std::vector<char>>& values) {
  const CudaPlan& plan = compiled.plan;
  std::vector<int> tiled_of(plan.kernels.size(), -1);
  for (size_t t = 0; t < compiled.tiled.size(); ++t)
    for (int kernel : compiled.tiled[t].kernels) tiled_of[kernel] = static_cast<int>(t);
  std::vector<bool> done(compiled.tiled.size(), false);
  reset_error_word(plan, values);
  for (const CudaLaunchStep& launch : plan.launches) {
    if (launch.attention >= 0) {
      ASSERT_NO_FATAL_FAILURE(run_sdpa_on_host(plan, launch, values));
      continue;
    }
    if (launch.collective >= 0) {
      // A collective of one rank (each kind, and mean) is the identity.
      const CudaCollectiveInfo& c = plan.collectives[launch.collective];
      ASSERT_EQ(c.world_size, 1) << c.origin << ": only a world of one runs on the host";
      const size_t bytes = plan.values[launch.args[0]].bytes();
      ASSERT_EQ(bytes, plan.values[launch.writes[0]].bytes()) << c.origin;
      std::memmove(host_bytes(&plan, values, launch.writes[0]),
                   host_bytes(&plan, values, launch.args[0]), bytes);
      continue;
    }
    if (launch.matmul >= 0) {
      const CudaMatmulInfo& info = plan.matmuls[launch.matmul];
      const char* bias = info.shape.bias ? host_bytes(&plan, values, launch.args[2]) : nullptr;
      char* grad = launch.writes.size() > 1 ? host_bytes(&plan, values, launch.writes[1]) : nullptr;
      ASSERT_NO_FATAL_FAILURE(host_matmul(info, host_bytes(&plan, values, launch.args[0]),
                                          host_bytes(&plan, values, launch.args[1]), bias,
                                          host_bytes(&plan, values, launch.writes[0]), grad));
      continue;
    }
    const int t = tiled_of[launch.kernel];
    ASSERT_GE(t, 0) << plan.kernels[launch.kernel].name;
    if (done[t]) continue;
    done[t] = true;
    ASSERT_NO_FATAL_FAILURE(run_tiled_op_on_host(context, compiled.tiled[t], values, &plan));
  }
}

/// Expects the plan's values equal byte for byte between two runs of it
/// (`forward`, then with ScopedReversedParallelLoops, `backward`); each
/// value that differs is named with the launch that writes it. `what`
/// names the step.
inline void expect_the_same_bytes(const CudaPlan& plan,
                                  const std::vector<std::vector<char>>& forward,
                                  const std::vector<std::vector<char>>& backward,
                                  const std::string& what) {
  int differ = 0;
  for (size_t v = 0; v < plan.values.size(); ++v) {
    if (forward[v] == backward[v]) continue;
    std::string writer = "no launch";
    for (const CudaLaunchStep& launch : plan.launches)
      if (std::find(launch.writes.begin(), launch.writes.end(), static_cast<int>(v)) !=
          launch.writes.end()) {
        writer = describe_cuda_step(plan, launch);
        break;
      }
    if (differ++ < 5)
      ADD_FAILURE() << what << ": %" << v << " (" << plan.values[v].to_string()
                    << ") depends on the order of parallel iterations (a race on the GPU); "
                    << "written by " << writer;
  }
  EXPECT_EQ(differ, 0) << what;
}

/// Expects the plan's outputs equal byte for byte between a run whose
/// other values started as 0x7f bytes (`first`) and one where they started
/// as 0xff (`poisoned`: NaN in every float type): an output that differs
/// depends on bytes no step wrote (compute-sanitizer's initcheck on a
/// GPU). `what` names the step.
inline void expect_no_unwritten_reads(const CudaPlan& plan,
                                      const std::vector<std::vector<char>>& first,
                                      const std::vector<std::vector<char>>& poisoned,
                                      const std::string& what) {
  for (size_t k = 0; k < plan.outputs.size(); ++k) {
    const int v = plan.outputs[k];
    EXPECT_TRUE(first[v] == poisoned[v])
        << what << ": output " << k << " (%" << v << ", " << plan.values[v].to_string()
        << ") changes with the bytes of memory no step wrote (a read of uninitialized memory)";
  }
}

/// Runs `compiled`'s plan on host buffers three times from `initial` (its
/// inputs set, every other value 0x7f bytes, as host_values makes them):
/// as it is; with every parallel loop backwards, expecting the same bytes
/// in every value (expect_the_same_bytes: no race); and with every value
/// past the plan's inputs starting as 0xff bytes, expecting the same
/// outputs (expect_no_unwritten_reads). Returns the first run's values;
/// `what` names the step in failures.
inline std::vector<std::vector<char>> run_plan_on_host_checked(
    mlir::MLIRContext& context, const CompiledCudaStep& compiled,
    const std::vector<std::vector<char>>& initial, const std::string& what) {
  const CudaPlan& plan = compiled.plan;
  std::vector<std::vector<char>> forward = initial, backward = initial, poisoned = initial;
  for (size_t v = plan.num_inputs; v < poisoned.size(); ++v)
    std::fill(poisoned[v].begin(), poisoned[v].end(), char(0xff));
  run_plan_on_host(context, compiled, forward);
  if (::testing::Test::HasFatalFailure()) return forward;
  {
    ScopedReversedParallelLoops reversed;
    run_plan_on_host(context, compiled, backward);
  }
  expect_the_same_bytes(plan, forward, backward, what);
  run_plan_on_host(context, compiled, poisoned);
  expect_no_unwritten_reads(plan, forward, poisoned, what);
  return forward;
}

/// Host buffers for `plan`'s values (`fill` bytes, 0x7f by default: an
/// unwritten element shows), the inputs filled from `inputs`.
template <typename T = float>
std::vector<std::vector<char>> host_values(const CudaPlan& plan,
                                           const std::vector<std::vector<T>>& inputs,
                                           char fill = char{0x7f}) {
  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), fill);
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(values[i].data(), inputs[i].data(), values[i].size());
  return values;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

template <typename T> const T* as(const std::vector<char>& bytes) {
  return reinterpret_cast<const T*>(bytes.data());
}

} // namespace mstep::cuda::testing
