// mstep.matmul in the cuda compile half: the plan holds a cuBLASLt step
// (shape, batch, strides) instead of a kernel, and CudaExecutable runs it
// in program order with the kernels, on the backend's stream, through the
// runtime's CublasLtMatmul over a fake cuBLASLt table that records each
// cublasLtMatmul call into the fake driver's call list (FakeCublasLt.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "mstep/core/Error.h"
#include "test/cuda/BiasGradSteps.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCublasLt.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/LinearReluStep.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

using testing::kLinearReluStep;

constexpr const char* kBatchedStep = R"(
func.func @step(%a: tensor<4x8x16xf32>, %b: tensor<4x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}
)";

constexpr const char* kBroadcastRhsStep = R"(
func.func @step(%a: tensor<4x8x16xf32>, %b: tensor<16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}
)";

constexpr const char* kBroadcastBatchStep = R"(
func.func @step(%a: tensor<4x1x8x16xf32>, %b: tensor<1x3x16x32xf32>) -> tensor<4x3x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x1x8x16xf32>, tensor<1x3x16x32xf32> -> tensor<4x3x8x32xf32>
  return %0 : tensor<4x3x8x32xf32>
}
)";

using testing::plan_of;

TEST(CudaCublasLtPlan, ALinearsBiasAndReluAreItsCublasLtStepsEpilogue) {
  auto plan = plan_of(kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const CudaMatmulInfo& m = plan->matmuls[0];
  EXPECT_EQ(m.shape.m, 64);
  EXPECT_EQ(m.shape.n, 80);
  EXPECT_EQ(m.shape.k, 96);
  EXPECT_FALSE(m.shape.transpose_a);
  EXPECT_FALSE(m.shape.transpose_b);
  EXPECT_EQ(m.shape.dtype, DType::f32);
  EXPECT_TRUE(m.shape.bias);
  EXPECT_EQ(m.shape.epilogue, MatmulEpilogue::relu);
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.origin, "mstep.matmul #0");
  // One step: the cuBLASLt call reading x (%0), w (%1) and the bias (%2),
  // writing the relu's result (%3); no kernels.
  ASSERT_EQ(plan->launches.size(), 1u);
  EXPECT_EQ(plan->launches[0].matmul, 0);
  EXPECT_THAT(plan->launches[0].args, ::testing::ElementsAre(0, 1, 2));
  EXPECT_THAT(plan->launches[0].writes, ::testing::ElementsAre(3));
  // The kernels are the epilogue's fallback (the add's and the relu's, over
  // %3 in place), launched only where cuBLASLt has no algorithm for it.
  ASSERT_EQ(m.fallback.size(), 2u);
  EXPECT_THAT(m.fallback[0].args, ::testing::ElementsAre(3, 2, 3));
  EXPECT_THAT(m.fallback[1].args, ::testing::ElementsAre(3, 3));
  EXPECT_EQ(plan->kernels.size(), 2u);
  EXPECT_THAT(describe_cuda_plan(*plan),
              HasSubstr("cublaslt matmul (mstep.matmul #0) [64, 96] x [96, 80] f32, bias + relu"));
}

/// matmul + bias, then `activation` (a kernel unless it is relu or gelu's
/// tanh form).
std::string linear_then(absl::string_view activation) {
  return absl::StrCat(R"(
func.func @step(%x: tensor<64x96xf32>, %w: tensor<96x80xf32>, %b: tensor<80xf32>)
    -> tensor<64x80xf32> {
  %0 = mstep.matmul %x, %w : tensor<64x96xf32>, tensor<96x80xf32> -> tensor<64x80xf32>
  %1 = mstep.add %0, %b : tensor<64x80xf32>, tensor<80xf32> -> tensor<64x80xf32>
  %2 = )", activation, R"( : tensor<64x80xf32>
  return %2 : tensor<64x80xf32>
}
)");
}

TEST(CudaCublasLtPlan, GelusTanhFormIsTheGeluBiasEpilogueItsErfFormAKernel) {
  const std::string tanh_form = linear_then("mstep.gelu %1 {approximate = #mstep.gelu_approximation<tanh>}");
  auto plan = plan_of(tanh_form.c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->matmuls[0].shape.epilogue, MatmulEpilogue::gelu);
  EXPECT_TRUE(plan->matmuls[0].shape.bias);
  EXPECT_EQ(plan->launches.size(), 1u);
  // cuBLASLt has no erf form: a bias epilogue, then gelu's kernel.
  const std::string erf_form = linear_then("mstep.gelu %1");
  plan = plan_of(erf_form.c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->matmuls[0].shape.epilogue, MatmulEpilogue::none);
  EXPECT_TRUE(plan->matmuls[0].shape.bias);
  ASSERT_EQ(plan->launches.size(), 2u);
  // gelu's kernel, and the bias epilogue's fallback (the add's).
  EXPECT_EQ(plan->matmuls[0].fallback.size(), 1u);
  EXPECT_EQ(plan->kernels.size(), 2u);
}

TEST(CudaCublasLtPlan, ABiasOfAnotherDtypeOrShapeIsNoEpilogue) {
  // A [64, 80] addend is no bias (one per output column); the sum stays a kernel.
  auto plan = plan_of(R"(
func.func @step(%x: tensor<64x96xf32>, %w: tensor<96x80xf32>, %b: tensor<64x80xf32>)
    -> tensor<64x80xf32> {
  %0 = mstep.matmul %x, %w : tensor<64x96xf32>, tensor<96x80xf32> -> tensor<64x80xf32>
  %1 = mstep.add %0, %b : tensor<64x80xf32>, tensor<64x80xf32> -> tensor<64x80xf32>
  return %1 : tensor<64x80xf32>
}
)");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->matmuls[0].shape.bias);
  EXPECT_EQ(plan->launches.size(), 2u);
}

TEST(CudaCublasLtPlan, EqualBatchDimsAreStridedCalls) {
  auto plan = plan_of(kBatchedStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const CudaMatmulInfo& m = plan->matmuls[0];
  EXPECT_EQ(m.batch, 4);
  EXPECT_EQ(m.shape.m, 8);
  EXPECT_EQ(m.a_stride, 8 * 16);
  EXPECT_EQ(m.b_stride, 16 * 32);
  EXPECT_EQ(m.c_stride, 8 * 32);
}

TEST(CudaCublasLtPlan, A2DRhsFoldsTheBatchIntoRows) {
  auto plan = plan_of(kBroadcastRhsStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->matmuls[0].batch, 1);
  EXPECT_EQ(plan->matmuls[0].shape.m, 4 * 8);
}

TEST(CudaCublasLtPlan, BatchDimsThatBroadcastPartlyAreExpandedFirst) {
  // [4, 1] against [1, 3]: each operand is expanded to the result's batch
  // dims [4, 3] by a kernel, then one strided call of 12 products, each
  // operand at a stride of one matrix (CudaOpLoopsHost's
  // ABatchedMatmulWhoseBatchDimsBroadcastPartly checks the values).
  auto plan = plan_of(kBroadcastBatchStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const CudaMatmulInfo& m = plan->matmuls[0];
  EXPECT_EQ(m.batch, 12);
  EXPECT_EQ(m.a_stride, 8 * 16);
  EXPECT_EQ(m.b_stride, 16 * 32);
  EXPECT_EQ(m.c_stride, 8 * 32);
  int kernels = 0;
  for (const CudaLaunchStep& launch : plan->launches) kernels += launch.matmul < 0 ? 1 : 0;
  EXPECT_EQ(kernels, 2);  // the two expands
}

// ---- the executable over a fake cuBLASLt table (FakeCublasLt.h) -----------

using testing::fake_cublaslt;
/// The fake's recorded attributes.
template <typename T> T last_attribute(cublasLtMatmulDescAttributes_t attribute) {
  return testing::fake_cublaslt_state().last_attribute<T>(attribute);
}
template <typename T> std::vector<T> layout_values(cublasLtMatrixLayoutAttribute_t attribute) {
  return testing::fake_cublaslt_state().layout_values<T>(attribute);
}

class CudaCublasLtExecutableTest : public ::testing::Test {
protected:
  void SetUp() override {
    testing::fake_cublaslt_state() = {};
    testing::fake_cublaslt_state().recorder = &fake_;
    auto backend = CudaBackend::create(fake_.driver());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  void TearDown() override { testing::fake_cublaslt_state() = {}; }
  BufferPtr input(const TensorType& type) {
    auto buffer = backend_->allocate(type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *buffer : nullptr;
  }
  /// The calls since `before` that are launches or cuBLASLt calls.
  std::vector<testing::FakeCall> work_since(size_t before) {
    std::vector<testing::FakeCall> work;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel" || fake_.calls[i].name == "cublasLtMatmul")
        work.push_back(fake_.calls[i]);
    return work;
  }
  static std::string address(CUdeviceptr p) { return std::to_string(p); }
  /// A pointer as a kernel launch's argument bytes.
  static std::string pointer_bytes(CUdeviceptr p) {
    return std::string(reinterpret_cast<const char*>(&p), sizeof p);
  }
  /// The plan of a conv2d of x [2, 3, 6, 6], w [4, 3, 3, 3] and a bias
  /// (padding 1) in `dtype`, its kernels known to the fake driver.
  absl::StatusOr<CudaPlan> conv_plan(DType dtype) {
    const std::string text = absl::StrReplaceAll(R"(
func.func @step(%x: tensor<2x3x6x6x$T>, %w: tensor<4x3x3x3x$T>, %b: tensor<4x$T>) -> tensor<2x4x6x6x$T> {
  %y = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<2x3x6x6x$T>, tensor<4x3x3x3x$T>, tensor<4x$T> -> tensor<2x4x6x6x$T>
  return %y : tensor<2x4x6x6x$T>
}
)",
                                                 {{"$T", dtype_name(dtype)}});
    absl::StatusOr<CudaPlan> plan = plan_of(text.c_str());
    if (plan.ok())
      for (const CudaLaunchStep& l : plan->launches)
        if (l.matmul < 0) fake_.add_kernel(plan->kernels[l.kernel].name, l.args.size());
    return plan;
  }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaCublasLtExecutableTest, TheMatmulRunsBeforeTheKernelsOnTheBackendsStream) {
  // The bias is the call's epilogue; tanh a kernel after it.
  const std::string text = linear_then("mstep.tanh %1");
  auto plan = plan_of(text.c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const CudaLaunchStep& l : plan->launches)
    if (l.matmul < 0) fake_.add_kernel(plan->kernels[l.kernel].name, l.args.size());
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({64, 96}), DType::f32});
  BufferPtr w = input({Shape({96, 80}), DType::f32});
  BufferPtr b = input({Shape({80}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x, w, b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 2u);
  EXPECT_EQ(work[0].name, "cublasLtMatmul");
  EXPECT_EQ(work[0].stream, backend_->context().stream());
  // cuBLASLt's A is mstep's rhs (w), its B mstep's lhs (x).
  EXPECT_EQ(work[0].args[0], address(CudaBackend::device_pointer(*w)));
  EXPECT_EQ(work[0].args[1], address(CudaBackend::device_pointer(*x)));
  EXPECT_EQ(work[1].name, "cuLaunchKernel");
  // The tanh kernel reads the buffer the matmul wrote.
  const std::string matmul_out(reinterpret_cast<const char*>(&work[0].target), sizeof(CUdeviceptr));
  EXPECT_THAT(work[1].args, ::testing::Contains(matmul_out));
}

TEST_F(CudaCublasLtExecutableTest, TheEpilogueAttributeAndTheBiasPointerAreSet) {
  auto plan = plan_of(kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({64, 96}), DType::f32});
  BufferPtr w = input({Shape({96, 80}), DType::f32});
  BufferPtr b = input({Shape({80}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x, w, b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 1u);  // the matmul, its bias and its relu in one call
  EXPECT_EQ(last_attribute<cublasLtEpilogue_t>(CUBLASLT_MATMUL_DESC_EPILOGUE),
            CUBLASLT_EPILOGUE_RELU_BIAS);
  EXPECT_EQ(last_attribute<cudaDataType_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), CUDA_R_32F);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(last_attribute<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER)),
            CudaBackend::device_pointer(*b));
  // It writes the step's output (the relu's result) directly.
  EXPECT_EQ(work[0].target, CudaBackend::device_pointer(*(*outputs)[0]));
}

TEST_F(CudaCublasLtExecutableTest, ItsWorkspaceIsAllocatedAtCreateSoACapturedRunAllocatesNothing) {
  auto plan = plan_of(kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const CudaLaunchStep& l : plan->launches)
    if (l.matmul < 0) fake_.add_kernel(plan->kernels[l.kernel].name, l.args.size());
  BufferPtr x = input({Shape({64, 96}), DType::f32});
  BufferPtr w = input({Shape({96, 80}), DType::f32});
  BufferPtr b = input({Shape({80}), DType::f32});
  BufferPtr out = input({Shape({64, 80}), DType::f32});
  const size_t before = fake_.calls.size();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  // PyTorch's cuBLASLt workspace on Hopper: 32 MiB, allocated with the executable.
  bool workspace = false;
  for (size_t i = before; i < fake_.calls.size(); ++i)
    workspace |= fake_.calls[i].name == "cuMemAlloc" && fake_.calls[i].bytes == (size_t{32} << 20);
  EXPECT_TRUE(workspace);
  // The capture refuses allocations (as CUDA does): the matmul's run needs none.
  auto graph = backend_->record_graph(
      [&] { return (*exe)->run({x, w, b}, {.inputs = {}, .outputs = {out}}).status(); });
  ASSERT_TRUE(graph.ok()) << graph.status();
}

TEST_F(CudaCublasLtExecutableTest, ABatchedMatmulIsOneStridedBatchedCall) {
  auto plan = plan_of(kBatchedStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr a = input({Shape({4, 8, 16}), DType::f32});
  BufferPtr b = input({Shape({4, 16, 32}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({a, b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 1u);
  // cuBLASLt's A is mstep's B: the first matrix of each operand.
  EXPECT_EQ(work[0].args[0], address(CudaBackend::device_pointer(*b)));
  EXPECT_EQ(work[0].args[1], address(CudaBackend::device_pointer(*a)));
  EXPECT_EQ(work[0].target, CudaBackend::device_pointer(*(*outputs)[0]));
  // Every layout (its A, B, C) counts 4 matrices, each its matrix's
  // elements after the last.
  EXPECT_THAT(layout_values<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT),
              ::testing::ElementsAre(4, 4, 4));
  EXPECT_THAT(layout_values<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET),
              ::testing::ElementsAre(16 * 32, 8 * 16, 8 * 32));
}

TEST_F(CudaCublasLtExecutableTest, AConvolutionIsIm2colThenOneBatchedCallThenTheBias) {
  // conv2d's im2col form (CudaConvLowering.h), one group: the im2col
  // kernel writes the columns (arena scratch), one call batched over the
  // 2 images reads them with w shared (stride 0) and writes y, then the
  // bias kernel adds to y in place.
  auto plan = conv_plan(DType::f32);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({2, 3, 6, 6}), DType::f32});
  BufferPtr w = input({Shape({4, 3, 3, 3}), DType::f32});
  BufferPtr b = input({Shape({4}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x, w, b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 3u);
  const CUdeviceptr y = CudaBackend::device_pointer(*(*outputs)[0]);
  EXPECT_EQ(work[0].name, "cuLaunchKernel");  // im2col(x) -> columns
  ASSERT_EQ(work[0].args.size(), 2u);
  EXPECT_EQ(work[0].args[0], pointer_bytes(CudaBackend::device_pointer(*x)));
  CUdeviceptr columns = 0;
  std::memcpy(&columns, work[0].args[1].data(), sizeof columns);
  EXPECT_NE(columns, y);
  EXPECT_EQ(work[1].name, "cublasLtMatmul");
  // cuBLASLt's A is mstep's B (the columns), its B mstep's A (w).
  EXPECT_EQ(work[1].args[0], address(columns));
  EXPECT_EQ(work[1].args[1], address(CudaBackend::device_pointer(*w)));
  EXPECT_EQ(work[1].target, y);
  EXPECT_THAT(layout_values<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT),
              ::testing::ElementsAre(2, 2, 2));
  // Columns [27, 36] per image, w shared, y [4, 36] per image.
  EXPECT_THAT(layout_values<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET),
              ::testing::ElementsAre(27 * 36, 0, 4 * 36));
  EXPECT_EQ(work[2].name, "cuLaunchKernel");  // y += bias
  EXPECT_THAT(work[2].args, ::testing::ElementsAre(pointer_bytes(CudaBackend::device_pointer(*b)),
                                                   pointer_bytes(y)));
}

TEST_F(CudaCublasLtExecutableTest, AnF16ConvolutionsProductIsF32UntilItsBiasKernel) {
  // f16 (CudaConvLowering.h): A and B f16, C f32 (arena scratch, not y),
  // f32 compute; the bias kernel reads the f32 product and the bias and
  // writes y, rounding once.
  auto plan = conv_plan(DType::f16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  EXPECT_EQ(plan->matmuls[0].shape.dtype, DType::f16);
  EXPECT_TRUE(plan->matmuls[0].shape.f32_result);
  testing::fake_cublaslt_state().desc_types.clear();
  testing::fake_cublaslt_state().layout_types.clear();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr b = input({Shape({4}), DType::f16});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({input({Shape({2, 3, 6, 6}), DType::f16}),
                              input({Shape({4, 3, 3, 3}), DType::f16}), b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const testing::FakeCublasLtState& state = testing::fake_cublaslt_state();
  EXPECT_THAT(state.layout_types, ::testing::ElementsAre(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F));
  ASSERT_EQ(state.desc_types.size(), 1u);
  EXPECT_EQ(state.desc_types[0].first, CUBLAS_COMPUTE_32F);
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 3u);  // im2col, the matmul, the bias
  const CUdeviceptr y = CudaBackend::device_pointer(*(*outputs)[0]);
  EXPECT_EQ(work[1].name, "cublasLtMatmul");
  EXPECT_NE(work[1].target, y);
  EXPECT_EQ(work[2].name, "cuLaunchKernel");  // y = product + bias (the kernel's order)
  EXPECT_THAT(work[2].args, ::testing::UnorderedElementsAre(pointer_bytes(work[1].target),
                                                   pointer_bytes(CudaBackend::device_pointer(*b)),
                                                   pointer_bytes(y)));
}

TEST_F(CudaCublasLtExecutableTest, ABroadcastBatchDimIsAStrideOfZero) {
  // rhs [1, 16, 32]: one matrix shared by the 4 of lhs.
  auto plan = plan_of(R"(
func.func @step(%a: tensor<4x8x16xf32>, %b: tensor<1x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x8x16xf32>, tensor<1x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}
)");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run(
      {input({Shape({4, 8, 16}), DType::f32}), input({Shape({1, 16, 32}), DType::f32})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(work_since(before).size(), 1u);
  EXPECT_THAT(layout_values<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET),
              ::testing::ElementsAre(0, 8 * 16, 8 * 32));
}

TEST_F(CudaCublasLtExecutableTest, AnUnbatchedMatmulSetsNoBatchAttributes) {
  auto plan = plan_of(kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto outputs =
      (*exe)->run({input({Shape({64, 96}), DType::f32}), input({Shape({96, 80}), DType::f32}),
                   input({Shape({80}), DType::f32})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_TRUE(testing::fake_cublaslt_state().layout_attributes.empty());
}

TEST_F(CudaCublasLtExecutableTest, ABiasGradientIsWrittenWhereTheBiasPointerPoints) {
  // dW = x^T dz and db = sum(dz, 0), both step outputs: one call.
  auto plan = plan_of(testing::kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  const size_t before = fake_.calls.size();
  auto outputs =
      (*exe)->run({input({Shape({64, 96}), DType::f32}), input({Shape({64, 80}), DType::f32})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> work = work_since(before);
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].target, CudaBackend::device_pointer(*(*outputs)[0]));
  EXPECT_EQ(last_attribute<cublasLtEpilogue_t>(CUBLASLT_MATMUL_DESC_EPILOGUE),
            CUBLASLT_EPILOGUE_BGRADA);
  // The gradient has the output's type (cublasLt.h, BIAS_DATA_TYPE).
  EXPECT_EQ(last_attribute<cudaDataType_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), CUDA_R_32F);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(last_attribute<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER)),
            CudaBackend::device_pointer(*(*outputs)[1]));
}

TEST_F(CudaCublasLtExecutableTest, A16BitLinearIsItsDtypeThroughoutWithF32Accumulation) {
  // A, B, C and the bias in bf16 or f16 (the bias has the output's type),
  // the sums and the scale in f32 (ref's 16-bit matmuls accumulate in f32).
  for (const auto& [dtype, cuda_type] :
       {std::pair{DType::bf16, CUDA_R_16BF}, std::pair{DType::f16, CUDA_R_16F}}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::string text = absl::StrReplaceAll(R"(
func.func @step(%x: tensor<64x96x$T>, %w: tensor<96x80x$T>, %b: tensor<80x$T>)
    -> tensor<64x80x$T> {
  %0 = mstep.matmul %x, %w : tensor<64x96x$T>, tensor<96x80x$T> -> tensor<64x80x$T>
  %1 = mstep.add %0, %b : tensor<64x80x$T>, tensor<80x$T> -> tensor<64x80x$T>
  return %1 : tensor<64x80x$T>
}
)",
                                                 {{"$T", dtype_name(dtype)}});
    auto plan = plan_of(text.c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->launches.size(), 1u);
    EXPECT_EQ(plan->matmuls[0].shape.dtype, dtype);
    EXPECT_TRUE(plan->matmuls[0].shape.bias);
    testing::fake_cublaslt_state().desc_types.clear();
    testing::fake_cublaslt_state().layout_types.clear();
    auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
    ASSERT_TRUE(exe.ok()) << exe.status();
    auto outputs = (*exe)->run({input({Shape({64, 96}), dtype}), input({Shape({96, 80}), dtype}),
                                input({Shape({80}), dtype})});
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    const testing::FakeCublasLtState& state = testing::fake_cublaslt_state();
    EXPECT_THAT(state.layout_types, ::testing::ElementsAre(cuda_type, cuda_type, cuda_type));
    ASSERT_EQ(state.desc_types.size(), 1u);
    EXPECT_EQ(state.desc_types[0].first, CUBLAS_COMPUTE_32F);
    EXPECT_EQ(state.desc_types[0].second, CUDA_R_32F);
    EXPECT_EQ(last_attribute<cublasLtEpilogue_t>(CUBLASLT_MATMUL_DESC_EPILOGUE),
              CUBLASLT_EPILOGUE_BIAS);
    EXPECT_EQ(last_attribute<cudaDataType_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), cuda_type);
  }
}

TEST_F(CudaCublasLtExecutableTest, ACublasLtThatCannotStartFailsCreate) {
  auto plan = plan_of(kBatchedStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  testing::fake_cublaslt_state().fail_create = true;
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(exe.status().message(), HasSubstr("cublasLt: unavailable: cublasLtCreate: "));
}

TEST_F(CudaCublasLtExecutableTest, ARefusedMatmulFailsRunNamingTheOp) {
  auto plan = plan_of(kBatchedStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  testing::fake_cublaslt_state().fail_matmul = true;
  auto outputs = (*exe)->run(
      {input({Shape({4, 8, 16}), DType::f32}), input({Shape({4, 16, 32}), DType::f32})});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(outputs.status().message(),
              HasSubstr("cublasLt step (mstep.matmul #0): cublasLt matmul "
                        "[8, 16] x [16, 32] f32: cublasLtMatmul: CUBLAS_STATUS_FAKE"));
  // The executable keeps working once cuBLASLt does.
  testing::fake_cublaslt_state().fail_matmul = false;
  EXPECT_TRUE(
      (*exe)
          ->run({input({Shape({4, 8, 16}), DType::f32}), input({Shape({4, 16, 32}), DType::f32})})
          .ok());
}

TEST(CudaCublasLtPlanValidation, AMatmulStepWithTheWrongOperandsIsNamed) {
  auto plan = plan_of(kBatchedStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  plan->launches[0].args.pop_back();
  absl::Status status = validate_cuda_plan(*plan);
  EXPECT_THAT(
      status.message(),
      HasSubstr("cuda plan: launch 0 (cublasLt matmul [8, 16] x [16, 32] f32) has 1 operands "
                "and 1 results; it needs 2 and 1"));
  plan->launches[0].matmul = 5;
  EXPECT_THAT(validate_cuda_plan(*plan).message(), HasSubstr("launch 0 names matmul 5 of 1"));
}

} // namespace
} // namespace mstep::cuda
