// The cpu backend's oneDNN kernels against the ref kernels: each test
// builds a tiny TraceGraph (parameters and the op), evaluates it with the
// ref kernels, runs the oneDNN kernel on the same input buffers and
// compares. Sizes are odd on purpose (1, 3, 17, 127).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/OneDnnKernels.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::cpu {
namespace {

using host::HostBuffer;

using Values = std::vector<std::vector<std::shared_ptr<HostBuffer>>>;

/// Runs `graph` with the ref kernels on `inputs` (one per parameter);
/// a fusion node runs its body the same way. Returns every node's results.
Values run_ref(const TraceGraph& graph, const std::vector<std::shared_ptr<HostBuffer>>& inputs) {
  Values values(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& node = graph.nodes[i];
    if (node.op == OpKind::parameter) {
      values[i].push_back(inputs[attr_int(node.attrs, AttrName::index)]);
      continue;
    }
    std::vector<std::shared_ptr<HostBuffer>> operands;
    for (ValueRef v : node.operands) operands.push_back(values[v.node][v.index]);
    if (node.body) {
      Values inner = run_ref(*node.body, operands);
      for (ValueRef v : node.body->outputs) values[i].push_back(inner[v.node][v.index]);
      continue;
    }
    std::vector<const HostBuffer*> in;
    for (auto& b : operands) in.push_back(b.get());
    std::vector<HostBuffer*> out;
    for (const TensorType& t : node.results) {
      values[i].push_back(std::make_shared<HostBuffer>(t));
      out.push_back(values[i].back().get());
    }
    const ref::RefKernel kernel = ref::ref_kernel(node.op);
    EXPECT_NE(kernel, nullptr) << op_name(node.op);
    const absl::Status status = kernel(ref::KernelArgs{node, in, out});
    EXPECT_TRUE(status.ok()) << status;
  }
  return values;
}

/// Builds a TraceGraph node by node.
struct GraphBuilder {
  TraceGraph graph;

  ValueRef input(const Shape& shape, DType dtype = DType::f32) {
    GraphNode p;
    p.op = OpKind::parameter;
    p.attrs.push_back({AttrName::index, static_cast<int64_t>(graph.input_types.size())});
    p.results.push_back({shape, dtype});
    graph.input_types.push_back({shape, dtype});
    return push(std::move(p));
  }
  ValueRef op(OpKind kind, std::vector<ValueRef> operands, AttrList attrs, TensorType result) {
    GraphNode n;
    n.op = kind;
    n.operands.assign(operands.begin(), operands.end());
    n.attrs = std::move(attrs);
    n.results.push_back(std::move(result));
    return push(std::move(n));
  }
  ValueRef push(GraphNode n) {
    graph.nodes.push_back(std::move(n));
    return {static_cast<uint32_t>(graph.nodes.size() - 1), 0};
  }
};

/// How a test fills its inputs.
enum class Fill { uniform, ties, specials };

/// Random inputs, one per parameter of `graph`.
std::vector<std::shared_ptr<HostBuffer>> make_inputs(const TraceGraph& graph, Fill fill,
                                                      unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<std::shared_ptr<HostBuffer>> inputs;
  for (const TensorType& t : graph.input_types) {
    auto buffer = std::make_shared<HostBuffer>(t);
    for (int64_t i = 0; i < t.numel(); ++i) {
      float v = fill == Fill::ties ? static_cast<float>(small(rng)) : uniform(rng);
      if (fill == Fill::specials && i % 11 == 3) v = std::numeric_limits<float>::quiet_NaN();
      if (fill == Fill::specials && i % 13 == 5) v = -std::numeric_limits<float>::infinity();
      if (t.dtype == DType::bf16) buffer->data<BFloat16>()[i] = BFloat16(v);
      else buffer->data<float>()[i] = v;
    }
    inputs.push_back(std::move(buffer));
  }
  return inputs;
}

float element(const HostBuffer& b, int64_t i) {
  return b.type().dtype == DType::bf16 ? static_cast<float>(b.data<BFloat16>()[i])
                                       : b.data<float>()[i];
}

void expect_close(const HostBuffer& expected, const HostBuffer& actual, float tol) {
  ASSERT_EQ(expected.type(), actual.type());
  int mismatches = 0;
  for (int64_t i = 0; i < expected.numel() && mismatches < 5; ++i) {
    const float e = element(expected, i), a = element(actual, i);
    const bool same_special = (std::isnan(e) && std::isnan(a)) || (std::isinf(e) && e == a);
    if (!same_special && !(std::fabs(e - a) <= tol * (1 + std::fabs(e)))) {
      ADD_FAILURE() << "element " << i << " of " << expected.type().to_string() << ": ref " << e
                    << ", onednn " << a;
      ++mismatches;
    }
  }
}

/// Evaluates `b.graph` with the ref kernels, builds the oneDNN kernel for
/// node `node` and checks that it reproduces the node's results.
void check_node(const GraphBuilder& b, ValueRef node, float tol, Fill fill = Fill::uniform) {
  const TraceGraph& graph = b.graph;
  const auto inputs = make_inputs(graph, fill);
  const Values expected = run_ref(graph, inputs);
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel = make_onednn_kernel({graph, node.node});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_NE(*kernel, nullptr) << "oneDNN declined " << graph.to_text();
  const GraphNode& n = graph.nodes[node.node];
  std::vector<const void*> operands;
  for (ValueRef v : n.operands) {
    const ValueRef read =
        n.op == OpKind::matmul ? transposed_source(graph, v).value_or(v) : v;
    operands.push_back(expected[read.node][read.index]->bytes());
  }
  std::vector<std::unique_ptr<HostBuffer>> results;
  std::vector<void*> result_ptrs;
  for (const TensorType& t : n.results) {
    results.push_back(std::make_unique<HostBuffer>(t));
    result_ptrs.push_back(results.back()->bytes());
  }
  // Twice: a second run must not depend on state left by the first.
  for (int run = 0; run < 2; ++run) {
    (*kernel)->run(operands.data(), result_ptrs.data());
    for (size_t j = 0; j < results.size(); ++j)
      expect_close(*expected[node.node][j], *results[j], tol);
  }
}

void expect_declined(const GraphBuilder& b, ValueRef node) {
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel = make_onednn_kernel({b.graph, node.node});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(*kernel, nullptr) << b.graph.to_text();
}

constexpr float kF32Tol = 2e-5f;
constexpr float kBf16Tol = 2e-2f;

// ---- matmul -----------------------------------------------------------

TensorType matmul_type(const Shape& batch, int64_t n, int64_t p, DType dtype) {
  Shape s = batch;
  s.push_back(n);
  s.push_back(p);
  return {s, dtype};
}

TEST(OneDnnMatmul, OddSizes2D) {
  const int64_t sizes[][3] = {{1, 1, 1}, {3, 17, 1}, {17, 3, 127}, {127, 127, 3}, {1, 127, 17}};
  for (const auto& [n, k, p] : sizes) {
    GraphBuilder b;
    ValueRef x = b.input({n, k}), y = b.input({k, p});
    check_node(b, b.op(OpKind::matmul, {x, y}, {}, matmul_type({}, n, p, DType::f32)), kF32Tol);
  }
}

TEST(OneDnnMatmul, BatchedWithBroadcast) {
  struct Case {
    Shape lhs, rhs, batch;
  };
  const Case cases[] = {
      {{2, 3, 5, 7}, {7, 4}, {2, 3}},            // rank 4 x rank 2
      {{3, 1, 5, 7}, {1, 4, 7, 2}, {3, 4}},      // both sides broadcast
      {{4, 5, 7}, {2, 1, 7, 3}, {2, 4}},         // lower-rank lhs
      {{17, 3, 17}, {17, 17, 1}, {17}},          // plain batched
      {{1, 1, 127}, {3, 127, 17}, {3}},          // unit batch on the left
  };
  for (const Case& c : cases) {
    GraphBuilder b;
    ValueRef x = b.input(c.lhs), y = b.input(c.rhs);
    const int64_t n = c.lhs[c.lhs.rank() - 2], p = c.rhs[c.rhs.rank() - 1];
    check_node(b, b.op(OpKind::matmul, {x, y}, {}, matmul_type(c.batch, n, p, DType::f32)),
               kF32Tol);
  }
}

TEST(OneDnnMatmul, PropagatesNaNAndInf) {
  const int64_t sizes[][3] = {{17, 33, 5}, {3, 1, 17}, {5, 3, 127}, {127, 17, 1}};
  for (DType dtype : {DType::f32, DType::bf16})
    for (const auto& [n, k, p] : sizes) {
      GraphBuilder b;
      ValueRef x = b.input({2, n, k}, dtype), y = b.input({k, p}, dtype);
      check_node(b, b.op(OpKind::matmul, {x, y}, {}, {{2, n, p}, dtype}),
                 dtype == DType::f32 ? kF32Tol : kBf16Tol, Fill::specials);
    }
}

TEST(OneDnnMatmul, Bf16AccumulatesInF32) {
  GraphBuilder b;
  ValueRef x = b.input({2, 17, 127}, DType::bf16), y = b.input({127, 3}, DType::bf16);
  check_node(b, b.op(OpKind::matmul, {x, y}, {}, matmul_type({2}, 17, 3, DType::bf16)),
             kBf16Tol);
}

TEST(OneDnnMatmul, TransposedWeightIsReadInPlace) {
  // A linear layer: x [5, 17] @ permute(w [3, 17]).
  GraphBuilder b;
  ValueRef x = b.input({5, 17}), w = b.input({3, 17});
  ValueRef wt = b.op(OpKind::permute, {w}, {{AttrName::perm, IntList{1, 0}}}, {{17, 3}});
  ValueRef mm = b.op(OpKind::matmul, {x, wt}, {}, {{5, 3}});
  ASSERT_TRUE(transposed_source(b.graph, wt).has_value());
  EXPECT_EQ(*transposed_source(b.graph, wt), w);
  EXPECT_FALSE(transposed_source(b.graph, x).has_value());
  check_node(b, mm, kF32Tol);
}

TEST(OneDnnMatmul, TransposedBatchedOperandsOnBothSides) {
  GraphBuilder b;
  ValueRef a = b.input({2, 17, 5}), w = b.input({2, 3, 17});
  const IntList swap = {0, 2, 1};
  ValueRef at = b.op(OpKind::permute, {a}, {{AttrName::perm, swap}}, {{2, 5, 17}});
  ValueRef wt = b.op(OpKind::permute, {w}, {{AttrName::perm, swap}}, {{2, 17, 3}});
  ValueRef mm = b.op(OpKind::matmul, {at, wt}, {}, {{2, 5, 3}});
  check_node(b, mm, kF32Tol);
  ASSERT_TRUE(transposed_source(b.graph, at).has_value());
  ASSERT_TRUE(transposed_source(b.graph, wt).has_value());
}

TEST(OneDnnMatmul, NoLookThroughOfIntermediatesOrOtherPerms) {
  GraphBuilder b;
  ValueRef w = b.input({3, 17}), x = b.input({5, 17});
  ValueRef neg = b.op(OpKind::neg, {w}, {}, {{3, 17}});
  ValueRef neg_t = b.op(OpKind::permute, {neg}, {{AttrName::perm, IntList{1, 0}}}, {{17, 3}});
  EXPECT_FALSE(transposed_source(b.graph, neg_t).has_value());
  ValueRef mm = b.op(OpKind::matmul, {x, neg_t}, {}, {{5, 3}});
  check_node(b, mm, kF32Tol);  // reads the permute's own result

  ValueRef v = b.input({2, 3, 4});
  ValueRef batch_swap = b.op(OpKind::permute, {v}, {{AttrName::perm, IntList{1, 0, 2}}}, {{3, 2, 4}});
  EXPECT_FALSE(transposed_source(b.graph, batch_swap).has_value());
}

TEST(OneDnnMatmul, DeclinesOtherDtypesAndEmptyProducts) {
  for (DType dtype : {DType::i32, DType::i64, DType::f64}) {
    GraphBuilder b;
    ValueRef x = b.input({3, 4}, dtype), y = b.input({4, 5}, dtype);
    expect_declined(b, b.op(OpKind::matmul, {x, y}, {}, {{3, 5}, dtype}));
  }
  GraphBuilder b;
  ValueRef x = b.input({3, 0}), y = b.input({0, 5});
  expect_declined(b, b.op(OpKind::matmul, {x, y}, {}, {{3, 5}}));
}

// ---- matmul + bias epilogue -------------------------------------------

/// A fusion body computing act(p0 + p1), p1 the bias as given.
std::shared_ptr<TraceGraph> bias_body(const TensorType& product, const TensorType& bias,
                                      OpKind act, int64_t approximate = 0) {
  GraphBuilder b;
  ValueRef p0 = b.input(product.shape, product.dtype), p1 = b.input(bias.shape, bias.dtype);
  ValueRef sum = b.op(OpKind::add, {p1, p0}, {}, product);  // bias on the left on purpose
  ValueRef out = sum;
  if (act != OpKind::add) {
    AttrList attrs;
    if (act == OpKind::gelu) attrs.push_back({AttrName::approximate, approximate});
    out = b.op(act, {sum}, std::move(attrs), product);
  }
  b.graph.outputs.push_back(out);
  return std::make_shared<TraceGraph>(std::move(b.graph));
}

void check_epilogue(OpKind act, int64_t approximate, DType dtype, float tol,
                    Fill fill = Fill::uniform) {
  SCOPED_TRACE(absl::StrCat(op_name(act), " approximate=", approximate, " ", dtype_name(dtype)));
  GraphBuilder b;
  ValueRef x = b.input({2, 5, 17}, dtype), w = b.input({3, 17}, dtype), bias = b.input({3}, dtype);
  ValueRef wt = b.op(OpKind::permute, {w}, {{AttrName::perm, IntList{1, 0}}}, {{17, 3}, dtype});
  const TensorType product{{2, 5, 3}, dtype};
  ValueRef mm = b.op(OpKind::matmul, {x, wt}, {}, product);
  GraphNode fusion;
  fusion.op = OpKind::fusion;
  fusion.operands = {mm, bias};
  fusion.results.push_back(product);
  fusion.body = bias_body(product, {{3}, dtype}, act, approximate);
  ValueRef fused = b.push(std::move(fusion));
  b.graph.outputs.push_back(fused);

  const std::optional<MatmulEpilogue> epilogue = find_matmul_epilogue(b.graph, fused.node);
  ASSERT_TRUE(epilogue.has_value());
  EXPECT_EQ(epilogue->matmul, mm.node);
  EXPECT_EQ(epilogue->bias, bias);
  auto kernel = make_onednn_matmul_epilogue_kernel(b.graph, *epilogue);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_NE(*kernel, nullptr);

  const auto inputs = make_inputs(b.graph, fill);
  const Values expected = run_ref(b.graph, inputs);
  const void* operands[] = {inputs[0]->bytes(), inputs[1]->bytes() /* w, read transposed */,
                            inputs[2]->bytes()};
  HostBuffer result(product);
  void* results[] = {result.bytes()};
  (*kernel)->run(operands, results);
  expect_close(*expected[fused.node][0], result, tol);
}

TEST(OneDnnMatmulEpilogue, BiasAddAndActivation) {
  check_epilogue(OpKind::add, 0, DType::f32, kF32Tol);
  check_epilogue(OpKind::relu, 0, DType::f32, kF32Tol);
  check_epilogue(OpKind::gelu, 0, DType::f32, 1e-4f);
  check_epilogue(OpKind::gelu, 1, DType::f32, 1e-4f);
  check_epilogue(OpKind::relu, 0, DType::bf16, kBf16Tol);
}

TEST(OneDnnMatmulEpilogue, PropagatesNaNAndInf) {
  check_epilogue(OpKind::add, 0, DType::f32, kF32Tol, Fill::specials);
  check_epilogue(OpKind::relu, 0, DType::f32, kF32Tol, Fill::specials);
  check_epilogue(OpKind::gelu, 0, DType::f32, 1e-4f, Fill::specials);
  check_epilogue(OpKind::gelu, 1, DType::f32, 1e-4f, Fill::specials);
  check_epilogue(OpKind::gelu, 0, DType::bf16, kBf16Tol, Fill::specials);
}

TEST(OneDnnMatmulEpilogue, RejectsAMatmulWithOtherUses) {
  GraphBuilder b;
  ValueRef x = b.input({5, 17}), w = b.input({17, 3}), bias = b.input({3});
  const TensorType product{{5, 3}, DType::f32};
  ValueRef mm = b.op(OpKind::matmul, {x, w}, {}, product);
  GraphNode fusion;
  fusion.op = OpKind::fusion;
  fusion.operands = {mm, bias};
  fusion.results.push_back(product);
  fusion.body = bias_body(product, {{3}, DType::f32}, OpKind::relu);
  ValueRef fused = b.push(std::move(fusion));
  b.graph.outputs = {fused, mm};  // the product itself is an output too
  EXPECT_FALSE(find_matmul_epilogue(b.graph, fused.node).has_value());

  // A full-size addend is not a bias.
  GraphBuilder c;
  ValueRef cx = c.input({5, 17}), cw = c.input({17, 3}), addend = c.input({5, 3});
  ValueRef cmm = c.op(OpKind::matmul, {cx, cw}, {}, product);
  GraphNode add_fusion;
  add_fusion.op = OpKind::fusion;
  add_fusion.operands = {cmm, addend};
  add_fusion.results.push_back(product);
  add_fusion.body = bias_body(product, product, OpKind::relu);
  ValueRef cf = c.push(std::move(add_fusion));
  c.graph.outputs = {cf};
  EXPECT_FALSE(find_matmul_epilogue(c.graph, cf.node).has_value());
}

// ---- conv2d and its gradients -----------------------------------------

struct ConvCase {
  Shape input;  // N, C, H, W
  int64_t out_channels, kh, kw;
  IntList stride, padding, dilation;
  int64_t groups;
  bool bias;

  Shape weight() const { return {out_channels, input[1] / groups, kh, kw}; }
  Shape output() const {
    Shape out{input[0], out_channels, 0, 0};
    const int64_t k[] = {kh, kw};
    for (int i = 0; i < 2; ++i)
      out[2 + i] = (input[2 + i] + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1) / stride[i] + 1;
    return out;
  }
  AttrList attrs() const {
    return {{AttrName::stride, stride},
            {AttrName::padding, padding},
            {AttrName::dilation, dilation},
            {AttrName::groups, groups}};
  }
};

const ConvCase kConvCases[] = {
    {{2, 3, 9, 7}, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 4, 17, 17}, 6, 3, 3, {2, 2}, {0, 0}, {2, 2}, 2, false},  // stride, dilation, groups
    {{3, 1, 8, 8}, 17, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},    // 1x1, one input channel
    {{1, 6, 10, 11}, 6, 3, 2, {3, 2}, {1, 0}, {1, 1}, 6, true},   // depthwise; stride leaves rows
    {{2, 17, 5, 5}, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, false},
};

TEST(OneDnnConv, Forward) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const ConvCase& c : kConvCases) {
      GraphBuilder b;
      std::vector<ValueRef> operands = {b.input(c.input, dtype), b.input(c.weight(), dtype)};
      if (c.bias) operands.push_back(b.input({c.out_channels}, dtype));
      AttrList attrs = c.attrs();
      attrs.push_back({AttrName::has_bias, int64_t{c.bias}});
      ValueRef y = b.op(OpKind::conv2d, operands, attrs, {c.output(), dtype});
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol);
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol, Fill::specials);
    }
  }
}

TEST(OneDnnConv, InputGrad) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const ConvCase& c : kConvCases) {
      GraphBuilder b;
      ValueRef grad = b.input(c.output(), dtype), w = b.input(c.weight(), dtype);
      AttrList attrs = c.attrs();
      attrs.push_back({AttrName::shape, IntList(c.input.begin(), c.input.end())});
      ValueRef y = b.op(OpKind::conv2d_input_grad, {grad, w}, attrs, {c.input, dtype});
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol);
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol, Fill::specials);
    }
  }
}

TEST(OneDnnConv, WeightGrad) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const ConvCase& c : kConvCases) {
      GraphBuilder b;
      ValueRef x = b.input(c.input, dtype), grad = b.input(c.output(), dtype);
      const Shape w = c.weight();
      AttrList attrs = c.attrs();
      attrs.push_back({AttrName::shape, IntList(w.begin(), w.end())});
      // Weight gradients sum over N * OH * OW products: bf16 rounding of
      // the 17x5x5 case's result needs a little more room.
      ValueRef y = b.op(OpKind::conv2d_weight_grad, {x, grad}, attrs, {w, dtype});
      check_node(b, y, dtype == DType::f32 ? 1e-4f : 3e-2f);
      check_node(b, y, dtype == DType::f32 ? 1e-4f : 3e-2f, Fill::specials);
    }
  }
}

// ---- pooling ----------------------------------------------------------

struct PoolCase {
  Shape input;
  IntList kernel, stride, padding, dilation;
  bool ceil_mode;

  /// PyTorch's pooling_output_shape.
  Shape output() const {
    Shape out{input[0], input[1], 0, 0};
    for (int i = 0; i < 2; ++i) {
      const int64_t in = input[2 + i], span = dilation[i] * (kernel[i] - 1) + 1;
      int64_t o = (in + 2 * padding[i] - span + (ceil_mode ? stride[i] - 1 : 0)) / stride[i] + 1;
      if (ceil_mode && (o - 1) * stride[i] >= in + padding[i]) --o;
      out[2 + i] = o;
    }
    return out;
  }
  AttrList max_attrs() const {
    return {{AttrName::kernel, kernel}, {AttrName::stride, stride},
            {AttrName::padding, padding}, {AttrName::dilation, dilation},
            {AttrName::ceil_mode, int64_t{ceil_mode}}};
  }
  AttrList avg_attrs(bool include_pad) const {
    return {{AttrName::kernel, kernel}, {AttrName::stride, stride},
            {AttrName::padding, padding}, {AttrName::ceil_mode, int64_t{ceil_mode}},
            {AttrName::count_include_pad, int64_t{include_pad}}};
  }
};

const PoolCase kMaxPoolCases[] = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{1, 3, 17, 17}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},   // ceil mode, padding
    {{2, 1, 9, 11}, {3, 2}, {1, 2}, {1, 1}, {2, 1}, false},   // dilation, overlap
    {{1, 2, 7, 7}, {3, 3}, {3, 3}, {0, 0}, {1, 1}, true},     // ceil adds a partial window
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false},
};

TEST(OneDnnPool, MaxForward) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Fill fill : {Fill::uniform, Fill::ties, Fill::specials})
      for (const PoolCase& c : kMaxPoolCases) {
        GraphBuilder b;
        ValueRef x = b.input(c.input, dtype);
        check_node(b, b.op(OpKind::max_pool2d, {x}, c.max_attrs(), {c.output(), dtype}), 0.f,
                   fill);
      }
}

TEST(OneDnnPool, MaxGradPicksTheRefTap) {
  // Ties pick the first maximum; NaN and -inf take the exact path.
  for (DType dtype : {DType::f32, DType::bf16})
    for (Fill fill : {Fill::uniform, Fill::ties, Fill::specials})
      for (const PoolCase& c : kMaxPoolCases) {
        GraphBuilder b;
        ValueRef grad = b.input(c.output(), dtype), x = b.input(c.input, dtype);
        check_node(b, b.op(OpKind::max_pool2d_grad, {grad, x}, c.max_attrs(), {c.input, dtype}),
                   dtype == DType::f32 ? 1e-5f : kBf16Tol, fill);
      }
}

const PoolCase kAvgPoolCases[] = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{1, 3, 17, 17}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{2, 1, 9, 11}, {3, 2}, {1, 2}, {1, 1}, {1, 1}, false},
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},   // ceil, last window inside the padding
    {{1, 2, 7, 7}, {3, 3}, {3, 3}, {0, 0}, {1, 1}, true},   // ceil, last window past it
};

/// Whether a ceil-mode window reaches past the padded input, where
/// count_include_pad's divisor differs from oneDNN's.
bool past_padding(const PoolCase& c) {
  const Shape out = c.output();
  for (int i = 0; i < 2; ++i)
    if ((out[2 + i] - 1) * c.stride[i] + c.kernel[i] > c.input[2 + i] + 2 * c.padding[i])
      return true;
  return false;
}

TEST(OneDnnPool, AvgForward) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (bool include_pad : {false, true})
      for (const PoolCase& c : kAvgPoolCases) {
        GraphBuilder b;
        ValueRef x = b.input(c.input, dtype);
        ValueRef y = b.op(OpKind::avg_pool2d, {x}, c.avg_attrs(include_pad), {c.output(), dtype});
        if (include_pad && past_padding(c)) {
          expect_declined(b, y);
        } else {
          check_node(b, y, dtype == DType::f32 ? 1e-5f : kBf16Tol);
          check_node(b, y, dtype == DType::f32 ? 1e-5f : kBf16Tol, Fill::specials);
        }
      }
}

TEST(OneDnnPool, AvgGrad) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (bool include_pad : {false, true})
      for (const PoolCase& c : kAvgPoolCases) {
        GraphBuilder b;
        ValueRef grad = b.input(c.output(), dtype);
        AttrList attrs = c.avg_attrs(include_pad);
        attrs.push_back({AttrName::shape, IntList(c.input.begin(), c.input.end())});
        ValueRef y = b.op(OpKind::avg_pool2d_grad, {grad}, attrs, {c.input, dtype});
        if (include_pad && past_padding(c))
          expect_declined(b, y);
        else
          check_node(b, y, dtype == DType::f32 ? 1e-5f : kBf16Tol);
      }
}

// ---- softmax, log_softmax (declined), layer_norm ----------------------

TEST(OneDnnNormalization, SoftmaxAndLogSoftmaxAreDeclined) {
  // oneDNN misses the ref kernel by ~1e-6; the host kernel takes them.
  for (OpKind op : {OpKind::softmax, OpKind::log_softmax})
    for (DType dtype : {DType::f32, DType::bf16}) {
      GraphBuilder b;
      ValueRef x = b.input({3, 17}, dtype);
      expect_declined(b, b.op(op, {x}, {{AttrName::dim, int64_t{1}}}, {{3, 17}, dtype}));
    }
}

TEST(OneDnnNormalization, LayerNorm) {
  struct Case {
    Shape shape;
    int64_t normalized_ndim;
    bool weight, bias;
  };
  const Case cases[] = {{{3, 17}, 1, true, true},  {{2, 3, 17}, 2, true, false},
                        {{127, 1}, 1, false, true}, {{5, 127}, 1, false, false},
                        {{2, 3, 4, 5}, 3, true, true}};
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Case& c : cases) {
      GraphBuilder b;
      const Shape normalized(c.shape.dims().subspan(c.shape.rank() - c.normalized_ndim));
      std::vector<ValueRef> operands = {b.input(c.shape, dtype)};
      if (c.weight) operands.push_back(b.input(normalized, dtype));
      if (c.bias) operands.push_back(b.input(normalized, dtype));
      const AttrList attrs = {{AttrName::normalized_ndim, c.normalized_ndim},
                              {AttrName::eps, 1e-5},
                              {AttrName::has_weight, int64_t{c.weight}},
                              {AttrName::has_bias, int64_t{c.bias}}};
      ValueRef y = b.op(OpKind::layer_norm, operands, attrs, {c.shape, dtype});
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol);
      check_node(b, y, dtype == DType::f32 ? 1e-4f : kBf16Tol, Fill::specials);
    }
}

}  // namespace
}  // namespace mstep::cpu
