// LowerReductions.cpp: sum, mean, max and min over the last (or trailing)
// axes lowered to tile programs and run on the simulator, against a double
// host reduction; ragged row tiles, chunked long rows, bf16, refusals.
#include <cmath>
#include <limits>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

GraphNode reduction(OpKind k, const Shape& in_shape, IntList dims, DType dt) {
  std::vector<int64_t> out_dims;
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out_dims.push_back(in_shape[d]);
  GraphNode n = op(k, {0}, TensorType{Shape(out_dims), dt});
  n.attrs.push_back({AttrName::dims, AttrValue(dims)});
  n.attrs.push_back({AttrName::keepdim, AttrValue(int64_t{0})});
  return n;
}

void check_reduction(OpKind k, DType dt, const Shape& shape, IntList dims) {
  const TensorType t{shape, dt};
  int64_t cols = 1;
  for (int64_t d : dims) cols *= shape[d];
  const int64_t rows = t.numel() / cols;
  // Reduced axes leading (and not all): result r reduces elements r + c *
  // rows (a column of [cols, rows]); trailing: r * cols + c.
  const bool leading = dims[0] == 0 && static_cast<int64_t>(dims.size()) < shape.rank();
  auto x = buffer(t, random_values(t.numel(), -2, 2, 11));
  auto got = run_node(reduction(k, shape, dims, dt), {x});
  ASSERT_TRUE(got);
  for (int64_t r = 0; r < rows; ++r) {
    double want = k == OpKind::max ? -INFINITY : k == OpKind::min ? INFINITY : 0, mag = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = at(*x, leading ? r + c * rows : r * cols + c);
      if (k == OpKind::max)
        want = std::max(want, v);
      else if (k == OpKind::min)
        want = std::min(want, v);
      else
        want += v;
      mag += std::abs(v);
    }
    if (k == OpKind::mean) {
      want /= double(cols);
      mag /= double(cols);
    }
    // fp32 accumulation: cols * 2^-24 * sum|x| (max/min exact), plus the
    // result's rounding (2^-24, bf16 2^-8 relative).
    const bool adds = k == OpKind::sum || k == OpKind::mean;
    const double tol = (adds ? double(cols) * std::ldexp(1.0, -24) * mag : 0) +
                       std::ldexp(1.0, dt == DType::bf16 ? -8 : -24) * std::abs(want);
    ASSERT_NEAR(at(*got, r), want, tol + 1e-30) << op_name(k) << " row " << r;
  }
}

// 300 rows: tiles of 128, 128 and 44 (ragged).
TEST(NeuronReductionLowering, SumF32RaggedRows) {
  check_reduction(OpKind::sum, DType::f32, Shape({300, 70}), {1});
}
TEST(NeuronReductionLowering, MeanF32) {
  check_reduction(OpKind::mean, DType::f32, Shape({3, 50, 33}), {2});
}
TEST(NeuronReductionLowering, MaxAndMinF32) {
  check_reduction(OpKind::max, DType::f32, Shape({130, 17}), {1});
  check_reduction(OpKind::min, DType::f32, Shape({130, 17}), {1});
}
TEST(NeuronReductionLowering, SumBf16) {
  check_reduction(OpKind::sum, DType::bf16, Shape({129, 40}), {1});
}
// 10000 columns: three chunks of at most 4096, reduced into partials.
// Many short rows: g rows per partition (row groups), then the rest in
// ragged row tiles: 2 x 4 x 128 + 77 rows.
TEST(NeuronReductionLowering, ShortRowsGoInGroups) {
  const Shape shape({1101, 40});
  for (OpKind k : {OpKind::sum, OpKind::mean, OpKind::max, OpKind::min})
    check_reduction(k, DType::f32, shape, {1});
  check_reduction(OpKind::mean, DType::bf16, shape, {1});
  // The groups are one reduce instruction over [128, g, 40] each.
  absl::StatusOr<LoweredOp> low =
      lower_node(reduction(OpKind::sum, shape, {1}, DType::f32), {TensorType{shape, DType::f32}});
  ASSERT_TRUE(low.ok()) << low.status();
  bool grouped = false;
  for (const Instruction& i : low->program.instructions)
    grouped = grouped || (i.opcode == Opcode::tensor_reduce && i.srcs[0].dims.size() == 2 &&
                          i.srcs[0].dims.back().size == 40 && i.srcs[0].dims.front().size > 1);
  EXPECT_TRUE(grouped);
}

TEST(NeuronReductionLowering, LongRowsAreChunked) {
  check_reduction(OpKind::mean, DType::f32, Shape({5, 10000}), {1});
  check_reduction(OpKind::max, DType::bf16, Shape({5, 10000}), {1});
}
// Trailing axes reduce as one row of their product; all axes: one row.
TEST(NeuronReductionLowering, TrailingAxes) {
  check_reduction(OpKind::sum, DType::f32, Shape({6, 7, 9}), {1, 2});
  check_reduction(OpKind::sum, DType::f32, Shape({6, 7, 9}), {0, 1, 2});
}

// Leading axes (bias gradients): rows on partitions, summed by a matmul
// against ones into PSUM. 300 rows: three row tiles accumulated (the last
// ragged); 5000 columns: column blocks of 2048 (4 PSUM banks) and a ragged
// 904; [2, 150, 3] over {0, 1}: one row of their product per column.
TEST(NeuronReductionLowering, LeadingAxesSum) {
  check_reduction(OpKind::sum, DType::f32, Shape({300, 70}), {0});
  check_reduction(OpKind::sum, DType::f32, Shape({2, 150, 3}), {0, 1});
  check_reduction(OpKind::sum, DType::f32, Shape({3, 5000}), {0});
}
// Many narrow rows: g rows per partition per load (2 x 4 x 128 of 1074
// rows grouped), the ragged rest in row tiles, all into the same PSUM sums.
TEST(NeuronReductionLowering, LeadingAxesGroupNarrowRows) {
  check_reduction(OpKind::sum, DType::f32, Shape({1074, 70}), {0});
  check_reduction(OpKind::mean, DType::bf16, Shape({1074, 70}), {0});
}
TEST(NeuronReductionLowering, LeadingAxesMeanAndBf16) {
  check_reduction(OpKind::mean, DType::f32, Shape({16, 64, 64}), {0, 1});
  check_reduction(OpKind::sum, DType::bf16, Shape({129, 40}), {0});
  check_reduction(OpKind::mean, DType::bf16, Shape({7, 600}), {0});
}
// The leading-axis program: one Tensor-engine matmul per row tile and PSUM
// bank, no Vector reduction of the input.
TEST(NeuronReductionLowering, LeadingAxesUseTheTensorEngine) {
  const TensorType t{Shape({300, 70}), DType::f32};
  absl::StatusOr<LoweredOp> low = lower_node(reduction(OpKind::sum, t.shape, {0}, DType::f32), {t});
  ASSERT_TRUE(low.ok()) << low.status();
  int matmuls = 0, reduces = 0;
  for (const Instruction& i : low->program.instructions) {
    matmuls += i.opcode == Opcode::nc_matmul;
    reduces += i.opcode == Opcode::tensor_reduce;
  }
  EXPECT_EQ(matmuls, 3); // 128 + 128 + 44 rows, 70 columns: one bank
  EXPECT_EQ(reduces, 0);
}

// A few leading rows (<= 32) and columns a multiple of 128: summed on the
// Vector engine in row order, the columns on the partitions; 32 x 89600:
// two column chunks per partition.
TEST(NeuronReductionLowering, FewLeadingRowsSumOnVector) {
  check_reduction(OpKind::sum, DType::f32, Shape({8, 64, 256}), {0});
  check_reduction(OpKind::mean, DType::f32, Shape({8, 64, 256}), {0});
  check_reduction(OpKind::sum, DType::bf16, Shape({3, 1280}), {0});
  check_reduction(OpKind::mean, DType::bf16, Shape({1, 384}), {0});
  check_reduction(OpKind::sum, DType::f32, Shape({32, 89600}), {0});
  const TensorType t{Shape({8, 64, 256}), DType::f32};
  absl::StatusOr<LoweredOp> low = lower_node(reduction(OpKind::sum, t.shape, {0}, DType::f32), {t});
  ASSERT_TRUE(low.ok()) << low.status();
  int matmuls = 0, adds = 0;
  for (const Instruction& i : low->program.instructions) {
    matmuls += i.opcode == Opcode::nc_matmul;
    adds += i.opcode == Opcode::tensor_tensor && i.dst.partitions == kPartitions;
  }
  EXPECT_EQ(matmuls, 0);
  EXPECT_EQ(adds, 7); // 8 rows, one chunk of 128 columns per partition
}

// max/min over leading axes: the input loaded transposed (columns on
// partitions), reduced along the free axis. 9000 rows: three chunks into
// partials; 130 columns: two column tiles (128 + 2).
TEST(NeuronReductionLowering, LeadingAxesMaxAndMin) {
  check_reduction(OpKind::max, DType::f32, Shape({300, 70}), {0});
  check_reduction(OpKind::min, DType::bf16, Shape({2, 150, 3}), {0, 1});
  check_reduction(OpKind::max, DType::f32, Shape({9000, 130}), {0});
}

TEST(NeuronReductionLowering, RefusesOtherAxes) {
  const TensorType t{Shape({4, 5, 6}), DType::f32};
  EXPECT_THAT(refusal(reduction(OpKind::sum, t.shape, {1}, DType::f32), {t}),
              HasSubstr("sum not tiled: f32[4, 5, 6]: only a reduction over trailing or leading "
                        "axes"));
  EXPECT_THAT(refusal(reduction(OpKind::max, t.shape, {1}, DType::f32), {t}),
              HasSubstr("max not tiled: f32[4, 5, 6]: only a reduction over trailing or leading "
                        "axes"));
  const TensorType i{Shape({4, 5}), DType::i32};
  EXPECT_THAT(refusal(reduction(OpKind::max, i.shape, {1}, DType::i32), {i}),
              HasSubstr("only f32/bf16"));
}

} // namespace
} // namespace mstep::neuron
