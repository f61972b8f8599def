// Autograd of the shape and data-movement ops: finite-difference checks of
// every formula (reshape, permute, expand, slice, cat, gather,
// index_select, pad, triu/tril, scatter_add, index_add, slice_scatter) and
// of the composites that reach them (view, flatten, squeeze, unsqueeze,
// transpose, stack, chunk, embedding), with negative dims, non-contiguous
// inputs, size-1 and size-0 dims; hand-checked accumulation of duplicate
// indices; and which inputs get no gradient.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "mstep/mstep.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::gradcheck;
using V = std::vector<Tensor>;

/// Distinct, deterministic f64 values of `shape`.
Tensor val(const Shape& shape) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.3 + 1.7 * i) * 2;
  return from_vector(v, shape);
}

Tensor idx(std::vector<int64_t> v, Shape shape) { return from_vector(v, shape); }

TEST(AutogradShapeGradcheck, ReshapeFamily) {
  Tensor x = val({2, 3, 4});
  EXPECT_TRUE(gradcheck([](const V& v) { return reshape(v[0], {4, -1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return view(v[0], {24}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return flatten(v[0], 1, -1); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return squeeze(unsqueeze(v[0], -1) * 2.0, 3); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return reshape(v[0], {}); }, {val({1, 1})}));
  // Non-contiguous input: reshape after a transpose.
  EXPECT_TRUE(gradcheck([](const V& v) { return reshape(transpose(v[0], 0, 2), {-1}); }, {x}));
}

TEST(AutogradShapeGradcheck, PermuteAndTranspose) {
  Tensor x = val({2, 3, 4});
  EXPECT_TRUE(gradcheck([](const V& v) { return permute(v[0], {2, 0, 1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return permute(v[0], {-1, 0, -2}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return transpose(v[0], -1, 0); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return permute(transpose(v[0], 0, 1), {1, 2, 0}); }, {x}));
}

TEST(AutogradShapeGradcheck, ExpandSumsOverBroadcastDims) {
  EXPECT_TRUE(gradcheck([](const V& v) { return expand(v[0], {2, 3, 4}); }, {val({3, 1})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return expand(v[0], {3, -1}); }, {val({1, 4})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return expand(v[0], {5}); }, {val({})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return expand(v[0], {0, 2}); }, {val({1, 2})}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        return expand(transpose(v[0], 0, 1), {2, 3, 2});
      },
      {val({1, 3})}));
}

TEST(AutogradShapeGradcheck, Slice) {
  Tensor x = val({3, 7, 2});
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(v[0], 1, 1, kSliceEnd, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(v[0], -1, -1); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(v[0], 0, -100, 2); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(v[0], 1, 5, 3); }, {x}));  // empty
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(transpose(v[0], 0, 1), 1, 1, 3); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return slice(v[0], 0, 0, 1); }, {val({0, 2})}));
}

TEST(AutogradShapeGradcheck, CatStackChunk) {
  Tensor a = val({2, 3}), b = val({2, 1}), c = val({2, 2});
  EXPECT_TRUE(gradcheck([](const V& v) { return cat(v, 1); }, {a, b, c}));
  EXPECT_TRUE(gradcheck([](const V& v) { return cat(v, -1); }, {a, val({2, 0}), c}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        return cat({transpose(v[0], 0, 1), v[1]}, 0);
      },
      {a, val({4, 2})}));
  // A tensor used twice gets both slices' gradients summed.
  EXPECT_TRUE(gradcheck([](const V& v) { return cat({v[0], v[1], v[0]}, 0); }, {a, val({1, 3})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return stack(v, -1); }, {a, val({2, 3})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return stack(v, 0); }, {val({}), val({})}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        std::vector<Tensor> p = chunk(v[0], 3, -1);  // pieces 3, 3, 1
        return cat({p[2] * 2.0, p[0], exp(p[1])}, 1);
      },
      {val({2, 7})}));
  // Only one chunk used: the others get zero gradient.
  EXPECT_TRUE(gradcheck([](const V& v) { return chunk(v[0], 2, 0)[1]; }, {val({4, 2})}));
}

TEST(AutogradShapeGradcheck, GatherScattersBackWithDuplicates) {
  Tensor x = val({3, 4});
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(v[0], 0, v[1]); },
                        {x, idx({0, 0, 2, 1, 0, 0, 0, 2}, {2, 4})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(v[0], -1, v[1]); },
                        {x, idx({3, 3, 3, 0, 1, 1}, {3, 2})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(transpose(v[0], 0, 1), 1, v[1]); },
                        {x, idx({2, 2, 1, 0}, {2, 2})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(v[0], 0, v[1]); }, {val({}), idx({0}, {})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(v[0], 1, v[1]); }, {x, idx({}, {3, 0})}));
  Tensor i32 = from_vector(std::vector<int32_t>{1, 1, 0}, {1, 3});
  EXPECT_TRUE(gradcheck([](const V& v) { return gather(v[0], 0, v[1]); }, {x, i32}));
}

TEST(AutogradShapeGradcheck, IndexSelectAndEmbedding) {
  Tensor x = val({4, 3});
  EXPECT_TRUE(gradcheck([](const V& v) { return index_select(v[0], 0, v[1]); },
                        {x, idx({3, 0, 3, 3, 1}, {5})}));
  EXPECT_TRUE(
      gradcheck([](const V& v) { return index_select(v[0], -1, v[1]); }, {x, idx({2, 2}, {2})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return index_select(transpose(v[0], 0, 1), 1, v[1]); },
                        {x, idx({1, 1, 0}, {3})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return index_select(v[0], 0, v[1]); }, {x, idx({2}, {})}));
  EXPECT_TRUE(
      gradcheck([](const V& v) { return index_select(v[0], 0, v[1]); }, {val({}), idx({0}, {1})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return index_select(v[0], 0, v[1]); }, {x, idx({}, {0})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return embedding(v[1], v[0]); },
                        {val({5, 2}), idx({4, 0, 4, 1, 4, 0}, {2, 3})}));
}

TEST(AutogradShapeGradcheck, PadAndCrop) {
  Tensor x = val({3, 4});
  EXPECT_TRUE(gradcheck([](const V& v) { return pad(v[0], {1, 2}, 0.5); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return pad(v[0], {-1, 2, 1, -1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return pad(v[0], {-2, -2}); }, {x}));  // to empty
  EXPECT_TRUE(gradcheck([](const V& v) { return pad(v[0], {0, 0, -3, 1}, -1.0); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return pad(transpose(v[0], 0, 1), {1, 0, 0, 2}); }, {x}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        return pad(v[0], {1, 1, 1, 0, 0, 1});
      },
      {val({2, 1, 2})}));
}

TEST(AutogradShapeGradcheck, Triangles) {
  Tensor x = val({2, 3, 4});
  for (int64_t d : {0, 1, -2}) {
    EXPECT_TRUE(gradcheck([d](const V& v) { return triu(v[0], d); }, {x})) << d;
    EXPECT_TRUE(gradcheck([d](const V& v) { return tril(v[0], d); }, {x})) << d;
  }
  EXPECT_TRUE(gradcheck([](const V& v) { return triu(transpose(v[0], -1, -2), 1); }, {x}));
}

TEST(AutogradShapeGradcheck, ScatterAdd) {
  Tensor x = val({3, 2}), src = val({3, 3});
  // The index covers only src[:, :2]; duplicates accumulate.
  Tensor index = idx({0, 1, 2, 0, 0, 0}, {3, 2});
  EXPECT_TRUE(
      gradcheck([](const V& v) { return scatter_add(v[0], 0, v[1], v[2]); }, {x, index, src}));
  EXPECT_TRUE(gradcheck([](const V& v) { return scatter_add(v[0], -1, v[1], v[2]); },
                        {x, idx({1, 1, 0, 0}, {2, 2}), val({2, 2})}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) { return scatter_add(transpose(v[0], 0, 1), 1, v[1], transpose(v[2], 0, 1)); },
      {val({3, 2}), idx({2, 2, 0, 1}, {2, 2}), val({2, 2})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return scatter_add(v[0], 0, v[1], v[2]); },
                        {val({}), idx({0}, {}), val({})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return scatter_add(v[0], 0, v[1], v[2]); },
                        {x, idx({}, {0, 2}), val({1, 2})}));
}

TEST(AutogradShapeGradcheck, IndexAdd) {
  Tensor x = val({4, 3});
  EXPECT_TRUE(gradcheck([](const V& v) { return index_add(v[0], 0, v[1], v[2]); },
                        {x, idx({3, 0, 3}, {3}), val({3, 3})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return index_add(v[0], -1, v[1], v[2]); },
                        {x, idx({1, 1}, {2}), val({4, 2})}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) { return index_add(transpose(v[0], 0, 1), 1, v[1], transpose(v[2], 0, 1)); },
      {x, idx({2, 0}, {2}), val({2, 3})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return index_add(v[0], 0, v[1], v[2]); },
                        {val({}), idx({0}, {}), val({})}));
}

TEST(AutogradShapeGradcheck, SliceScatter) {
  Tensor x = val({3, 7});
  EXPECT_TRUE(gradcheck([](const V& v) { return slice_scatter(v[0], v[1], 1, 1, kSliceEnd, 2); },
                        {x, val({3, 3})}));
  EXPECT_TRUE(
      gradcheck([](const V& v) { return slice_scatter(v[0], v[1], -2, -1); }, {x, val({1, 7})}));
  EXPECT_TRUE(gradcheck([](const V& v) { return slice_scatter(v[0], v[1], 1, 4, 2); },
                        {x, val({3, 0})}));  // empty slice: all of x passes through
  EXPECT_TRUE(
      gradcheck([](const V& v) { return slice_scatter(transpose(v[0], 0, 1), v[1], 0, 0, 2); },
                {x, val({2, 3})}));
}

TEST(AutogradShape, DuplicateIndicesAccumulate) {
  Tensor w = val({4, 2}).requires_grad_();
  sum(embedding(idx({1, 1, 3, 1}, {2, 2}), w)).backward();
  EXPECT_THAT(w.grad().to_vector<double>(), ElementsAre(0, 0, 3, 3, 0, 0, 1, 1));
  Tensor x = val({3}).requires_grad_();
  sum(gather(x, 0, idx({2, 2, 0, 2}, {4}))).backward();
  EXPECT_THAT(x.grad().to_vector<double>(), ElementsAre(1, 0, 3));
  Tensor y = val({3, 1}).requires_grad_();
  sum(index_select(y, 0, idx({0, 0}, {2}))).backward();
  EXPECT_THAT(y.grad().to_vector<double>(), ElementsAre(2, 0, 0));
}

TEST(AutogradShape, GradFnNamesAndF32Gradients) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor y = slice(x, 1, 1);
  EXPECT_EQ(y.grad_fn_name(), "slice_backward");
  EXPECT_EQ(pad(x, {1, 1}).grad_fn_name(), "pad_backward");
  Tensor z = scatter_add(x, 0, idx({1, 0}, {1, 2}), y * 2.0f);
  EXPECT_EQ(z.grad_fn_name(), "scatter_add_backward");
  sum(z).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  // d/dx: 1 from scatter_add's input; 2 from src for x[:, 1:] in the
  // index's two columns, i.e. x[0][1] and x[0][2].
  EXPECT_THAT(x.grad().to_vector<float>(), ElementsAre(1, 3, 3, 1, 1, 1));
}

TEST(AutogradShape, MixedDtypesGetGradientsOfTheirOwnType) {
  Tensor a = from_vector(std::vector<float>{1, 2}, {2}).requires_grad_();
  Tensor b = val({1}).requires_grad_();
  Tensor c = cat({a, b}, 0);  // promoted to f64
  EXPECT_EQ(c.dtype(), DType::f64);
  sum(c * 3.0).backward();
  EXPECT_EQ(a.grad().dtype(), DType::f32);
  EXPECT_THAT(a.grad().to_vector<float>(), ElementsAre(3, 3));
  EXPECT_THAT(b.grad().to_vector<double>(), ElementsAre(3));
  // slice_scatter casts src to the input's dtype; src's gradient is cast back.
  Tensor x = val({3}).requires_grad_();
  Tensor s = from_vector(std::vector<float>{1}, {1}).requires_grad_();
  sum(slice_scatter(x, s, 0, 1, 2) * 2.0).backward();
  EXPECT_EQ(s.grad().dtype(), DType::f32);
  EXPECT_THAT(s.grad().to_vector<float>(), ElementsAre(2));
  EXPECT_THAT(x.grad().to_vector<double>(), ElementsAre(2, 0, 2));
}

TEST(AutogradShape, IntegerAndBoolInputsGetNoGradient) {
  Tensor x = val({2, 3}).requires_grad_();
  Tensor i = idx({0, 1, 2, 3, 4, 5}, {2, 3});
  // Integer data moving next to a requires-grad tensor records no backward.
  EXPECT_FALSE(reshape(i, {3, 2}).requires_grad());
  EXPECT_FALSE(gather(i, 1, idx({0}, {1, 1})).requires_grad());
  EXPECT_FALSE(slice_scatter(i, idx({9, 9}, {2, 1}), 1, 0, 1).requires_grad());
  // ... and an integer index gives the op's float input its gradient only.
  Tensor y = scatter_add(x, 1, idx({2, 2}, {1, 2}), x * 1.0);
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  EXPECT_THAT(x.grad().to_vector<double>(), ElementsAre(2, 2, 1, 1, 1, 1));
  // Masks through triangles: the bool result carries no gradient.
  Tensor b = from_vector(std::vector<bool>{true, true, true, true}, {2, 2});
  EXPECT_FALSE(triu(b).requires_grad());
}

}  // namespace
}  // namespace mstep
