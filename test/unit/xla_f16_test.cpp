// f16 on the xla backend: the step function computes f16 ops itself (no
// callout to a cpu kernel) as the ref kernels' f16 instantiation does
// (lib/backends/ref: f16 elements widened to f32, the kernel's f32 or f64
// arithmetic, f64 -> f32 -> f16 rounding on store), so the loops equal ref
// bit for bit:
// - reductions, softmax, nll_loss and the norms (f64 accumulation, ref's
//   order), rand / randn / arange / dropout (ref's Philox numbers; rand
//   keeps 11 bits), pools and their gradients (f32 sums), index_add /
//   scatter_add (each add in f32, rounded to f16);
// - matmuls (the cpu backend has no f16 matmul of its own and runs ref's):
//   f32 products and sums in order of k, one rounding, batched, broadcast,
//   with a transposed weight, bias and gelu (separate f16 ops, as ref);
// - conv2d and its two gradients: f32 sums in ref's loop order;
// - the optimizer update with and without clip_grad_norm_ (every f32
//   operation rounded to f16, as ref's rnd_same; the norms' squares or powers
//   rounded before their f64 sum);
// - element-wise chains and casts are the cpu backend's fusion code on
//   both backends: equal to cpu bit for bit.
// Attention (an online softmax, where ref holds the [L, S] matrix) is within
// the bf16/f16 conformance tolerance of ref (backend_conformance_test). The
// bf16 optimizer update with clipping, now a loop too, equals ref bit for
// bit. GPT-mini's training steps under autocast f16 call out for nothing.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/GptTrainingLosses.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaHalfTests.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::callouts_of_last_step;
using testing::RecordSteps;

using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// Values spread over a few binades, rounded to `dtype` on the way in.
Tensor on(Device d, Shape s, int seed, double scale = 1.0, DType dtype = DType::f16) {
  return testing::half_input(d, s, seed, scale, dtype);
}

/// A leaf of `dtype` that requires grad (data, values of `on`).
Tensor leaf(Device d, Shape s, int seed, double scale = 1.0, DType dtype = DType::f16) {
  return testing::half_leaf(d, s, seed, scale, dtype);
}

/// `make(device)`'s f16 results as f32, on xla (no callout, no fallback)
/// and on `other`.
template <typename F> auto on_xla_and(Device other, F make) {
  return testing::on_xla_and(other, DType::f16, make);
}

using testing::expect_same;

TEST(XlaF16, ReductionsSoftmaxAndNllLossEqualRefBitForBit) {
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = on(d, {4, 5, 40}, 1, 3.0), y = on(d, {3, 5, 6}, 4, 8.0);
    Tensor t = from_vector(std::vector<int64_t>{3, -100, 0, 8, 1, 3}, {6}, std::nullopt, d);
    Tensor logp = log_softmax(on(d, {6, 9}, 5, 4.0), 1);
    return std::vector<Tensor>{sum(x, {2}, true), sum(x, {0, 1}), mean(x, {0}), max(x, {2}),
                               min(x, {0}), var(x, {2}), logsumexp(x, {2}),
                               argmax(x, 2).to(DType::f16), softmax(x, 2), log_softmax(y, 1),
                               nll_loss(logp, t), nll_loss(logp, t, Reduction::none)};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, NormsEqualRefBitForBit) {
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = on(d, {3, 4, 24}, 8, 4.0) + 1.0;
    Tensor w = on(d, {24}, 9), b = on(d, {24}, 10);
    return std::vector<Tensor>{layer_norm(x, {24}, w, b), layer_norm(x, {4, 24}),
                               rms_norm(x, {24}, w)};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, RandomOpsArangeAndDropoutEqualRefBitForBit) {
  // rand keeps 11 bits of its draw (floor(u * 2^11) / 2^11).
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    manual_seed(1234);
    Tensor x = on(d, {5, 37}, 11, 2.0);
    return std::vector<Tensor>{rand({7, 33}, DType::f16, d), randn({5, 9}, DType::f16, d),
                               arange(-3.0, 300.0, 0.7, DType::f16, d), dropout(x, 0.3)};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, PoolsIndexAddAndScatterAddEqualRefBitForBit) {
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = leaf(d, {2, 3, 9, 10}, 1, 2.0), z = leaf(d, {2, 3, 9, 10}, 2, 2.0);
    Tensor m = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    Tensor a = avg_pool2d(z, {3, 3}, {2, 2}, {1, 1}, false, /*count_include_pad=*/false);
    Tensor table = leaf(d, {11, 8}, 4);
    Tensor tokens = from_vector(std::vector<int64_t>{3, 3, 7, 0, 3, 10}, {6}, std::nullopt, d);
    (sum(m * on(d, m.shape(), 3)) + sum(a * on(d, a.shape(), 4)) +
     sum(index_select(table, 0, tokens) * on(d, {6, 8}, 5)))
        .backward();
    Tensor y = on(d, {6, 17}, 6, 4.0);
    Tensor rows = from_vector(std::vector<int64_t>{2, 0, 2, 5, 2, 1, 0}, {7}, std::nullopt, d);
    std::vector<int64_t> cols(6 * 9);
    for (size_t i = 0; i < cols.size(); ++i) cols[i] = static_cast<int64_t>((i * 7) % 17);
    return std::vector<Tensor>{
        m, a, x.grad(), z.grad(), table.grad(), index_add(y, 0, rows, on(d, {7, 17}, 7, 3.0)),
        scatter_add(y, 1, from_vector(cols, {6, 9}, std::nullopt, d), on(d, {6, 9}, 8, 3.0))};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, MatmulsEqualRefBitForBit) {
  // f32 sums in order of k and one rounding, however the operands are laid
  // out (k = 257 makes long sums; a transposed weight is read in place).
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor a = on(d, {2, 9, 257}, 1), w = on(d, {33, 257}, 2), bias = on(d, {33}, 3);
    return std::vector<Tensor>{matmul(on(d, {17, 33}, 4), on(d, {33, 7}, 5)),
                               matmul(on(d, {3, 5, 6}, 6), on(d, {3, 6, 4}, 7)),
                               matmul(on(d, {2, 1, 3, 37}, 8), on(d, {1, 4, 37, 5}, 9)),
                               linear(a, w, bias), gelu(linear(a, w, bias)),
                               linear(a, w) + on(d, {2, 9, 33}, 10)};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, ConvolutionAndItsGradientsEqualRefBitForBit) {
  // Stride, padding, dilation, groups; each output's f32 sum in ref's order.
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = leaf(d, {2, 4, 9, 11}, 1), w = leaf(d, {6, 2, 3, 3}, 2, 0.5),
           b = leaf(d, {6}, 3, 0.2);
    Tensor y = conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2}, /*groups=*/2);
    sum(y * on(d, y.shape(), 4)).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  });
  expect_same(xla, ref);
}

TEST(XlaF16, ElementwiseChainsAndCastsEqualTheCpuBackendBitForBit) {
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    Tensor x = on(d, {7, 19}, 6, 2.0), y = on(d, {19}, 7);
    Tensor f = (x.to(DType::f32) * 1.001 + 0.3).to(DType::f16);
    return std::vector<Tensor>{gelu(x * y + 1.0), exp(x) / (y + 3.0), relu(x - y), f};
  });
  expect_same(xla, cpu);
}

/// Three optimizer steps on parameters of `dtype`, the gradients clipped
/// to total `norm_type`-norm 0.5 first when `clip`: the parameters and every
/// state as floats; on xla, each step calls out for nothing.
template <typename Make>
std::vector<std::vector<float>> train(Device d, DType dtype, Make make_optimizer, bool clip,
                                      double norm_type = 2.0) {
  RecordSteps record;
  std::vector<Tensor> params = {leaf(d, {17, 33}, 1, 1.0, dtype), leaf(d, {33}, 2, 0.5, dtype)};
  auto opt = make_optimizer(params);
  std::vector<std::vector<float>> values;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (sum(params[0] * on(d, {17, 33}, 3, 1.0, dtype)) + sum(params[1] * params[1])).backward();
    Tensor total_norm;
    if (clip) total_norm = optim::clip_grad_norm_(params, 0.5, norm_type);
    opt.step();
    mark_step();
    if (d == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
    if (clip) values.push_back(total_norm.to(DType::f32).to_vector<float>());
  }
  testing::append_parameters_and_states(values, params, opt, dtype);
  return values;
}

template <typename Make>
void expect_training_equals_ref(DType dtype, Make make, bool clip, double norm_type = 2.0) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + (clip ? " clipped, norm " : " unclipped, norm ") +
               std::to_string(norm_type));
  expect_same(train(kXla, dtype, make, clip, norm_type), train(kRef, dtype, make, clip, norm_type));
}

TEST(XlaF16, OptimizerUpdatesOfF16ParametersEqualRefBitForBit) {
  auto adadelta = [](std::vector<Tensor> p) { return optim::Adadelta(p, {.lr = 0.5}); };
  expect_training_equals_ref(DType::f16, testing::nesterov_sgd, false);
  expect_training_equals_ref(DType::f16, testing::amsgrad_adam, false);
  expect_training_equals_ref(DType::f16, testing::decayed_adamw, false);
  expect_training_equals_ref(DType::f16, adadelta, false);
}

TEST(XlaF16, ClippedOptimizerUpdatesOfBf16AndF16ParametersEqualRefBitForBit) {
  // The total norm (returned) and the clipped update: the ref's norms in
  // the parameters' dtype (2, 1, inf and a p-norm).
  auto adamw = [](std::vector<Tensor> p) {
    return optim::AdamW(p, {.lr = 0.01, .weight_decay = 0.1});
  };
  auto sgd = [](std::vector<Tensor> p) { return optim::SGD(p, {.lr = 0.1, .momentum = 0.9}); };
  for (DType dtype : {DType::bf16, DType::f16}) {
    expect_training_equals_ref(dtype, adamw, true, 2.0);
    expect_training_equals_ref(dtype, sgd, true, 1.0);
    expect_training_equals_ref(dtype, sgd, true, std::numeric_limits<double>::infinity());
    expect_training_equals_ref(dtype, adamw, true, 3.0);
  }
}

TEST(XlaF16, GptTrainingStepUnderAutocastF16CallsOutForNothing) {
  RecordSteps record;
  reset_metrics();
  const std::vector<float> xla =
      testing::gpt_training_losses(kXla, DType::f16, 3, [&](int step) {
        EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
      });
  EXPECT_EQ(metrics().fallbacks, 0);
  const std::vector<float> ref = testing::gpt_training_losses(kRef, DType::f16, 3);
  ASSERT_EQ(xla.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    // The attention's online softmax sums in another order than ref's
    // [L, S] rows: a few f16 roundings (2^-11 relative) of the logits
    // apart, well inside autocast_test.cpp's 16-bit training tolerance.
    EXPECT_NEAR(xla[i], ref[i], 2e-3 * (1 + std::abs(ref[i]))) << "step " << i;
  EXPECT_LT(xla.back(), xla.front());
}

} // namespace
} // namespace mstep
