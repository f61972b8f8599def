// The cpu backend's host reductions (sum, mean, max, min, argmax,
// logsumexp, var) against the ref kernels on the same inputs: every
// contiguous dim set with keepdim on and off, large rows, columns and
// whole tensors, NaN, infinities and ties.
#include "test/unit/CpuHostKernelHarness.h"

namespace mstep::cpu {
namespace {

using namespace host_test;

// ---- Reductions -------------------------------------------------------------

/// The result shape of reducing `dims` of `shape`.
Shape reduced_shape(const Shape& shape, const IntList& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

constexpr OpKind kReductions[] = {OpKind::sum,    OpKind::mean,      OpKind::max, OpKind::min,
                                  OpKind::argmax, OpKind::logsumexp, OpKind::var};

void compare_reduction(OpKind op, const ref::HostBuffer& input, const IntList& dims, bool keepdim,
                       int64_t correction = 1) {
  const Shape& shape = input.type().shape;
  const DType out_dtype = op == OpKind::argmax ? DType::i64 : DType::f32;
  AttrList attrs = {{AttrName::dims, dims}, {AttrName::keepdim, int64_t{keepdim}}};
  if (op == OpKind::var) attrs.push_back({AttrName::correction, correction});
  BufferList inputs;
  inputs.push_back(std::make_unique<ref::HostBuffer>(input.type()));
  std::memcpy(inputs[0]->bytes(), input.bytes(), input.type().bytes());
  // Both kernels sum in f64 and round once: only the order of the f64
  // additions differs.
  compare_with_ref(op, inputs, {TensorType{reduced_shape(shape, dims, keepdim), out_dtype}}, attrs,
                   1e-6,
                   absl::StrCat(op_name(op), " of ", input.type().to_string(), " over [",
                                absl::StrJoin(dims, ", "), "] keepdim=", keepdim));
}

/// Every contiguous run of dims of `rank` dims (inner, outer, middle, all).
std::vector<IntList> contiguous_dim_sets(int64_t rank) {
  std::vector<IntList> sets;
  for (int64_t begin = 0; begin < rank; ++begin)
    for (int64_t end = begin + 1; end <= rank; ++end) {
      IntList dims;
      for (int64_t d = begin; d < end; ++d) dims.push_back(d);
      sets.push_back(dims);
    }
  return sets;
}

TEST(CpuHostReductionTest, MatchRefOverEveryContiguousDimSet) {
  SKIP_WITHOUT_HOST_KERNELS();
  const Shape shapes[] = {{1}, {3}, {17}, {5, 7}, {3, 17, 33}, {2, 1, 40, 3}, {4, 1}, {1, 1, 5}};
  uint32_t seed = 1;
  for (const Shape& shape : shapes) {
    const auto input = random_f32(shape, seed++, -3, 3);
    for (const IntList& dims : contiguous_dim_sets(shape.rank()))
      for (OpKind op : kReductions) {
        if (op == OpKind::argmax && dims.size() != 1 &&
            static_cast<int64_t>(dims.size()) != shape.rank())
          continue; // argmax reduces one dim or all
        for (bool keepdim : {false, true}) compare_reduction(op, *input, dims, keepdim);
      }
  }
}

TEST(CpuHostReductionTest, LargeRowsColumnsAndAllElements) {
  SKIP_WITHOUT_HOST_KERNELS();
  // Sizes that take every scheduling path: many rows, few long rows (the
  // threads split a row), many columns, few long columns, one huge row.
  const auto all = random_f32({1000003}, 7, -2, 2);
  const auto wide = random_f32({3, 100003}, 8, -2, 2);
  const auto tall = random_f32({100003, 3}, 9, -2, 2);
  const auto square = random_f32({257, 515}, 10, -2, 2);
  for (OpKind op : kReductions) {
    compare_reduction(op, *all, {0}, false);
    compare_reduction(op, *wide, {1}, false);
    compare_reduction(op, *wide, {0}, true);
    compare_reduction(op, *tall, {0}, false);
    compare_reduction(op, *tall, {1}, true);
    compare_reduction(op, *square, {0}, false);
    compare_reduction(op, *square, {1}, false);
    if (op != OpKind::argmax) compare_reduction(op, *wide, {0, 1}, false);
  }
}

TEST(CpuHostReductionTest, NanInfinitiesAndTiesAsRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  // Rows (and, reduced over dim 0, columns) holding a NaN, -inf only, +inf,
  // ties (argmax takes the first) and signed zeros.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {1, nan, 3, 2, 0, -inf, -inf, -inf, -inf, -inf, 2, inf, 1, inf, 0,
                          5, 5,   1, 5, 0, -0.f, 0.f,  -0.f, 0.f,  -0.f, 1, 2,   3, 4,   nan};
  const auto x = filled<float>({6, 5}, DType::f32, v);
  for (OpKind op : kReductions)
    for (const IntList& dims : {IntList{0}, IntList{1}, IntList{0, 1}}) {
      compare_reduction(op, *x, dims, false);
    }
  // The same rows long enough for full vectors, the special value late.
  std::vector<float> long_rows(3 * 100, 1.0f);
  long_rows[77] = nan;
  long_rows[100 + 40] = 9;
  long_rows[100 + 90] = 9;
  for (int i = 200; i < 300; ++i) long_rows[i] = -inf;
  const auto y = filled<float>({3, 100}, DType::f32, long_rows);
  for (OpKind op : kReductions) compare_reduction(op, *y, {1}, true);
}

TEST(CpuHostReductionTest, VarCorrectionsIncludingTooFewElements) {
  SKIP_WITHOUT_HOST_KERNELS();
  const auto x = random_f32({4, 3}, 11);
  for (int64_t correction : {0, 1, 3, 5}) {
    compare_reduction(OpKind::var, *x, {1}, false, correction);
    compare_reduction(OpKind::var, *x, {0}, false, correction);
  }
}

TEST(CpuHostReductionTest, NonContiguousDimsAndOtherDtypesKeepTheRefKernel) {
  const TraceGraph split =
      one_op_graph(OpKind::sum, {TensorType{{2, 3, 4}, DType::f32}}, {TensorType{{3}, DType::f32}},
                   {{AttrName::dims, IntList{0, 2}}, {AttrName::keepdim, int64_t{0}}});
  auto k = make_host_kernel(KernelRequest{split, 1});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, nullptr);
  const TraceGraph f64 =
      one_op_graph(OpKind::sum, {TensorType{{2, 3}, DType::f64}}, {TensorType{{2}, DType::f64}},
                   {{AttrName::dims, IntList{1}}, {AttrName::keepdim, int64_t{0}}});
  k = make_host_kernel(KernelRequest{f64, 1});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, nullptr);
}

} // namespace
} // namespace mstep::cpu
