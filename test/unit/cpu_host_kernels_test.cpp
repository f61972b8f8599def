// The cpu backend's other host kernels against the ref kernels of the
// same ops on the same inputs: softmax and log_softmax over the last, a
// middle and the first dim; nll_loss, rms_norm, dropout (the same Philox
// stream) and the index ops, including bad indices. softmax, log_softmax,
// nll_loss, rms_norm and dropout also in bf16 and f16, where the host
// kernel must give the ref kernel's values exactly.
#include "test/unit/CpuHostKernelHarness.h"

#include "lib/runtime/RuntimeInternal.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::cpu {
namespace {

using namespace host_test;

// ---- softmax, log_softmax -------------------------------------------------------

constexpr OpKind kSoftmaxes[] = {OpKind::softmax, OpKind::log_softmax};

/// `rel` 0 (bf16, f16): the same value, since both round the f64 result
/// to f32 and then to the half type.
void compare_softmax(OpKind op, const host::HostBuffer& input, int64_t dim, double rel = 1e-6) {
  BufferList inputs;
  inputs.push_back(std::make_unique<host::HostBuffer>(input.type()));
  std::memcpy(inputs[0]->bytes(), input.bytes(), input.type().bytes());
  // Both compute in f64 and round once: only the order of the f64 sum's
  // additions differs.
  compare_with_ref(op, inputs, {input.type()}, {{AttrName::dim, dim}}, rel,
                   absl::StrCat(op_name(op), " of ", input.type().to_string(), " over dim ", dim));
}

TEST(CpuHostSoftmaxTest, MatchRefOverLastAndMiddleDims) {
  SKIP_WITHOUT_HOST_KERNELS();
  uint32_t seed = 20;
  for (int64_t n : {1, 3, 17, 1000}) {
    // Last dim (rows), middle dims with 7 and 33 lanes (column blocks with
    // a tail) and the first dim.
    const auto rows = random_f32({5, n}, seed++, -5, 5);
    const auto middle = random_f32({4, n, 7}, seed++, -5, 5);
    const auto wide_middle = random_f32({2, n, 33}, seed++, -5, 5);
    for (OpKind op : kSoftmaxes) {
      compare_softmax(op, *rows, 1);
      compare_softmax(op, *rows, 0);
      compare_softmax(op, *middle, 1);
      compare_softmax(op, *middle, 0);
      compare_softmax(op, *wide_middle, 1);
    }
  }
}

TEST(CpuHostSoftmaxTest, LargeTensorsSplitOverThreads) {
  SKIP_WITHOUT_HOST_KERNELS();
  const auto rows = random_f32({300, 1000}, 30, -8, 8);
  const auto columns = random_f32({8, 1000, 40}, 31, -8, 8);
  const auto one_long_row = random_f32({100003}, 32, -8, 8);
  for (OpKind op : kSoftmaxes) {
    compare_softmax(op, *rows, 1);
    compare_softmax(op, *rows, 0);
    compare_softmax(op, *columns, 1);
    compare_softmax(op, *one_long_row, 0);
  }
}

TEST(CpuHostSoftmaxTest, NanAndInfinitiesAsRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  // Rows (dim 1) and columns (dim 0) holding a NaN, -inf among finite
  // values, only -inf, a +inf, and values far from 0 (the shift matters).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {1,    nan,  3,    2,    0,    -inf, 1,   -inf, 2,   -inf,
                          -inf, -inf, -inf, -inf, -inf, 2,    inf, 1,    0,   -1,
                          -300, -301, -299, -300, -305, 500,  499, -inf, 498, 500};
  const auto x = filled<float>({6, 5}, DType::f32, v);
  // The same rows long enough for full vectors and a tail, the special
  // value late in the row.
  std::vector<float> long_rows(4 * 37, 0.5f);
  long_rows[33] = nan;
  long_rows[37 + 36] = -inf;
  for (int i = 2 * 37; i < 3 * 37; ++i) long_rows[i] = -inf;
  long_rows[3 * 37 + 20] = inf;
  const auto y = filled<float>({4, 37}, DType::f32, long_rows);
  const auto single = filled<float>({3, 1}, DType::f32, {-inf, nan, 7});
  for (OpKind op : kSoftmaxes) {
    for (int64_t dim : {0, 1}) {
      compare_softmax(op, *x, dim);
      compare_softmax(op, *y, dim);
      compare_softmax(op, *single, dim);
    }
  }
}

TEST(CpuHostSoftmaxTest, HalfTypesMatchRefExactly) {
  SKIP_WITHOUT_HOST_KERNELS();
  uint32_t seed = 120;
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (int64_t n : {1, 3, 17, 1000}) {
      const auto rows = converted(*random_f32({5, n}, seed++, -5, 5), dtype);
      const auto middle = converted(*random_f32({4, n, 7}, seed++, -5, 5), dtype);
      const auto wide_middle = converted(*random_f32({2, n, 33}, seed++, -5, 5), dtype);
      for (OpKind op : kSoftmaxes) {
        compare_softmax(op, *rows, 1, 0);
        compare_softmax(op, *rows, 0, 0);
        compare_softmax(op, *middle, 1, 0);
        compare_softmax(op, *middle, 0, 0);
        compare_softmax(op, *wide_middle, 1, 0);
      }
    }
    // NaN and infinities (as NanAndInfinitiesAsRef), and a large tensor.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> long_rows(4 * 37, 0.5f);
    long_rows[33] = nan;
    long_rows[37 + 36] = -inf;
    for (int i = 2 * 37; i < 3 * 37; ++i) long_rows[i] = -inf;
    long_rows[3 * 37 + 20] = inf;
    const auto y = converted(*filled<float>({4, 37}, DType::f32, long_rows), dtype);
    const auto single = converted(*filled<float>({3, 1}, DType::f32, {-inf, nan, 7}), dtype);
    const auto large = converted(*random_f32({300, 1000}, seed++, -8, 8), dtype);
    for (OpKind op : kSoftmaxes) {
      for (int64_t dim : {0, 1}) {
        compare_softmax(op, *y, dim, 0);
        compare_softmax(op, *single, dim, 0);
        compare_softmax(op, *large, dim, 0);
      }
    }
  }
}

TEST(CpuHostSoftmaxTest, OtherDtypesKeepTheRefKernel) {
  for (DType dtype : {DType::f64}) {
    const TraceGraph g = one_op_graph(OpKind::softmax, {TensorType{{2, 3}, dtype}},
                                      {TensorType{{2, 3}, dtype}}, {{AttrName::dim, int64_t{1}}});
    auto k = make_host_kernel(KernelRequest{g, 1});
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(*k, nullptr);
  }
}

// ---- nll_loss, rms_norm, dropout ----------------------------------------------

TEST(CpuHostLossTest, NllLossEveryReductionAndIgnoredTargets) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (int64_t rows : {1, 3, 17, 1000}) {
    BufferList inputs;
    inputs.push_back(random_f32({rows, 10}, 3, -5, 0));
    std::vector<int64_t> target(rows);
    for (int64_t i = 0; i < rows; ++i) target[i] = i % 4 == 1 ? -100 : (i * 7) % 10;
    inputs.push_back(filled<int64_t>({rows}, DType::i64, target));
    for (int64_t reduction : {0, 1, 2}) {
      const Shape out = reduction == 0 ? Shape{rows} : Shape{};
      compare_with_ref(OpKind::nll_loss, inputs, {TensorType{out, DType::f32}},
                       {{AttrName::ignore_index, int64_t{-100}}, {AttrName::reduction, reduction}},
                       1e-6, absl::StrCat("nll_loss rows ", rows, " reduction ", reduction));
    }
  }
  // Every target ignored: the mean is 0/0 = NaN in both.
  BufferList inputs;
  inputs.push_back(random_f32({2, 4}, 4));
  inputs.push_back(filled<int64_t>({2}, DType::i64, {7, 7}));
  compare_with_ref(OpKind::nll_loss, inputs, {TensorType{{}, DType::f32}},
                   {{AttrName::ignore_index, int64_t{7}}, {AttrName::reduction, int64_t{1}}}, 0,
                   "nll_loss, all ignored");
}

TEST(CpuHostLossTest, NllLossHalfTypesMatchRefExactly) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (DType dtype : {DType::bf16, DType::f16})
    for (int64_t rows : {1, 3, 17, 1000}) {
      BufferList inputs;
      inputs.push_back(converted(*random_f32({rows, 10}, 3, -5, 0), dtype));
      std::vector<int64_t> target(rows);
      for (int64_t i = 0; i < rows; ++i) target[i] = i % 4 == 1 ? -100 : (i * 7) % 10;
      inputs.push_back(filled<int64_t>({rows}, DType::i64, target));
      for (int64_t reduction : {0, 1, 2}) {
        const Shape out = reduction == 0 ? Shape{rows} : Shape{};
        compare_with_ref(
            OpKind::nll_loss, inputs, {TensorType{out, dtype}},
            {{AttrName::ignore_index, int64_t{-100}}, {AttrName::reduction, reduction}}, 0,
            absl::StrCat("nll_loss ", dtype_name(dtype), " rows ", rows, " reduction ", reduction));
      }
    }
}

TEST(CpuHostLossTest, NllLossBadTargetIsReportedNotRead) {
  SKIP_WITHOUT_HOST_KERNELS();
  BufferList inputs;
  inputs.push_back(random_f32({3, 4}, 5));
  inputs.push_back(filled<int64_t>({3}, DType::i64, {0, 4, 1}));
  const TraceGraph g = one_op_graph(
      OpKind::nll_loss, {inputs[0]->type(), inputs[1]->type()}, {TensorType{{}, DType::f32}},
      {{AttrName::ignore_index, int64_t{-100}}, {AttrName::reduction, int64_t{1}}});
  std::unique_ptr<CpuKernel> kernel = host_kernel(g);
  ASSERT_NE(kernel, nullptr);
  BufferList out = run_host(*kernel, g.nodes.back(), inputs);
  EXPECT_TRUE(std::isnan(out[0]->data<float>()[0]));
  auto* checked = dynamic_cast<IndexCheckedKernel*>(kernel.get());
  ASSERT_NE(checked, nullptr);
  EXPECT_THAT(checked->last_error().message(),
              ::testing::HasSubstr("target 4 at position 1 is out of range for C = 4"));
}

TEST(CpuHostNormTest, RmsNormWithAndWithoutWeight) {
  SKIP_WITHOUT_HOST_KERNELS();
  struct Case {
    Shape shape;
    int64_t normalized_ndim;
  };
  for (const Case& c : {Case{{1, 1}, 1}, Case{{3, 17}, 1}, Case{{2, 3, 40}, 2}, Case{{1000, 33}, 1},
                        Case{{2, 1000003}, 1}})
    for (bool weight : {false, true}) {
      BufferList inputs;
      inputs.push_back(random_f32(c.shape, 6, -3, 3));
      int64_t cols = 1;
      for (int64_t d = c.shape.rank() - c.normalized_ndim; d < c.shape.rank(); ++d)
        cols *= c.shape[d];
      if (weight) inputs.push_back(random_f32({cols}, 7));
      compare_with_ref(OpKind::rms_norm, inputs, {inputs[0]->type()},
                       {{AttrName::normalized_ndim, c.normalized_ndim},
                        {AttrName::eps, 1e-5},
                        {AttrName::has_weight, int64_t{weight}}},
                       1e-6, absl::StrCat("rms_norm ", c.shape.to_string(), " weight ", weight));
    }
}

TEST(CpuHostNormTest, RmsNormHalfTypesMatchRefExactly) {
  SKIP_WITHOUT_HOST_KERNELS();
  struct Case {
    Shape shape;
    int64_t normalized_ndim;
  };
  for (DType dtype : {DType::bf16, DType::f16})
    for (const Case& c : {Case{{1, 1}, 1}, Case{{3, 17}, 1}, Case{{2, 3, 40}, 2},
                          Case{{1000, 33}, 1}, Case{{2, 100003}, 1}})
      for (bool weight : {false, true}) {
        BufferList inputs;
        inputs.push_back(converted(*random_f32(c.shape, 6, -3, 3), dtype));
        int64_t cols = 1;
        for (int64_t d = c.shape.rank() - c.normalized_ndim; d < c.shape.rank(); ++d)
          cols *= c.shape[d];
        if (weight) inputs.push_back(converted(*random_f32({cols}, 7), dtype));
        compare_with_ref(
            OpKind::rms_norm, inputs, {inputs[0]->type()},
            {{AttrName::normalized_ndim, c.normalized_ndim},
             {AttrName::eps, 1e-5},
             {AttrName::has_weight, int64_t{weight}}},
            0, absl::StrCat("rms_norm ", inputs[0]->type().to_string(), " weight ", weight));
      }
}

TEST(CpuHostDropoutTest, HalfTypesSamePhiloxStreamAsRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dtype : {DType::bf16, DType::f16})
    for (int64_t numel : {1, 3, 17, 100003})
      for (double p : {0.0, 0.1, 0.5, 1.0}) {
        BufferList inputs;
        auto x = random_f32({numel}, 8, -4, 4);
        x->data<float>()[numel / 2] = nan;
        inputs.push_back(converted(*x, dtype));
        inputs.push_back(filled<int64_t>({2}, DType::i64, {-7, 0xFFFFFFF5LL}));
        compare_with_ref(OpKind::dropout, inputs, {inputs[0]->type()},
                         {{AttrName::p, p}, {AttrName::offset, int64_t{3}}}, 0,
                         absl::StrCat("dropout ", inputs[0]->type().to_string(), " p ", p));
      }
}

TEST(CpuHostDropoutTest, SamePhiloxStreamAsRef) {
  SKIP_WITHOUT_HOST_KERNELS();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t numel : {1, 3, 17, 1000003})
    for (double p : {0.0, 0.1, 0.5, 1.0})
      // The second state makes the 64-bit counter carry into its high word
      // inside a 16-lane block.
      for (const std::vector<int64_t>& state :
           {std::vector<int64_t>{42, 0}, std::vector<int64_t>{-7, 0xFFFFFFF5LL}}) {
        BufferList inputs;
        inputs.push_back(random_f32({numel}, 8, -4, 4));
        inputs[0]->data<float>()[numel / 2] = nan;
        inputs.push_back(filled<int64_t>({2}, DType::i64, state));
        compare_with_ref(OpKind::dropout, inputs, {inputs[0]->type()},
                         {{AttrName::p, p}, {AttrName::offset, int64_t{3}}}, 0,
                         absl::StrCat("dropout numel ", numel, " p ", p, " seed ", state[0]));
      }
}

// ---- Index ops ----------------------------------------------------------------

template <typename I>
std::unique_ptr<host::HostBuffer> random_index(const Shape& shape, int64_t size, uint32_t seed) {
  const DType dtype = std::is_same_v<I, int32_t> ? DType::i32 : DType::i64;
  auto b = std::make_unique<host::HostBuffer>(TensorType{shape, dtype});
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, size - 1);
  for (int64_t i = 0; i < b->numel(); ++i) b->data<I>()[i] = static_cast<I>(dist(rng));
  return b;
}

/// With dim's extent replaced by `extent`.
Shape with_extent(Shape shape, int64_t dim, int64_t extent) {
  shape[dim] = extent;
  return shape;
}

template <typename I> void compare_index_ops(const Shape& shape, int64_t dim, int64_t n) {
  const std::string what = absl::StrCat(shape.to_string(), " dim ", dim, " n ", n, " index ",
                                        sizeof(I) == 4 ? "i32" : "i64");
  const AttrList attrs = {{AttrName::dim, dim}};
  const Shape along = with_extent(shape, dim, n);
  { // index_select, f32 and (moved as bytes) i64 data
    BufferList inputs;
    inputs.push_back(random_f32(shape, 1));
    inputs.push_back(random_index<I>({n}, shape[dim], 2));
    compare_with_ref(OpKind::index_select, inputs, {TensorType{along, DType::f32}}, attrs, 0,
                     "index_select " + what);
    inputs[0] = random_index<int64_t>(shape, 1000, 3);
    compare_with_ref(OpKind::index_select, inputs, {TensorType{along, DType::i64}}, attrs, 0,
                     "index_select i64 " + what);
  }
  { // gather
    BufferList inputs;
    inputs.push_back(random_f32(shape, 4));
    inputs.push_back(random_index<I>(along, shape[dim], 5));
    compare_with_ref(OpKind::gather, inputs, {TensorType{along, DType::f32}}, attrs, 0,
                     "gather " + what);
  }
  { // index_add, with duplicates
    BufferList inputs;
    inputs.push_back(random_f32(shape, 6));
    inputs.push_back(random_index<I>({n}, shape[dim], 7));
    inputs.push_back(random_f32(along, 8));
    compare_with_ref(OpKind::index_add, inputs, {TensorType{shape, DType::f32}}, attrs, 0,
                     "index_add " + what);
  }
  { // scatter_add, with duplicates
    BufferList inputs;
    inputs.push_back(random_f32(shape, 9));
    inputs.push_back(random_index<I>(along, shape[dim], 10));
    inputs.push_back(random_f32(along, 11));
    compare_with_ref(OpKind::scatter_add, inputs, {TensorType{shape, DType::f32}}, attrs, 0,
                     "scatter_add " + what);
  }
}

TEST(CpuHostIndexTest, MatchRefAlongEveryDim) {
  SKIP_WITHOUT_HOST_KERNELS();
  compare_index_ops<int64_t>({50, 33}, 0, 17); // an embedding table
  compare_index_ops<int32_t>({50, 33}, 0, 17);
  compare_index_ops<int64_t>({50, 33}, 1, 3);
  compare_index_ops<int64_t>({4, 9, 5}, 1, 20);
  compare_index_ops<int64_t>({1}, 0, 1);
  compare_index_ops<int64_t>({1000, 768}, 0, 4096); // large enough to split over threads
  compare_index_ops<int32_t>({3, 100003}, 0, 2);
}

TEST(CpuHostIndexTest, BadIndexIsReportedNotFollowed) {
  SKIP_WITHOUT_HOST_KERNELS();
  BufferList inputs;
  inputs.push_back(random_f32({5, 4}, 1));
  inputs.push_back(filled<int64_t>({3}, DType::i64, {0, 5, 1}));
  const TraceGraph g =
      one_op_graph(OpKind::index_select, {inputs[0]->type(), inputs[1]->type()},
                   {TensorType{{3, 4}, DType::f32}}, {{AttrName::dim, int64_t{0}}});
  std::unique_ptr<CpuKernel> kernel = host_kernel(g);
  ASSERT_NE(kernel, nullptr);
  BufferList out = run_host(*kernel, g.nodes.back(), inputs);
  for (int64_t i = 0; i < out[0]->numel(); ++i) EXPECT_TRUE(std::isnan(out[0]->data<float>()[i]));
  auto* checked = dynamic_cast<IndexCheckedKernel*>(kernel.get());
  ASSERT_NE(checked, nullptr);
  EXPECT_THAT(checked->last_error().message(),
              ::testing::HasSubstr("index_select: index 5 (element 1 of the index i64[3]) is "
                                   "out of range [0, 5)"));
  // A good index afterwards clears the error.
  inputs[1]->data<int64_t>()[1] = 4;
  run_host(*kernel, g.nodes.back(), inputs);
  EXPECT_TRUE(checked->last_error().ok());
}

} // namespace
} // namespace mstep::cpu

// ---- A bf16 autocast step on the cpu backend ------------------------------------

namespace mstep::cpu {
namespace {

TEST(CpuHostAutocastTest, Bf16StepRunsItsNormsLossesAndReductionsOnHostKernels) {
  SKIP_WITHOUT_HOST_KERNELS();
  // An MLP step under autocast: the matmuls produce bf16, so rms_norm,
  // dropout, softmax, log_softmax, nll_loss and the reductions below run
  // on bf16 tensors, forward and backward. None of them may fall back to
  // the ref kernel.
  auto values = [](Shape s, int seed) {
    std::vector<float> v(s.numel());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
    return from_vector(v, s, DType::f32, Device{DeviceType::cpu, 0});
  };
  Tensor x = values({8, 16}, 1);
  Tensor w1 = values({16, 33}, 2).requires_grad_();
  Tensor w2 = values({33, 10}, 3).requires_grad_();
  std::vector<int64_t> labels = {0, 3, 9, 1, 4, 4, 7, 2};
  Tensor target = from_vector(labels, {8}, DType::i64, Device{DeviceType::cpu, 0});
  Tracer::get().cache().clear();
  reset_metrics();
  for (int step = 0; step < 2; ++step) {
    Tensor loss;
    {
      auto scope = autocast(DType::bf16);
      Tensor h = matmul(x, w1);
      EXPECT_EQ(h.dtype(), DType::bf16);
      h = dropout(rms_norm(h, {33}), 0.1);
      Tensor a = softmax(h, 1);
      Tensor logits = matmul(a, w2);
      loss = nll_loss(log_softmax(logits, 1), target);
      EXPECT_EQ(loss.dtype(), DType::bf16);
      Tensor extra =
          mean(logsumexp(logits, {1})) + sum(max(h, {1})) * 1e-3 + mean(var(logits, {0})) * 1e-3;
      loss = loss + extra;
    }
    loss.backward();
    {
      NoGradGuard no_grad;
      w1.copy_(w1 - w1.grad() * 0.1);
      w2.copy_(w2 - w2.grad() * 0.1);
      w1.set_grad(Tensor());
      w2.set_grad(Tensor());
    }
    mark_step();
  }
  EXPECT_EQ(metrics().fallbacks, 0) << internal::fallback_table();
  Tracer::get().cache().clear();
}

} // namespace
} // namespace mstep::cpu
