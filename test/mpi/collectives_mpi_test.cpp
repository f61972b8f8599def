// The collectives under mpirun (label mpi; `mpirun -np 2`, any world size
// works): each rank holds values built from its rank, and every result is
// checked against the closed form (rank r holds r + 1, so the sum over a
// world of W is W(W+1)/2), in lazy mode and in replay, on ref and cpu.
// Every rank runs every test, in the same order.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mstep/mstep.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;
using dist::ReduceOp;

class CollectivesTest : public ::testing::TestWithParam<DeviceType> {
 protected:
  Device device() const { return Device{GetParam(), 0}; }
  int r() const { return dist::rank(); }
  int w() const { return dist::world_size(); }
  /// [n] with element i = (rank + 1) * (i + 1).
  Tensor ranked(int64_t n, DType dtype = DType::f32) const {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((r() + 1) * (i + 1));
    return from_vector(v, {n}, dtype, device());
  }
  double rank_sum() const { return w() * (w() + 1) / 2.0; }
};

TEST_P(CollectivesTest, AllReduceSumMeanMaxMin) {
  Tensor x = ranked(5);
  Tensor sum = dist::all_reduce(x, ReduceOp::sum);
  Tensor mean = dist::all_reduce(x, ReduceOp::mean);
  Tensor max = dist::all_reduce(x, ReduceOp::max);
  Tensor min = dist::all_reduce(x, ReduceOp::min);
  mark_step();
  std::vector<float> s = sum.to_vector<float>(), m = mean.to_vector<float>(),
                     hi = max.to_vector<float>(), lo = min.to_vector<float>();
  for (int i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(s[i], rank_sum() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(m[i], rank_sum() / w() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(hi[i], w() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(lo[i], 1.0f * (i + 1)) << i;
  }
}

TEST_P(CollectivesTest, AllReduceOtherDtypes) {
  for (DType dtype : {DType::f64, DType::i32, DType::i64, DType::bf16, DType::f16}) {
    Tensor s = dist::all_reduce(ranked(3, dtype), ReduceOp::sum).to(DType::f64);
    Tensor hi = dist::all_reduce(ranked(3, dtype), ReduceOp::max).to(DType::f64);
    std::vector<double> got = s.to_vector<double>(), top = hi.to_vector<double>();
    for (int i = 0; i < 3; ++i) {
      EXPECT_DOUBLE_EQ(got[i], rank_sum() * (i + 1)) << dtype_name(dtype) << " " << i;
      EXPECT_DOUBLE_EQ(top[i], w() * (i + 1)) << dtype_name(dtype) << " " << i;
    }
  }
}

TEST_P(CollectivesTest, AllReduceInsideComputation) {
  // Elementwise work before and after the collective (fused on cpu) must
  // not be moved across it.
  Tensor x = ranked(4);
  Tensor y = dist::all_reduce(x * 2.0 + 1.0) * 3.0 - 1.0;
  std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(got[i], (2.0 * rank_sum() * (i + 1) + w()) * 3.0 - 1.0) << i;
}

TEST_P(CollectivesTest, TwoEqualAllReducesBothRun) {
  Tensor x = ranked(3);
  Tensor a = dist::all_reduce(x);
  Tensor b = dist::all_reduce(x);
  Tensor c = dist::all_reduce(a);  // depends on the first
  mark_step();
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(av[i], rank_sum() * (i + 1));
    EXPECT_FLOAT_EQ(bv[i], rank_sum() * (i + 1));
    EXPECT_FLOAT_EQ(cv[i], w() * rank_sum() * (i + 1));
  }
}

TEST_P(CollectivesTest, AllGatherAlongDims) {
  // x[i, j] = 100 * rank + 10 * i + j, shape [2, 3].
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) v.push_back(100.0f * r() + 10 * i + j);
  Tensor x = from_vector(v, {2, 3}, std::nullopt, device());
  Tensor g0 = dist::all_gather(x, 0);
  Tensor g1 = dist::all_gather(x, -1);
  EXPECT_EQ(g0.shape(), (Shape{2 * w(), 3}));
  EXPECT_EQ(g1.shape(), (Shape{2, 3 * w()}));
  std::vector<float> a = g0.to_vector<float>(), b = g1.to_vector<float>();
  for (int q = 0; q < w(); ++q)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        const float want = 100.0f * q + 10 * i + j;
        EXPECT_EQ(a[(q * 2 + i) * 3 + j], want);
        EXPECT_EQ(b[i * 3 * w() + q * 3 + j], want);
      }
}

TEST_P(CollectivesTest, BroadcastFromTheLastRank) {
  const int root = w() - 1;
  Tensor y = dist::broadcast(ranked(4), root);
  std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], (root + 1) * (i + 1));
}

TEST_P(CollectivesTest, ReduceScatterAlongDims) {
  // x[i, j] = (rank + 1) * (10 * i + j), shape [2W, 2W].
  const int n = 2 * w();
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) v.push_back((r() + 1.0f) * (10 * i + j));
  Tensor x = from_vector(v, {n, n}, std::nullopt, device());
  Tensor s0 = dist::reduce_scatter(x, ReduceOp::sum, 0);
  Tensor s1 = dist::reduce_scatter(x, ReduceOp::mean, 1);
  ASSERT_EQ(s0.shape(), (Shape{2, n}));
  ASSERT_EQ(s1.shape(), (Shape{n, 2}));
  std::vector<float> a = s0.to_vector<float>(), b = s1.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < n; ++j)
      EXPECT_FLOAT_EQ(a[i * n + j], rank_sum() * (10 * (2 * r() + i) + j)) << i << "," << j;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 2; ++j)
      EXPECT_FLOAT_EQ(b[i * 2 + j], rank_sum() / w() * (10 * i + 2 * r() + j)) << i << "," << j;
}

TEST_P(CollectivesTest, ReplayRunsTheCapturedCollectives) {
  Tensor x = ranked(3);
  Tensor acc = zeros({3}, DType::f32, device());
  acc.copy_(acc + 0.0);
  mark_step();
  Graph g;
  g.capture_begin();
  acc.copy_(acc + dist::all_reduce(x * 2.0));
  g.capture_end();
  // Each step adds 2 * rank_sum * (i + 1); after the capture and two replays: 3 steps.
  g.replay();
  g.replay();
  std::vector<float> got = acc.to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[i], 3 * 2 * rank_sum() * (i + 1)) << i;
  // New data in the static input: the replay reduces it.
  std::vector<float> ones(3, 1.0f);
  x.copy_(from_vector(ones, {3}, std::nullopt, device()));
  acc.copy_(zeros({3}, DType::f32, device()));
  mark_step();
  g.replay();
  got = acc.to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[i], 2.0f * w()) << i;
}

TEST_P(CollectivesTest, GradientOfAllReduceIsTheAllReduceOfTheGradient) {
  // L_r = sum(all_reduce(w * x_r)): each rank's upstream gradient is 1, so
  // dL/dw on rank r is x_r times the sum of the ranks' ones: W * x_r.
  Tensor wgt = ones({4}, DType::f32, device()).requires_grad_();
  Tensor x = ranked(4);
  sum(dist::all_reduce(wgt * x, ReduceOp::sum)).backward();
  std::vector<float> g = wgt.grad().to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(g[i], w() * (r() + 1) * (i + 1)) << i;
  // mean: the gradient is the mean of the ranks' gradients (1 each).
  Tensor v = ones({4}, DType::f32, device()).requires_grad_();
  sum(dist::all_reduce(v * x, ReduceOp::mean)).backward();
  g = v.grad().to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(g[i], (r() + 1) * (i + 1)) << i;
}

TEST_P(CollectivesTest, BarrierReturns) {
  dist::barrier();
  dist::barrier();
}

INSTANTIATE_TEST_SUITE_P(Backends, CollectivesTest,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) {
                           return std::string(info.param == DeviceType::ref ? "ref" : "cpu");
                         });

}  // namespace
}  // namespace mstep

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mstep::distributed::init();
  // One rank prints gtest's report; the others only their failures.
  if (mstep::distributed::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  mstep::distributed::finalize();
  return failed;
}
