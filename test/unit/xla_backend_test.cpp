// The xla backend as the runtime sees it: a step compiles to one native
// function (one kernel per run); fusions and f32 matmuls, batched or not
// and reading transposed operands in place, run inside it and equal ref;
// the ops it does not compute are callouts to the cpu backend's kernels,
// named, and those that run a ref kernel are counted as host fallbacks
// every run; a callout that fails stops the step before a donated
// parameter is written; values with disjoint lifetimes share the one temp
// arena; each run splits its large loop nests over the threads by the
// thread count at that run; the disk cache keeps the step function's
// stored form and a load runs it without compiling.
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::RecordSteps;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

Tensor on(Device d, Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, d);
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "element " << i;
}

/// The xla executable of the last step's graph, compiled again.
struct Compiled {
  std::unique_ptr<Executable> executable;
  int64_t planned_arena = 0;
  xla::XlaExecutable* xla() { return dynamic_cast<xla::XlaExecutable*>(executable.get()); }
};

Compiled compile_last_step() {
  const StepRecord& step = Tracer::get().last_step();
  EXPECT_NE(step.graph, nullptr);
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  return {std::move(compiled->executable), compiled->arena_bytes};
}

TEST(XlaBackend, IsARegisteredDeviceWithACompileHalf) {
  EXPECT_EQ(*BackendRegistry::device_type("xla"), DeviceType::xla);
  absl::StatusOr<BackendCompiler*> compiler = CompilerRegistry::get("xla");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  EXPECT_EQ((*compiler)->backend_name(), "xla");
}

TEST(XlaBackend, MlpForwardIsOneFunctionWithoutCallouts) {
  RecordSteps record;
  Tensor x = on(kXla, {5, 7}, 1), w1 = on(kXla, {7, 9}, 2), b1 = on(kXla, {9}, 3);
  Tensor w2 = on(kXla, {9, 3}, 4);
  Tensor y = matmul(relu(matmul(x, w1) + b1), w2);
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_EQ(compiled.executable->num_kernels(), 1u);
  EXPECT_TRUE(compiled.xla()->callout_names().empty());
  EXPECT_TRUE(compiled.executable->host_fallbacks().empty());
  Tensor xr = on(kRef, {5, 7}, 1), w1r = on(kRef, {7, 9}, 2), b1r = on(kRef, {9}, 3);
  Tensor yr = matmul(relu(matmul(xr, w1r) + b1r), on(kRef, {9, 3}, 4));
  expect_near(y.to_vector<float>(), yr.to_vector<float>());
}

TEST(XlaBackend, BatchedMatmulsRunInsideTheFunction) {
  RecordSteps record;
  // Equal batches; a batched lhs times a matrix (one gemm over the rows);
  // a matrix times a batched rhs (the lhs broadcast over the batch).
  auto products = [](Device d) {
    return std::vector<Tensor>{matmul(on(d, {2, 5, 7}, 1), on(d, {2, 7, 3}, 2)),
                               matmul(on(d, {2, 5, 7}, 3), on(d, {7, 3}, 4)),
                               matmul(on(d, {5, 7}, 5), on(d, {2, 7, 3}, 6))};
  };
  std::vector<Tensor> got = products(kXla);
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_TRUE(compiled.xla()->callout_names().empty());
  std::vector<Tensor> want = products(kRef);
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(got[i].to_vector<float>(), want[i].to_vector<float>());
  }
}

TEST(XlaBackend, GemmsReadTransposedOperandsInPlace) {
  // linear reads W^T, and the backward's weight gradient is x^T-shaped
  // products: the gemms read the transposes' sources, so no permute is
  // called out; the gradients still equal ref's.
  RecordSteps record;
  Tensor w = on(kXla, {16, 32}, 1).requires_grad_(), b = on(kXla, {16}, 2).requires_grad_();
  Tensor loss = sum(relu(linear(on(kXla, {8, 32}, 3), w, b)));
  loss.backward();
  Tensor gw = w.grad();
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_THAT(compiled.xla()->callout_names(), ::testing::Not(::testing::Contains("permute")));
  Tensor wr = on(kRef, {16, 32}, 1).requires_grad_(), br = on(kRef, {16}, 2).requires_grad_();
  sum(relu(linear(on(kRef, {8, 32}, 3), wr, br))).backward();
  expect_near(gw.to_vector<float>(), wr.grad().to_vector<float>());
}

TEST(XlaBackend, AGemmWritesItsTransposedResultAndLaterGemmsReadIt) {
  // (x y)^T is written by the gemm as y^T x^T; the next product reads that
  // transpose (not the untransposed product, which is never stored), and
  // so does the step's output.
  RecordSteps record;
  auto run = [](Device d) {
    Tensor t = transpose(matmul(on(d, {4, 6}, 1), on(d, {6, 5}, 2)), 0, 1);
    return std::vector<Tensor>{t, matmul(t, on(d, {4, 3}, 3))};
  };
  std::vector<Tensor> got = run(kXla);
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_TRUE(compiled.xla()->callout_names().empty());
  std::vector<Tensor> want = run(kRef);
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(got[i].to_vector<float>(), want[i].to_vector<float>());
  }
}

/// An f64 softmax, as f32: the function has no loop for it (its loop
/// takes f32, bf16 and f16), so a callout.
Tensor f64_softmax(Device d) {
  return to(softmax(to(on(d, {2, 5, 7}, 1), DType::f64), 1), DType::f32);
}

TEST(XlaBackend, OpsTheFunctionDoesNotComputeAreCallouts) {
  RecordSteps record;
  // The sum over dims that are not one block is a loop; the f64 softmax
  // a callout.
  Tensor s = mean(sum(f64_softmax(kXla), {0, 2}));
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_THAT(compiled.xla()->callout_names(), ElementsAre("softmax"));
  EXPECT_EQ(compiled.executable->num_kernels(), 1u);
  EXPECT_NEAR(s.item(), mean(sum(f64_softmax(kRef), {0, 2})).item(), 1e-5);
}

TEST(XlaBackend, CalloutsThatRunARefKernelAreCountedFallbacksEachRun) {
  // With the cpu kernel families off (MSTEP_CPU_DISABLE=all), the
  // softmax callout runs the ref kernel: one host fallback per run, as on
  // cpu.
  Tracer::get().mutable_options().cpu_disable = "all";
  Tracer::get().cache().clear();
  reset_metrics();
  for (int run = 0; run < 2; ++run) {
    Tensor s = mean(sum(f64_softmax(kXla), {0, 2}));
    mark_step();
  }
  Tracer::get().mutable_options().cpu_disable.clear();
  Tracer::get().cache().clear();
  EXPECT_EQ(metrics().compiles, 1);
  EXPECT_EQ(metrics().fallbacks, 2);
}

TEST(XlaBackend, AFailedCalloutStopsTheStepAndLeavesParametersAlone) {
  Tensor table = on(kXla, {4, 3}, 1);
  mark_step();
  const std::vector<float> before = table.to_vector<float>();
  const std::string msg = testing::error_of([&] {
    Tensor ids = from_vector(std::vector<int64_t>{0, 7}, {2}, std::nullopt, kXla);
    Tensor rows = embedding(ids, table);
    table.copy_(table * 2.0); // donated: would be written in place
    mark_step();
  });
  EXPECT_THAT(msg, HasSubstr("7"));
  std::vector<float> doubled(before);
  for (float& v : doubled) v *= 2;
  EXPECT_EQ(table.to_vector<float>(), doubled);
  // The backend keeps working.
  Tensor ok = table + 1.0;
  mark_step();
  EXPECT_FLOAT_EQ(ok.to_vector<float>()[0], doubled[0] + 1);
}

TEST(XlaBackend, ValuesWithDisjointLifetimesShareTheArena) {
  RecordSteps record;
  // A chain of four 64x64 products: each intermediate dies at the next
  // product, so the arena holds two of them at a time, not three.
  Tensor w = on(kXla, {64, 64}, 1);
  Tensor h = on(kXla, {64, 64}, 2);
  for (int i = 0; i < 4; ++i) h = matmul(h, w);
  Tensor out = h * 2.0;
  mark_step();
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  const int64_t bytes = 64 * 64 * 4;
  EXPECT_EQ(compiled.xla()->arena_bytes(), compiled.planned_arena);
  EXPECT_LE(compiled.xla()->arena_bytes(), 2 * bytes);
  Tensor hr = on(kRef, {64, 64}, 2), wr = on(kRef, {64, 64}, 1);
  for (int i = 0; i < 4; ++i) hr = matmul(hr, wr);
  expect_near(out.to_vector<float>(), (hr * 2.0).to_vector<float>());
}

// Whether a run splits its large nests over the OpenMP threads is decided
// at that run (not at compile time, nor asked of OpenMP at every nest):
// one thread runs them all on the caller, two split them, one again runs
// them on the caller; every run gives ref's values.
TEST(XlaBackend, EachRunSplitsItsNestsByItsThreadCount) {
  RecordSteps record;
  const Shape shape{300, 257}; // 77K elements: a nest split above 32K
  Tensor y = exp(on(kXla, shape, 1)) * 2.0 + 1.0;
  mark_step();
  const std::vector<BufferPtr> inputs = Tracer::get().last_step().inputs;
  Compiled compiled = compile_last_step();
  ASSERT_NE(compiled.xla(), nullptr);
  EXPECT_TRUE(compiled.xla()->callout_names().empty());
  const std::vector<float> want = (exp(on(kRef, shape, 1)) * 2.0 + 1.0).to_vector<float>();
  Backend& xla = **BackendRegistry::get(DeviceType::xla);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 1}) {
    SCOPED_TRACE(threads);
    omp_set_num_threads(threads);
    absl::StatusOr<std::vector<BufferPtr>> out = compiled.executable->run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(compiled.xla()->last_run_split_nests(), threads > 1);
    std::vector<float> got(want.size());
    ASSERT_TRUE(xla.copy_out(*out->at(0), got.data(), got.size() * sizeof(float)).ok());
    expect_near(got, want);
  }
  omp_set_num_threads(saved);
}

/// Four SGD steps of a linear layer with a relu, from fixed weights; with
/// `replay`, the third is captured and the fourth replays it.
std::vector<float> sgd_losses(bool replay, size_t* kernels = nullptr, size_t* segments = nullptr) {
  Tensor w = on(kXla, {6, 4}, 1).requires_grad_();
  Tensor x = on(kXla, {3, 6}, 2);
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  Tensor loss;
  auto step = [&] {
    opt.zero_grad();
    loss = mean(relu(matmul(x, w)));
    loss.backward();
    opt.step();
    mark_step();
  };
  Graph graph;
  std::vector<float> losses;
  for (int i = 0; i < 4; ++i) {
    if (!replay || i < 2) {
      step();
    } else if (i == 2) {
      graph.capture_begin();
      step();
      graph.capture_end();
    } else {
      graph.replay();
    }
    losses.push_back(loss.item());
  }
  if (kernels) *kernels = graph.num_kernels();
  if (segments) *segments = graph.num_segments();
  return losses;
}

TEST(XlaBackend, AReplayedStepIsOneCallPerSegmentAndEqualsLazyMode) {
  size_t kernels = 0, segments = 0;
  const std::vector<float> replayed = sgd_losses(true, &kernels, &segments);
  EXPECT_EQ(replayed, sgd_losses(false));
  EXPECT_GT(segments, 0u);
  EXPECT_EQ(kernels, segments);
}

TEST(XlaBackend, TheDiskCacheKeepsTheStepFunctionAndALoadRunsIt) {
  // The cache holds the stored form (XlaFormat.h: the shared object, not
  // the module text); a load compiles nothing and gives the same numbers.
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("mstep_xla_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  const RuntimeOptions saved = Tracer::get().options();
  Tracer::get().mutable_options().disk_cache = dir.string() + ",false,64";
  Tracer::get().reset_disk_cache();
  ASSERT_NE(Tracer::get().disk_cache(), nullptr);
  Tracer::get().cache().clear();
  reset_metrics();
  const std::vector<float> first = sgd_losses(false);
  const Metrics compiled = metrics();
  Tracer::get().disk_cache()->flush();
  int native_entries = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::ifstream file(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    native_entries += bytes.find("MSTEPXLA") != std::string::npos;
  }
  Tracer::get().cache().clear();
  reset_metrics();
  const std::vector<float> second = sgd_losses(false);
  const Metrics loaded = metrics();
  Tracer::get().mutable_options() = saved;
  Tracer::get().reset_disk_cache();
  Tracer::get().cache().clear();
  fs::remove_all(dir);
  ASSERT_GT(compiled.compiles, 0);
  EXPECT_EQ(loaded.compiles, 0) << metrics_report();
  EXPECT_EQ(loaded.disk_hits, compiled.compiles);
  EXPECT_EQ(native_entries, compiled.compiles);
  EXPECT_EQ(first, second);
}

} // namespace
} // namespace mstep
