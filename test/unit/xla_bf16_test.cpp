// bf16 on the xla backend: the step function computes bf16 ops itself
// (no callout to a cpu kernel) and gives the cpu backend's values.
// - Loops that accumulate in f64 and round f64 -> f32 -> bf16 (reductions,
//   softmax, nll_loss) and element-wise chains and casts (the same fusion
//   code on both backends) equal the cpu backend bit for bit. (An f64 sum
//   in another order moves the result by ~1e-16 relative, and a bf16
//   rounding flips only at a tie; none lies that close here.) max, min
//   and argmax are exact.
// - layer_norm and rms_norm compute as the ref kernel (f64 statistics), so
//   they equal ref bit for bit; the cpu backend's oneDNN layer_norm keeps
//   f32 statistics: within one bf16 rounding of it.
// - bf16 matmuls are oneDNN's matmul primitive on both backends (products
//   exact in f32, f32 accumulation, one rounding to bf16), but xla may fold
//   a batch into the rows or read a transposed operand in place, which can
//   change the order of the f32 sums: within one bf16 ulp of cpu's plus
//   k * 2^-23 * sum |a b| (the bound on reordering an f32 sum of k terms).
// - A bf16 matmul whose only reader adds a bias (then perhaps gelu or
//   relu) or a residual runs the pair as the cpu backend does: one oneDNN
//   matmul with that epilogue on its f32 sum and one rounding, so the
//   result equals cpu's bit for bit.
// - GPT-mini's training step under autocast bf16 calls out for nothing
//   (no callout, no host fallback) and its losses stay within the bf16
//   tolerance of autocast_test.cpp's training test of ref's bf16 losses.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/GptTrainingLosses.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaHalfTests.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::RecordSteps;
using testing::callouts_of_last_step;

using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// Values spread over a few binades, rounded to bf16 on the way in.
Tensor on(Device d, Shape s, int seed, double scale = 1.0) {
  return testing::half_input(d, s, seed, scale, DType::bf16);
}

/// `make(device)`'s bf16 results as f32, on xla (no callout, no fallback)
/// and on `other`.
template <typename F> auto on_xla_and(Device other, F make) {
  return testing::on_xla_and(other, DType::bf16, make);
}

using testing::expect_same;

TEST(XlaBf16, ReductionsEqualTheCpuBackendBitForBit) {
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    Tensor x = on(d, {4, 5, 40}, 1, 3.0);
    return std::vector<Tensor>{
        sum(x, {2}, true), sum(x, {0, 1}),   sum(x, {0}), sum(x, {1}), sum(x),
        mean(x, {2}),      mean(x, {0, 1}),  max(x, {2}), min(x, {0}), max(x),
        var(x, {2}),       logsumexp(x, {2})};
  });
  expect_same(xla, cpu);
}

TEST(XlaBf16, ArgmaxOfBf16IsTheCpuBackends) {
  RecordSteps record;
  auto make = [](Device d) { return argmax(on(d, {6, 33}, 2), 1); };
  Tensor xla = make(kXla);
  mark_step();
  EXPECT_THAT(callouts_of_last_step(), IsEmpty());
  Tensor cpu = make(kCpu);
  EXPECT_EQ(xla.to_vector<int64_t>(), cpu.to_vector<int64_t>());
}

TEST(XlaBf16, SoftmaxAndLogSoftmaxEqualTheCpuBackendBitForBit) {
  // A last dim of 37 (row mode, a masked tail block) and a middle dim
  // (lanes of stride 6).
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    Tensor x = on(d, {3, 4, 37}, 3, 8.0), y = on(d, {3, 5, 6}, 4, 8.0);
    return std::vector<Tensor>{softmax(x, 2), log_softmax(x, 2), softmax(y, 1), log_softmax(y, 1)};
  });
  expect_same(xla, cpu);
}

TEST(XlaBf16, NllLossEqualsTheCpuBackendBitForBit) {
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    Tensor logp = log_softmax(on(d, {6, 9}, 5, 4.0), 1);
    Tensor t = from_vector(std::vector<int64_t>{3, -100, 0, 8, 1, 3}, {6}, std::nullopt, d);
    return std::vector<Tensor>{nll_loss(logp, t), nll_loss(logp, t, Reduction::sum),
                               nll_loss(logp, t, Reduction::none)};
  });
  expect_same(xla, cpu);
}

TEST(XlaBf16, ElementwiseChainsAndCastsEqualTheCpuBackendBitForBit) {
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    Tensor x = on(d, {7, 19}, 6, 2.0), y = on(d, {19}, 7);
    Tensor f = (x.to(DType::f32) * 1.001 + 0.3).to(DType::bf16); // f32 -> bf16 rounding
    return std::vector<Tensor>{gelu(x * y + 1.0), exp(x) / (y + 3.0), relu(x - y), f};
  });
  expect_same(xla, cpu);
}

TEST(XlaBf16, DropoutOfBf16EqualsTheCpuBackendBitForBit) {
  // The same Philox stream on both (the seed set first); a last dim that
  // is no multiple of the vector width.
  auto [xla, cpu] = on_xla_and(kCpu, [](Device d) {
    manual_seed(7);
    Tensor x = on(d, {5, 37}, 11, 2.0);
    return std::vector<Tensor>{dropout(x, 0.3), dropout(x * 1.5, 0.5)};
  });
  expect_same(xla, cpu);
}

TEST(XlaBf16, NormsEqualRefBitForBitAndCpuWithinOneRounding) {
  auto make = [](Device d) {
    Tensor x = on(d, {3, 4, 24}, 8, 4.0) + 1.0;
    Tensor w = on(d, {24}, 9), b = on(d, {24}, 10);
    return std::vector<Tensor>{layer_norm(x, {24}, w, b), layer_norm(x, {4, 24}),
                               rms_norm(x, {24}, w)};
  };
  auto [xla, ref] = on_xla_and(kRef, make);
  expect_same(xla, ref);
  auto [again, cpu] = on_xla_and(kCpu, make);
  for (size_t i = 0; i < cpu.size(); ++i)
    for (size_t j = 0; j < cpu[i].size(); ++j)
      // one bf16 ulp (2^-7 relative at most) and f32 statistics' error
      EXPECT_NEAR(again[i][j], cpu[i][j], 0x1p-7 * std::abs(cpu[i][j]) + 1e-5)
          << "result " << i << " element " << j;
}

/// The matmuls' products on xla within the stated bound of cpu's.
void expect_products_near(Device other, const std::vector<std::pair<Shape, Shape>>& shapes,
                          bool transpose_rhs) {
  auto make = [&](Device d) {
    std::vector<Tensor> out;
    int seed = 20;
    for (const auto& [a, b] : shapes) {
      Tensor lhs = on(d, a, seed++);
      if (!transpose_rhs) {
        out.push_back(matmul(lhs, on(d, b, seed++)));
        continue;
      }
      Shape stored = b; // b^T, transposed back
      std::swap(stored[b.rank() - 1], stored[b.rank() - 2]);
      out.push_back(matmul(lhs, transpose(on(d, stored, seed++), -1, -2)));
    }
    return out;
  };
  auto [xla, want] = on_xla_and(other, make);
  for (size_t i = 0; i < shapes.size(); ++i) {
    // Every |a| <= 1.5 and |b| <= 1.5: sum |a b| <= 2.25 k.
    const int64_t k = shapes[i].first[shapes[i].first.rank() - 1];
    const double reorder = static_cast<double>(k) * 0x1p-23 * 2.25 * static_cast<double>(k);
    for (size_t j = 0; j < want[i].size(); ++j)
      EXPECT_NEAR(xla[i][j], want[i][j], 0x1p-7 * std::abs(want[i][j]) + reorder)
          << "product " << i << " element " << j;
  }
}

TEST(XlaBf16, MatmulsAreOneDnnsBf16MatmulInsideTheFunction) {
  // A matrix product, equal batches, a batched lhs times a matrix (folded
  // into one gemm over the rows), a matrix times a batched rhs, k = 1.
  const std::vector<std::pair<Shape, Shape>> shapes = {{{9, 70}, {70, 13}},
                                                       {{3, 5, 33}, {3, 33, 7}},
                                                       {{2, 8, 16}, {16, 24}},
                                                       {{6, 40}, {2, 40, 5}},
                                                       {{4, 1}, {1, 3}}};
  expect_products_near(kCpu, shapes, false);
  // The rhs read transposed in place (a linear layer's weight).
  expect_products_near(kCpu, shapes, true);
}

TEST(XlaBf16, AProductOfBf16ValuesIsRoundedOnceFromItsF32Sum) {
  // Both f32 sums are bf16 ties: 1 + 2^-8 lies halfway between 1 and
  // 1 + 2^-7, and 1 + 3 * 2^-8 halfway between 1 + 2^-7 and 1 + 2^-6; the
  // even neighbour wins (1, then 1 + 2^-6), where truncation would give
  // 1 and 1 + 2^-7. The sums are exact in f32, so this is the one
  // rounding alone, on xla and cpu alike.
  auto make = [](Device d) {
    Tensor a = from_vector(std::vector<float>{1, 0x1p-8f, 1, 0x3p-8f}, {2, 2}, DType::f32, d)
                   .to(DType::bf16);
    Tensor b = from_vector(std::vector<float>{1, 1}, {2, 1}, DType::f32, d).to(DType::bf16);
    return std::vector<Tensor>{matmul(a, b)};
  };
  auto [xla, cpu] = on_xla_and(kCpu, make);
  EXPECT_EQ(xla[0], (std::vector<float>{1.0f, 1.0f + 0x1p-6f}));
  expect_same(xla, cpu);
}

TEST(XlaBf16, MatmulWithBiasActivationOrResidualEqualsTheCpuBackendBitForBit) {
  // cpu folds each of these into one oneDNN matmul with an epilogue
  // (find_matmul_epilogue); xla must round once as it does. A matrix
  // product, a batched lhs folded into the rows, a weight read transposed.
  // The operands are materialized first (mark_step), so that no cast is
  // fused into the epilogue's fusion (which neither backend would fold).
  auto make = [](Device d) {
    struct Operands {
      Tensor x, w, wt, bias, residual;
    };
    std::vector<Operands> operands;
    const int64_t p = 13;
    for (const Shape& x_shape : {Shape{9, 70}, Shape{2, 8, 70}}) {
      Shape out_shape = x_shape;
      out_shape[out_shape.rank() - 1] = p;
      operands.push_back({on(d, x_shape, 40, 1.5), on(d, {70, p}, 41), on(d, {p, 70}, 42),
                          on(d, {p}, 43, 4.0), on(d, out_shape, 44, 3.0)});
    }
    // The product 1 + 2^-8 is a bf16 tie (alone it rounds to 1); the bias
    // adds 2^-10, and the one rounding of the f32 sum gives 1 + 2^-7
    // where rounding the product first would give 1.
    Tensor a = from_vector(std::vector<float>{1, 0x1p-8f}, {1, 2}, DType::f32, d).to(DType::bf16);
    Tensor b = from_vector(std::vector<float>{1, 1}, {2, 1}, DType::f32, d).to(DType::bf16);
    Tensor tie_bias = from_vector(std::vector<float>{0x1p-10f}, {1}, DType::f32, d).to(DType::bf16);
    mark_step();
    std::vector<Tensor> out;
    for (const auto& [x, w, wt, bias, residual] : operands) {
      out.push_back(matmul(x, w) + bias);
      out.push_back(matmul(x, transpose(wt, -1, -2)) + bias);
      out.push_back(gelu(matmul(x, w) + bias));
      out.push_back(gelu(matmul(x, w) + bias, "tanh"));
      out.push_back(relu(matmul(x, w) + bias));
      out.push_back(residual + (matmul(x, w) + bias));
      out.push_back(residual + matmul(x, w));
    }
    out.push_back(matmul(a, b) + tie_bias);
    return out;
  };
  auto [xla, cpu] = on_xla_and(kCpu, make);
  EXPECT_EQ(xla.back(), std::vector<float>{1.0f + 0x1p-7f});
  expect_same(xla, cpu);
}

/// Three AdamW steps of a small GPT-mini under autocast bf16, as gpt_train
/// --autocast bf16 takes them: each step graph is checked for callouts
/// when `check`.
std::vector<float> gpt_losses(Device device, bool check) {
  RecordSteps record;
  reset_metrics();
  const std::vector<float> losses =
      testing::gpt_training_losses(device, DType::bf16, 3, [&](int step) {
        if (check) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
      });
  if (check) EXPECT_EQ(metrics().fallbacks, 0);
  return losses;
}

/// A bf16 leaf that requires grad (values of `on`, rounded once).
Tensor leaf(Device d, Shape s, int seed, double scale = 1.0) {
  return testing::half_leaf(d, s, seed, scale, DType::bf16);
}

// Ops that were callouts in bf16 until this round, now loops that compute
// as the ref kernel's bf16 instantiation does (the cpu backend runs those
// kernels for them): bit for bit equal to ref.

TEST(XlaBf16, RandRandnAndArangeOfBf16EqualRefBitForBit) {
  // rand keeps 8 bits of its draw (floor(u * 2^8) / 2^8), randn rounds
  // its f32 value once, arange rounds start + i * step (f64 -> f32 -> bf16).
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    manual_seed(1234);
    return std::vector<Tensor>{rand({7, 33}, DType::bf16, d), randn({5, 9}, DType::bf16, d),
                               arange(-3.0, 300.0, 0.7, DType::bf16, d)};
  });
  expect_same(xla, ref);
}

TEST(XlaBf16, PoolsAndTheirGradientsOfBf16EqualRefBitForBit) {
  // Overlapping windows (stride 2 under kernel 3), padding, and the avg
  // divisor without the padding: a gradient's plane sums its windows in
  // f32 (the step's scratch) and rounds once, as the ref kernel.
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = leaf(d, {2, 3, 9, 10}, 1, 2.0), z = leaf(d, {2, 3, 9, 10}, 2, 2.0);
    Tensor m = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    Tensor a = avg_pool2d(z, {3, 3}, {2, 2}, {1, 1}, false, /*count_include_pad=*/false);
    (sum(m * on(d, m.shape(), 3)) + sum(a * on(d, a.shape(), 4))).backward();
    return std::vector<Tensor>{m, a, x.grad(), z.grad()};
  });
  expect_same(xla, ref);
}

TEST(XlaBf16, IndexAddScatterAddAndEmbeddingGradientOfBf16EqualRefBitForBit) {
  // Duplicate indices add in order, each addition in f32 rounded to bf16
  // (the ref's add in its storage type).
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    Tensor x = on(d, {6, 17}, 1, 4.0);
    Tensor rows = from_vector(std::vector<int64_t>{2, 0, 2, 5, 2, 1, 0}, {7}, std::nullopt, d);
    Tensor added = index_add(x, 0, rows, on(d, {7, 17}, 2, 3.0));
    std::vector<int64_t> cols(6 * 9);
    for (size_t i = 0; i < cols.size(); ++i) cols[i] = static_cast<int64_t>((i * 7) % 17);
    Tensor scattered =
        scatter_add(x, 1, from_vector(cols, {6, 9}, std::nullopt, d), on(d, {6, 9}, 3, 3.0));
    Tensor table = leaf(d, {11, 8}, 4);
    Tensor tokens = from_vector(std::vector<int64_t>{3, 3, 7, 0, 3, 10}, {6}, std::nullopt, d);
    sum(index_select(table, 0, tokens) * on(d, {6, 8}, 5)).backward();
    return std::vector<Tensor>{added, scattered, table.grad()};
  });
  expect_same(xla, ref);
}

TEST(XlaBf16, ABroadcastBatchMatmulOfBf16EqualsRefBitForBit) {
  // Batch dims that broadcast both ways are no gemm call: the loop sums in
  // f32 in order of k and rounds once, as the ref's bf16 matmul.
  auto [xla, ref] = on_xla_and(kRef, [](Device d) {
    return std::vector<Tensor>{matmul(on(d, {2, 1, 3, 37}, 1), on(d, {1, 4, 37, 5}, 2))};
  });
  expect_same(xla, ref);
}

/// Three optimizer steps on bf16 parameters (gradients of an elementwise
/// loss): the parameters and every state as floats; on xla, each update
/// step calls out for nothing.
template <typename Make>
std::vector<std::vector<float>> train_bf16(Device d, Make make_optimizer) {
  RecordSteps record;
  std::vector<Tensor> params = {leaf(d, {17, 33}, 1), leaf(d, {33}, 2, 0.5)};
  auto opt = make_optimizer(params);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (sum(params[0] * on(d, {17, 33}, 3)) + sum(params[1] * params[1])).backward();
    opt.step();
    mark_step();
    if (d == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
  }
  std::vector<std::vector<float>> values;
  testing::append_parameters_and_states(values, params, opt, DType::bf16);
  return values;
}

TEST(XlaBf16, OptimizerUpdatesOfBf16ParametersEqualRefBitForBit) {
  // Every product, sum, quotient and root rounded to bf16, the
  // coefficients cast f64 -> f32 -> bf16: the ref kernel's bf16 update.
  auto check = [](auto make) {
    const auto xla = train_bf16(kXla, make);
    const auto ref = train_bf16(kRef, make);
    expect_same(xla, ref);
  };
  check([](std::vector<Tensor> p) {
    return optim::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  });
  check([](std::vector<Tensor> p) {
    return optim::SGD(p, {.lr = 0.1, .momentum = 0.5, .dampening = 0.25});
  });
  check([](std::vector<Tensor> p) {
    return optim::Adam(p, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  });
  check([](std::vector<Tensor> p) { return optim::AdamW(p, {.lr = 0.01, .weight_decay = 0.1}); });
  check([](std::vector<Tensor> p) { return optim::Adadelta(p, {.lr = 0.5}); });
}

TEST(XlaBf16, GptTrainingStepUnderAutocastCallsOutForNothing) {
  const std::vector<float> xla = gpt_losses(kXla, true);
  const std::vector<float> ref = gpt_losses(kRef, false);
  ASSERT_EQ(xla.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    // autocast_test.cpp's bf16 training tolerance
    EXPECT_NEAR(xla[i], ref[i], 2e-2 * (1 + std::abs(ref[i]))) << "step " << i;
  EXPECT_LT(xla.back(), xla.front());
}

} // namespace
} // namespace mstep
