// Backend conformance: every case of ConformanceCases.h (every op of the
// public API, forward and backward, on odd and size-1 shapes, in f32 and
// where the op allows bf16 and f16, integers and bool; all_cases_with_f16)
// runs on the ref backend,
// the oracle, and on each other registered backend with the same inputs
// and the same RNG seed; outputs and input gradients must match. Then two
// small training graphs (an MLP with SGD, a transformer block with AdamW)
// must give the same losses over three steps, and an op whose operands
// live on two backends must fail with a clear error. On xla, the step of
// every case but those xla_may_call_out names is one function that calls
// out to no cpu-backend kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/xla/XlaExecutable.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/ConformanceCases.h"
#include "test/unit/TestUtil.h"

namespace mstep::conformance {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

constexpr Device kRef{DeviceType::ref, 0};
/// Seeded before every run, so random ops draw the same numbers everywhere.
constexpr uint64_t kSeed = 1234;

/// The backends compared against ref: every registered one but ref that
/// starts here (cuda is registered where the toolkit was found, and is
/// unavailable without a GPU; it has no compile half yet either).
std::vector<DeviceType> backends_under_test() {
  std::vector<DeviceType> out;
  for (DeviceType t : BackendRegistry::available())
    if (t != DeviceType::ref && t != DeviceType::cuda && BackendRegistry::get(t).ok())
      out.push_back(t);
  return out;
}

// ---- running a case -------------------------------------------------------

/// A tensor's values read back to the host.
struct HostTensor {
  bool defined = false;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> values;
};

HostTensor to_host(const Tensor& t) {
  if (!t.defined()) return {};
  return {true, t.dtype(), t.shape(), t.to_vector<double>()};
}

struct RunResult {
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> grads; // one per input that requires grad
  std::string error;             // what the run threw, if it threw
};

/// Which graph a run records.
enum class Pass : uint8_t {
  training,  // forward and, when the case checks grads, backward, in one graph
  inference, // forward alone under NoGradGuard (kernels may differ: nothing is saved)
};

/// Runs `c` with its inputs on `device`, one mark_step, and reads every
/// output (and in the training pass every input gradient). Every tensor it
/// made is gone when it returns, so the next run may use another device
/// (one mark_step cuts the graph of one device only).
RunResult run_case(const ConformanceCase& c, Device device, Pass pass) {
  RunResult r;
  try {
    manual_seed(kSeed);
    Inputs in;
    for (size_t i = 0; i < c.inputs.size(); ++i) in.push_back(make_input(c.inputs[i], i, device));
    const bool grads = pass == Pass::training && c.check_grads;
    Outputs out;
    if (pass == Pass::inference) {
      NoGradGuard no_grad;
      out = c.fn(in, device);
    } else {
      out = c.fn(in, device);
    }
    if (grads) {
      Tensor loss = weighted_loss(out, device);
      if (loss.defined()) loss.backward();
    }
    mark_step();
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].defined() && out[i].device() != device)
        r.error = absl::StrCat("output ", i, " lives on ", out[i].device().to_string(), ", not on ",
                               device.to_string());
      r.outputs.push_back(to_host(out[i]));
    }
    if (grads)
      for (size_t i = 0; i < in.size(); ++i)
        if (c.inputs[i].requires_grad) r.grads.push_back(to_host(in[i].grad()));
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// ---- comparing --------------------------------------------------------------

struct Tolerance {
  double rtol, atol;
};

/// f32 to about 1e-4 relative; bf16 to about two units in the last place;
/// integers and bools exactly.
Tolerance tolerance_for(DType dtype, double scale) {
  switch (dtype) {
  case DType::f32:
  case DType::f64:
    return {1e-4 * scale, 1e-5 * scale};
  case DType::bf16:
  case DType::f16:
    return {2e-2 * scale, 2e-2 * scale};
  default:
    return {0, 0};
  }
}

/// "[3, 0, 4]": the coordinates of flat index `i` in `shape`.
std::string coordinates(const Shape& shape, size_t i) {
  std::vector<int64_t> at(shape.rank());
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    at[d] = static_cast<int64_t>(i) % shape[d];
    i /= shape[d];
  }
  return absl::StrCat("[", absl::StrJoin(at, ", "), "]");
}

bool close(double want, double got, Tolerance tol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  return std::fabs(want - got) <= tol.atol + tol.rtol * std::fabs(want);
}

std::string signature(const HostTensor& t) {
  return t.defined ? absl::StrCat(dtype_name(t.dtype), t.shape.to_string()) : "undefined";
}

::testing::AssertionResult matches(const HostTensor& want, const HostTensor& got,
                                   double tol_scale) {
  if (want.defined != got.defined || want.dtype != got.dtype || want.shape != got.shape)
    return ::testing::AssertionFailure()
           << "ref gives " << signature(want) << ", the backend " << signature(got);
  if (!want.defined) return ::testing::AssertionSuccess();
  const Tolerance tol = tolerance_for(want.dtype, tol_scale);
  size_t bad = 0, first = 0, worst = 0;
  double worst_diff = -1;
  for (size_t i = 0; i < want.values.size(); ++i) {
    if (close(want.values[i], got.values[i], tol)) continue;
    if (bad++ == 0) first = i;
    const double diff = std::fabs(want.values[i] - got.values[i]);
    const double rank = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
    if (rank > worst_diff) worst_diff = rank, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  auto at = [&](size_t i) {
    return absl::StrCat(coordinates(want.shape, i), ": ref ", want.values[i], ", backend ",
                        got.values[i]);
  };
  return ::testing::AssertionFailure()
         << bad << " of " << want.values.size() << " elements of " << signature(want)
         << " differ (rtol " << tol.rtol << ", atol " << tol.atol << "); first at " << at(first)
         << "; largest at " << at(worst);
}

// ---- the parameterized suite ----------------------------------------------------

struct ConformanceParam {
  const ConformanceCase* test_case;
  DeviceType backend;
};

std::vector<ConformanceParam> all_params() {
  std::vector<ConformanceParam> out;
  for (DeviceType backend : backends_under_test())
    for (const ConformanceCase& c : all_cases_with_f16()) out.push_back({&c, backend});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<ConformanceParam>& info) {
  return absl::StrCat(device_type_name(info.param.backend), "_", info.param.test_case->name);
}

class BackendConformance : public ::testing::TestWithParam<ConformanceParam> {};

/// The cases whose step on xla may still call out to a cpu-backend kernel
/// (lib/backends/xla/XlaOpLoops.h has loops for the others): none, f32 and
/// bf16 alike.
bool xla_may_call_out(const ConformanceCase&) { return false; }

/// The ops the executable of the last step (recorded) calls out for, when
/// it ran on xla; none when nothing was compiled (a case of data only, or
/// of ops with data-dependent shapes, which run before the step).
std::vector<std::string> xla_callouts_of_last_step() {
  const StepRecord& step = Tracer::get().last_step();
  if (!step.graph) return {};
  ModuleCache::Entry* entry =
      Tracer::get().cache().find(step.key, static_cast<uint32_t>(step.graph->nodes.size()),
                                 static_cast<uint32_t>(step.graph->input_types.size()));
  if (!entry) return {"<the step is not in the module cache>"};
  auto* xla = dynamic_cast<const xla::XlaExecutable*>(entry->executable.get());
  if (!xla) return {"<not an xla executable>"};
  return xla->callout_names();
}

/// Records the graph of every step while it lives.
struct RecordSteps {
  RecordSteps() { Tracer::get().set_record_steps(true); }
  ~RecordSteps() { Tracer::get().set_record_steps(false); }
};

/// Runs `c` on ref and on `device` and compares outputs and gradients.
void expect_same_results(const ConformanceCase& c, Device device, Pass pass) {
  SCOPED_TRACE(pass == Pass::training ? "training graph (forward + backward)"
                                      : "inference graph (forward under NoGradGuard)");
  const RunResult want = run_case(c, kRef, pass);
  ASSERT_EQ(want.error, "") << "the case fails on the ref backend itself";
  ASSERT_FALSE(want.outputs.empty());
  const bool no_callouts = device.type == DeviceType::xla && !xla_may_call_out(c);
  std::optional<RecordSteps> record;
  if (no_callouts) record.emplace();
  const RunResult got = run_case(c, device, pass);
  if (no_callouts)
    EXPECT_THAT(xla_callouts_of_last_step(), ::testing::IsEmpty())
        << "the xla step function calls out to cpu-backend kernels";
  record.reset();
  ASSERT_EQ(got.error, "") << "ref ran this case; " << device.to_string() << " threw";
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i)
    EXPECT_TRUE(matches(want.outputs[i], got.outputs[i], c.tol_scale)) << "output " << i;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  size_t grad_slot = 0;
  for (size_t i = 0; i < c.inputs.size() && grad_slot < want.grads.size(); ++i) {
    if (!c.inputs[i].requires_grad) continue;
    EXPECT_TRUE(matches(want.grads[grad_slot], got.grads[grad_slot], c.tol_scale))
        << "gradient of input " << i;
    ++grad_slot;
  }
}

TEST_P(BackendConformance, MatchesRefBackend) {
  const ConformanceCase& c = *GetParam().test_case;
  const Device device{GetParam().backend, 0};
  expect_same_results(c, device, Pass::training);
  // A graph without backward saves nothing for it: backends may pick other
  // kernels (e.g. attention without the row statistics), so check it too.
  bool differentiable = false;
  for (const InputSpec& s : c.inputs) differentiable |= s.requires_grad;
  if (c.check_grads && differentiable) expect_same_results(c, device, Pass::inference);
}

INSTANTIATE_TEST_SUITE_P(Ops, BackendConformance, ::testing::ValuesIn(all_params()), param_name);
// A build with no backend but ref has nothing to compare.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformance);

TEST(BackendConformanceTable, CaseNamesAreUniqueAndCoverEveryFamily) {
  std::set<std::string> names;
  for (const ConformanceCase& c : all_cases_with_f16()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case " << c.name;
    EXPECT_EQ(
        c.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
        std::string::npos)
        << c.name;
  }
  for (const char* prefix : {"zeros",       "rand",          "arange",
                             "exp",         "add",           "eq",
                             "where",       "sum",           "argmax",
                             "logsumexp",   "var",           "gather",
                             "scatter_add", "index_add",     "slice_scatter",
                             "nonzero",     "masked_select", "matmul",
                             "bmm",         "linear",        "conv2d",
                             "max_pool2d",  "avg_pool2d",    "softmax",
                             "layer_norm",  "rms_norm",      "dropout",
                             "sdpa",        "fused_sdpa",    "cross_entropy",
                             "nll_loss",    "mse_loss",      "bce_with_logits",
                             "optim_sgd",   "optim_adam",    "optim_adamw"}) {
    auto it = names.lower_bound(prefix);
    EXPECT_TRUE(it != names.end() && it->rfind(prefix, 0) == 0) << "no case for " << prefix;
  }
}

TEST(BackendConformanceTable, ComparisonCatchesDifferencesAndMatchesSpecialValues) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const HostTensor want{true, DType::f32, Shape{4}, {1, nan, -inf, 0}};
  EXPECT_TRUE(matches(want, want, 1));
  HostTensor got = want;
  got.values[0] = 1 + 5e-5; // within rtol 1e-4
  EXPECT_TRUE(matches(want, got, 1));
  got.values[0] = 1.001;
  EXPECT_FALSE(matches(want, got, 1));
  got = want;
  got.values[1] = 0; // NaN only matches NaN
  EXPECT_FALSE(matches(want, got, 1));
  got = want;
  got.values[2] = inf;
  EXPECT_FALSE(matches(want, got, 1));
  got = want;
  got.shape = Shape{2, 2};
  EXPECT_FALSE(matches(want, got, 1));
  got = want;
  got.dtype = DType::bf16;
  EXPECT_FALSE(matches(want, got, 1));
  const HostTensor ints{true, DType::i64, Shape{2}, {3, 4}};
  HostTensor off_by_one = ints;
  off_by_one.values[1] = 5;
  EXPECT_FALSE(matches(ints, off_by_one, 100)); // integers compare exactly at any scale
  const HostTensor bf16{true, DType::bf16, Shape{1}, {1.0}};
  EXPECT_TRUE(matches(bf16, HostTensor{true, DType::bf16, Shape{1}, {1.0078125}}, 1)); // one ulp
  EXPECT_FALSE(matches(HostTensor{}, bf16, 1)); // a missing gradient is a difference
}

// ---- whole training steps ------------------------------------------------------

/// The losses of three steps and the parameters after them.
struct TrainingRun {
  std::vector<double> losses;
  std::vector<HostTensor> params;
};

/// A leaf parameter: `center` plus fixed values in [-scale, scale).
Tensor parameter(Shape shape, uint64_t seed, Device device, double scale, double center = 0) {
  return fixed_tensor(shape, seed, device, scale, center).requires_grad_();
}

Tensor labels(int64_t n, int64_t classes, uint64_t seed, Device device) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(hashed_unit(seed, i) * classes);
  return from_vector(v, {n}, std::nullopt, device);
}

/// linear -> gelu -> dropout -> linear -> cross_entropy, SGD with momentum.
TrainingRun train_mlp_with_sgd(Device device) {
  manual_seed(7);
  std::vector<Tensor> p = {parameter({32, 12}, 10, device, 0.3), parameter({32}, 11, device, 0.1),
                           parameter({5, 32}, 12, device, 0.2), parameter({5}, 13, device, 0.1)};
  const Tensor x = fixed_tensor({16, 12}, 14, device);
  const Tensor y = labels(16, 5, 15, device);
  optim::SGD opt(p, {.lr = 0.1, .momentum = 0.9});
  TrainingRun run;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor hidden = dropout(gelu(linear(x, p[0], p[1])), 0.1);
    Tensor loss = cross_entropy(linear(hidden, p[2], p[3]), y);
    loss.backward();
    opt.step();
    mark_step();
    run.losses.push_back(loss.item());
  }
  for (const Tensor& t : p) run.params.push_back(to_host(t));
  return run;
}

/// A pre-norm transformer block over token embeddings: causal attention
/// (2 heads) and a gelu MLP, a vocabulary head, cross_entropy, gradient
/// clipping and AdamW.
TrainingRun train_transformer_block_with_adamw(Device device) {
  constexpr int64_t kBatch = 2, kSeq = 9, kModel = 16, kHeads = 2, kVocab = 23;
  manual_seed(8);
  uint64_t seed = 20;
  auto param = [&](Shape s, double scale, double center = 0) {
    return parameter(s, seed++, device, scale, center);
  };
  Tensor embed = param({kVocab, kModel}, 0.5);
  Tensor ln1_w = param({kModel}, 0.1, 1.0), ln1_b = param({kModel}, 0.1);
  // No qkv bias: the key bias has a zero gradient (softmax ignores a shift
  // shared by all keys), and AdamW would turn its rounding noise into
  // full-size steps of either sign.
  Tensor qkv_w = param({3 * kModel, kModel}, 0.3);
  Tensor out_w = param({kModel, kModel}, 0.3), out_b = param({kModel}, 0.05);
  Tensor ln2_w = param({kModel}, 0.1, 1.0), ln2_b = param({kModel}, 0.1);
  Tensor fc1_w = param({2 * kModel, kModel}, 0.3), fc1_b = param({2 * kModel}, 0.05);
  Tensor fc2_w = param({kModel, 2 * kModel}, 0.2), fc2_b = param({kModel}, 0.05);
  Tensor head_w = param({kVocab, kModel}, 0.3);
  std::vector<Tensor> p = {embed, ln1_w, ln1_b, qkv_w, out_w, out_b, ln2_w,
                           ln2_b, fc1_w, fc1_b, fc2_w, fc2_b, head_w};
  const Tensor tokens = reshape(labels(kBatch * kSeq, kVocab, 40, device), {kBatch, kSeq});
  const Tensor targets = labels(kBatch * kSeq, kVocab, 41, device);
  optim::AdamW opt(p, {.lr = 1e-2, .weight_decay = 0.01});
  auto heads = [&](const Tensor& t) { // [B, S, D] -> [B, H, S, D / H]
    return transpose(reshape(t, {kBatch, kSeq, kHeads, kModel / kHeads}), 1, 2);
  };
  TrainingRun run;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor h = embedding(tokens, embed);
    std::vector<Tensor> qkv = chunk(linear(layer_norm(h, {kModel}, ln1_w, ln1_b), qkv_w), 3, -1);
    SdpaOptions causal;
    causal.is_causal = true;
    causal.dropout_p = 0.1;
    Tensor attn = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), causal);
    attn = reshape(transpose(attn, 1, 2), {kBatch, kSeq, kModel});
    h = h + linear(attn, out_w, out_b);
    h = h + linear(gelu(linear(layer_norm(h, {kModel}, ln2_w, ln2_b), fc1_w, fc1_b)), fc2_w, fc2_b);
    Tensor logits = linear(h, head_w);
    Tensor loss = cross_entropy(reshape(logits, {kBatch * kSeq, kVocab}), targets);
    loss.backward();
    optim::clip_grad_norm_(p, 1.0);
    opt.step();
    mark_step();
    run.losses.push_back(loss.item());
  }
  for (const Tensor& t : p) run.params.push_back(to_host(t));
  return run;
}

void expect_same_training(TrainingRun (*train)(Device)) {
  const TrainingRun want = train(kRef);
  for (DeviceType type : backends_under_test()) {
    const Device device{type, 0};
    TrainingRun got;
    try {
      got = train(device);
    } catch (const std::exception& e) {
      ADD_FAILURE() << device.to_string() << " threw where ref trained: " << e.what();
      continue;
    }
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (size_t s = 0; s < want.losses.size(); ++s)
      EXPECT_NEAR(got.losses[s], want.losses[s], 1e-4 * (1 + std::fabs(want.losses[s])))
          << device.to_string() << " step " << s;
    for (size_t i = 0; i < want.params.size(); ++i)
      EXPECT_TRUE(matches(want.params[i], got.params[i], 10.0))
          << device.to_string() << " parameter " << i << " after 3 steps";
  }
}

TEST(BackendConformanceTraining, MlpWithSgdGivesTheSameLosses) {
  expect_same_training(&train_mlp_with_sgd);
}

TEST(BackendConformanceTraining, TransformerBlockWithAdamWGivesTheSameLosses) {
  expect_same_training(&train_transformer_block_with_adamw);
}

// ---- tensors of two backends in one op -------------------------------------------

TEST(BackendConformanceDevices, OneOpOnTensorsOfTwoBackendsIsAClearError) {
  for (DeviceType type : backends_under_test()) {
    const Device other{type, 0};
    const std::string names[] = {kRef.to_string(), other.to_string()};
    Tensor on_ref = fixed_tensor({3, 4}, 1, kRef), on_other = fixed_tensor({3, 4}, 2, other);
    auto expect_device_error = [&](const char* what, auto&& call) {
      const std::string msg = error_of(call);
      EXPECT_THAT(msg, HasSubstr("different devices")) << what;
      for (const std::string& n : names) EXPECT_THAT(msg, HasSubstr(n)) << what;
    };
    expect_device_error("add", [&] { add(on_ref, on_other); });
    expect_device_error("matmul", [&] { matmul(on_ref, transpose(on_other, 0, 1)); });
    expect_device_error("linear bias",
                        [&] { linear(on_other, on_other, fixed_tensor({3}, 3, kRef)); });
    expect_device_error("where", [&] { where(gt(on_ref, 0.0), on_other, on_other); });
    expect_device_error("cat", [&] { cat(std::vector<Tensor>{on_ref, on_other}); });
    expect_device_error("embedding", [&] {
      embedding(from_vector(std::vector<int64_t>{0, 2}, {2}, std::nullopt, kRef), on_other);
    });
    expect_device_error("scatter_add index", [&] {
      scatter_add(on_other, 0,
                  from_vector(std::vector<int64_t>{0, 1, 2, 0}, {1, 4}, std::nullopt, kRef),
                  on_other);
    });
    expect_device_error("sdpa mask", [&] {
      SdpaOptions o;
      o.attn_mask = from_vector(std::vector<bool>(9, true), {3, 3}, kRef);
      Tensor q = reshape(on_other, {1, 3, 4});
      scaled_dot_product_attention(q, q, q, o);
    });
    expect_device_error("sdpa valid_seq_len", [&] {
      SdpaOptions o;
      o.valid_seq_len = from_vector(std::vector<int64_t>{2}, {1}, std::nullopt, kRef);
      Tensor q = reshape(on_other, {1, 3, 4});
      scaled_dot_product_attention(q, q, q, o);
    });
    expect_device_error("device scalar", [&] { on_other* Tensor::scalar(2.0, DType::f32, kRef); });
    expect_device_error("optimizer over parameters of two backends", [&] {
      Tensor p_ref = fixed_tensor({2}, 4, kRef).requires_grad_();
      Tensor p_other = fixed_tensor({2}, 5, other).requires_grad_();
      sum(p_ref * p_ref).backward();
      sum(p_other * p_other).backward();
      optim::SGD({p_ref, p_other}, {.lr = 0.1}).step();
    });
    EXPECT_THAT(error_of([&] { on_other.copy_(on_ref); }), HasSubstr("devices differ"));
    // After the errors both backends still run their own graphs.
    Tensor ref_result = fixed_tensor({3, 4}, 2, kRef) * 2.0;
    Tensor other_result = on_other * 2.0;
    EXPECT_EQ(other_result.to_vector<float>(), ref_result.to_vector<float>());
  }
}

} // namespace
} // namespace mstep::conformance
