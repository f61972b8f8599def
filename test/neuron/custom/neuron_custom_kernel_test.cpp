// Custom ops with a NeuronCore kernel (mstep/runtime/NeuronCustomKernel.h)
// on the `neuron` device: the kernel runs as a tile program on the
// simulator (no host fallback) and gives the host kernel's values; a
// kernel that breaks a hardware rule, misuses the builder, leaves an output
// element unstored or is of another kind is an error naming the op (and,
// for a rule, the instruction and the rule), after which the process keeps
// working; an op without a neuron kernel, a call with f64 tensors, or one
// the kernel declines runs the host kernel as a counted host fallback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/NeuronCustomKernel.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

constexpr Device kNeuron{DeviceType::neuron, 0};

/// The host kernel of every test op: y = exp(x) * 2 (f32 or f64).
std::shared_ptr<const CustomKernel> host_exp2() {
  return host_kernel([](const HostKernelCall& c) {
    const int64_t n = c.input_types[0].numel();
    if (c.input_types[0].dtype == DType::f64) {
      const auto* x = static_cast<const double*>(c.inputs[0]);
      auto* y = static_cast<double*>(c.outputs[0]);
      for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * 2;
    } else {
      const auto* x = static_cast<const float*>(c.inputs[0]);
      auto* y = static_cast<float*>(c.outputs[0]);
      for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * 2;
    }
    return absl::OkStatus();
  });
}

/// What the test kernels do wrong, if anything.
enum class Flaw { none, misaligned, tail_unstored, loads_output, declines, stores_twice };

/// y = exp(x) * 2 over n elements viewed as [128, n / 128] plus the n mod
/// 128 left one per partition: Scalar exp, Vector multiply.
NeuronKernelFn exp2_kernel(Flaw flaw) {
  return [flaw](NeuronKernelBuilder& b, const NeuronKernelCall& c) -> absl::Status {
    if (flaw == Flaw::declines) return absl::UnimplementedError("not this shape");
    const int64_t n = c.input_types[0].numel(), f = n / 128, r = n % 128;
    const NeuronAccess x = b.tile(NeuronMemory::sbuf, DType::f32, std::max<int64_t>(f, 1), "x");
    const NeuronAccess y = b.tile(NeuronMemory::sbuf, DType::f32, std::max<int64_t>(f, 1), "y");
    auto piece = [&](int64_t row_len, int64_t row0, int32_t parts, int64_t w) {
      const NeuronAccess xv = x.part(0, parts).free(0, {{w, 1}});
      const NeuronAccess yv = y.part(0, parts).free(0, {{w, 1}});
      b.load(xv, flaw == Flaw::loads_output ? b.output(0, row_len, row0, parts, 0, w)
                                            : b.input(0, row_len, row0, parts, 0, w));
      b.activation(yv, xv, NeuronActivation::exp);
      b.tensor_scalar(NeuronEngine::vector, yv, yv, NeuronAlu::multiply, 2.0f);
      // 64 partitions starting at 16: partitions 33-64 start at 0 or 64.
      if (flaw == Flaw::misaligned)
        b.tensor_copy(NeuronEngine::vector, yv.part(16, 64), yv.part(16, 64));
      b.store(b.output(0, row_len, row0, parts, 0, w), yv);
      // The same rows again from x: two DMA engines writing one HBM range unordered.
      if (flaw == Flaw::stores_twice) b.store(b.output(0, row_len, row0, parts, 0, w), xv);
    };
    if (f > 0) piece(f, 0, 128, f);
    if (r > 0 && flaw != Flaw::tail_unstored) piece(1, 128 * f, static_cast<int32_t>(r), 1);
    return absl::OkStatus();
  };
}

/// Registers "neuron_custom_test.<name>" (once) with the host kernel and,
/// unless `neuron` is null, `neuron` under "neuron".
std::string op(const std::string& name, std::shared_ptr<const CustomKernel> neuron) {
  const std::string full = "neuron_custom_test." + name;
  CustomOpDef def{.name = full,
                  .schema = {.inputs = {{"x", {DType::f32, DType::f64}}}, .num_outputs = 1},
                  .shape_rule = same_type_as_input(0),
                  .kernels = {{"ref", host_exp2()}}};
  if (neuron) def.kernels.push_back({"neuron", std::move(neuron)});
  register_custom_op(std::move(def));
  return full;
}

std::vector<float> inputs(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i));
  return v;
}

/// The op on 300 elements ([128, 2] and a tail of 44) on neuron.
std::vector<float> run(const std::string& name) {
  Tensor x = from_vector(inputs(300), {300}, std::nullopt, kNeuron);
  return custom_op(name, {x})[0].to_vector<float>();
}

/// Runs `name` expecting the step to fail with every one of `parts`; then
/// a good kernel still runs (the process keeps working).
void expect_error(const std::string& name, std::vector<std::string> parts) {
  {
    const std::string msg = testing::error_of([&] { run(name); });
    for (const std::string& p : parts) EXPECT_THAT(msg, HasSubstr(p));
  }
  const std::vector<float> y = run(op("exp2", neuron_kernel(exp2_kernel(Flaw::none))));
  ASSERT_EQ(y.size(), 300u);
  EXPECT_NEAR(y[299], std::exp(std::sin(0.37f * 299)) * 2, 1e-5f);
}

TEST(NeuronCustomKernel, RunsAsATileProgramWithTheHostKernelsValues) {
  const std::string name = op("exp2", neuron_kernel(exp2_kernel(Flaw::none)));
  const Metrics before = metrics();
  const std::vector<float> got = run(name);
  const Metrics after = metrics();
  EXPECT_EQ(after.fallbacks, before.fallbacks);
  EXPECT_EQ(after.simulated.programs - before.simulated.programs, 1);
  auto scalar_busy = [](const Metrics& m) {
    const auto it = m.simulated.busy_seconds.find("Scalar");
    return it == m.simulated.busy_seconds.end() ? 0.0 : it->second;
  };
  EXPECT_GT(scalar_busy(after), scalar_busy(before)); // the exp ran on the Scalar engine
  const std::vector<float> x = inputs(300);
  ASSERT_EQ(got.size(), x.size());
  // The simulator's exp and multiply are fp32, as the host kernel's.
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(got[i], std::exp(x[i]) * 2, 2e-7f * std::exp(x[i]) * 2) << i;
}

TEST(NeuronCustomKernel, AHardwareRuleBreachNamesTheOpTheInstructionAndTheRule) {
  expect_error(op("misaligned", neuron_kernel(exp2_kernel(Flaw::misaligned))),
               {"custom op 'neuron_custom_test.misaligned'", "breaks a hardware rule",
                "Vector tensor_copy", "rule partition_start", "p16+64"});
}

// Stores of one output range on two DMA engines, nothing ordering them:
// the value left in HBM depends on timing (the validator's rule race).
TEST(NeuronCustomKernel, TwoUnorderedStoresOfOneRangeAreARace) {
  expect_error(op("stores_twice", neuron_kernel(exp2_kernel(Flaw::stores_twice))),
               {"custom op 'neuron_custom_test.stores_twice'", "breaks a hardware rule",
                "rule race", "Sync dma_copy", "writes dst", "HBM tensor 'out0' elements [0, 256)",
                "unordered access by two engines: add a semaphore wait"});
}

TEST(NeuronCustomKernel, AnUnstoredOutputElementIsAnError) {
  expect_error(op("tail_unstored", neuron_kernel(exp2_kernel(Flaw::tail_unstored))),
               {"custom op 'neuron_custom_test.tail_unstored'",
                "stores 256 of the 300 elements of output 0", "must store every element"});
}

TEST(NeuronCustomKernel, ABuilderMisuseIsAnErrorNamingTheCall) {
  expect_error(op("loads_output", neuron_kernel(exp2_kernel(Flaw::loads_output))),
               {"custom op 'neuron_custom_test.loads_output'",
                "load(): the source must be an input's HBM view"});
}

TEST(NeuronCustomKernel, AKernelOfAnotherKindUnderNeuronIsAnError) {
  expect_error(op("host_under_neuron", host_exp2()),
               {"custom op 'neuron_custom_test.host_under_neuron'", "is a 'host' kernel",
                "mstep::neuron_kernel"});
}

/// Runs `x` through `name` on neuron: one counted host fallback, the host
/// kernel's values.
template <typename T> void expect_host_fallback(const std::string& name, DType dtype) {
  const std::vector<float> xf = inputs(300);
  const std::vector<T> xv(xf.begin(), xf.end());
  const int64_t before = metrics().fallbacks;
  Tensor x = from_vector(xv, {300}, std::nullopt, kNeuron);
  EXPECT_EQ(x.dtype(), dtype);
  const std::vector<T> got = custom_op(name, {x})[0].template to_vector<T>();
  EXPECT_EQ(metrics().fallbacks - before, 1);
  ASSERT_EQ(got.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], std::exp(xv[i]) * 2) << i;
}

TEST(NeuronCustomKernel, AnOpWithoutANeuronKernelIsACountedHostFallback) {
  expect_host_fallback<float>(op("host_only", nullptr), DType::f32);
}

TEST(NeuronCustomKernel, F64TensorsAndDeclinedCallsAreCountedHostFallbacks) {
  expect_host_fallback<double>(op("exp2", neuron_kernel(exp2_kernel(Flaw::none))), DType::f64);
  expect_host_fallback<float>(op("declines", neuron_kernel(exp2_kernel(Flaw::declines))),
                              DType::f32);
}

} // namespace
} // namespace mstep
