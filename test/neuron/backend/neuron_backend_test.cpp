// The `neuron` backend's runtime half: opaque HBM (only copy_in/copy_out
// reach it), NaN in fresh buffers, clear errors for wrong buffers, ops
// the lowering cannot tile run as counted host fallbacks, and the ones it
// can run as tile programs (no fallback counted).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lib/backends/neuron/NeuronBackend.h"
#include "mstep/mstep.h"

namespace mstep::neuron {
namespace {

constexpr Device kNeuron{DeviceType::neuron, 0};

Backend& neuron_backend() {
  absl::StatusOr<Backend*> b = BackendRegistry::get("neuron");
  EXPECT_TRUE(b.ok()) << b.status();
  return **b;
}

TEST(NeuronBackend, HbmIsOpaque) {
  Backend& b = neuron_backend();
  const TensorType t{Shape({4}), DType::f32};
  float host[4] = {1, 2, 3, 4};
  EXPECT_EQ(b.wrap_host(t, host, [] {}).status().code(), absl::StatusCode::kUnimplemented);
  absl::StatusOr<BufferPtr> buf = b.allocate(t);
  ASSERT_TRUE(buf.ok());
  float fresh[4];
  ASSERT_TRUE(b.copy_out(**buf, fresh, sizeof fresh).ok());
  for (float v : fresh) EXPECT_TRUE(std::isnan(v)); // nothing wrote it
  ASSERT_TRUE(b.copy_in(**buf, host, sizeof host).ok());
  float back[4] = {};
  ASSERT_TRUE(b.copy_out(**buf, back, sizeof back).ok());
  EXPECT_EQ(std::memcmp(host, back, sizeof host), 0);
}

TEST(NeuronBackend, CopiesCheckSizeAndDevice) {
  Backend& b = neuron_backend();
  absl::StatusOr<BufferPtr> buf = b.allocate(TensorType{Shape({4}), DType::f32});
  ASSERT_TRUE(buf.ok());
  float host[3];
  const absl::Status s = b.copy_out(**buf, host, sizeof host);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("neuron copy_out of 12 bytes with f32[4] (16 bytes)"));
  absl::StatusOr<Backend*> ref = BackendRegistry::get("ref");
  ASSERT_TRUE(ref.ok());
  absl::StatusOr<BufferPtr> other = (*ref)->allocate(TensorType{Shape({4}), DType::f32});
  ASSERT_TRUE(other.ok());
  float four[4] = {};
  EXPECT_THAT(std::string(b.copy_in(**other, four, sizeof four).message()),
              ::testing::HasSubstr("neuron copy_in of a ref"));
}

TEST(NeuronBackend, EveryOpIsACountedHostFallback) {
  reset_metrics();
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, std::nullopt, kNeuron);
  Tensor y = log(x) * 2.0f + x; // log has no engine lowering: a fallback
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], std::log(float(i + 1)) * 2.0f + float(i + 1));
  EXPECT_GE(metrics().fallbacks, 1);
  EXPECT_EQ(y.device().type, DeviceType::neuron);
}

// exp, mul, add on 128 x 4 elements, and a row operand broadcast against
// them: lowered (tile programs on the simulator), so no op is counted as a
// fallback.
TEST(NeuronBackend, TileableOpsRunAsTilePrograms) {
  std::vector<float> v(512);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 7) * 0.25f - 0.5f;
  reset_metrics();
  Tensor x = from_vector(v, {128, 4}, std::nullopt, kNeuron);
  Tensor y = exp(x) * x + x;
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(got[i], std::exp(v[i]) * v[i] + v[i], 1e-6f * (1 + std::abs(got[i])));
  EXPECT_EQ(metrics().fallbacks, 0);

  reset_metrics();
  Tensor row = from_vector(std::vector<float>{1, 2, 3, 4}, {4}, std::nullopt, kNeuron);
  const std::vector<float> bgot = (exp(x) * row).to_vector<float>();
  ASSERT_EQ(bgot.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(bgot[i], std::exp(v[i]) * float(i % 4 + 1), 1e-6f * (1 + std::abs(bgot[i])));
  EXPECT_EQ(metrics().fallbacks, 0);
}

// softmax, layer_norm (weight, bias), a last-axis mean, log_softmax and a
// bf16 cast through the API: every op lowered (no fallback), the values as
// the ref backend's within fp32 statistics' error.
TEST(NeuronBackend, NormsSoftmaxAndReductionsRunAsTilePrograms) {
  const int64_t rows = 200, cols = 96; // 200 rows: a ragged second row tile
  std::vector<float> xv(rows * cols), wv(cols), bv(cols);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 37) % 101) * 0.05f - 2.0f;
  for (int64_t j = 0; j < cols; ++j) {
    wv[j] = 0.5f + float(j % 5) * 0.25f;
    bv[j] = float(j % 3) - 1.0f;
  }
  auto compute = [&](Device d) {
    Tensor x = from_vector(xv, {rows, cols}, std::nullopt, d);
    Tensor w = from_vector(wv, {cols}, std::nullopt, d);
    Tensor b = from_vector(bv, {cols}, std::nullopt, d);
    Tensor n = layer_norm(softmax(x, 1) * 50.0f, {cols}, w, b);
    Tensor out = log_softmax(n, 1) - n.mean({1}, true);
    return std::make_pair(out.to(DType::bf16).to(DType::f32).to_vector<float>(),
                          rms_norm(x, {cols}, w).to_vector<float>());
  };
  const auto want = compute(Device{DeviceType::ref, 0});
  reset_metrics();
  const auto got = compute(kNeuron);
  EXPECT_EQ(metrics().fallbacks, 0);
  ASSERT_EQ(got.first.size(), want.first.size());
  for (size_t i = 0; i < got.first.size(); ++i) {
    // bf16 output (2^-8 relative; values may round either way of a tie).
    ASSERT_NEAR(got.first[i], want.first[i], std::ldexp(1.0f, -7) * std::abs(want.first[i]) + 1e-4f)
        << i;
    ASSERT_NEAR(got.second[i], want.second[i], 1e-5f * (1 + std::abs(want.second[i]))) << i;
  }
}

// A graph of one tileable op (3 elements: the tail piece) and one without an
// engine lowering: the executable lowers the
// one (with a cost-model estimate) and counts only the other as a fallback.
TEST(NeuronBackend, LoweringStatsAndFallbackCount) {
  const TensorType t{Shape({3}), DType::f32};
  TraceGraph g;
  g.input_types = {t, t};
  for (int64_t i = 0; i < 2; ++i) {
    GraphNode p{OpKind::parameter, {}, {}, {g.input_types[i]}, nullptr};
    p.attrs.push_back({AttrName::index, AttrValue(i)});
    g.nodes.push_back(p);
  }
  g.nodes.push_back(GraphNode{OpKind::tanh, {}, {ValueRef{0, 0}}, {t}, nullptr});
  g.nodes.push_back(GraphNode{OpKind::log, {}, {ValueRef{1, 0}}, {t}, nullptr}); // no lowering
  g.outputs = {ValueRef{2, 0}, ValueRef{3, 0}};
  absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(g);
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_EQ((*exe)->host_fallbacks().size(), 1u);
  // The fallback says why (MSTEP_LOG_FALLBACK=1 prints it): the op and the lowering's refusal.
  const HostFallbackOp& f = (*exe)->host_fallbacks()[0];
  EXPECT_EQ(f.op, OpKind::log);
  EXPECT_NE(f.reason.find("log"), std::string::npos) << f.reason;
  EXPECT_NE(f.reason.find("no engine lowering"), std::string::npos) << f.reason;
  EXPECT_EQ((*exe)->num_kernels(), 2u);
  const NeuronLoweringStats stats = lowering_stats(**exe);
  EXPECT_EQ(stats.lowered_ops, 1u);
  EXPECT_GT(stats.estimated_ns, 0);
}

// A softmax -> layer_norm -> last-axis sum graph (and a cast): before the
// last-axis lowerings each of these ops was a host fallback; now all four
// are lowered, each with a cost-model estimate.
TEST(NeuronBackend, LoweringStatsCountTheLastAxisFamilies) {
  const TensorType t{Shape({256, 64}), DType::f32}, row{Shape({64}), DType::f32};
  TraceGraph g;
  g.input_types = {t, row, row};
  for (int64_t i = 0; i < 3; ++i) {
    GraphNode p{OpKind::parameter, {}, {}, {g.input_types[i]}, nullptr};
    p.attrs.push_back({AttrName::index, AttrValue(i)});
    g.nodes.push_back(p);
  }
  GraphNode sm{OpKind::softmax, {}, {ValueRef{0, 0}}, {t}, nullptr}; // %3
  sm.attrs.push_back({AttrName::dim, AttrValue(int64_t{1})});
  g.nodes.push_back(sm);
  GraphNode ln{
      OpKind::layer_norm, {}, {ValueRef{3, 0}, ValueRef{1, 0}, ValueRef{2, 0}}, {t}, nullptr}; // %4
  ln.attrs = {{AttrName::normalized_ndim, AttrValue(int64_t{1})},
              {AttrName::eps, AttrValue(1e-5)},
              {AttrName::has_weight, AttrValue(int64_t{1})},
              {AttrName::has_bias, AttrValue(int64_t{1})}};
  g.nodes.push_back(ln);
  GraphNode sum{
      OpKind::sum, {}, {ValueRef{4, 0}}, {TensorType{Shape({256}), DType::f32}}, nullptr}; // %5
  sum.attrs = {{AttrName::dims, AttrValue(IntList{1})}, {AttrName::keepdim, AttrValue(int64_t{0})}};
  g.nodes.push_back(sum);
  GraphNode cast{OpKind::cast, {}, {ValueRef{4, 0}}, {TensorType{t.shape, DType::bf16}}, nullptr};
  cast.attrs.push_back({AttrName::dtype, AttrValue(DType::bf16)});
  g.nodes.push_back(cast); // %6
  g.outputs = {ValueRef{5, 0}, ValueRef{6, 0}};
  absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(g);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->host_fallbacks().size(), 0u);
  const NeuronLoweringStats stats = lowering_stats(**exe);
  EXPECT_EQ(stats.lowered_ops, 4u);
  EXPECT_GT(stats.estimated_ns, 0);
}

// Copies: a reshape feeding an op needs no program (its result is the
// operand's bytes); a permute is a DMA program; a reshape that is a graph
// output is copied by its program (outputs never share HBM).
TEST(NeuronBackend, CopiesAreDmaProgramsOrAliases) {
  const TensorType x{Shape({4, 6}), DType::f32}, flat{Shape({24}), DType::f32},
      xt{Shape({6, 4}), DType::f32};
  TraceGraph g;
  g.input_types = {x};
  GraphNode p{OpKind::parameter, {}, {}, {x}, nullptr};
  p.attrs.push_back({AttrName::index, AttrValue(int64_t{0})});
  g.nodes.push_back(p);                                                                 // %0
  g.nodes.push_back(GraphNode{OpKind::reshape, {}, {ValueRef{0, 0}}, {flat}, nullptr}); // %1
  g.nodes.push_back(GraphNode{OpKind::tanh, {}, {ValueRef{1, 0}}, {flat}, nullptr});    // %2
  GraphNode t{OpKind::permute, {}, {ValueRef{0, 0}}, {xt}, nullptr};
  t.attrs.push_back({AttrName::perm, AttrValue(IntList{1, 0})});
  g.nodes.push_back(t);                                                                 // %3
  g.nodes.push_back(GraphNode{OpKind::reshape, {}, {ValueRef{0, 0}}, {flat}, nullptr}); // %4
  g.outputs = {ValueRef{2, 0}, ValueRef{3, 0}, ValueRef{4, 0}};
  absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(g);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->host_fallbacks().size(), 0u);
  const NeuronLoweringStats stats = lowering_stats(**exe);
  EXPECT_EQ(stats.aliased_ops, 1u); // %1
  EXPECT_EQ(stats.lowered_ops, 3u); // tanh, the permute, the output reshape

  Backend& b = neuron_backend();
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = 0.1f * float(i) - 1.0f;
  absl::StatusOr<BufferPtr> in = b.allocate(x);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(b.copy_in(**in, v.data(), 24 * sizeof(float)).ok());
  absl::StatusOr<std::vector<BufferPtr>> out = (*exe)->run({*in});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> th(24), tr(24), re(24);
  ASSERT_TRUE(b.copy_out(*(*out)[0], th.data(), 24 * sizeof(float)).ok());
  ASSERT_TRUE(b.copy_out(*(*out)[1], tr.data(), 24 * sizeof(float)).ok());
  ASSERT_TRUE(b.copy_out(*(*out)[2], re.data(), 24 * sizeof(float)).ok());
  for (int i = 0; i < 24; ++i) {
    EXPECT_NEAR(th[i], std::tanh(v[i]), 1e-6f) << i;
    EXPECT_EQ(tr[(i % 6) * 4 + i / 6], v[i]) << i; // x[r][c] at xt[c][r]
    EXPECT_EQ(re[i], v[i]) << i;
  }
  // The input buffer changes after the run; the outputs keep their values.
  std::vector<float> zeros(24, 0.0f);
  ASSERT_TRUE(b.copy_in(**in, zeros.data(), 24 * sizeof(float)).ok());
  ASSERT_TRUE(b.copy_out(*(*out)[2], re.data(), 24 * sizeof(float)).ok());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(re[i], v[i]) << i;
}

// matmul(transpose(X), B), X [K, M], and matmul(A, transpose(Y)), Y [N,
// K]: the matmul reads X as its A^T (no transposes at all) and Y as its
// B^T (transposed on chip); a transpose gets no program when all its uses
// are such matmuls. One also read by another op, or returned, keeps its
// program. Values against a double-precision product (ragged K, M and
// two column blocks of N). With `out_t` the graph returns transpose(C)
// (a weight gradient's form): the matmul stores C^T = B^T A^T itself and
// that transpose gets no program either.
TEST(NeuronBackend, MatmulReadsATransposesOperandAsItIs) {
  const int64_t k = 200, m = 150, n = 600;
  struct Case {
    bool a_t, b_t;
    int extra; // 0 none, 1 the first transpose also feeds a tanh, 2 it is also returned
    bool out_t = false;
  };
  for (const Case cs :
       {Case{true, false, 0}, Case{false, true, 0}, Case{true, true, 0}, Case{true, false, 1},
        Case{false, true, 2}, Case{true, false, 0, true}, Case{false, true, 0, true},
        Case{false, false, 0, true}, Case{true, true, 0, true}}) {
    SCOPED_TRACE(testing::Message() << cs.a_t << cs.b_t << cs.extra << cs.out_t);
    const TensorType a{Shape({m, k}), DType::f32}, b{Shape({k, n}), DType::f32},
        c{Shape({m, n}), DType::f32};
    auto swapped = [](const TensorType& t) {
      return TensorType{Shape({t.shape[1], t.shape[0]}), t.dtype};
    };
    TraceGraph g;
    g.input_types = {cs.a_t ? swapped(a) : a, cs.b_t ? swapped(b) : b};
    for (int64_t i = 0; i < 2; ++i) {
      GraphNode p{OpKind::parameter, {}, {}, {g.input_types[i]}, nullptr};
      p.attrs.push_back({AttrName::index, AttrValue(i)});
      g.nodes.push_back(p); // %0, %1
    }
    ValueRef operand[2] = {ValueRef{0, 0}, ValueRef{1, 0}};
    std::vector<uint32_t> transposes;
    for (int i = 0; i < 2; ++i) {
      if (!(i == 0 ? cs.a_t : cs.b_t)) continue;
      GraphNode t{OpKind::permute, {}, {operand[i]}, {i == 0 ? a : b}, nullptr};
      t.attrs.push_back({AttrName::perm, AttrValue(IntList{1, 0})});
      transposes.push_back(static_cast<uint32_t>(g.nodes.size()));
      operand[i] = ValueRef{transposes.back(), 0};
      g.nodes.push_back(t);
    }
    g.nodes.push_back(GraphNode{OpKind::matmul, {}, {operand[0], operand[1]}, {c}, nullptr});
    if (cs.out_t) {
      GraphNode t{OpKind::permute, {}, {ValueRef{static_cast<uint32_t>(g.nodes.size() - 1), 0}},
                  {swapped(c)}, nullptr};
      t.attrs.push_back({AttrName::perm, AttrValue(IntList{1, 0})});
      g.nodes.push_back(t);
    }
    g.outputs = {ValueRef{static_cast<uint32_t>(g.nodes.size() - 1), 0}};
    const ValueRef first{transposes.empty() ? 0u : transposes[0], 0};
    if (cs.extra == 1) {
      g.nodes.push_back(
          GraphNode{OpKind::tanh, {}, {first}, {g.nodes[transposes[0]].results[0]}, nullptr});
      g.outputs.push_back(ValueRef{static_cast<uint32_t>(g.nodes.size() - 1), 0});
    }
    if (cs.extra == 2) g.outputs.push_back(first);
    absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(g);
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_EQ((*exe)->host_fallbacks().size(), 0u);
    const NeuronLoweringStats stats = lowering_stats(**exe);
    EXPECT_EQ(stats.transposes_read_by_matmuls,
              (cs.extra == 0 ? transposes.size() : 0u) + (cs.out_t ? 1u : 0u));
    EXPECT_EQ(stats.lowered_ops, cs.extra == 0 ? 1u : cs.extra == 1 ? 3u : 2u);

    // Logical A [M, K] and B [K, N]; the inputs hold them or their transposes.
    std::vector<float> av(m * k), bv(k * n), in0(m * k), in1(k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        av[i * k + p] = float((i * 37 + p * 11) % 101 - 50) / 64.0f;
        in0[cs.a_t ? p * m + i : i * k + p] = av[i * k + p];
      }
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) {
        bv[p * n + j] = float((p * 53 + j * 7) % 89 - 44) / 32.0f;
        in1[cs.b_t ? j * k + p : p * n + j] = bv[p * n + j];
      }
    Backend& be = neuron_backend();
    absl::StatusOr<BufferPtr> x0 = be.allocate(g.input_types[0]),
                              x1 = be.allocate(g.input_types[1]);
    ASSERT_TRUE(x0.ok() && x1.ok());
    ASSERT_TRUE(be.copy_in(**x0, in0.data(), in0.size() * sizeof(float)).ok());
    ASSERT_TRUE(be.copy_in(**x1, in1.data(), in1.size() * sizeof(float)).ok());
    absl::StatusOr<std::vector<BufferPtr>> out = (*exe)->run({*x0, *x1});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> got(m * n);
    ASSERT_TRUE(be.copy_out(*(*out)[0], got.data(), got.size() * sizeof(float)).ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, abs_sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          ref += double(av[i * k + p]) * double(bv[p * n + j]);
          abs_sum += std::fabs(double(av[i * k + p]) * double(bv[p * n + j]));
        }
        // fp32 accumulation: at most K ulps of the absolute sum.
        ASSERT_NEAR(got[cs.out_t ? j * m + i : i * n + j], ref, k * std::ldexp(1.0, -24) * abs_sum)
            << i << "," << j;
      }
    if (cs.extra == 2) { // the returned transpose holds B
      std::vector<float> tr(k * n);
      ASSERT_TRUE(be.copy_out(*(*out)[1], tr.data(), tr.size() * sizeof(float)).ok());
      EXPECT_EQ(tr, bv);
    }
  }
}

} // namespace
} // namespace mstep::neuron
