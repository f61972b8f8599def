// Custom ops (mstep/runtime/CustomOp.h, mstep/api/CustomOp.h): one op with
// a ref and a cpu kernel, run lazily and through capture/replay and checked
// against values computed here; the registry's and the call's errors; the
// missing-kernel error and the cpu -> ref host fallback; distinct cache
// keys for distinct ops; and a fusion boundary in a real step.
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

// Which kernel ran, so a test can tell the backends apart.
std::atomic<int> ref_calls{0}, cpu_calls{0};

/// softplus(beta * x) / beta, and the per-row sum of that: the values
/// the tests expect, computed in double.
double softplus(double x, double beta) { return std::log1p(std::exp(beta * x)) / beta; }

/// The kernel of "test.row_softplus": x [m, n] f32 -> (y [m, n], row_sum [m]).
absl::Status row_softplus_kernel(const HostKernelCall& call, std::atomic<int>& counter) {
  ++counter;
  absl::StatusOr<double> beta = call.attrs.get_double("beta");
  if (!beta.ok()) return beta.status();
  const Shape& s = call.input_types[0].shape;
  const auto* x = static_cast<const float*>(call.inputs[0]);
  auto* y = static_cast<float*>(call.outputs[0]);
  auto* sum = static_cast<float*>(call.outputs[1]);
  for (int64_t i = 0; i < s[0]; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < s[1]; ++j) {
      const double v = softplus(x[i * s[1] + j], *beta);
      y[i * s[1] + j] = static_cast<float>(v);
      acc += v;
    }
    sum[i] = static_cast<float>(acc);
  }
  return absl::OkStatus();
}

/// The shape rule: a 2-d f32 input gives [m, n] and [m].
absl::StatusOr<std::vector<TensorType>> row_softplus_rule(absl::Span<const TensorType> in,
                                                          const CustomAttrView& attrs) {
  if (in.size() != 1) return absl::InvalidArgumentError("takes one input");
  if (in[0].shape.rank() != 2 || in[0].dtype != DType::f32)
    return absl::InvalidArgumentError("the input must be a 2-d f32 matrix");
  if (!attrs.get_double("beta").ok()) return absl::InvalidArgumentError("beta must be a number");
  return std::vector<TensorType>{in[0], TensorType{Shape({in[0].shape[0]}), DType::f32}};
}

/// A test op with `kernels` ("ref", "cpu" or both), registered once.
CustomOpDef row_softplus_def(std::string name, std::vector<std::string> backends) {
  CustomOpDef def{.name = std::move(name),
                  .schema = {.inputs = {{"x"}},
                             .attrs = {{"beta", CustomAttrType::float64}},
                             .num_outputs = 2},
                  .shape_rule = row_softplus_rule};
  for (const std::string& b : backends)
    def.kernels.emplace_back(b, host_kernel([b](const HostKernelCall& call) {
                               return row_softplus_kernel(call, b == "ref" ? ref_calls : cpu_calls);
                             }));
  return def;
}

void register_once(const std::string& name, std::vector<std::string> backends) {
  if (!CustomOpRegistry::global().find(name).ok())
    register_custom_op(row_softplus_def(name, std::move(backends)));
}

Tensor matrix(Device d, int seed) {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.9 * i + seed));
  return from_vector(v, {3, 4}, DType::f32, d);
}

void expect_row_softplus(const Tensor& x, const std::vector<Tensor>& out, double beta) {
  const std::vector<float> xv = x.to_vector<float>();
  const std::vector<float> y = out[0].to_vector<float>(), sum = out[1].to_vector<float>();
  ASSERT_EQ(y.size(), 12u);
  ASSERT_EQ(sum.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    double acc = 0;
    for (int j = 0; j < 4; ++j) {
      const double want = softplus(xv[i * 4 + j], beta);
      EXPECT_NEAR(y[i * 4 + j], want, 1e-6) << i << "," << j;
      acc += want;
    }
    EXPECT_NEAR(sum[i], acc, 1e-5) << "row " << i;
  }
}

class CustomOpTest : public ::testing::TestWithParam<Device> {
protected:
  void SetUp() override {
    register_once("test.row_softplus", {"ref", "cpu"});
    reset_metrics();
  }
  std::atomic<int>& own_calls() {
    return GetParam().type == DeviceType::ref ? ref_calls : cpu_calls;
  }
};

TEST_P(CustomOpTest, LazyCallMatchesAnIndependentComputation) {
  Tensor x = matrix(GetParam(), 1);
  const int before = own_calls();
  std::vector<Tensor> out = custom_op("test.row_softplus", {x}, {{"beta", 2.0}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].is_pending());
  EXPECT_EQ(out[1].type().to_string(), "f32[3]");
  // Dumps name the op.
  EXPECT_THAT(pending_graph().to_text(), HasSubstr("custom[test.row_softplus]("));
  mark_step();
  expect_row_softplus(x, out, 2.0);
  EXPECT_EQ(own_calls(), before + 1); // this backend's own kernel ran
  EXPECT_EQ(metrics().fallbacks, 0);
}

TEST_P(CustomOpTest, MixesWithBuiltInOpsAroundIt) {
  Tensor x = matrix(GetParam(), 2);
  // Elementwise ops on both sides: the custom op splits them into fusions.
  std::vector<Tensor> out = custom_op("test.row_softplus", {x * 2.0 + 1.0}, {{"beta", 0.5}});
  Tensor z = exp(out[0]) - 1.0;
  Tensor s = sum(out[1]);
  mark_step();
  Tensor expected_in = x * 2.0 + 1.0;
  std::vector<Tensor> again = custom_op("test.row_softplus", {expected_in}, {{"beta", 0.5}});
  mark_step();
  expect_row_softplus(expected_in, again, 0.5);
  const std::vector<float> y = again[0].to_vector<float>(), zv = z.to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(zv[i], std::expm1(y[i]), 1e-5);
  float total = 0;
  for (float v : again[1].to_vector<float>()) total += v;
  EXPECT_NEAR(s.item(), total, 1e-4);
}

TEST_P(CustomOpTest, CaptureAndReplayRunTheKernelOnNewInputs) {
  Tensor x = matrix(GetParam(), 3);
  mark_step();
  Graph g;
  std::vector<Tensor> out;
  {
    CaptureGuard capture(g);
    out = custom_op("test.row_softplus", {x}, {{"beta", 1.5}});
    out[0] = out[0] * 3.0;
  }
  std::vector<Tensor> tripled = {out[0] / 3.0, out[1]};
  expect_row_softplus(x, tripled, 1.5);
  const int before = own_calls();
  x.copy_(matrix(GetParam(), 7));
  mark_step();
  g.replay();
  EXPECT_EQ(own_calls(), before + 1);
  tripled = {out[0] / 3.0, out[1]};
  expect_row_softplus(matrix(GetParam(), 7), tripled, 1.5);
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, CustomOpTest, ::testing::Values(kRef, kCpu),
                         [](const auto& info) {
                           return info.param.type == DeviceType::ref ? "ref" : "cpu";
                         });

// ---- errors at the call ----

TEST(CustomOpCall, ErrorsNameTheOpAndTheInputs) {
  register_once("test.row_softplus", {"ref", "cpu"});
  Tensor x = matrix(kRef, 1);
  Tensor v = from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  std::string msg = error_of([&] { custom_op("test.nope", {x}); });
  EXPECT_THAT(msg, HasSubstr("no custom op named 'test.nope' is registered"));
  EXPECT_THAT(msg, HasSubstr("test.row_softplus")); // lists what is registered

  msg = error_of([&] { custom_op("test.row_softplus", {v}, {{"beta", 1.0}}); });
  EXPECT_THAT(msg, HasSubstr("custom_op 'test.row_softplus'"));
  EXPECT_THAT(msg, HasSubstr("the input must be a 2-d f32 matrix"));
  EXPECT_THAT(msg, HasSubstr("f32[4]"));

  msg = error_of([&] { custom_op("test.row_softplus", {x.to(DType::f64)}, {{"beta", 1.0}}); });
  EXPECT_THAT(msg, HasSubstr("f64[3, 4]"));

  msg = error_of([&] { custom_op("test.row_softplus", {x}); });
  EXPECT_THAT(msg, HasSubstr("attribute 'beta' is missing"));
  msg = error_of([&] {
    custom_op("test.row_softplus", {x}, {{"beta", 1.0}, {"gamma", int64_t{2}}});
  });
  EXPECT_THAT(msg, HasSubstr("has no attribute 'gamma'"));
  EXPECT_THAT(msg, HasSubstr("Its schema: (x) {beta: float} -> 2 outputs"));
  msg = error_of([&] { custom_op("test.row_softplus", {x}, {{"beta", 1.0}, {"beta", 2.0}}); });
  EXPECT_THAT(msg, HasSubstr("given twice"));
  msg = error_of([&] { custom_op("test.row_softplus", {x}, {{"beta", IntList{1, 2}}}); });
  EXPECT_THAT(msg, HasSubstr("attribute 'beta' has type float; the value [1, 2] has type int list"));

  Tensor w = matrix(kRef, 2).requires_grad_();
  msg = error_of([&] { custom_op("test.row_softplus", {w}, {{"beta", 1.0}}); });
  EXPECT_THAT(msg, HasSubstr("has no backward"));
  {
    NoGradGuard no_grad; // without autograd the same call is fine
    EXPECT_EQ(custom_op("test.row_softplus", {w}, {{"beta", 1.0}}).size(), 2u);
  }

  // Nothing was recorded by the failed calls: the process keeps working.
  std::vector<Tensor> out = custom_op("test.row_softplus", {x}, {{"beta", 1.0}});
  mark_step();
  expect_row_softplus(x, out, 1.0);
}

// ---- kernels per backend ----

TEST(CustomOpKernels, MissingKernelIsACompileErrorNamingOpAndBackend) {
  register_once("test.cpu_only", {"cpu"});
  testing::expect_step_error(
      [] {
        return custom_op("test.cpu_only", {matrix(kRef, 1)}, {{"beta", 1.0}})[0];
      },
      {"custom op 'test.cpu_only' has no kernel for backend 'ref'", "it has kernels for: cpu",
       "add_kernel(\"test.cpu_only\", \"ref\""});
  // The same op on cpu runs its own kernel.
  Tensor x = matrix(kCpu, 1);
  std::vector<Tensor> out = custom_op("test.cpu_only", {x}, {{"beta", 1.0}});
  mark_step();
  expect_row_softplus(x, out, 1.0);
}

TEST(CustomOpKernels, AKernelAddedLaterIsFound) {
  register_once("test.added_later", {"cpu"});
  auto added = CustomOpRegistry::global().add_kernel(
      "test.added_later", "ref",
      host_kernel([](const HostKernelCall& c) { return row_softplus_kernel(c, ref_calls); }));
  ASSERT_TRUE(added.ok()) << added;
  Tensor x = matrix(kRef, 4);
  std::vector<Tensor> out = custom_op("test.added_later", {x}, {{"beta", 1.0}});
  mark_step();
  expect_row_softplus(x, out, 1.0);
  EXPECT_EQ(CustomOpRegistry::global()
                .add_kernel("test.added_later", "ref",
                            host_kernel([](const HostKernelCall&) { return absl::OkStatus(); }))
                .code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(CustomOpKernels, CpuFallsBackToTheRefHostKernelAndCountsIt) {
  register_once("test.ref_only", {"ref"});
  reset_metrics();
  const int before = ref_calls;
  Tensor x = matrix(kCpu, 5);
  std::vector<Tensor> out = custom_op("test.ref_only", {x}, {{"beta", 3.0}});
  mark_step();
  expect_row_softplus(x, out, 3.0);
  EXPECT_EQ(ref_calls, before + 1);
  EXPECT_EQ(metrics().fallbacks, 1);
}

/// A kernel of a kind no host backend runs (what a device backend's
/// kernel is to ref and cpu).
class DeviceKernel final : public CustomKernel {
public:
  static constexpr absl::string_view kKind = "test-device";
  absl::string_view kind() const override { return kKind; }
};

TEST(CustomOpKernels, AKernelOfAnotherKindIsRefusedByAHostBackend) {
  if (!CustomOpRegistry::global().find("test.device_kind").ok()) {
    CustomOpDef def = row_softplus_def("test.device_kind", {});
    def.kernels.emplace_back("ref", std::make_shared<DeviceKernel>());
    register_custom_op(std::move(def));
  }
  // The lookup hands each backend its own kind.
  auto op = CustomOpRegistry::global().find("test.device_kind");
  ASSERT_TRUE(op.ok());
  EXPECT_NE(custom_kernel_as<DeviceKernel>((*op)->kernel("ref")), nullptr);
  EXPECT_EQ(custom_kernel_as<HostCustomKernel>((*op)->kernel("ref")), nullptr);
  testing::expect_step_error(
      [] {
        return custom_op("test.device_kind", {matrix(kRef, 1)}, {{"beta", 1.0}})[0];
      },
      {"is a 'test-device' kernel", "runs host kernels"});
}

TEST(CustomOpKernels, AFailingKernelFailsTheStepWithItsMessage) {
  if (!CustomOpRegistry::global().find("test.failing").ok()) {
    CustomOpDef def = row_softplus_def("test.failing", {});
    def.kernels.emplace_back("ref", host_kernel([](const HostKernelCall&) {
                               return absl::InvalidArgumentError("bad luck");
                             }));
    register_custom_op(std::move(def));
  }
  testing::expect_step_error(
      [] {
        return custom_op("test.failing", {matrix(kRef, 1)}, {{"beta", 1.0}})[0];
      },
      {"custom op 'test.failing' kernel failed: bad luck"});
}

// ---- caching ----

/// Keeps Tracer::last_step() filled for the scope.
struct RecordSteps {
  RecordSteps() { Tracer::get().set_record_steps(true); }
  ~RecordSteps() { Tracer::get().set_record_steps(false); }
};

TEST(CustomOpCache, TwoOpsWithTheSameShapesHaveDifferentKeys) {
  register_once("test.twin_a", {"ref"});
  register_once("test.twin_b", {"ref"});
  RecordSteps record;
  reset_metrics();
  Tensor x = matrix(kRef, 1);
  mark_step();
  auto run = [&](const char* name) {
    std::vector<Tensor> out = custom_op(name, {x}, {{"beta", 1.0}});
    mark_step();
    return Tracer::get().last_step().key;
  };
  const GraphKey a = run("test.twin_a");
  const GraphKey b = run("test.twin_b");
  EXPECT_NE(a.structure, b.structure);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(metrics().compiles, 2);
  // The same op again is a cache hit; another beta only changes constants.
  const GraphKey a2 = run("test.twin_a");
  EXPECT_EQ(a2.full(), a.full());
  EXPECT_EQ(metrics().compiles, 2);
  std::vector<Tensor> out = custom_op("test.twin_a", {x}, {{"beta", 4.0}});
  mark_step();
  EXPECT_EQ(Tracer::get().last_step().key.structure, a.structure);
  EXPECT_NE(Tracer::get().last_step().key.constants, a.constants);
  expect_row_softplus(x, out, 4.0);
}

TEST(CustomOpCache, TheCpuStepKeepsTheCustomOpOutsideFusions) {
  register_once("test.row_softplus", {"ref", "cpu"});
  RecordSteps record;
  Tensor x = matrix(kCpu, 1);
  std::vector<Tensor> out = custom_op("test.row_softplus", {exp(x) * 2.0}, {{"beta", 1.0}});
  Tensor z = neg(out[0]) + 1.0;
  mark_step();
  const StepRecord& step = Tracer::get().last_step();
  ASSERT_NE(step.graph, nullptr);
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::cpu), {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto* exe = dynamic_cast<cpu::CpuExecutable*>(compiled->executable.get());
  ASSERT_NE(exe, nullptr);
  // One kernel before the custom op, the custom op's own, one after.
  int custom = 0, fusions = 0;
  for (const std::string& k : exe->kernel_names()) {
    custom += k == "custom.test.row_softplus";
    fusions += k.find("fusion") != std::string::npos;
  }
  EXPECT_EQ(custom, 1);
  EXPECT_EQ(fusions, 2);
}

// ---- the registry ----

TEST(CustomOpRegistryTest, RejectsBadDefinitionsAndDuplicates) {
  CustomOpRegistry registry; // a private one: the global registry is untouched
  EXPECT_EQ(registry.add(row_softplus_def("", {"ref"})).code(), absl::StatusCode::kInvalidArgument);
  CustomOpDef no_rule = row_softplus_def("a", {"ref"});
  no_rule.shape_rule = nullptr;
  EXPECT_THAT(registry.add(std::move(no_rule)).message(), HasSubstr("has no shape rule"));
  CustomOpDef twice = row_softplus_def("a", {"ref"});
  twice.schema.attrs.push_back({"beta", CustomAttrType::float64});
  EXPECT_THAT(registry.add(std::move(twice)).message(),
              HasSubstr("declares attribute 'beta' twice"));
  EXPECT_THAT(registry.add(row_softplus_def("a", {"ref", "ref"})).message(),
              HasSubstr("two kernels for backend 'ref'"));
  CustomOpDef null_kernel = row_softplus_def("a", {});
  null_kernel.kernels.emplace_back("cpu", nullptr);
  EXPECT_THAT(registry.add(std::move(null_kernel)).message(), HasSubstr("is null"));

  ASSERT_TRUE(registry.add(row_softplus_def("a", {"ref"})).ok());
  // The same schema again is a no-op (custom_op_schema_test.cpp has the
  // rest): the first registration's kernels stay.
  ASSERT_TRUE(registry.add(row_softplus_def("a", {"cpu"})).ok());
  EXPECT_EQ((*registry.find("a"))->kernel("cpu"), nullptr);
  CustomOpDef other = row_softplus_def("a", {"ref"});
  other.schema.num_outputs = 1;
  absl::Status again = registry.add(std::move(other));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("'a' version 1 is already registered with another schema"));
  EXPECT_EQ(registry.add_kernel("b", "cpu", host_kernel(nullptr)).code(),
            absl::StatusCode::kNotFound);
  auto found = registry.find("a");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->id, custom_op_id("a"));
  EXPECT_NE(custom_op_id("a"), custom_op_id("b"));
  auto by_id = registry.find(custom_op_id("a"));
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ((*by_id)->name, "a");
  EXPECT_EQ(registry.find("b").status().code(), absl::StatusCode::kNotFound);

  // The public registration throws on the same mistakes.
  register_once("test.row_softplus", {"ref", "cpu"});
  CustomOpDef changed = row_softplus_def("test.row_softplus", {"ref"});
  changed.schema.inputs[0].dtypes = {DType::f32};
  EXPECT_THAT(error_of([&] { register_custom_op(std::move(changed)); }),
              HasSubstr("already registered with another schema"));
}

TEST(CustomOpRegistryTest, ConcurrentRegistrationsAndLookupsAgree) {
  CustomOpRegistry registry;
  std::vector<std::thread> threads;
  std::atomic<int> added{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        // Every thread registers every name with the same schema: the
        // first add registers it, the others are no-ops.
        if (registry.add(row_softplus_def(absl::StrCat("op", i), {"ref"})).ok()) ++added;
        EXPECT_TRUE(registry.find(absl::StrCat("op", i)).ok());
        (void)registry.add_kernel(absl::StrCat("op", i), absl::StrCat("b", t),
                                  host_kernel(nullptr));
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(added, 8 * 50);
  for (int i = 0; i < 50; ++i) {
    auto op = registry.find(absl::StrCat("op", i));
    ASSERT_TRUE(op.ok());
    EXPECT_EQ((*op)->kernels.size(), 9u); // ref + one per thread
  }
}

} // namespace
} // namespace mstep
