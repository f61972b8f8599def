// Batched matmul on the Tensor engine ([..., M, K] x [..., K, N], batch
// dims broadcast): a linear layer on [B, T, D] folds its batch into M;
// bmm and attention's composed q·kᵀ / p·v run one tiled product per batch
// index, A read transposed by the DMA. Against a double-precision product
// computed here with fp32 accumulation's error bound (plus bf16's rounding
// of the output), and the programs' Tensor-engine time per the cost model.
#include <cmath>

#include "lib/backends/neuron/CostModel.h"
#include "test/neuron/LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using testing::at;
using testing::buffer;
using testing::op;
using testing::random_values;

/// The row-major offset of batch index `idx` (of `batch`) in an operand
/// whose batch dims are `own` (right-aligned, size 1 broadcast).
int64_t batch_offset(const Shape& batch, int64_t idx, const Shape& own) {
  int64_t off = 0, stride = 1;
  for (int64_t d = batch.rank() - 1, o = own.rank() - 1; d >= 0; --d, --o) {
    const int64_t i = idx % batch[d];
    idx /= batch[d];
    if (o < 0) continue;
    if (own[o] != 1) off += i * stride;
    stride *= own[o];
  }
  return off;
}

void check_batched(DType dtype, Shape a_batch, Shape b_batch, Shape batch, int64_t m, int64_t k,
                   int64_t n) {
  Shape as = a_batch, bs = b_batch, cs = batch;
  for (int64_t d : {m, k}) as.push_back(d);
  for (int64_t d : {k, n}) bs.push_back(d);
  for (int64_t d : {m, n}) cs.push_back(d);
  const TensorType ta{as, dtype}, tb{bs, dtype}, tc{cs, dtype};
  auto a = buffer(ta, random_values(ta.numel(), -1, 1, 21));
  auto b = buffer(tb, random_values(tb.numel(), -1, 1, 22));
  auto got = testing::run_node(op(OpKind::matmul, {0, 1}, tc), {a, b});
  ASSERT_TRUE(got);
  for (int64_t q = 0; q < batch.numel(); ++q) {
    const int64_t ao = batch_offset(batch, q, a_batch) * m * k;
    const int64_t bo = batch_offset(batch, q, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double prod = double(at(*a, ao + i * k + p)) * at(*b, bo + p * n + j);
          want += prod;
          mag += std::abs(prod);
        }
        const double tol = k * std::ldexp(1.0, -24) * mag +
                           (dtype == DType::bf16 ? std::ldexp(1.0, -8) * std::abs(want) : 0);
        ASSERT_NEAR(at(*got, (q * m + i) * n + j), want, tol + 1e-30)
            << "batch " << q << " (" << i << ", " << j << ")";
      }
  }
}

// A linear layer's [B, T, D] x [D, N]: one 2-d product of (B*T) rows.
TEST(NeuronBatchedMatmul, LinearOnThreeDims) {
  check_batched(DType::f32, Shape({3}), Shape(), Shape({3}), 70, 64, 96);
}
// bmm with ragged M, K (> 128: PSUM accumulation over K tiles) and N (> 512).
TEST(NeuronBatchedMatmul, BmmF32RaggedTiles) {
  check_batched(DType::f32, Shape({3}), Shape({3}), Shape({3}), 130, 300, 600);
}
TEST(NeuronBatchedMatmul, BmmBf16) {
  check_batched(DType::bf16, Shape({2}), Shape({2}), Shape({2}), 64, 256, 70);
}
// Attention's composed q·kᵀ over [B, H] and a broadcast of either side.
TEST(NeuronBatchedMatmul, HeadsAndBroadcastBatchDims) {
  check_batched(DType::f32, Shape({2, 3}), Shape({2, 3}), Shape({2, 3}), 64, 16, 64);
  check_batched(DType::f32, Shape({2, 1}), Shape({1, 3}), Shape({2, 3}), 40, 20, 30);
  check_batched(DType::f32, Shape(), Shape({4}), Shape({4}), 50, 130, 20);
}

// The Tensor engine's share: bf16 runs 4x the fp32 rate, so the same
// batched product is Tensor-bound for f32 with about 4x the Tensor time.
TEST(NeuronBatchedMatmul, CostModelChargesFp32AtAQuarterOfBf16) {
  auto tensor_ns = [](DType dt) {
    const TensorType a{Shape({8, 256, 256}), dt}, c{Shape({8, 256, 512}), dt},
        b{Shape({8, 256, 512}), dt};
    absl::StatusOr<LoweredOp> low = lower_node(op(OpKind::matmul, {0, 1}, c), {a, b});
    EXPECT_TRUE(low.ok()) << low.status();
    absl::StatusOr<CostReport> r = estimate_cost(low->program);
    EXPECT_TRUE(r.ok()) << r.status();
    return r->busy_ns[static_cast<int>(Engine::tensor)];
  };
  const double f32 = tensor_ns(DType::f32), bf16 = tensor_ns(DType::bf16);
  // Per product: 4 nc_matmul of 512 columns, 60 + 4 x 512 cycles vs 60 +
  // 512 (the access cost plus the streamed columns), and A^T's 4 on-chip
  // transposes of 128 columns, 60 + 4 x 128 vs 60 + 128; each + the
  // fitted overhead.
  const double o = CostParams{}.matmul_overhead_cycles;
  EXPECT_NEAR(f32 / bf16, (60 + 4.0 * 512 + o + 60 + 4.0 * 128 + o) / (60 + 512 + o + 60 + 128 + o),
              1e-9);
}

} // namespace
} // namespace mstep::neuron
