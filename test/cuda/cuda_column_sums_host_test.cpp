// Split column reductions (CudaColumnSums.h, MSTEP_CUDA_COLUMN_REDUCTION=
// split, the default): sums and means over leading dims and
// clip_grad_norm_'s per-gradient norms with many threads per output.
// Each step's tiled loop nests (the blocks' phases one after the other)
// run on this CPU against ref, the launch configuration is checked in the
// plan and on the fake driver, and ptxas's report of the kernels.
//
// ref adds a column's rows in order in f64; the split form adds them in
// another order in f64 (strided lanes, a tree, the chunks), so the bound
// is 2(n-1)·2^-53·Σ|x| between the f64 sums plus one unit in the last
// place of the output between the rounded results. The first form
// (=thread) accumulates in the output type (f32 for bf16) in row order:
// (n-1)·2^-24·Σ|x| plus an ulp. Nothing here ran on a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lib/backends/cuda/CudaExecutable.h"
#include "mstep/core/HalfTypes.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/HostStepRun.h"
#include "test/cuda/RefOracle.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<char> f32_bytes(const std::vector<float>& values) {
  std::vector<char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<char> bf16_bytes(const std::vector<float>& values) {
  std::vector<char> bytes(values.size() * sizeof(BFloat16));
  for (size_t i = 0; i < values.size(); ++i) {
    const BFloat16 v(values[i]);
    std::memcpy(bytes.data() + i * sizeof v, &v, sizeof v);
  }
  return bytes;
}

/// Element i of an f32 or bf16 buffer.
double element(const std::vector<char>& bytes, bool bf16, size_t i) {
  if (bf16) {
    BFloat16 v;
    std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
    return static_cast<float>(v);
  }
  float v;
  std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
  return v;
}

/// One unit in the last place of |v| in f32 or bf16.
double ulp(double v, bool bf16) {
  const float f = std::fabs(static_cast<float>(v));
  const double f32_ulp = std::nextafter(f, INFINITY) - f;
  return bf16 ? f32_ulp * 65536.0 : f32_ulp;
}

CudaCompileOptions with_columns(CudaColumnReduction form) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.column_reduction = form;
  return options;
}

using HostRun = testing::HostStepRun;

HostRun run_host(const std::string& text, const std::vector<std::vector<char>>& inputs,
                 CudaColumnReduction form) {
  return testing::run_step_on_host(text.c_str(), inputs, with_columns(form));
}

/// A column reduction of the step: its input (rows x columns, row-major),
/// whether it is a mean, whether its dtype is bf16.
struct ColumnCase {
  int input = 0;
  int64_t rows = 0, columns = 0;
  bool mean = false, bf16 = false;
};

/// Every column of `got` within the bound from ref's (NaN where ref's is
/// NaN); `unit`: the accumulation's unit roundoff. The largest error seen
/// relative to the bound, for the log.
double expect_within_bound(const ColumnCase& c, const std::vector<char>& input,
                           const std::vector<char>& got, const std::vector<char>& ref, double unit,
                           const char* form) {
  double worst = 0;
  for (int64_t col = 0; col < c.columns; ++col) {
    double magnitude = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      magnitude += std::fabs(element(input, c.bf16, r * c.columns + col));
    if (c.mean) magnitude /= static_cast<double>(c.rows);
    const double want = element(ref, c.bf16, col), have = element(got, c.bf16, col);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(have)) << form << " column " << col;
      continue;
    }
    const double bound =
        2.0 * static_cast<double>(std::max<int64_t>(c.rows - 1, 0)) * unit * magnitude +
        ulp(std::max(std::fabs(want), std::fabs(have)), c.bf16);
    EXPECT_LE(std::fabs(have - want), bound)
        << form << " input " << c.input << " column " << col << ": " << have << " vs ref " << want;
    worst = std::max(worst, std::fabs(have - want) / bound);
  }
  return worst;
}

// A partial last chunk (1001 rows in chunks of 40) and column tile (300
// columns in tiles of 32), a NaN and a column of large values that
// cancel; one row; one column (tiles of one column, 256 row lanes); a
// mean over two leading dims with keepdim; GPT-mini's bf16 bias gradient.
const char* const kColumnStep = R"(
func.func @step(%a: tensor<1001x300xf32>, %b: tensor<1x300xf32>, %c: tensor<5000x1xf32>, %d: tensor<4x50x30xf32>, %e: tensor<8x256x768xbf16>)
    -> (tensor<300xf32>, tensor<300xf32>, tensor<1xf32>, tensor<1x1x30xf32>, tensor<768xbf16>) {
  %s0 = mstep.sum %a {dims = array<i64: 0>, keepdim = false} : tensor<1001x300xf32> -> tensor<300xf32>
  %s1 = mstep.sum %b {dims = array<i64: 0>, keepdim = false} : tensor<1x300xf32> -> tensor<300xf32>
  %s2 = mstep.sum %c {dims = array<i64: 0>, keepdim = false} : tensor<5000x1xf32> -> tensor<1xf32>
  %s3 = mstep.mean %d {dims = array<i64: 0, 1>, keepdim = true} : tensor<4x50x30xf32> -> tensor<1x1x30xf32>
  %s4 = mstep.sum %e {dims = array<i64: 0, 1>, keepdim = false} : tensor<8x256x768xbf16> -> tensor<768xbf16>
  return %s0, %s1, %s2, %s3, %s4 : tensor<300xf32>, tensor<300xf32>, tensor<1xf32>, tensor<1x1x30xf32>, tensor<768xbf16>
})";

const std::vector<ColumnCase> kColumnCases = {
    {0, 1001, 300}, {1, 1, 300}, {2, 5000, 1}, {3, 200, 30, true}, {4, 2048, 768, false, true}};

std::vector<std::vector<char>> column_inputs() {
  std::vector<float> a = testing::random_floats(1001 * 300, 60);
  a[500 * 300 + 7] = NAN;
  for (int r = 0; r < 1001; ++r) a[r * 300 + 9] = (r % 2 ? 1e6f : -1e6f) + a[r * 300 + 9];
  return {f32_bytes(a), f32_bytes(testing::random_floats(300, 61)),
          f32_bytes(testing::random_floats(5000, 62)),
          f32_bytes(testing::random_floats(4 * 50 * 30, 63)),
          bf16_bytes(testing::random_floats(8 * 256 * 768, 64))};
}

TEST(CudaColumnSumsHost, SplitAndThreadFormsMatchRefWithinTheirBounds) {
  const std::vector<std::vector<char>> inputs = column_inputs();
  testing::CudaStepContext step(kColumnStep);
  auto ref = testing::ref_outputs(step.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const HostRun split = run_host(kColumnStep, inputs, CudaColumnReduction::split);
  const HostRun thread = run_host(kColumnStep, inputs, CudaColumnReduction::thread);
  ASSERT_EQ(split.outputs.size(), kColumnCases.size());
  ASSERT_EQ(thread.outputs.size(), kColumnCases.size());
  for (size_t o = 0; o < kColumnCases.size(); ++o) {
    const ColumnCase& c = kColumnCases[o];
    const double split_worst = expect_within_bound(c, inputs[c.input], split.outputs[o], (*ref)[o],
                                                   std::ldexp(1.0, -53), "split");
    const double thread_worst = expect_within_bound(c, inputs[c.input], thread.outputs[o],
                                                    (*ref)[o], std::ldexp(1.0, -24), "thread");
    std::printf("input %d (%lld x %lld): worst error / bound: split %.3g, thread %.3g\n", c.input,
                static_cast<long long>(c.rows), static_cast<long long>(c.columns), split_worst,
                thread_worst);
  }
  // The split form's tiled nests are block-rows loops with an f64 buffer
  // per thread; the first form's are not.
  ASSERT_FALSE(split.tiled.empty());
  EXPECT_THAT(split.tiled[0], HasSubstr("mstep_block_threads = 256"));
  EXPECT_THAT(split.tiled[0], HasSubstr("memref.alloca() : memref<256xf64>"));
  for (const std::string& tiled : thread.tiled)
    EXPECT_THAT(tiled, ::testing::Not(HasSubstr("mstep_block_threads")));
}

TEST(CudaColumnSumsHost, LaunchesAreChunksTimesTilesThenOneThreadPerColumn) {
  testing::CudaStepContext step(kColumnStep);
  auto compiled = compile_cuda_step(step.module(), with_columns(CudaColumnReduction::split));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  // Per op: pass 1 (tiles x chunks blocks), pass 2 over the partials
  // (none with one chunk). 1001 x 300: 10 tiles x 26 chunks of 40 rows
  // (the last of 1); 1 x 300: one chunk; 5000 x 1: 5 chunks of 1024; 200 x
  // 30: 7 chunks of 32 (the last of 8); 2048 x 768: 24 tiles x 11 chunks
  // of 192 (the last of 128).
  std::vector<std::array<unsigned, 3>> grids;
  for (const CudaLaunchStep& launch : plan.launches)
    grids.push_back(plan.kernels[launch.kernel].grid);
  EXPECT_THAT(grids,
              ElementsAre(ElementsAre(260u, 1u, 1u), ElementsAre(2u, 1u, 1u),
                          ElementsAre(10u, 1u, 1u), ElementsAre(5u, 1u, 1u),
                          ElementsAre(1u, 1u, 1u), ElementsAre(7u, 1u, 1u), ElementsAre(1u, 1u, 1u),
                          ElementsAre(264u, 1u, 1u), ElementsAre(3u, 1u, 1u)));
  // Blocks of 256 threads, but one column's pass 2: one thread.
  for (size_t l = 0; l < plan.launches.size(); ++l)
    EXPECT_THAT(plan.kernels[plan.launches[l].kernel].block,
                ElementsAre(l == 4 ? 1u : 256u, 1u, 1u))
        << "launch " << l;
  // Pass 2 reads what pass 1 wrote: an f64 temporary of chunks x columns.
  const CudaLaunchStep& first = plan.launches[0];
  const CudaLaunchStep& second = plan.launches[1];
  ASSERT_EQ(first.args.size(), 2u);
  ASSERT_EQ(second.args.size(), 2u);
  EXPECT_EQ(first.args[0], 0); // input %a
  EXPECT_EQ(second.args[0], first.args[1]);
  EXPECT_EQ(plan.values[first.args[1]], (TensorType{Shape({26 * 300}), DType::f64}));
  EXPECT_EQ(second.args[1], plan.outputs[0]);
}

// GPT-mini's column sums: layer_norm weight gradients (f32) and bias
// gradients (bf16) over [8·256, 256].
constexpr const char* kNormGradientSums = R"(
func.func @step(%x: tensor<8x256x256xf32>, %y: tensor<8x256x256xbf16>) -> (tensor<256xf32>, tensor<1x1x256xbf16>) {
  %s = mstep.sum %x {dims = array<i64: 0, 1>, keepdim = false} : tensor<8x256x256xf32> -> tensor<256xf32>
  %t = mstep.sum %y {dims = array<i64: 0, 1>, keepdim = true} : tensor<8x256x256xbf16> -> tensor<1x1x256xbf16>
  return %s, %t : tensor<256xf32>, tensor<1x1x256xbf16>
})";

TEST(CudaColumnSumsHost, KernelsAssembleWithSharedMemoryAndNoSpills) {
  // A kernel pair per sum (MSTEP_CUDA_ROW_REDUCTION=block: no batches).
  testing::CudaStepContext step(kNormGradientSums);
  CudaCompileOptions options = with_columns(CudaColumnReduction::split);
  options.codegen.row_reduction = CudaRowReduction::block;
  auto compiled = compile_cuda_step(step.module(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_EQ(plan.launches.size(), 4u);
  for (size_t l = 0; l < plan.launches.size(); ++l) {
    const CudaKernelInfo& kernel = plan.kernels[plan.launches[l].kernel];
    const bool pass1 = l % 2 == 0;
    // 8 tiles x 32 chunks of 64 rows, then one block of 256 columns.
    EXPECT_THAT(kernel.grid, ElementsAre(pass1 ? 256u : 1u, 1u, 1u)) << kernel.name;
    if (pass1) {
      EXPECT_THAT(kernel.ptx, HasSubstr(".shared"));
      EXPECT_THAT(kernel.ptx, HasSubstr("bar.sync"));
    }
    ASSERT_EQ(kernel.reports.size(), 2u) << kernel.name; // sm_80, sm_90
    for (const PtxasKernelReport& report : kernel.reports) {
      EXPECT_EQ(report.shared_bytes, pass1 ? 256 * 8 : 0) << kernel.name << " " << report.arch;
      EXPECT_EQ(report.spill_store_bytes, 0) << kernel.name << " " << report.arch;
      EXPECT_EQ(report.spill_load_bytes, 0) << kernel.name << " " << report.arch;
      EXPECT_LE(report.registers, 64) << kernel.name << " " << report.arch;
      std::printf("%s (%s) %s: %d registers, %d bytes shared, spills %d/%d\n", kernel.name.c_str(),
                  pass1 ? "pass 1" : "pass 2", report.arch.c_str(), report.registers,
                  report.shared_bytes, report.spill_store_bytes, report.spill_load_bytes);
    }
  }
}

TEST(CudaColumnSumsHost, SiblingSumsAreOneBatchWithTheBytesOfTheirOwnKernels) {
  // With the default (fused): one kernel pair for both sums
  // (CudaColumnSumBatches.h), each sum's bytes those of its own pair.
  const std::vector<std::vector<char>> inputs = {
      f32_bytes(testing::random_floats(8 * 256 * 256, 31)),
      bf16_bytes(testing::random_floats(8 * 256 * 256, 32))};
  CudaCompileOptions block = with_columns(CudaColumnReduction::split);
  block.codegen.row_reduction = CudaRowReduction::block;
  const HostRun batched = testing::run_step_on_host(kNormGradientSums, inputs,
                                                    with_columns(CudaColumnReduction::split));
  const HostRun alone = testing::run_step_on_host(kNormGradientSums, inputs, block);
  ASSERT_EQ(batched.plan.launches.size(), 2u);
  ASSERT_EQ(alone.plan.launches.size(), 4u);
  const CudaKernelInfo& pass1 = batched.plan.kernels[batched.plan.launches[0].kernel];
  EXPECT_THAT(pass1.origin, HasSubstr("column-sum batch"));
  EXPECT_THAT(pass1.grid, ElementsAre(256u, 1u, 1u));
  for (const PtxasKernelReport& report : pass1.reports) {
    EXPECT_EQ(report.shared_bytes, 2 * 256 * 8) << report.arch;  // a tree buffer per sum
    EXPECT_EQ(report.spill_store_bytes, 0) << report.arch;
  }
  ASSERT_EQ(batched.outputs.size(), 2u);
  ASSERT_EQ(alone.outputs.size(), 2u);
  for (size_t o = 0; o < 2; ++o) EXPECT_TRUE(batched.outputs[o] == alone.outputs[o]) << "output " << o;
}

// ---- clip_grad_norm_ --------------------------------------------------------

/// SGD with clipping over four gradients of 64, 300, 5000 and 3000
/// elements (8364 in all: chunks of 1024, so 1 + 1 + 5 + 3 blocks), norm
/// type `norm`.
std::string clip_step(const char* norm) {
  return std::string(R"(
func.func @step(%w0: tensor<64xf32>, %w1: tensor<300xf32>, %w2: tensor<5000xf32>, %w3: tensor<3000xf32>, %g0: tensor<64xf32>, %g1: tensor<300xf32>, %g2: tensor<5000xf32>, %g3: tensor<3000xf32>, %lr: tensor<f64>)
    -> (tensor<64xf32>, tensor<300xf32>, tensor<5000xf32>, tensor<3000xf32>, tensor<f32>) {
  %p:4, %n = mstep.multi_tensor_update <sgd> params(%w0, %w1, %w2, %w3 : tensor<64xf32>, tensor<300xf32>, tensor<5000xf32>, tensor<3000xf32>) grads(%g0, %g1, %g2, %g3 : tensor<64xf32>, tensor<300xf32>, tensor<5000xf32>, tensor<3000xf32>) lr(%lr) {max_grad_norm = 1.0 : f64, grad_norm_type = )") +
         norm + R"( : f64} -> total_grad_norm tensor<f32>
  return %p#0, %p#1, %p#2, %p#3, %n : tensor<64xf32>, tensor<300xf32>, tensor<5000xf32>, tensor<3000xf32>, tensor<f32>
})";
}

std::vector<std::vector<char>> clip_inputs() {
  std::vector<std::vector<char>> inputs;
  const int64_t sizes[] = {64, 300, 5000, 3000};
  for (int k = 0; k < 4; ++k) inputs.push_back(f32_bytes(testing::random_floats(sizes[k], 70 + k)));
  for (int k = 0; k < 4; ++k) {
    std::vector<float> g = testing::random_floats(sizes[k], 80 + k);
    for (float& v : g) v *= 3.f;
    inputs.push_back(f32_bytes(g));
  }
  const double lr = 0.05;
  std::vector<char> lr_bytes(sizeof lr);
  std::memcpy(lr_bytes.data(), &lr, sizeof lr);
  inputs.push_back(lr_bytes);
  return inputs;
}

TEST(CudaColumnSumsHost, ClipNormsSplitOverBlocksMatchRef) {
  const std::vector<std::vector<char>> inputs = clip_inputs();
  // L2, L1, inf and a p of 3: the per-gradient f64 sums in chunks and a
  // tree (the inf-norm's max is exact in any order), then ref's roundings.
  for (const char* norm : {"2.0", "1.0", "0x7FF0000000000000", "3.0"}) {
    const std::string text = clip_step(norm);
    testing::CudaStepContext step(text.c_str());
    auto ref = testing::ref_outputs(step.module(), inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    for (CudaColumnReduction form : {CudaColumnReduction::split, CudaColumnReduction::thread}) {
      const char* name = form == CudaColumnReduction::split ? "split" : "thread";
      const HostRun run = run_host(text, inputs, form);
      ASSERT_EQ(run.outputs.size(), 5u);
      // The per-gradient sums differ from ref's by f64 roundings only:
      // within an f32 ulp once rounded, so the norm and the total within
      // a few ulps, and the clipped update (p - lr·g·coef, each rounded)
      // within a few ulps of its largest term.
      const double total = element(run.outputs[4], false, 0);
      const double want = element((*ref)[4], false, 0);
      EXPECT_NEAR(total, want, 4 * ulp(want, false)) << norm << " " << name;
      EXPECT_GT(want, 1.0) << norm; // it clips
      for (int o = 0; o < 4; ++o) {
        const size_t n = run.outputs[o].size() / sizeof(float);
        for (size_t i = 0; i < n; ++i) {
          const double p = element(run.outputs[o], false, i), r = element((*ref)[o], false, i);
          const double scale = std::fabs(element(inputs[o], false, i)) +
                               0.05 * std::fabs(element(inputs[4 + o], false, i));
          ASSERT_NEAR(p, r, 8 * ulp(scale, false))
              << norm << " " << name << " param " << o << " element " << i;
        }
      }
    }
  }
}

TEST(CudaColumnSumsHost, ClipNormsAreTwoLaunchesSplitAndOnePerGradientThread) {
  const std::string text = clip_step("2.0");
  testing::CudaStepContext step(text.c_str());
  auto split = compile_cuda_step(step.module(), with_columns(CudaColumnReduction::split));
  ASSERT_TRUE(split.ok()) << split.status();
  auto thread = compile_cuda_step(step.module(), with_columns(CudaColumnReduction::thread));
  ASSERT_TRUE(thread.ok()) << thread.status();
  // split: pass 1 (10 chunks), pass 2 (one block: the norms, then the
  // total), then the update (one launch for all four) and the step counter.
  const CudaPlan& plan = split->plan;
  ASSERT_GE(plan.launches.size(), 3u);
  const CudaKernelInfo& pass1 = plan.kernels[plan.launches[0].kernel];
  const CudaKernelInfo& pass2 = plan.kernels[plan.launches[1].kernel];
  EXPECT_THAT(pass1.grid, ElementsAre(10u, 1u, 1u));
  EXPECT_THAT(pass1.block, ElementsAre(256u, 1u, 1u));
  EXPECT_THAT(pass2.grid, ElementsAre(1u, 1u, 1u));
  EXPECT_THAT(pass2.block, ElementsAre(32u, 1u, 1u));
  // pass 1 reads the four gradients and writes the partials that pass 2 reads.
  EXPECT_EQ(plan.launches[0].args.size(), 5u);
  EXPECT_EQ(plan.launches[1].args[0], plan.launches[0].args[4]);
  for (const PtxasKernelReport& report : pass1.reports) {
    EXPECT_EQ(report.shared_bytes, 256 * 8) << report.arch;
    EXPECT_EQ(report.spill_store_bytes, 0) << report.arch;
    std::printf("clip pass 1 %s: %d registers, %d bytes shared\n", report.arch.c_str(),
                report.registers, report.shared_bytes);
  }
  // thread: a launch of one thread per gradient, then the total.
  EXPECT_EQ(thread->plan.launches.size(), plan.launches.size() - 2 + 5);
  EXPECT_THAT(thread->plan.kernels[thread->plan.launches[0].kernel].grid, ElementsAre(1u, 1u, 1u));
  EXPECT_THAT(thread->plan.kernels[thread->plan.launches[0].kernel].block, ElementsAre(1u, 1u, 1u));
}

// ---- the fake driver ----------------------------------------------------------

class CudaColumnSumsLaunchTest : public testing::FakeCudaBackendTest {};

std::string pointer_bytes(const Buffer& buffer) {
  CUdeviceptr pointer = CudaBackend::device_pointer(buffer);
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

TEST_F(CudaColumnSumsLaunchTest, PassOneThenPassTwoThroughTheTemporary) {
  testing::CudaStepContext step(R"(
func.func @step(%x: tensor<1001x300xf32>) -> tensor<300xf32> {
  %s = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<1001x300xf32> -> tensor<300xf32>
  return %s : tensor<300xf32>
})");
  auto compiled = compile_cuda_step(step.module(), with_columns(CudaColumnReduction::split));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = CudaExecutable::create(*backend_, compiled->plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input(TensorType{Shape({1001, 300}), DType::f32});
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const std::vector<testing::FakeCall> launches = launches_since(before);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_THAT(launches[0].grid, ElementsAre(260u, 1u, 1u));
  EXPECT_THAT(launches[1].grid, ElementsAre(2u, 1u, 1u));
  for (const testing::FakeCall& launch : launches) {
    EXPECT_THAT(launch.block, ElementsAre(256u, 1u, 1u));
    EXPECT_EQ(launch.shared_bytes, 0u); // static shared memory only
    ASSERT_EQ(launch.args.size(), 2u);
    for (const std::string& arg : launch.args) EXPECT_EQ(arg.size(), sizeof(CUdeviceptr));
  }
  // Pass 1: the input, the partials; pass 2: the partials, the output.
  EXPECT_EQ(launches[0].args[0], pointer_bytes(*x));
  EXPECT_EQ(launches[1].args[0], launches[0].args[1]);
  EXPECT_EQ(launches[1].args[1], pointer_bytes(*(*outputs)[0]));
  EXPECT_NE(launches[0].args[1], pointer_bytes(*(*outputs)[0]));
}

TEST(CudaColumnSumsOption, EnvironmentPicksTheFormAndRejectsOtherValues) {
  ::setenv("MSTEP_CUDA_COLUMN_REDUCTION", "thread", 1);
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.column_reduction,
            CudaColumnReduction::thread);
  ::setenv("MSTEP_CUDA_COLUMN_REDUCTION", "atomic", 1);
  ::testing::internal::CaptureStderr();
  const RuntimeOptions bad = RuntimeOptions::from_env();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("MSTEP_CUDA_COLUMN_REDUCTION=atomic"));
  EXPECT_EQ(cuda_compile_options(bad).codegen.column_reduction, CudaColumnReduction::split);
  ::unsetenv("MSTEP_CUDA_COLUMN_REDUCTION");
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.column_reduction,
            CudaColumnReduction::split);
}

} // namespace
} // namespace mstep::cuda
