// Collectives split into several MPI calls (CallSlices.h) under mpirun
// (label mpi): ctest runs this binary with MSTEP_DIST_MAX_CALL_BYTES=12,
// so an f32 collective moves 3 elements per call, an f64 or i64 one 1
// (8 does not divide 12), a bf16 one 6; every shape below is chosen so
// each collective takes 3 or more calls with an uneven last one. Results
// against closed forms (rank r holds values scaled by r + 1; the sum over
// a world of W is W(W+1)/2), in lazy mode and in replay, on ref and cpu.
// Without the variable (the unsplit run of mpi_collectives) they pass too.
// SlicedHostPath calls the host path directly: a collective along an
// inner dim as an imported module records it, and (when asked) one above
// 2 GiB.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "lib/runtime/distributed/Communicator.h"
#include "mstep/mstep.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;
using dist::ReduceOp;

class SlicedCollectivesTest : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    const char* limit = std::getenv("MSTEP_DIST_MAX_CALL_BYTES");
    if (limit) ASSERT_EQ(std::string(limit), "12") << "the shapes below are chosen for 12 bytes";
  }
  Device device() const { return Device{GetParam(), 0}; }
  int r() const { return dist::rank(); }
  int w() const { return dist::world_size(); }
  double rank_sum() const { return w() * (w() + 1) / 2.0; }
  /// [n] with element i = (rank + 1) * (i + 1).
  Tensor ranked(int64_t n, DType dtype = DType::f32) const {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((r() + 1) * (i + 1));
    return from_vector(v, {n}, dtype, device());
  }
  /// [rows, cols] with element (i, j) = (rank + 1) * (100 * i + j).
  Tensor ranked2(int64_t rows, int64_t cols) const {
    std::vector<float> v;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) v.push_back((r() + 1.0f) * (100 * i + j));
    return from_vector(v, {rows, cols}, std::nullopt, device());
  }
};

TEST_P(SlicedCollectivesTest, AllReduceEveryOpAndDtype) {
  // f32 [10]: calls of 3, 3, 3, 1 elements.
  Tensor x = ranked(10);
  std::vector<float> s = dist::all_reduce(x, ReduceOp::sum).to_vector<float>();
  std::vector<float> m = dist::all_reduce(x, ReduceOp::mean).to_vector<float>();
  std::vector<float> hi = dist::all_reduce(x, ReduceOp::max).to_vector<float>();
  std::vector<float> lo = dist::all_reduce(x, ReduceOp::min).to_vector<float>();
  for (int i = 0; i < 10; ++i) {
    EXPECT_FLOAT_EQ(s[i], rank_sum() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(m[i], rank_sum() / w() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(hi[i], w() * (i + 1)) << i;
    EXPECT_FLOAT_EQ(lo[i], 1.0f * (i + 1)) << i;
  }
  // f64, i64: 1 element a call; i32: 3; bf16, f16: 6 (13 = 6 + 6 + 1).
  for (DType dtype : {DType::f64, DType::i64, DType::i32, DType::bf16, DType::f16}) {
    std::vector<double> got =
        dist::all_reduce(ranked(13, dtype), ReduceOp::sum).to(DType::f64).to_vector<double>();
    for (int i = 0; i < 13; ++i)
      EXPECT_DOUBLE_EQ(got[i], rank_sum() * (i + 1)) << dtype_name(dtype) << " " << i;
  }
}

TEST_P(SlicedCollectivesTest, AllGatherKeepsEachRanksBlock) {
  // [2, 5] f32 = 10 elements: 4 calls; along dim 1 the blocks interleave.
  Tensor x = ranked2(2, 5);
  std::vector<float> a = dist::all_gather(x, 0).to_vector<float>();
  std::vector<float> b = dist::all_gather(x, 1).to_vector<float>();
  for (int q = 0; q < w(); ++q)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j) {
        const float want = (q + 1.0f) * (100 * i + j);
        EXPECT_EQ(a[(q * 2 + i) * 5 + j], want) << q << "," << i << "," << j;
        EXPECT_EQ(b[i * 5 * w() + q * 5 + j], want) << q << "," << i << "," << j;
      }
}

TEST_P(SlicedCollectivesTest, BroadcastFromTheLastRank) {
  const int root = w() - 1;
  std::vector<float> got = dist::broadcast(ranked(7), root).to_vector<float>();  // 3, 3, 1
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(got[i], (root + 1) * (i + 1)) << i;
}

TEST_P(SlicedCollectivesTest, ReduceScatterKeepsEachRanksPart) {
  // dim 0: [2W, 7], each rank's part 14 elements (5 calls: 3, 3, 3, 3, 2).
  // dim 1: [3, 4W], each rank's part 3 pieces of 4 (12 elements, 4 calls
  // whose bounds cut the pieces).
  const int n = 2 * w();
  std::vector<float> a = dist::reduce_scatter(ranked2(n, 7), ReduceOp::sum, 0).to_vector<float>();
  std::vector<float> b =
      dist::reduce_scatter(ranked2(3, 4 * w()), ReduceOp::mean, 1).to_vector<float>();
  ASSERT_EQ(a.size(), 14u);
  ASSERT_EQ(b.size(), 12u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_FLOAT_EQ(a[i * 7 + j], rank_sum() * (100 * (2 * r() + i) + j)) << i << "," << j;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_FLOAT_EQ(b[i * 4 + j], rank_sum() / w() * (100 * i + 4 * r() + j)) << i << "," << j;
}

TEST_P(SlicedCollectivesTest, ReplayRunsEverySlice) {
  // One captured step with each collective; replayed on new data.
  Tensor x = ranked(10);
  Tensor m = ranked2(2 * w(), 7);
  mark_step();
  Graph g;
  g.capture_begin();
  Tensor sum = dist::all_reduce(x * 2.0);
  Tensor gathered = dist::all_gather(x, 0);
  Tensor bcast = dist::broadcast(x, 0);
  Tensor scattered = dist::reduce_scatter(m, ReduceOp::sum, 0);
  g.capture_end();
  for (int round = 0; round < 2; ++round) {
    // Round 1: every element scaled by 3 through the static inputs.
    const float k = round == 0 ? 1.0f : 3.0f;
    if (round == 1) {
      x.copy_(ranked(10) * 3.0);
      m.copy_(ranked2(2 * w(), 7) * 3.0);
      mark_step();
    }
    g.replay();
    std::vector<float> s = sum.to_vector<float>(), ga = gathered.to_vector<float>(),
                       b = bcast.to_vector<float>(), sc = scattered.to_vector<float>();
    for (int i = 0; i < 10; ++i) {
      EXPECT_FLOAT_EQ(s[i], k * 2 * rank_sum() * (i + 1)) << round << " " << i;
      EXPECT_FLOAT_EQ(b[i], k * (i + 1)) << round << " " << i;
      for (int q = 0; q < w(); ++q)
        EXPECT_FLOAT_EQ(ga[q * 10 + i], k * (q + 1) * (i + 1)) << round << " " << q << " " << i;
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 7; ++j)
        EXPECT_FLOAT_EQ(sc[i * 7 + j], k * rank_sum() * (100 * (2 * r() + i) + j))
            << round << " " << i << "," << j;
  }
}

// The host path along an inner dim (an imported module's collective, not
// permuted to dim 0 at recording): blocks before the dim interleave, and
// reduce_scatter's packing cuts them at slice bounds.
TEST(SlicedHostPath, InnerDimGatherAndScatter) {
  namespace comm = ::mstep::dist;
  const int64_t W = dist::world_size(), r = dist::rank();
  const double rank_sum = W * (W + 1) / 2.0;
  comm::Collective gather;
  gather.op = OpKind::all_gather;
  gather.dim = 1;
  gather.world_size = W;
  gather.input = TensorType{Shape{3, 5}, DType::f32};  // 15 elements: 5 calls of 3
  gather.result = TensorType{Shape{3, 5 * W}, DType::f32};
  std::vector<float> in(15), out(15 * W);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) in[i * 5 + j] = (r + 1.0f) * (100 * i + j);
  ASSERT_TRUE(comm::run_collective(gather, in.data(), out.data()).ok());
  for (int i = 0; i < 3; ++i)
    for (int q = 0; q < W; ++q)
      for (int j = 0; j < 5; ++j)
        EXPECT_EQ(out[(i * W + q) * 5 + j], (q + 1.0f) * (100 * i + j)) << i << "," << q << "," << j;
  comm::Collective scatter;
  scatter.op = OpKind::reduce_scatter;
  scatter.dim = 1;
  scatter.world_size = W;
  scatter.input = TensorType{Shape{3, 4 * W}, DType::f32};  // parts of 3 x 4: 4 calls of 3
  scatter.result = TensorType{Shape{3, 4}, DType::f32};
  std::vector<float> x(12 * W), y(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4 * W; ++j) x[i * 4 * W + j] = (r + 1.0f) * (100 * i + j);
  ASSERT_TRUE(comm::run_collective(scatter, x.data(), y.data()).ok());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_FLOAT_EQ(y[i * 4 + j], rank_sum * (100 * i + 4 * r + j)) << i << "," << j;
}

// Above 2 GiB for real (one MPI call could not count it), at the default
// limit: 2 GiB + 4 KiB of f32 all-reduced and broadcast in place. Needs
// about 3 GiB per rank, so it runs only when asked:
// MSTEP_TEST_ABOVE_2GIB=1 mpirun -np 2 mstep_mpi_tests --gtest_filter=*Above2GiB*
TEST(SlicedHostPath, Above2GiBWhenAsked) {
  if (!std::getenv("MSTEP_TEST_ABOVE_2GIB")) GTEST_SKIP() << "MSTEP_TEST_ABOVE_2GIB not set";
  namespace comm = ::mstep::dist;
  const int64_t W = dist::world_size(), r = dist::rank();
  const int64_t n = (int64_t{1} << 29) + 1024;
  comm::Collective c;
  c.op = OpKind::all_reduce;
  c.world_size = W;
  c.input = c.result = TensorType{Shape{n}, DType::f32};
  ASSERT_GT(c.input.bytes(), size_t{INT32_MAX});
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * (i % 1000));
  ASSERT_TRUE(comm::run_collective(c, v.data(), v.data()).ok());
  const float rank_sum = W * (W + 1) / 2.0f;
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += v[i] != rank_sum * (i % 1000);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(v[n - 1], rank_sum * ((n - 1) % 1000));
  c.op = OpKind::broadcast;
  c.root = W - 1;
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(r * 7 + i % 3);
  ASSERT_TRUE(comm::run_collective(c, v.data(), v.data()).ok());
  wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += v[i] != static_cast<float>((W - 1) * 7 + i % 3);
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, SlicedCollectivesTest,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) {
                           return std::string(info.param == DeviceType::ref ? "ref" : "cpu");
                         });

}  // namespace
}  // namespace mstep
