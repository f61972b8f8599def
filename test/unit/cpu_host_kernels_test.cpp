// The cpu backend's host kernels (lib/backends/cpu/HostKernels.h) against
// the ref kernels of the same ops on the same inputs: one-op TraceGraphs
// built by hand, random data, odd sizes (1, 3, 17, 1000003 elements), every
// optimizer kind and flag, results written in place over their operands,
// reductions over inner, outer, middle and all dims, and softmax over the
// last, a middle and the first dim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cpu/HostKernels.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::cpu {
namespace {

using BufferList = std::vector<std::unique_ptr<ref::HostBuffer>>;

// ---- Graphs, buffers and the two kernels -----------------------------------

/// A graph of one parameter per input and then the op; the op is the last
/// node.
TraceGraph one_op_graph(OpKind op, const std::vector<TensorType>& inputs, ResultTypes results,
                        AttrList attrs) {
  TraceGraph g;
  GraphNode node;
  node.op = op;
  node.attrs = std::move(attrs);
  node.results = std::move(results);
  for (size_t i = 0; i < inputs.size(); ++i) {
    GraphNode p;
    p.op = OpKind::parameter;
    p.attrs.push_back({AttrName::index, static_cast<int64_t>(i)});
    p.results.push_back(inputs[i]);
    g.nodes.push_back(std::move(p));
    g.input_types.push_back(inputs[i]);
    node.operands.push_back({static_cast<uint32_t>(i), 0});
  }
  g.nodes.push_back(std::move(node));
  g.outputs.push_back({static_cast<uint32_t>(inputs.size()), 0});
  return g;
}

const ref::KernelTable& ref_kernels() {
  static const ref::KernelTable table = [] {
    ref::KernelTable t{};
    ref::register_reduction_kernels(t);
    ref::register_optimizer_kernels(t);
    ref::register_loss_kernels(t);
    ref::register_nn_kernels(t);
    ref::register_shape_kernels(t);
    ref::register_scatter_kernels(t);
    return t;
  }();
  return table;
}

BufferList allocate(const ResultTypes& types) {
  BufferList out;
  for (const TensorType& t : types) out.push_back(std::make_unique<ref::HostBuffer>(t));
  return out;
}

BufferList copies(const BufferList& from) {
  BufferList out;
  for (const auto& b : from) {
    out.push_back(std::make_unique<ref::HostBuffer>(b->type()));
    std::memcpy(out.back()->bytes(), b->bytes(), b->type().bytes());
  }
  return out;
}

/// The ref kernel's results for `inputs`.
BufferList run_ref(const GraphNode& node, const BufferList& inputs) {
  BufferList outputs = allocate(node.results);
  std::vector<const ref::HostBuffer*> in;
  std::vector<ref::HostBuffer*> out;
  for (const auto& b : inputs) in.push_back(b.get());
  for (const auto& b : outputs) out.push_back(b.get());
  const ref::RefKernel kernel = ref_kernels()[static_cast<int>(node.op)];
  EXPECT_NE(kernel, nullptr) << op_name(node.op);
  const absl::Status s = kernel(ref::KernelArgs{node, in, out});
  EXPECT_TRUE(s.ok()) << s;
  return outputs;
}

/// The host kernel of the graph's last node; fails the test if there is
/// none (or on a machine without AVX-512, skips).
std::unique_ptr<CpuKernel> host_kernel(const TraceGraph& g) {
  absl::StatusOr<std::unique_ptr<CpuKernel>> k =
      make_host_kernel(KernelRequest{g, static_cast<uint32_t>(g.nodes.size() - 1)});
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return nullptr;
  EXPECT_NE(*k, nullptr) << "no host kernel for " << g.to_text();
  return std::move(*k);
}

/// The host kernel's results for `inputs`, written to fresh buffers.
BufferList run_host(CpuKernel& kernel, const GraphNode& node, const BufferList& inputs) {
  BufferList outputs = allocate(node.results);
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const auto& b : inputs) in.push_back(b->bytes());
  for (const auto& b : outputs) out.push_back(b->bytes());
  kernel.run(in.data(), out.data());
  return outputs;
}

// ---- Data and comparison ----------------------------------------------------

std::unique_ptr<ref::HostBuffer> random_f32(const Shape& shape, uint32_t seed, float lo = -1,
                                            float hi = 1) {
  auto b = std::make_unique<ref::HostBuffer>(TensorType{shape, DType::f32});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* x = b->data<float>();
  for (int64_t i = 0; i < b->numel(); ++i) x[i] = dist(rng);
  return b;
}

template <typename T>
std::unique_ptr<ref::HostBuffer> filled(const Shape& shape, DType dtype, std::vector<T> values) {
  auto b = std::make_unique<ref::HostBuffer>(TensorType{shape, dtype});
  EXPECT_EQ(static_cast<int64_t>(values.size()), b->numel());
  std::memcpy(b->bytes(), values.data(), values.size() * sizeof(T));
  return b;
}

std::unique_ptr<ref::HostBuffer> scalar_f64(double v) {
  return filled<double>({}, DType::f64, {v});
}
std::unique_ptr<ref::HostBuffer> scalar_i64(int64_t v) {
  return filled<int64_t>({}, DType::i64, {v});
}

/// Same type; floats within `rel` of each other relative to the larger
/// magnitude (NaN matching NaN, infinities equal); other dtypes bitwise.
void expect_close(const ref::HostBuffer& expected, const ref::HostBuffer& actual, double rel,
                  const std::string& what) {
  ASSERT_EQ(expected.type(), actual.type()) << what;
  const int64_t n = expected.numel();
  int failures = 0;
  auto report = [&](int64_t i, double e, double a) {
    ADD_FAILURE() << what << ": element " << i << " of " << expected.type().to_string()
                  << ": expected " << e << ", got " << a;
    return ++failures < 5;
  };
  if (expected.type().dtype == DType::f32 || expected.type().dtype == DType::f64) {
    for (int64_t i = 0; i < n; ++i) {
      const double e = expected.type().dtype == DType::f32 ? expected.data<float>()[i]
                                                           : expected.data<double>()[i];
      const double a =
          actual.type().dtype == DType::f32 ? actual.data<float>()[i] : actual.data<double>()[i];
      const bool same = (std::isnan(e) && std::isnan(a)) || e == a ||
                        std::fabs(e - a) <= rel * std::max(std::fabs(e), std::fabs(a));
      if (!same && !report(i, e, a)) return;
    }
  } else {
    EXPECT_EQ(std::memcmp(expected.bytes(), actual.bytes(), expected.type().bytes()), 0) << what;
    if (expected.type().dtype == DType::i64)
      for (int64_t i = 0; i < n; ++i)
        if (expected.data<int64_t>()[i] != actual.data<int64_t>()[i] &&
            !report(i, expected.data<int64_t>()[i], actual.data<int64_t>()[i]))
          return;
  }
}

void expect_all_close(const BufferList& expected, const BufferList& actual, double rel,
                      const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t j = 0; j < expected.size(); ++j)
    expect_close(*expected[j], *actual[j], rel, absl::StrCat(what, ", result ", j));
}

/// Builds the op, runs both kernels on `inputs` and compares.
void compare_with_ref(OpKind op, const BufferList& inputs, ResultTypes results, AttrList attrs,
                      double rel, const std::string& what) {
  std::vector<TensorType> types;
  for (const auto& b : inputs) types.push_back(b->type());
  const TraceGraph g = one_op_graph(op, types, std::move(results), std::move(attrs));
  const GraphNode& node = g.nodes.back();
  std::unique_ptr<CpuKernel> kernel = host_kernel(g);
  if (!kernel) return;
  expect_all_close(run_ref(node, inputs), run_host(*kernel, node, inputs), rel, what);
}

#define SKIP_WITHOUT_HOST_KERNELS()                                                                \
  if (!host_kernels_available()) GTEST_SKIP() << "the host kernels need AVX-512"

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

// ---- multi_tensor_update -------------------------------------------------------

enum class Rule { sgd = 0, adam = 1, adamw = 2, adadelta = 3 };

struct OptimizerCase {
  Rule rule;
  bool momentum = false, dampening = false, nesterov = false; // sgd
  bool amsgrad = false, maximize = false, weight_decay = false;
  std::optional<double> max_grad_norm; // clipping
  double norm_type = 2;
  bool return_clipped = false;
  int64_t first_step = 0; // the counters' value before the update

  std::string describe() const {
    return absl::StrCat("rule ", static_cast<int>(rule), " momentum ", momentum, " dampening ",
                        dampening, " nesterov ", nesterov, " amsgrad ", amsgrad, " maximize ",
                        maximize, " weight_decay ", weight_decay, " clip ",
                        max_grad_norm ? *max_grad_norm : -1.0, " norm ", norm_type,
                        " return_clipped ", return_clipped, " step ", first_step);
  }
};

/// A multi_tensor_update node over parameters of `sizes` and its inputs.
struct OptimizerProblem {
  TraceGraph graph;
  BufferList inputs;
  int num_params = 0, slots = 0;
  bool has_steps = false;
};

OptimizerProblem make_optimizer_problem(const OptimizerCase& c, const std::vector<int64_t>& sizes,
                                        uint32_t seed) {
  OptimizerProblem p;
  const int n = static_cast<int>(sizes.size());
  p.num_params = n;
  switch (c.rule) {
  case Rule::sgd:
    p.slots = c.momentum ? 1 : 0;
    break;
  case Rule::adam:
  case Rule::adamw:
    p.slots = c.amsgrad ? 3 : 2;
    break;
  case Rule::adadelta:
    p.slots = 2;
    break;
  }
  p.has_steps = c.rule != Rule::sgd || c.momentum;
  // Operands, segment by segment.
  for (int i = 0; i < n; ++i) p.inputs.push_back(random_f32({sizes[i]}, seed++));
  for (int i = 0; i < n; ++i) p.inputs.push_back(random_f32({sizes[i]}, seed++, -2, 2));
  for (int s = 0; s < p.slots; ++s)
    for (int i = 0; i < n; ++i) // second moments and accumulators are >= 0
      p.inputs.push_back(s == 0 && c.rule != Rule::adadelta ? random_f32({sizes[i]}, seed++)
                                                            : random_f32({sizes[i]}, seed++, 0, 1));
  if (p.has_steps)
    for (int i = 0; i < n; ++i) p.inputs.push_back(scalar_i64(c.first_step + i));
  const bool adam_like = c.rule == Rule::adam || c.rule == Rule::adamw;
  std::vector<int64_t> segments = {n, n, p.slots * n, p.has_steps ? n : 0};
  auto hyper = [&](bool present, double v) {
    segments.push_back(present);
    if (present) p.inputs.push_back(scalar_f64(v));
  };
  hyper(true, 0.01);                                  // lr
  hyper(c.momentum, 0.9);                             // momentum
  hyper(c.dampening, 0.1);                            // dampening
  hyper(adam_like, 0.9);                              // beta1
  hyper(adam_like, 0.999);                            // beta2
  hyper(c.rule == Rule::adadelta, 0.9);               // rho
  hyper(adam_like || c.rule == Rule::adadelta, 1e-6); // eps
  hyper(c.weight_decay, 0.05);                        // weight_decay

  ResultTypes results;
  for (int i = 0; i < n + p.slots * n; ++i) results.push_back(p.inputs[i < n ? i : n + i]->type());
  if (p.has_steps)
    for (int i = 0; i < n; ++i) results.push_back(TensorType{{}, DType::i64});
  const int clipped = c.max_grad_norm && c.return_clipped ? n : 0;
  for (int i = 0; i < clipped; ++i) results.push_back(p.inputs[n + i]->type());
  if (c.max_grad_norm) results.push_back(TensorType{{}, DType::f32});

  AttrList attrs = {{AttrName::kind, static_cast<int64_t>(c.rule)},
                    {AttrName::nesterov, int64_t{c.nesterov}},
                    {AttrName::amsgrad, int64_t{c.amsgrad}},
                    {AttrName::maximize, int64_t{c.maximize}},
                    {AttrName::grad_norm_type, c.norm_type},
                    {AttrName::operand_segments, IntList(segments.begin(), segments.end())},
                    {AttrName::result_segments, IntList{n, p.slots * n, p.has_steps ? n : 0,
                                                        clipped, c.max_grad_norm ? 1 : 0}}};
  if (c.max_grad_norm) attrs.push_back({AttrName::max_grad_norm, *c.max_grad_norm});
  std::vector<TensorType> types;
  for (const auto& b : p.inputs) types.push_back(b->type());
  p.graph = one_op_graph(OpKind::multi_tensor_update, types, std::move(results), std::move(attrs));
  return p;
}

/// Two steps of the host kernel, once into fresh buffers and once in place
/// (new params, states and steps over their operands, as the memory plan
/// and donated parameters do), against two steps of the ref kernel.
void compare_optimizer(const OptimizerCase& c, const std::vector<int64_t>& sizes) {
  SCOPED_TRACE(c.describe());
  OptimizerProblem p = make_optimizer_problem(c, sizes, 100);
  const GraphNode& node = p.graph.nodes.back();
  std::unique_ptr<CpuKernel> kernel = host_kernel(p.graph);
  if (!kernel) return;
  const int n = p.num_params;
  const int updated = n + p.slots * n + (p.has_steps ? n : 0); // results paired with operands
  // Operand position of the j-th paired result: params, states, steps.
  auto paired_operand = [&](int j) { return j < n ? j : n + j; };

  // The same operations in the same order as the ref kernel: bitwise
  // equal, except that the clipping norm's f64 sums add in another order.
  const double rel = c.max_grad_norm ? 1e-6 : 0;
  BufferList ref_inputs = copies(p.inputs), host_inputs = copies(p.inputs),
             in_place = copies(p.inputs);
  BufferList in_place_results = allocate(node.results);
  for (int step = 0; step < 2; ++step) {
    const std::string what = absl::StrCat("step ", step);
    const BufferList expected = run_ref(node, ref_inputs);
    expect_all_close(expected, run_host(*kernel, node, host_inputs), rel, what);
    // In place: paired results are the operands' own buffers.
    std::vector<const void*> in;
    std::vector<void*> out;
    for (const auto& b : in_place) in.push_back(b->bytes());
    for (int j = 0; j < static_cast<int>(node.results.size()); ++j)
      out.push_back(j < updated ? in_place[paired_operand(j)]->bytes()
                                : in_place_results[j]->bytes());
    kernel->run(in.data(), out.data());
    for (int j = 0; j < static_cast<int>(node.results.size()); ++j)
      expect_close(*expected[j], j < updated ? *in_place[paired_operand(j)] : *in_place_results[j],
                   rel, absl::StrCat(what, " in place, result ", j));
    // Next step: the updated values become the operands; a new lr shows
    // the kernel reads its hyperparameters on every run.
    for (int j = 0; j < updated; ++j) {
      std::memcpy(ref_inputs[paired_operand(j)]->bytes(), expected[j]->bytes(),
                  expected[j]->type().bytes());
      std::memcpy(host_inputs[paired_operand(j)]->bytes(), expected[j]->bytes(),
                  expected[j]->type().bytes());
    }
    const int lr = n + n + p.slots * n + (p.has_steps ? n : 0);
    for (BufferList* b : {&ref_inputs, &host_inputs, &in_place}) (*b)[lr]->data<double>()[0] = 0.02;
  }
}

const std::vector<int64_t> kOddSizes = {1, 3, 17, 1000003};

TEST(CpuHostOptimizerTest, SgdEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (bool momentum : {false, true})
    for (bool dampening : {false, true})
      for (bool nesterov : {false, true})
        for (bool weight_decay : {false, true})
          for (bool maximize : {false, true}) {
            if ((dampening || nesterov) && !momentum) continue;
            if (nesterov && dampening) continue;
            OptimizerCase c{Rule::sgd};
            c.momentum = momentum;
            c.dampening = dampening;
            c.nesterov = nesterov;
            c.weight_decay = weight_decay;
            c.maximize = maximize;
            compare_optimizer(c, {1, 3, 17, 1003});
          }
}

TEST(CpuHostOptimizerTest, AdamAndAdamWEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (Rule rule : {Rule::adam, Rule::adamw})
    for (bool amsgrad : {false, true})
      for (bool weight_decay : {false, true})
        for (bool maximize : {false, true}) {
          OptimizerCase c{rule};
          c.amsgrad = amsgrad;
          c.weight_decay = weight_decay;
          c.maximize = maximize;
          compare_optimizer(c, {1, 3, 17, 1003});
        }
}

TEST(CpuHostOptimizerTest, AdadeltaEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (bool weight_decay : {false, true})
    for (bool maximize : {false, true}) {
      OptimizerCase c{Rule::adadelta};
      c.weight_decay = weight_decay;
      c.maximize = maximize;
      compare_optimizer(c, {1, 3, 17, 1003});
    }
}

TEST(CpuHostOptimizerTest, OddSizesUpToAMillionElements) {
  SKIP_WITHOUT_HOST_KERNELS();
  OptimizerCase adamw{Rule::adamw};
  adamw.weight_decay = true;
  compare_optimizer(adamw, kOddSizes);
  OptimizerCase sgd{Rule::sgd};
  sgd.momentum = sgd.nesterov = true;
  compare_optimizer(sgd, kOddSizes);
  compare_optimizer(adamw, {1000003});
}

TEST(CpuHostOptimizerTest, GradientClippingEveryNormType) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()})
    for (bool return_clipped : {false, true})
      for (double max_norm : {0.5, 1e9}) { // clips / does not clip
        OptimizerCase c{Rule::adamw};
        c.weight_decay = true;
        c.max_grad_norm = max_norm;
        c.norm_type = norm_type;
        c.return_clipped = return_clipped;
        compare_optimizer(c, {1, 3, 17, 1003});
        compare_optimizer(c, {17}); // one parameter: its norm is the total
        if (return_clipped && max_norm < 1) compare_optimizer(c, kOddSizes);
      }
  OptimizerCase sgd{Rule::sgd};
  sgd.momentum = sgd.dampening = true;
  sgd.max_grad_norm = 1.0;
  compare_optimizer(sgd, {3, 1000003});
}

TEST(CpuHostOptimizerTest, NonFloat32ParametersKeepTheRefKernel) {
  OptimizerCase c{Rule::sgd};
  OptimizerProblem p = make_optimizer_problem(c, {3}, 1);
  p.graph.nodes[0].results[0].dtype = DType::f64;
  p.graph.nodes[1].results[0].dtype = DType::f64;
  p.graph.nodes.back().results[0].dtype = DType::f64;
  auto k =
      make_host_kernel(KernelRequest{p.graph, static_cast<uint32_t>(p.graph.nodes.size() - 1)});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, nullptr);
}

// ---- softmax, log_softmax -------------------------------------------------------

constexpr OpKind kSoftmaxes[] = {OpKind::softmax, OpKind::log_softmax};

void compare_softmax(OpKind op, const ref::HostBuffer& input, int64_t dim) {
  BufferList inputs;
  inputs.push_back(std::make_unique<ref::HostBuffer>(input.type()));
  std::memcpy(inputs[0]->bytes(), input.bytes(), input.type().bytes());
  // Both compute in f64 and round once: only the order of the f64 sum's
  // additions differs.
  compare_with_ref(op, inputs, {input.type()}, {{AttrName::dim, dim}}, 1e-6,
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

TEST(CpuHostSoftmaxTest, OtherDtypesKeepTheRefKernel) {
  for (DType dtype : {DType::bf16, DType::f64}) {
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
std::unique_ptr<ref::HostBuffer> random_index(const Shape& shape, int64_t size, uint32_t seed) {
  const DType dtype = std::is_same_v<I, int32_t> ? DType::i32 : DType::i64;
  auto b = std::make_unique<ref::HostBuffer>(TensorType{shape, dtype});
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
