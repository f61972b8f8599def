// The cpu backend as the runtime sees it: results equal ref's, steps run
// from the arena without disturbing earlier results, donated parameters
// are updated in place only when nothing else holds them, host fallbacks
// are counted, and executables round-trip through the disk cache.
#include <functional>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/backends/cpu/NativeFormat.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kRef{DeviceType::ref, 0};

Tensor on(Device d, Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, d);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-4f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << "element " << i;
}

/// A small MLP step: matmuls, a fused bias+relu, a reduction, a loss.
std::vector<float> mlp_forward(Device d) {
  Tensor x = on(d, {5, 7}, 1), w1 = on(d, {7, 9}, 2), b1 = on(d, {9}, 3), w2 = on(d, {9, 3}, 4);
  Tensor h = relu(matmul(x, w1) + b1);
  Tensor y = matmul(h, w2);
  Tensor loss = mean(y * y);
  mark_step();
  std::vector<float> out = y.to_vector<float>();
  out.push_back(loss.item());
  return out;
}

TEST(CpuBackend, IsRegisteredAndRunsTensorsPlacedOnIt) {
  auto backend = BackendRegistry::get(DeviceType::cpu);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
  Tensor t = on(kCpu, {3}, 0) * 2.0;
  mark_step();
  EXPECT_EQ(t.device().type, DeviceType::cpu);
}

TEST(CpuBackend, MlpForwardMatchesRef) { expect_near(mlp_forward(kCpu), mlp_forward(kRef)); }

TEST(CpuBackend, EarlierResultsSurviveLaterRunsOfTheSameGraph) {
  // The same graph twice: the second run reuses the arena; the first
  // step's result must keep its values.
  Tensor a = on(kCpu, {4, 4}, 1), b = on(kCpu, {4, 4}, 2);
  Tensor first = matmul(a, b) + 1.0;
  mark_step();
  const std::vector<float> first_values = first.to_vector<float>();
  Tensor c = on(kCpu, {4, 4}, 3);
  Tensor second = matmul(c, b) + 1.0;
  mark_step();
  EXPECT_EQ(first.to_vector<float>(), first_values);
  EXPECT_NE(second.to_vector<float>(), first_values);
}

TEST(CpuBackend, DonatedParameterIsUpdatedInPlaceOnlyWhenUnshared) {
  Tensor w = on(kCpu, {64}, 1);
  Tensor g = on(kCpu, {64}, 2);
  mark_step();
  const std::vector<float> before = w.to_vector<float>();
  // A second tensor sharing w's buffer: the update must not change it.
  Tensor snapshot = w.detach();
  w.copy_(w - g * 0.5);
  mark_step();
  EXPECT_EQ(snapshot.to_vector<float>(), before);
  std::vector<float> expected(before);
  const std::vector<float> gv = g.to_vector<float>();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= gv[i] * 0.5f;
  expect_near(w.to_vector<float>(), expected, 1e-6f);
  // Without a second owner the same step updates w in place and still
  // computes the same values.
  snapshot = Tensor();
  w.copy_(w - g * 0.5);
  mark_step();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] -= gv[i] * 0.5f;
  expect_near(w.to_vector<float>(), expected, 1e-6f);
}

TEST(CpuBackend, TrainingStepsMatchRef) {
  auto train = [](Device d) {
    Tensor w = on(d, {6, 4}, 1).requires_grad_();
    Tensor x = on(d, {8, 6}, 2), y = on(d, {8, 4}, 3);
    std::vector<float> losses;
    for (int step = 0; step < 3; ++step) {
      Tensor loss = mean((matmul(x, w) - y) * (matmul(x, w) - y));
      loss.backward();
      {
        NoGradGuard no_grad;
        w.copy_(w - w.grad() * 0.1);
        w.set_grad(Tensor());
      }
      mark_step();
      losses.push_back(loss.item());
    }
    return losses;
  };
  expect_near(train(kCpu), train(kRef));
}

/// One step of an op the cpu backend has a kernel for (var) and one it
/// runs as data movement (reshape).
std::vector<float> var_step() {
  Tensor v = var(on(kCpu, {5, 6}, 1), {1}).reshape({5, 1});
  mark_step();
  return v.to_vector<float>();
}

TEST(CpuBackend, OpsWithoutACpuKernelRunOnRefAndAreCountedEachRun) {
  // With every kernel family off, each compute op is a ref fallback; data
  // movement (reshape) is not counted. Each run counts again.
  Tracer::get().mutable_options().cpu_disable = "all";
  Tracer::get().cache().clear();
  reset_metrics();
  const std::vector<float> first = var_step();
  const int64_t per_run = metrics().fallbacks;
  const std::vector<float> second = var_step();
  Tracer::get().mutable_options().cpu_disable.clear();
  Tracer::get().cache().clear();
  EXPECT_EQ(per_run, 1);  // var
  EXPECT_EQ(metrics().fallbacks, 2 * per_run);
  EXPECT_EQ(first, second);
  Tensor r = var(on(kRef, {5, 6}, 1), {1});
  expect_near(first, r.to_vector<float>());
}

// MSTEP_CPU_DISABLE is read once, into RuntimeOptions, when the process
// starts (a fresh process: threadsafe death tests re-run the binary).
TEST(CpuBackend, DisableEnvVarIsReadAtStart) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("MSTEP_CPU_DISABLE", "onednn,all", 1);
  EXPECT_EXIT(
      {
        if (Tracer::get().options().cpu_disable != "onednn,all") std::_Exit(2);
        var_step();
        std::_Exit(metrics().fallbacks == 1 ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("MSTEP_CPU_DISABLE");
}

// RuntimeOptions::cpu_profile (MSTEP_CPU_PROFILE=1) reports the executables
// compiled while it is on at exit.
TEST(CpuBackend, ProfileOptionReportsAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Tracer::get().mutable_options().cpu_profile = true;
        var_step();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "mstep cpu profile: [0-9]+ calls");
}

TEST(CpuBackend, AnIndexOutOfRangeFailsTheStepAndLeavesParametersAlone) {
  Tensor table = on(kCpu, {4, 3}, 1);
  mark_step();
  const std::vector<float> before = table.to_vector<float>();
  const std::string msg = testing::error_of([&] {
    Tensor ids = from_vector(std::vector<int64_t>{0, 7}, {2}, std::nullopt, kCpu);
    Tensor rows = embedding(ids, table);
    table.copy_(table * 2.0);  // donated: would be written in place
    mark_step();
  });
  EXPECT_THAT(msg, HasSubstr("7"));
  // The update is still pending; had the failed step written it in place
  // already, this would read 4x.
  std::vector<float> doubled(before);
  for (float& v : doubled) v *= 2;
  EXPECT_EQ(table.to_vector<float>(), doubled);
}

/// The kernels the cpu backend picks for the graph of the last step.
std::vector<std::string> kernels_of_last_step() {
  const StepRecord& step = Tracer::get().last_step();
  EXPECT_NE(step.graph, nullptr);
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::cpu), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto* exe = dynamic_cast<cpu::CpuExecutable*>(compiled->executable.get());
  EXPECT_NE(exe, nullptr);
  return exe ? exe->kernel_names() : std::vector<std::string>{};
}

TEST(CpuBackend, LinearTrainingStepCopiesNoTransposes) {
  // y = x W^T + b, loss, backward: the forward reads W transposed in place
  // and the weight gradient (a transposed product) is computed as such: no
  // transpose kernel at all.
  Tracer::get().set_record_steps(true);
  Tensor w = on(kCpu, {16, 32}, 1).requires_grad_(), b = on(kCpu, {16}, 2).requires_grad_();
  Tensor x = on(kCpu, {8, 32}, 3);
  Tensor loss = mean(relu(linear(x, w, b)));
  loss.backward();
  Tensor gw = w.grad(), gb = b.grad();
  mark_step();
  const std::vector<std::string> names = kernels_of_last_step();
  Tracer::get().set_record_steps(false);
  EXPECT_THAT(names, ::testing::Contains("onednn.matmul"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains(::testing::HasSubstr("transpose"))));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("ref.permute")));
  // And the gradients still match ref.
  Tensor wr = on(kRef, {16, 32}, 1).requires_grad_(), br = on(kRef, {16}, 2).requires_grad_();
  Tensor lr = mean(relu(linear(on(kRef, {8, 32}, 3), wr, br)));
  lr.backward();
  expect_near(gw.to_vector<float>(), wr.grad().to_vector<float>());
  expect_near(gb.to_vector<float>(), br.grad().to_vector<float>());
}

TEST(CpuBackend, InferenceLinearReluIsOneMatmulWithAnEpilogue) {
  Tracer::get().set_record_steps(true);
  Tensor w = on(kCpu, {16, 32}, 1), b = on(kCpu, {16}, 2), x = on(kCpu, {8, 32}, 3);
  Tensor y = relu(linear(x, w, b));
  mark_step();
  const std::vector<std::string> names = kernels_of_last_step();
  Tracer::get().set_record_steps(false);
  EXPECT_THAT(names, ::testing::ElementsAre("onednn.matmul_epilogue"));
  Tensor yr = relu(linear(on(kRef, {8, 32}, 3), on(kRef, {16, 32}, 1), on(kRef, {16}, 2)));
  expect_near(y.to_vector<float>(), yr.to_vector<float>());
}

// A transformer's residual: x + linear(h), and x + gelu(linear(h)), and a
// bias-free x + h @ w, each one oneDNN matmul whose epilogue adds the
// residual. relu + residual keeps its own pass (relu must run last).
TEST(CpuBackend, ResidualAddIsPartOfTheMatmulEpilogue) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> f;
    bool one_kernel;
  };
  const std::vector<Case> cases = {
      {"x + linear", [](auto& x, auto& h, auto& w, auto& b) { return x + linear(h, w, b); }, true},
      {"linear + x", [](auto& x, auto& h, auto& w, auto& b) { return linear(h, w, b) + x; }, true},
      {"x + gelu(linear)",
       [](auto& x, auto& h, auto& w, auto& b) { return x + gelu(linear(h, w, b)); }, true},
      {"x + h @ w^T", [](auto& x, auto& h, auto& w, auto&) { return x + linear(h, w); }, true},
      {"x + relu(linear)",
       [](auto& x, auto& h, auto& w, auto& b) { return x + relu(linear(h, w, b)); }, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tracer::get().set_record_steps(true);
    Tensor y = c.f(on(kCpu, {8, 16}, 4), on(kCpu, {8, 32}, 3), on(kCpu, {16, 32}, 1),
                   on(kCpu, {16}, 2));
    mark_step();
    const std::vector<std::string> names = kernels_of_last_step();
    Tracer::get().set_record_steps(false);
    if (c.one_kernel)
      EXPECT_THAT(names, ::testing::ElementsAre("onednn.matmul_epilogue"));
    else
      EXPECT_GE(names.size(), 2u);
    Tensor yr = c.f(on(kRef, {8, 16}, 4), on(kRef, {8, 32}, 3), on(kRef, {16, 32}, 1),
                    on(kRef, {16}, 2));
    expect_near(y.to_vector<float>(), yr.to_vector<float>());
  }
}

// A reshape whose operand dies there is planned over it and moves nothing;
// the values are still right, including when the reshaped value is read
// later and when the reshape's source stays alive.
TEST(CpuBackend, ReshapeOverItsDyingOperandIsFree) {
  auto chain = [](Device d) {
    Tensor x = on(d, {6, 8}, 1);
    Tensor e = exp(x * 0.5);
    Tensor r = e.reshape({8, 6});         // e dies here: in place
    Tensor y = relu(r - 1.0).reshape({48});
    Tensor kept = (x + 1.0).reshape({2, 24});  // its source x is a graph input
    return std::vector<Tensor>{r.sum({}), y, kept};
  };
  std::vector<Tensor> c = chain(kCpu);
  mark_step();  // one graph with all three
  std::vector<Tensor> r = chain(kRef);
  mark_step();
  for (size_t i = 0; i < c.size(); ++i) expect_near(c[i].to_vector<float>(), r[i].to_vector<float>());
}

TEST(CpuBackend, CorruptNativeBlobIsAnErrorNotACrash) {
  Backend* cpu = *BackendRegistry::get(DeviceType::cpu);
  const TraceGraph empty;
  for (std::string blob : {std::string(""), std::string("MSTEPCPU"), std::string("not a blob"),
                           cpu::write_native_format(empty, {}, "not an object"),
                           cpu::write_native_format(empty, {}, "").substr(0, 20)}) {
    auto loaded = cpu->deserialize(blob, RuntimeOptions{});
    EXPECT_FALSE(loaded.ok()) << "blob of " << blob.size() << " bytes loaded";
  }
}

TEST(CpuBackend, DiskCacheRoundTripSkipsCompilation) {
  const std::string dir = (fs::temp_directory_path() / "mstep_cpu_disk_cache_test").string();
  fs::remove_all(dir);
  RuntimeOptions saved = Tracer::get().options();
  Tracer::get().mutable_options().disk_cache = dir + ",false,64";
  Tracer::get().reset_disk_cache();
  Tracer::get().cache().clear();
  const std::vector<float> compiled = mlp_forward(kCpu);
  Tracer::get().disk_cache()->flush();
  Tracer::get().cache().clear();
  reset_metrics();
  const std::vector<float> loaded = mlp_forward(kCpu);
  const Metrics m = metrics();
  Tracer::get().mutable_options() = saved;
  Tracer::get().reset_disk_cache();
  fs::remove_all(dir);
  EXPECT_EQ(m.compiles, 0);
  EXPECT_GE(m.disk_hits, 1);
  EXPECT_EQ(loaded, compiled);
}

}  // namespace
}  // namespace mstep
