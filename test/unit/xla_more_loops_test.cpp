// The loops of the op families the xla step function called out for until
// issue 20's last round (lib/backends/xla/XlaGatherLoops.cpp,
// XlaFillLoops.cpp, XlaPoolLoops.cpp, XlaConvGemm.cpp,
// XlaMatmulLoops.cpp, and XlaReductionLoops.cpp's strided rows): each is a
// row function that the step function splits over the OpenMP threads, so
// 3 threads give 1 thread's values bit for bit (conv2d's im2col + gemm
// too: the threads take whole samples, and oneDNN's sgemm runs on one
// thread inside an OpenMP region) and ref's to f32 rounding; the matmul
// loop and a sum over dims that are not one block give ref's bits; and a gather or scatter_add index out of range stops the
// step, naming the index, before a donated parameter is written.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

Tensor on(Device d, Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, d);
}

Tensor indices(Device d, Shape s, int64_t size, int seed) {
  std::vector<int64_t> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7 + seed) % size);
  return from_vector(v, s, std::nullopt, d);
}

/// The new families on shapes above the split's threshold (32K elements):
/// gather and scatter_add over dims 0 and 1, pad, tril, pools, conv2d, a
/// broadcast-batch matmul, sums and maxima over dims 0 and 2, i64 max,
/// then the gradients of conv2d (input, weight, and the bias's sum over
/// dims 0, 2, 3) and of both pools.
std::vector<Tensor> new_families(Device d) {
  Tensor x = on(d, {64, 600}, 1);
  Tensor image = on(d, {4, 16, 24, 24}, 2).requires_grad_();
  Tensor weight = (on(d, {8, 16, 3, 3}, 3) * 0.2).requires_grad_();
  Tensor bias = on(d, {8}, 4).requires_grad_();
  Tensor for_max = on(d, {4, 16, 24, 24}, 5).requires_grad_();
  Tensor for_avg = on(d, {4, 16, 24, 24}, 6).requires_grad_();
  Tensor conv = conv2d(image, weight, bias, {1, 1}, {1, 1});
  Tensor max_pooled = max_pool2d(for_max, {3, 3}, {2, 2}, {1, 1});
  Tensor avg_pooled = avg_pool2d(for_avg, {2, 2});
  Tensor idx = indices(d, {64, 600}, 600, 1);
  Tensor idx0 = indices(d, {64, 600}, 64, 2);
  Tensor cube = on(d, {40, 30, 50}, 7);
  std::vector<Tensor> out = {gather(x, 1, idx),
                             gather(x, 0, idx0),
                             scatter_add(x, 1, idx, x * 2.0),
                             scatter_add(x, 0, idx0, x * 3.0),
                             pad(x, {3, 2, 1, 4}, 0.5),
                             tril(x, 2),
                             max_pooled,
                             avg_pooled,
                             conv,
                             Tensor{},
                             Tensor{},
                             Tensor{},
                             Tensor{},
                             matmul(on(d, {2, 1, 64, 40}, 8), on(d, {3, 40, 70}, 9)),
                             sum(cube, {0, 2}),
                             max(cube, {0, 2}),
                             to(max(to(cube * 100.0, DType::i64), {0, 2}), DType::f32)};
  Tensor loss = sum(conv * on(d, {4, 8, 24, 24}, 10)) +
                sum(max_pooled * on(d, {4, 16, 12, 12}, 11)) +
                sum(avg_pooled * on(d, {4, 16, 12, 12}, 12));
  loss.backward();
  out[9] = image.grad();
  out[10] = weight.grad();
  out[11] = bias.grad();
  out[12] = for_max.grad() + for_avg.grad();
  return out;
}

/// `make(d)`'s values (as f32) computed in one step at `n` OpenMP threads
/// (0: the default count).
template <typename F>
std::vector<std::vector<float>> values_at(F make, Device d, int n) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(n > 0 ? n : threads);
  std::vector<Tensor> out = make(d);
  mark_step();
  std::vector<std::vector<float>> values;
  for (const Tensor& t : out) values.push_back(t.to_vector<float>());
  omp_set_num_threads(threads);
  return values;
}

TEST(XlaMoreLoops, SplitOverThreadsGiveOneThreadsValuesBitForBitAndRefs) {
  const std::vector<std::vector<float>> one = values_at(new_families, kXla, 1),
                                        three = values_at(new_families, kXla, 3),
                                        ref = values_at(new_families, kRef, 0);
  ASSERT_EQ(one.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(three[i], one[i]);
    ASSERT_EQ(one[i].size(), ref[i].size());
    // conv2d and its input and weight gradients (8, 9, 10) are f32 gemm
    // sums now (XlaConvGemm.cpp), checked against their bound in
    // xla_conv_gemm_test.
    if (i == 8 || i == 9 || i == 10) continue;
    for (size_t k = 0; k < ref[i].size(); ++k)
      ASSERT_NEAR(one[i][k], ref[i][k], 1e-5 * (1 + std::abs(ref[i][k]))) << "element " << k;
  }
  // The matmul loop (13) and the strided sum (14) are ref's sums in ref's
  // order: the same bits.
  for (size_t i : {13, 14}) EXPECT_EQ(one[i], ref[i]) << i;
}

// Transposing permutes copy 16 x 16 blocks (XlaCopyLoops.cpp): sides that
// are no multiple of 16, row ranges split unevenly over 3 threads, a
// batch of matrices, the last two dims moved to the front, i64 and bf16
// elements: each is a copy, so ref's values bit for bit at 1 and 3 threads.
std::vector<Tensor> transposes(Device d) {
  Tensor m = on(d, {333, 517}, 1);
  Tensor cube = on(d, {3, 70, 53}, 2);
  Tensor ints = to(on(d, {70, 531}, 3) * 1000.0, DType::i64);
  Tensor halves = to(on(d, {45, 1001}, 4), DType::bf16);
  return {permute(m, {1, 0}),
          permute(cube, {0, 2, 1}),
          permute(cube, {1, 2, 0}),
          permute(cube, {2, 0, 1}),
          to(permute(ints, {1, 0}), DType::f32),
          to(permute(halves, {1, 0}), DType::f32),
          permute(on(d, {1, 17}, 5), {1, 0})};
}

TEST(XlaMoreLoops, TransposesInBlocksAreRefsCopiesAtOneAndThreeThreads) {
  const std::vector<std::vector<float>> one = values_at(transposes, kXla, 1),
                                        three = values_at(transposes, kXla, 3),
                                        ref = values_at(transposes, kRef, 0);
  ASSERT_EQ(one.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(one[i], ref[i]);
    EXPECT_EQ(three[i], ref[i]);
  }
}

TEST(XlaMoreLoops, AnOutOfRangeIndexStopsTheStepBeforeTheParameterIsWritten) {
  Tensor w = on(kXla, {4, 3}, 1);
  mark_step();
  for (bool scatter : {false, true}) {
    SCOPED_TRACE(scatter ? "scatter_add" : "gather");
    const std::vector<float> before = w.to_vector<float>();
    const std::string msg = testing::error_of([&] {
      Tensor idx = from_vector(std::vector<int64_t>{0, 1, 2, 0, 5, 1}, {2, 3}, std::nullopt, kXla);
      Tensor x = on(kXla, {2, 4}, 2);
      Tensor y = scatter ? scatter_add(x, 1, idx, on(kXla, {2, 3}, 3)) : gather(x, 1, idx);
      w.copy_(w * 2.0); // donated: would be written in place after y
      mark_step();
    });
    EXPECT_THAT(msg, HasSubstr(scatter ? "mstep::scatter_add: index 5" : "mstep::gather: index 5"));
    EXPECT_THAT(msg, HasSubstr("out of range [0, 4)"));
    // The failed step's update of w did not happen; the retried one did
    // (once: w was not doubled in place before the step stopped).
    std::vector<float> doubled(before);
    for (float& v : doubled) v *= 2;
    EXPECT_EQ(w.to_vector<float>(), doubled);
  }
  // The backend keeps working.
  Tensor ok = gather(on(kXla, {2, 4}, 2), 1,
                     from_vector(std::vector<int64_t>{3, 0}, {2, 1}, std::nullopt, kXla));
  mark_step();
  EXPECT_EQ(ok.to_vector<float>(),
            gather(on(kRef, {2, 4}, 2), 1,
                   from_vector(std::vector<int64_t>{3, 0}, {2, 1}, std::nullopt, kRef))
                .to_vector<float>());
}

} // namespace
} // namespace mstep
