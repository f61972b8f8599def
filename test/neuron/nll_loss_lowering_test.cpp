// LowerNllLoss.cpp: nll_loss forward (ignore_index; reduction none, mean,
// sum) lowered to a tile program and run on the simulator, against ref's
// formula in double (-log_probs[i, target[i]] over the kept rows; mean
// divides by their count); ragged row tiles, chunked long rows, bf16, an
// ignore_index among the classes, infinities, the out-of-range error.
#include <cmath>
#include <limits>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

GraphNode nll(const TensorType& lp, int64_t reduction, int64_t ignore, const Shape& target) {
  GraphNode n =
      op(OpKind::nll_loss, {0, 1}, TensorType{reduction == kNone ? target : Shape({}), lp.dtype});
  n.attrs.push_back({AttrName::ignore_index, AttrValue(ignore)});
  n.attrs.push_back({AttrName::reduction, AttrValue(reduction)});
  return n;
}

std::shared_ptr<host::HostBuffer> targets(const Shape& shape, const std::vector<int64_t>& v) {
  auto b = std::make_shared<host::HostBuffer>(TensorType{shape, DType::i64});
  for (size_t i = 0; i < v.size(); ++i) b->data<int64_t>()[i] = v[i];
  return b;
}

/// Targets for `rows` rows of `cols` classes: every fifth row ignore_index.
std::vector<int64_t> some_ignored(int64_t rows, int64_t cols, int64_t ignore) {
  std::vector<int64_t> t(rows);
  for (int64_t i = 0; i < rows; ++i) t[i] = i % 5 == 3 ? ignore : (i * 7 + 1) % cols;
  return t;
}

/// Runs nll_loss lowered on x [rows, cols] (values as given) and checks it
/// against ref's formula: exact per row (one element picked and negated),
/// the sum within fp32 accumulation (rows * 2^-24 of the magnitudes).
void check(DType dt, int64_t rows, int64_t cols, int64_t reduction, int64_t ignore,
           const std::vector<int64_t>& t, std::vector<float> values = {}) {
  const TensorType lp{Shape({rows, cols}), dt};
  if (values.empty()) values = random_values(rows * cols, -6, 0, 5);
  auto x = buffer(lp, values);
  auto got = run_node(nll(lp, reduction, ignore, Shape({rows})), {x, targets(Shape({rows}), t)});
  ASSERT_TRUE(got);
  double total = 0, mag = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double loss = 0;
    if (t[i] != ignore) {
      loss = -static_cast<double>(at(*x, i * cols + t[i]));
      ++count;
    }
    if (reduction == kNone) ASSERT_EQ(at(*got, i), static_cast<float>(loss)) << "row " << i;
    total += loss;
    mag += std::abs(loss);
  }
  if (reduction == kNone) return;
  if (reduction == kMean) {
    total /= static_cast<double>(count);
    mag /= static_cast<double>(count);
  }
  const double tol = static_cast<double>(rows) * std::ldexp(1.0, -24) * mag +
                     std::ldexp(1.0, dt == DType::bf16 ? -8 : -23) * std::abs(total);
  ASSERT_NEAR(at(*got, 0), total, tol);
}

// 300 rows: row tiles of 128, 128 and 44 (ragged); the mean and sum add
// the row tiles' (loss, kept) columns in one PSUM bank.
TEST(NeuronNllLossLowering, MeanSumNoneF32) {
  const std::vector<int64_t> t = some_ignored(300, 56, -100);
  check(DType::f32, 300, 56, kMean, -100, t);
  check(DType::f32, 300, 56, kSum, -100, t);
  check(DType::f32, 300, 56, kNone, -100, t);
}

TEST(NeuronNllLossLowering, Bf16) {
  const std::vector<int64_t> t = some_ignored(130, 40, -100);
  check(DType::bf16, 130, 40, kMean, -100, t);
  check(DType::bf16, 130, 40, kNone, -100, t);
}

// An ignore_index that is a class: rows whose target is 3 are ignored,
// not picked.
TEST(NeuronNllLossLowering, IgnoreIndexAmongTheClasses) {
  check(DType::f32, 64, 10, kMean, 3, some_ignored(64, 10, 3));
  check(DType::f32, 64, 10, kNone, 3, some_ignored(64, 10, 3));
}

// 10000 classes: three column chunks, the picked value from any of them.
TEST(NeuronNllLossLowering, LongRowsAreChunked) {
  std::vector<int64_t> t = {0, 4095, 4096, 9999, 8191, -100, 5000};
  check(DType::f32, 7, 10000, kNone, -100, t);
  check(DType::f32, 7, 10000, kMean, -100, t);
}

// Infinite log-probs away from the target do not reach the loss (no
// 0 * inf); -inf at the target gives +inf, as ref.
TEST(NeuronNllLossLowering, Infinities) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(3 * 4, -1.0f);
  v[0] = -inf;     // row 0, class 0 (its target is 2)
  v[1] = inf;      // row 0, class 1
  v[4 + 3] = -inf; // row 1's target
  check(DType::f32, 3, 4, kNone, -100, {2, 3, -100}, v);
  check(DType::f32, 3, 4, kSum, -100, {2, 0, -100}, v);
}

// Every target ignored: the mean is 0 / 0 = NaN (ref, PyTorch).
TEST(NeuronNllLossLowering, AllIgnoredMeanIsNaN) {
  const TensorType lp{Shape({5, 3}), DType::f32};
  auto got = run_node(nll(lp, kMean, -100, Shape({5})),
                      {buffer(lp, random_values(15, -3, 0, 2)),
                       targets(Shape({5}), {-100, -100, -100, -100, -100})});
  ASSERT_TRUE(got);
  EXPECT_TRUE(std::isnan(at(*got, 0)));
}

// log_probs [C] with a 0-d target: one row.
TEST(NeuronNllLossLowering, OneRow) {
  const TensorType lp{Shape({6}), DType::f32};
  auto x = buffer(lp, {-1, -2, -3, -4, -5, -6});
  auto got = run_node(nll(lp, kMean, -100, Shape({})), {x, targets(Shape({}), {4})});
  ASSERT_TRUE(got);
  EXPECT_EQ(at(*got, 0), 5.0f);
}

// A target out of range: ref's error (the host checks the target before
// the program runs), not a number.
TEST(NeuronNllLossLowering, TargetOutOfRangeIsRefsError) {
  const TensorType lp{Shape({4, 3}), DType::f32};
  const GraphNode node = nll(lp, kMean, -100, Shape({4}));
  absl::StatusOr<LoweredOp> low = lower_node(node, {lp, TensorType{Shape({4}), DType::i64}});
  ASSERT_TRUE(low.ok()) << low.status();
  auto x = buffer(lp, random_values(12, -3, 0, 1));
  auto t = targets(Shape({4}), {0, 2, 3, 1});
  auto out = std::make_shared<host::HostBuffer>(node.results[0]);
  const host::HostBuffer* ins[] = {x.get(), t.get()};
  host::HostBuffer* outs[] = {out.get()};
  Simulator sim;
  const absl::Status s = run_lowered(*low, sim, ins, outs);
  EXPECT_THAT(s.message(), HasSubstr("target 3 at position 2 is out of range for C = 3"));
}

TEST(NeuronNllLossLowering, Refusals) {
  const TensorType target{Shape({4}), DType::i64};
  const TensorType half{Shape({4, 3}), DType::f16};
  EXPECT_THAT(refusal(nll(half, kMean, -100, Shape({4})), {half, target}),
              HasSubstr("nll_loss not tiled: f16[4, 3]: only f32/bf16"));
  const TensorType wide{Shape({1, (int64_t{1} << 24) + 1}), DType::f32};
  EXPECT_THAT(
      refusal(nll(wide, kSum, -100, Shape({1})), {wide, TensorType{Shape({1}), DType::i64}}),
      HasSubstr("class indices must stay below 2^24"));
}

} // namespace
} // namespace mstep::neuron
