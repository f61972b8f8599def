// The cpu backend's host reductions (sum, mean, max, min, argmax,
// logsumexp, var) against the ref kernels on the same inputs: every
// contiguous dim set with keepdim on and off, large rows, columns and
// whole tensors, NaN, infinities and ties; in f32, bf16 and f16; and the
// i64 sum.
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

/// `rel`: 1e-6 for f32; for bf16 and f16 the results must be the same
/// value (0): both kernels round the f64 result to f32 and then to the
/// half type, so only a sum-order difference right at a rounding boundary
/// could tell them apart.
void compare_reduction(OpKind op, const host::HostBuffer& input, const IntList& dims, bool keepdim,
                       int64_t correction = 1, double rel = 1e-6) {
  const Shape& shape = input.type().shape;
  const DType out_dtype = op == OpKind::argmax ? DType::i64 : input.type().dtype;
  AttrList attrs = {{AttrName::dims, dims}, {AttrName::keepdim, int64_t{keepdim}}};
  if (op == OpKind::var) attrs.push_back({AttrName::correction, correction});
  BufferList inputs;
  inputs.push_back(std::make_unique<host::HostBuffer>(input.type()));
  std::memcpy(inputs[0]->bytes(), input.bytes(), input.type().bytes());
  // Both kernels sum in f64 and round once: only the order of the f64
  // additions differs.
  compare_with_ref(op, inputs, {TensorType{reduced_shape(shape, dims, keepdim), out_dtype}}, attrs,
                   rel,
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

TEST(CpuHostReductionTest, HalfTypesMatchRefExactly) {
  SKIP_WITHOUT_HOST_KERNELS();
  const Shape shapes[] = {{1}, {3}, {17}, {5, 7}, {3, 17, 33}, {2, 1, 40, 3}, {4, 1}, {1, 1, 5}};
  uint32_t seed = 101;
  for (DType dtype : {DType::bf16, DType::f16})
    for (const Shape& shape : shapes) {
      const auto input = converted(*random_f32(shape, seed++, -3, 3), dtype);
      for (const IntList& dims : contiguous_dim_sets(shape.rank()))
        for (OpKind op : kReductions) {
          if (op == OpKind::argmax && dims.size() != 1 &&
              static_cast<int64_t>(dims.size()) != shape.rank())
            continue;
          for (bool keepdim : {false, true}) compare_reduction(op, *input, dims, keepdim, 1, 0);
        }
    }
  // Every scheduling path (see LargeRowsColumnsAndAllElements).
  const auto wide = converted(*random_f32({3, 100003}, 102, -2, 2), DType::bf16);
  const auto tall = converted(*random_f32({100003, 3}, 103, -2, 2), DType::bf16);
  const auto square = converted(*random_f32({257, 515}, 104, -2, 2), DType::bf16);
  for (OpKind op : kReductions) {
    compare_reduction(op, *wide, {1}, false, 1, 0);
    compare_reduction(op, *tall, {0}, false, 1, 0);
    compare_reduction(op, *square, {0}, false, 1, 0);
    compare_reduction(op, *square, {1}, false, 1, 0);
  }
  // NaN, infinities, ties and signed zeros (as NanInfinitiesAndTiesAsRef).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {1, nan, 3, 2, 0, -inf, -inf, -inf, -inf, -inf, 2, inf, 1, inf, 0,
                          5, 5,   1, 5, 0, -0.f, 0.f,  -0.f, 0.f,  -0.f, 1, 2,   3, 4,   nan};
  std::vector<float> long_rows(3 * 100, 1.0f);
  long_rows[77] = nan;
  long_rows[100 + 40] = 9;
  long_rows[100 + 90] = 9;
  for (int i = 200; i < 300; ++i) long_rows[i] = -inf;
  for (DType dtype : {DType::bf16, DType::f16}) {
    const auto x = converted(*filled<float>({6, 5}, DType::f32, v), dtype);
    const auto y = converted(*filled<float>({3, 100}, DType::f32, long_rows), dtype);
    for (OpKind op : kReductions) {
      for (const IntList& dims : {IntList{0}, IntList{1}, IntList{0, 1}})
        compare_reduction(op, *x, dims, false, 1, 0);
      compare_reduction(op, *y, {1}, true, 1, 0);
    }
  }
}

TEST(CpuHostReductionTest, I64SumMatchesRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  const Shape shapes[] = {{1}, {17}, {5, 7}, {3, 17, 33}, {2, 1, 40, 3}};
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> dist(-1000000, 1000000);
  for (const Shape& shape : shapes) {
    auto input = std::make_unique<host::HostBuffer>(TensorType{shape, DType::i64});
    for (int64_t i = 0; i < input->numel(); ++i) input->data<int64_t>()[i] = dist(rng);
    for (const IntList& dims : contiguous_dim_sets(shape.rank()))
      for (bool keepdim : {false, true}) compare_reduction(OpKind::sum, *input, dims, keepdim);
  }
}

TEST(CpuHostReductionTest, VarCorrectionsIncludingTooFewElements) {
  SKIP_WITHOUT_HOST_KERNELS();
  const auto x = random_f32({4, 3}, 11);
  for (int64_t correction : {0, 1, 3, 5}) {
    compare_reduction(OpKind::var, *x, {1}, false, correction);
    compare_reduction(OpKind::var, *x, {0}, false, correction);
  }
}

/// Every set of 2 or more dims of `rank` dims that is not one contiguous
/// run (dims 0 and 2 of three, say).
std::vector<IntList> split_dim_sets(int64_t rank) {
  std::vector<IntList> sets;
  for (int64_t mask = 1; mask < (int64_t{1} << rank); ++mask) {
    IntList dims;
    for (int64_t d = 0; d < rank; ++d)
      if (mask >> d & 1) dims.push_back(d);
    if (dims.back() - dims.front() + 1 != static_cast<int64_t>(dims.size())) sets.push_back(dims);
  }
  return sets;
}

TEST(CpuHostReductionTest, SplitDimSetsMatchRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  // Reduced dims in two or more blocks: rows (the last dim reduced) and
  // columns (a kept dim last), size-1 dims between, and every dtype.
  const Shape shapes[] = {{2, 3, 4}, {5, 17, 33}, {3, 1, 40, 7}, {2, 3, 4, 5, 6}, {300, 2, 70}};
  uint32_t seed = 200;
  for (const Shape& shape : shapes)
    for (DType dtype : {DType::f32, DType::bf16}) {
      const auto input = converted(*random_f32(shape, seed++, -3, 3), dtype);
      const double rel = dtype == DType::f32 ? 1e-6 : 0;
      for (const IntList& dims : split_dim_sets(shape.rank()))
        for (OpKind op : kReductions) {
          if (op == OpKind::argmax) continue; // one dim or all
          for (bool keepdim : {false, true}) compare_reduction(op, *input, dims, keepdim, 1, rel);
        }
    }
  // Large enough that the threads split each output's slabs (few
  // outputs) or share the outputs (many), in row and column mode.
  const auto few = random_f32({400, 3, 100}, seed++, -2, 2);
  const auto many = converted(*random_f32({50, 300, 40}, seed++, -2, 2), DType::bf16);
  const auto few_columns = random_f32({400, 100, 3}, seed++, -2, 2);
  for (OpKind op : kReductions) {
    if (op == OpKind::argmax) continue;
    compare_reduction(op, *few, {0, 2}, false);
    compare_reduction(op, *many, {0, 2}, false, 1, 0);
    compare_reduction(op, *few_columns, {0, 2}, true);
    compare_reduction(op, *few_columns, {0, 1}, true);
  }
  // NaN and infinities in one slab.
  std::vector<float> v(2 * 3 * 4, 1.0f);
  v[13] = std::numeric_limits<float>::quiet_NaN();
  v[2] = -std::numeric_limits<float>::infinity();
  v[22] = std::numeric_limits<float>::infinity();
  const auto x = filled<float>({2, 3, 4}, DType::f32, v);
  for (OpKind op : kReductions)
    if (op != OpKind::argmax) compare_reduction(op, *x, {0, 2}, false);
  // The i64 sum.
  auto ints = std::make_unique<host::HostBuffer>(TensorType{{4, 5, 6}, DType::i64});
  for (int64_t i = 0; i < ints->numel(); ++i) ints->data<int64_t>()[i] = i * 7919 % 1001 - 500;
  compare_reduction(OpKind::sum, *ints, {0, 2}, false);
}

TEST(CpuHostReductionTest, OtherDtypesKeepTheRefKernel) {
  const TraceGraph f64 =
      one_op_graph(OpKind::sum, {TensorType{{2, 3}, DType::f64}}, {TensorType{{2}, DType::f64}},
                   {{AttrName::dims, IntList{1}}, {AttrName::keepdim, int64_t{0}}});
  auto k = make_host_kernel(KernelRequest{f64, 1});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, nullptr);
}

} // namespace
} // namespace mstep::cpu
