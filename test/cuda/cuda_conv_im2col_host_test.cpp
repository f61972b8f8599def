// Host numerics of the im2col form of the convolutions on cuda
// (CudaConvLowering.h): steps of conv2d, its input gradient and its weight
// gradient are compiled for cuda (their kernels assembled for sm_80 and
// sm_90 by ptxas), and their plans run on this CPU (run_plan_on_host: the
// im2col, col2im, swap and bias kernels' tiled loop nests, the cuBLASLt
// steps as host GEMMs). cuBLASLt adds in its own order, so each element is
// checked against ref's within the sum's rounding: |cuda - ref| <=
// (n + 2) u S + u |ref|, with n the terms of the element's sum (R = C/G x
// kh x kw for the forward op, O/G x kh x kw for the input gradient, N x OH
// x OW for the weight gradient), u the dtype's unit roundoff (2^-24; 2^-8
// for bf16, whose matmul result is rounded before col2im and the bias add;
// 2^-11 for f16, whose matmul result stays f32 there) and S = sum |x w|
// (+ |bias|): ref's outputs for |x|, |w|, |bias|. The same steps with
// MSTEP_CUDA_CONV=direct match ref bit for bit. Shapes: groups, stride 2,
// dilation, padding, 1x1, batch 1, bf16, f16 (also the conformance cases'
// f16 convolutions, and f16 sums past f16's range).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaConvGeometry.h"
#include "lib/backends/cuda/CudaPlanSummary.h"
#include "lib/compiler/Compiler.h"
#include "test/cuda/ConformanceSteps.h"
#include "test/cuda/HostVsRef.h"

namespace mstep::cuda::testing {
namespace {

struct Geometry {
  int64_t n, c, h, w, o, groups, kh, kw;
  std::array<int64_t, 2> stride = {1, 1}, pad = {0, 0}, dilation = {1, 1};
  bool bias = false;
  DType dtype = DType::f32;
  int64_t out(int d) const {
    const int64_t in = d == 0 ? h : w, k = d == 0 ? kh : kw;
    return (in + 2 * pad[d] - dilation[d] * (k - 1) - 1) / stride[d] + 1;
  }
};

std::string dims(std::initializer_list<int64_t> d, DType dtype) {
  std::string s = "tensor<";
  for (int64_t v : d) absl::StrAppend(&s, v, "x");
  return absl::StrCat(s, dtype_name(dtype), ">");
}

/// func @step(x, w, [b,] dy) -> (y, dx, dw) of `g`.
std::string step_text(const Geometry& g) {
  const std::string x = dims({g.n, g.c, g.h, g.w}, g.dtype),
                    w = dims({g.o, g.c / g.groups, g.kh, g.kw}, g.dtype), b = dims({g.o}, g.dtype),
                    y = dims({g.n, g.o, g.out(0), g.out(1)}, g.dtype);
  const std::string attrs = absl::StrCat(
      "{dilation = array<i64: ", g.dilation[0], ", ", g.dilation[1], ">, groups = ", g.groups,
      " : i64, padding = array<i64: ", g.pad[0], ", ", g.pad[1], ">, stride = array<i64: ",
      g.stride[0], ", ", g.stride[1], ">}");
  return absl::StrCat(
      "func.func @step(%x: ", x, ", %w: ", w, g.bias ? absl::StrCat(", %b: ", b) : "", ", %g: ", y,
      ") -> (", y, ", ", x, ", ", w, ") {\n",
      "  %y = mstep.conv2d %x, %w", g.bias ? ", %b " : " ", attrs, " : ", x, ", ", w,
      g.bias ? absl::StrCat(", ", b) : "", " -> ", y, "\n",
      "  %dx = mstep.conv2d_input_grad %g, %w ", attrs, " : ", y, ", ", w, " -> ", x, "\n",
      "  %dw = mstep.conv2d_weight_grad %x, %g ", attrs, " : ", x, ", ", y, " -> ", w, "\n",
      "  return %y, %dx, %dw : ", y, ", ", x, ", ", w, "\n}");
}

/// Random inputs of `g` (x, w, [b,] dy), and their absolute values.
struct Inputs {
  std::vector<std::vector<char>> values, magnitudes;
};

/// `v` rounded to `dtype` (f32, bf16 or f16), as bytes.
std::vector<char> bytes_in(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::f32) return bytes_of(v);
  if (dtype == DType::bf16) {
    std::vector<BFloat16> out;
    for (float x : v) out.push_back(BFloat16(x));
    return bytes_of(out);
  }
  std::vector<Float16> out;
  for (float x : v) out.push_back(Float16(x));
  return bytes_of(out);
}

Inputs inputs_of(const Geometry& g, uint32_t seed) {
  std::vector<int64_t> sizes = {g.n * g.c * g.h * g.w, g.o * (g.c / g.groups) * g.kh * g.kw};
  if (g.bias) sizes.push_back(g.o);
  sizes.push_back(g.n * g.o * g.out(0) * g.out(1));
  Inputs in;
  for (int64_t size : sizes) {
    std::vector<float> v = random_floats(static_cast<size_t>(size), seed++), a = v;
    for (float& x : a) x = std::fabs(x);
    in.values.push_back(bytes_in(v, g.dtype));
    in.magnitudes.push_back(bytes_in(a, g.dtype));
  }
  return in;
}

std::vector<double> doubles(const std::vector<char>& bytes, DType dtype) {
  std::vector<double> out;
  if (dtype == DType::bf16)
    for (BFloat16 v : values_of<BFloat16>(bytes)) out.push_back(float(v));
  else if (dtype == DType::f16)
    for (Float16 v : values_of<Float16>(bytes)) out.push_back(float(v));
  else
    for (float v : values_of<float>(bytes)) out.push_back(v);
  return out;
}

/// The unit roundoff of `dtype`'s results (f32, bf16 or f16).
double unit_roundoff(DType dtype) {
  return std::ldexp(1.0, dtype == DType::bf16 ? -8 : dtype == DType::f16 ? -11 : -24);
}

/// The plan of `text` under `options`, run on the host (run_plan_on_host).
struct PlanRun {
  CudaPlan plan;
  std::vector<std::vector<char>> outputs;
};

PlanRun run_plan(const std::string& text, const std::vector<std::vector<char>>& inputs,
                 const CudaCompileOptions& options) {
  PlanRun run;
  CudaStepContext step(text.c_str());
  auto compiled = compile_cuda_step(step.module(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return run;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  run_plan_on_host(step.context(), *compiled, values);
  for (int id : compiled->plan.outputs) {
    const char* bytes = host_bytes(&compiled->plan, values, id);
    run.outputs.emplace_back(bytes, bytes + compiled->plan.values[id].bytes());
  }
  run.plan = std::move(compiled->plan);
  return run;
}

CudaCompileOptions with_form(CudaConvForm form) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.conv = form;
  return options;
}

/// How many kernels of `plan` have an origin ending in `what`.
int kernels_named(const CudaPlan& plan, const std::string& what) {
  int n = 0;
  for (const CudaKernelInfo& kernel : plan.kernels)
    if (absl::EndsWith(kernel.origin, what)) ++n;
  return n;
}

/// Both forms of `g`'s step against ref: the direct loops bit for bit, the
/// im2col form within the rounding bound above. Returns the im2col plan.
CudaPlan check_both_forms(const Geometry& g, uint32_t seed) {
  SCOPED_TRACE(step_text(g));
  const std::string text = step_text(g);
  const Inputs in = inputs_of(g, seed);
  CudaStepContext step(text.c_str());
  auto ref = ref_outputs(step.module(), in.values);
  auto magnitude = ref_outputs(step.module(), in.magnitudes);
  EXPECT_TRUE(ref.ok() && magnitude.ok());
  if (!ref.ok() || !magnitude.ok()) return {};

  const PlanRun direct = run_plan(text, in.values, with_form(CudaConvForm::direct));
  EXPECT_EQ(summarize_cuda_plan(direct.plan).conv_gemms, 0);
  EXPECT_EQ(summarize_cuda_plan(direct.plan).conv_direct, 3);
  for (size_t k = 0; k < direct.outputs.size(); ++k)
    EXPECT_TRUE(direct.outputs[k] == (*ref)[k]) << "direct form, output " << k;

  const PlanRun im2col = run_plan(text, in.values, with_form(CudaConvForm::im2col));
  EXPECT_EQ(summarize_cuda_plan(im2col.plan).conv_gemms, 3);
  EXPECT_EQ(summarize_cuda_plan(im2col.plan).conv_direct, 0);
  const double u = unit_roundoff(g.dtype);
  const int64_t taps = g.kh * g.kw;
  const int64_t terms[3] = {g.c / g.groups * taps, g.o / g.groups * taps,
                            g.n * g.out(0) * g.out(1)};
  EXPECT_EQ(im2col.outputs.size(), 3u);
  for (size_t k = 0; k < im2col.outputs.size() && k < 3; ++k) {
    const std::vector<double> got = doubles(im2col.outputs[k], g.dtype),
                              want = doubles((*ref)[k], g.dtype),
                              scale = doubles((*magnitude)[k], g.dtype);
    EXPECT_EQ(got.size(), want.size());
    if (got.size() != want.size()) continue;
    int bad = 0;
    double worst = 0;  // the largest error as a fraction of its bound
    for (size_t i = 0; i < got.size(); ++i) {
      const double bound = (terms[k] + 2) * u * scale[i] * (1 + 2 * u) + u * std::fabs(want[i]);
      const double error = std::fabs(got[i] - want[i]);
      worst = std::max(worst, bound > 0 ? error / bound : error);
      if (!(error <= bound) && bad++ < 5)
        ADD_FAILURE() << "im2col form, output " << k << " element " << i << ": ref " << want[i]
                      << ", cuda (host) " << got[i] << ", bound " << bound;
    }
    EXPECT_EQ(bad, 0) << "output " << k << ": " << bad << " elements over the bound";
    std::printf("output %zu: worst error %.3f of its bound\n", k, worst);
  }
  return im2col.plan;
}

TEST(CudaConvIm2colHost, GroupsStrideTwoPaddingAndDilationWithBias) {
  // Two groups and a batch of 2: the columns by group, the forward
  // product swapped back to [N][O][P] with the bias, dy swapped for both
  // gradients.
  const CudaPlan plan = check_both_forms(
      {.n = 2, .c = 4, .h = 7, .w = 9, .o = 6, .groups = 2, .kh = 3, .kw = 2, .stride = {2, 1},
       .pad = {1, 2}, .dilation = {1, 2}, .bias = true},
      30);
  EXPECT_EQ(kernels_named(plan, ": im2col"), 2);  // forward, weight gradient
  EXPECT_EQ(kernels_named(plan, ": col2im"), 1);
  EXPECT_EQ(kernels_named(plan, ": swap_out_bias"), 1);
  EXPECT_EQ(kernels_named(plan, ": swap_grad"), 2);
}

TEST(CudaConvIm2colHost, StrideTwoOneGroupBatchThree) {
  // One group: a batch of images per matmul, the bias added in place.
  const CudaPlan plan = check_both_forms({.n = 3, .c = 3, .h = 8, .w = 8, .o = 5, .groups = 1,
                                          .kh = 3, .kw = 3, .stride = {2, 2}, .pad = {1, 1},
                                          .bias = true},
                                         40);
  EXPECT_EQ(kernels_named(plan, ": bias"), 1);
  EXPECT_EQ(kernels_named(plan, ": swap_grad"), 1);  // the weight gradient's
}

TEST(CudaConvIm2colHost, DilationAndPaddingAtBatchOne) {
  check_both_forms({.n = 1, .c = 2, .h = 9, .w = 7, .o = 3, .groups = 1, .kh = 3, .kw = 3,
                    .pad = {2, 2}, .dilation = {2, 2}},
                   50);
}

TEST(CudaConvIm2colHost, PointwiseReadsTheInputAsItsColumns) {
  // 1x1 at stride 1: no im2col for the forward op, no col2im for the input
  // gradient (the matmul writes dx); the weight gradient of a batch of 2
  // still lays its columns out by group.
  const CudaPlan plan = check_both_forms(
      {.n = 2, .c = 5, .h = 3, .w = 7, .o = 4, .groups = 1, .kh = 1, .kw = 1, .bias = true}, 60);
  EXPECT_EQ(kernels_named(plan, ": im2col"), 1);
  EXPECT_EQ(kernels_named(plan, ": col2im"), 0);
  // Batch 1 with groups: every layout is the input's.
  const CudaPlan one = check_both_forms(
      {.n = 1, .c = 6, .h = 4, .w = 5, .o = 4, .groups = 2, .kh = 1, .kw = 1}, 70);
  EXPECT_EQ(one.kernels.size(), 0u);
  EXPECT_EQ(one.launches.size(), 3u);
}

TEST(CudaConvIm2colHost, DepthwiseWithBias) {
  check_both_forms({.n = 2, .c = 3, .h = 5, .w = 5, .o = 3, .groups = 3, .kh = 3, .kw = 3,
                    .pad = {1, 1}, .bias = true},
                   80);
}

TEST(CudaConvIm2colHost, Bf16GroupsAndBias) {
  check_both_forms({.n = 2, .c = 4, .h = 6, .w = 5, .o = 4, .groups = 2, .kh = 3, .kw = 3,
                    .pad = {1, 1}, .bias = true, .dtype = DType::bf16},
                   90);
  check_both_forms({.n = 1, .c = 3, .h = 6, .w = 5, .o = 4, .groups = 1, .kh = 3, .kw = 3,
                    .stride = {2, 2}, .pad = {1, 1}, .dtype = DType::bf16},
                   95);
}

/// How many of `plan`'s matmul steps write an f32 result (f16's sums that
/// a kernel adds to: the forward product before its bias, the column
/// gradients col2im sums).
int f32_results(const CudaPlan& plan) {
  int n = 0;
  for (const CudaMatmulInfo& m : plan.matmuls) n += m.shape.f32_result;
  return n;
}

TEST(CudaConvIm2colHost, F16ShapesRoundOnlyTheirOutputs) {
  // Groups, stride 2x1, padding, dilation and a bias at batch 2: the f32
  // product swapped back with the bias, col2im from f32 column gradients.
  CudaPlan plan = check_both_forms(
      {.n = 2, .c = 4, .h = 7, .w = 9, .o = 6, .groups = 2, .kh = 3, .kw = 2, .stride = {2, 1},
       .pad = {1, 2}, .dilation = {1, 2}, .bias = true, .dtype = DType::f16},
      130);
  EXPECT_EQ(kernels_named(plan, ": swap_out_bias"), 1);
  EXPECT_EQ(f32_results(plan), 2);
  // Stride 2 at batch 1 with a bias: the bias added to the f32 product out
  // of place.
  plan = check_both_forms({.n = 1, .c = 3, .h = 8, .w = 7, .o = 5, .groups = 1, .kh = 3,
                           .kw = 3, .stride = {2, 2}, .pad = {1, 1}, .bias = true,
                           .dtype = DType::f16},
                          140);
  EXPECT_EQ(kernels_named(plan, ": bias"), 1);
  EXPECT_EQ(f32_results(plan), 2);
  // Dilation and padding at batch 3 without a bias: the forward matmul
  // writes y (f16) itself; only col2im's columns are f32.
  plan = check_both_forms({.n = 3, .c = 2, .h = 9, .w = 7, .o = 3, .groups = 1, .kh = 3,
                           .kw = 3, .pad = {2, 2}, .dilation = {2, 2}, .dtype = DType::f16},
                          150);
  EXPECT_EQ(f32_results(plan), 1);
  // 1x1 with a bias at batch 2: no col2im (the matmul writes dx).
  plan = check_both_forms({.n = 2, .c = 5, .h = 3, .w = 7, .o = 4, .groups = 1, .kh = 1,
                           .kw = 1, .bias = true, .dtype = DType::f16},
                          160);
  EXPECT_EQ(kernels_named(plan, ": col2im"), 0);
  EXPECT_EQ(f32_results(plan), 1);
  // Depthwise with a bias at batch 1: the groups' product is y's layout.
  plan = check_both_forms({.n = 1, .c = 3, .h = 5, .w = 5, .o = 3, .groups = 3, .kh = 3,
                           .kw = 3, .pad = {1, 1}, .bias = true, .dtype = DType::f16},
                          170);
  EXPECT_EQ(kernels_named(plan, ": swap_out_bias"), 0);
  EXPECT_EQ(kernels_named(plan, ": bias"), 1);
}

TEST(CudaConvIm2colHost, F16SumsPastItsRangeAreInfWhereRefsAreAndOnlyThere) {
  // x [1, 1, 4, 1] = (400, 100, 100, 300), w [1, 1, 2, 1] = (256, -256),
  // bias -20000, dy = (300, 300, -300). Every partial sum is an integer
  // below 2^24, exact in f32 in any order, so cuda's outputs must equal
  // ref's bit for bit, infinities included:
  //   y  = (256 (400 - 100) - 20000, -20000, 256 (100 - 300) - 20000)
  //      = (56800, -20000, -inf): y[0]'s product 76800 is past f16's 65504;
  //   dx = (76800, 76800 - 76800, -76800 - 76800, 76800) = (inf, 0, -inf,
  //      inf): every column gradient is +-76800 (in f16 they would be
  //      +-inf and dx[1] inf - inf = NaN);
  //   dw = (300 (400 + 100 - 100), 300 (100 + 100 - 300)) = (inf, -30000).
  const Geometry g{.n = 1, .c = 1, .h = 4, .w = 1, .o = 1, .groups = 1, .kh = 2, .kw = 1,
                   .bias = true, .dtype = DType::f16};
  const std::string text = step_text(g);
  const std::vector<std::vector<char>> inputs = {
      bytes_in({400, 100, 100, 300}, DType::f16), bytes_in({256, -256}, DType::f16),
      bytes_in({-20000}, DType::f16), bytes_in({300, 300, -300}, DType::f16)};
  CudaStepContext step(text.c_str());
  auto ref = ref_outputs(step.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->size(), 3u);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(doubles((*ref)[0], DType::f16), ::testing::ElementsAre(56800, -20000, -inf));
  EXPECT_THAT(doubles((*ref)[1], DType::f16), ::testing::ElementsAre(inf, 0, -inf, inf));
  EXPECT_THAT(doubles((*ref)[2], DType::f16), ::testing::ElementsAre(inf, -30000));
  for (CudaConvForm form : {CudaConvForm::direct, CudaConvForm::im2col}) {
    const PlanRun run = run_plan(text, inputs, with_form(form));
    ASSERT_EQ(run.outputs.size(), 3u);
    for (size_t k = 0; k < 3; ++k)
      EXPECT_TRUE(run.outputs[k] == (*ref)[k])
          << (form == CudaConvForm::im2col ? "im2col" : "direct") << " form, output " << k
          << ": " << ::testing::PrintToString(doubles(run.outputs[k], DType::f16));
  }
}

TEST(CudaConvIm2colHost, ConformanceF16ConvolutionsWithinTheirBound) {
  // The convolutions of the conformance suite's f16 cases (the f16 twins
  // of all_cases_with_f16()), each geometry checked as above on random
  // inputs: the direct loops bit for bit, the im2col form within (n + 2)
  // u S + u |ref|, u = 2^-11.
  std::vector<Geometry> geometries;
  for (const conformance::ConformanceCase& c : conformance::all_cases_with_f16()) {
    bool f16 = false;
    for (const conformance::InputSpec& s : c.inputs) f16 |= s.dtype == DType::f16;
    if (!f16) continue;
    std::optional<RefStep> step = run_case_on_ref(c);
    if (!step) continue;
    absl::Status status = with_optimized_module(
        *step->graph, "cuda", CompileOptions{}, RuntimeOptions{}, [&](mlir::ModuleOp module) {
          module.walk([&](dialect::Conv2dOp op) {
            const conv::Conv v = conv::geometry_of(op);
            const auto element = mlir::cast<mlir::ShapedType>(op.getType()).getElementType();
            if (!element.isF16()) return;
            geometries.push_back({.n = v.batch, .c = v.channels, .h = v.height, .w = v.width,
                                  .o = v.out_channels, .groups = v.groups, .kh = v.kernel_h,
                                  .kw = v.kernel_w, .stride = v.stride, .pad = v.pad,
                                  .dilation = v.dilation, .bias = static_cast<bool>(op.getBias()),
                                  .dtype = DType::f16});
          });
          return absl::OkStatus();
        });
    ASSERT_TRUE(status.ok()) << c.name << ": " << status;
  }
  ASSERT_FALSE(geometries.empty()) << "no f16 convolution among the conformance cases";
  uint32_t seed = 200;
  for (const Geometry& g : geometries) check_both_forms(g, seed += 10);
}

TEST(CudaConvIm2colHost, DirectLoopsWhereTheScratchIsTooLargeOrTheDtypeIsNotCublasLts) {
  const Geometry g{.n = 2, .c = 4, .h = 7, .w = 9, .o = 6, .groups = 2, .kh = 3, .kw = 2,
                   .pad = {1, 1}, .bias = true};
  CudaCompileOptions options = with_form(CudaConvForm::im2col);
  options.codegen.conv_im2col_max_bytes = 64;
  const std::string text = step_text(g);
  CudaStepContext step(text.c_str());
  auto compiled = compile_cuda_step(step.module(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(summarize_cuda_plan(compiled->plan).conv_gemms, 0);
  EXPECT_EQ(summarize_cuda_plan(compiled->plan).conv_direct, 3);
  EXPECT_THAT(compiled->plan.kernels[0].origin,
              ::testing::HasSubstr("direct loops (im2col scratch of"));
  CudaStepContext f64(R"(
func.func @step(%x: tensor<1x2x5x5xf64>, %w: tensor<3x2x3x3xf64>) -> tensor<1x3x3x3xf64> {
  %y = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x2x5x5xf64>, tensor<3x2x3x3xf64> -> tensor<1x3x3x3xf64>
  return %y : tensor<1x3x3x3xf64>
})");
  auto wide = compile_cuda_step(f64.module(), default_cuda_compile_options());
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_THAT(describe_cuda_step(wide->plan, wide->plan.launches[0]),
              ::testing::HasSubstr("direct loops (f64: the im2col form takes f32, bf16 and f16"));
}

TEST(CudaConvIm2colOption, EnvironmentPicksTheFormAndRejectsOtherValues) {
  EXPECT_EQ(cuda_compile_options(RuntimeOptions{}).codegen.conv, CudaConvForm::im2col);
  ::setenv("MSTEP_CUDA_CONV", "direct", 1);
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.conv, CudaConvForm::direct);
  ::setenv("MSTEP_CUDA_CONV", "winograd", 1);
  ::testing::internal::CaptureStderr();
  const RuntimeOptions bad = RuntimeOptions::from_env();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ::testing::HasSubstr("MSTEP_CUDA_CONV=winograd is neither 'im2col' nor 'direct'"));
  EXPECT_EQ(cuda_compile_options(bad).codegen.conv, CudaConvForm::im2col);
  ::unsetenv("MSTEP_CUDA_CONV");
}

TEST(CudaConvIm2colHost, ConformanceConvCasesTakeTheIm2colForm) {
  // The conformance suite's conv2d training steps (test/unit/conformance/
  // NNCases.h: forward, input and weight gradients; their f16 twins) in
  // both forms: every f32, bf16 and f16 convolution takes the im2col form;
  // the steps per replay of each plan are printed (README, notes: the
  // launch counts).
  int cases = 0;
  for (const conformance::ConformanceCase& c : conformance::all_cases_with_f16()) {
    if (!absl::StartsWith(c.name, "conv2d")) continue;
    std::optional<RefStep> step = run_case_on_ref(c);
    if (!step) continue;
    CudaPlanSummary forms[2];
    for (CudaConvForm form : {CudaConvForm::direct, CudaConvForm::im2col}) {
      absl::Status status = with_optimized_module(
          *step->graph, "cuda", CompileOptions{}, RuntimeOptions{}, [&](mlir::ModuleOp module) {
            absl::StatusOr<CompiledCudaStep> compiled = compile_cuda_step(module, with_form(form));
            if (!compiled.ok()) return compiled.status();
            forms[form == CudaConvForm::im2col] = summarize_cuda_plan(compiled->plan);
            return absl::OkStatus();
          });
      ASSERT_TRUE(status.ok()) << c.name << ": " << status;
    }
    const CudaPlanSummary &direct = forms[0], &im2col = forms[1];
    EXPECT_GT(direct.conv_direct, 0) << c.name;
    EXPECT_EQ(im2col.conv_direct, 0) << c.name;
    EXPECT_EQ(im2col.conv_gemms, direct.conv_direct) << c.name << ": a gemm per convolution";
    std::printf("%-28s direct: %3lld steps (%3lld launches, %lld cuBLASLt)   im2col: %3lld steps "
                "(%3lld launches, %lld cuBLASLt, %lld of them convolutions), arena %.1f -> %.1f KiB\n",
                c.name.c_str(), static_cast<long long>(direct.steps),
                static_cast<long long>(direct.launches), static_cast<long long>(direct.cublaslt),
                static_cast<long long>(im2col.steps), static_cast<long long>(im2col.launches),
                static_cast<long long>(im2col.cublaslt), static_cast<long long>(im2col.conv_gemms),
                direct.arena_bytes / 1024.0, im2col.arena_bytes / 1024.0);
    ++cases;
  }
  EXPECT_GE(cases, 8);
}

}  // namespace
}  // namespace mstep::cuda::testing
