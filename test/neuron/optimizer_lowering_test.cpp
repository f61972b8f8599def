// OptimizerLowering.cpp: multi_tensor_update on the simulated NeuronCore
// against ref's kernel over several steps (results fed back as the next
// step's parameters, states and counts): every rule and flag, ragged and
// chunked sizes, bf16, clip_grad_norm_; refusals.
#include <cmath>
#include <optional>

#include "LoweringTestUtil.h"
#include "mstep/ir/MultiTensorUpdate.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;
using multi_tensor_update::Rule;

struct Case {
  Rule rule = Rule::sgd;
  bool momentum = false, dampening = false, nesterov = false;
  bool amsgrad = false, maximize = false, weight_decay = false;
  std::optional<double> max_grad_norm;
  bool return_clipped = false;
  DType dtype = DType::f32;
  std::string describe() const {
    return absl::StrCat("rule ", static_cast<int>(rule), " momentum ", momentum, " dampening ",
                        dampening, " nesterov ", nesterov, " amsgrad ", amsgrad, " maximize ",
                        maximize, " wd ", weight_decay, " clip ",
                        max_grad_norm ? *max_grad_norm : -1.0, " clipped ", return_clipped, " ",
                        dtype_name(dtype));
  }
};

struct Problem {
  GraphNode node;
  Buffers inputs;
  int n = 0, slots = 0;
  bool steps = false;
};

Problem make_problem(const Case& c, const std::vector<int64_t>& sizes) {
  Problem p;
  const int n = static_cast<int>(sizes.size());
  p.n = n;
  const bool adam = c.rule == Rule::adam || c.rule == Rule::adamw;
  p.slots = c.rule == Rule::sgd ? (c.momentum ? 1 : 0) : adam ? (c.amsgrad ? 3 : 2) : 2;
  p.steps = c.rule != Rule::sgd || c.momentum;
  unsigned seed = 50;
  auto tensor = [&](int64_t size, float lo, float hi) {
    return buffer(TensorType{Shape({size}), c.dtype}, random_values(size, lo, hi, seed++));
  };
  for (int i = 0; i < n; ++i) p.inputs.push_back(tensor(sizes[i], -1, 1));
  for (int i = 0; i < n; ++i) p.inputs.push_back(tensor(sizes[i], -2, 2));
  for (int s = 0; s < p.slots; ++s)
    for (int i = 0; i < n; ++i) // second moments and accumulators are >= 0
      p.inputs.push_back(s == 0 && c.rule != Rule::adadelta ? tensor(sizes[i], -1, 1)
                                                            : tensor(sizes[i], 0, 1));
  if (p.steps)
    for (int i = 0; i < n; ++i) p.inputs.push_back(scalar_of<int64_t>(i, DType::i64));
  IntList segments = {n, n, p.slots * n, p.steps ? n : 0};
  auto hyper = [&](bool present, double v) {
    segments.push_back(present);
    if (present) p.inputs.push_back(scalar_of<double>(v, DType::f64));
  };
  hyper(true, 0.01);
  hyper(c.momentum, 0.9);
  hyper(c.dampening, 0.1);
  hyper(adam, 0.9);
  hyper(adam, 0.999);
  hyper(c.rule == Rule::adadelta, 0.9);
  hyper(adam || c.rule == Rule::adadelta, 1e-6);
  hyper(c.weight_decay, 0.05);
  GraphNode node{OpKind::multi_tensor_update, {}, {}, {}, nullptr};
  for (int i = 0; i < n + p.slots * n; ++i)
    node.results.push_back(p.inputs[i < n ? i : n + i]->type());
  if (p.steps)
    for (int i = 0; i < n; ++i) node.results.push_back(TensorType{Shape({}), DType::i64});
  const int clipped = c.max_grad_norm && c.return_clipped ? n : 0;
  for (int i = 0; i < clipped; ++i) node.results.push_back(p.inputs[n + i]->type());
  if (c.max_grad_norm) node.results.push_back(TensorType{Shape({}), c.dtype});
  node.attrs = {{AttrName::kind, AttrValue(static_cast<int64_t>(c.rule))},
                {AttrName::nesterov, AttrValue(int64_t{c.nesterov})},
                {AttrName::amsgrad, AttrValue(int64_t{c.amsgrad})},
                {AttrName::maximize, AttrValue(int64_t{c.maximize})},
                {AttrName::grad_norm_type, AttrValue(2.0)},
                {AttrName::operand_segments, AttrValue(segments)},
                {AttrName::result_segments, AttrValue(IntList{n, p.slots * n, p.steps ? n : 0,
                                                              clipped, c.max_grad_norm ? 1 : 0})}};
  if (c.max_grad_norm) node.attrs.push_back({AttrName::max_grad_norm, AttrValue(*c.max_grad_norm)});
  p.node = std::move(node);
  return p;
}

/// Three steps on neuron and on ref, each fed its own results. f32
/// without clipping: the same operations in the same order, so the same
/// bits; with clipping the norm's sums are fp32 here and double in ref
/// (relative 1e-6); bf16: a few units in the last place.
void check(const Case& c, const std::vector<int64_t>& sizes = {1000, 130, 128 * 40 + 5}) {
  SCOPED_TRACE(c.describe());
  Problem p = make_problem(c, sizes);
  Buffers mine = p.inputs, theirs = p.inputs;
  const int paired = p.n + p.slots * p.n + (p.steps ? p.n : 0);
  auto operand_of = [&](int j) { return j < p.n ? j : p.n + j; }; // params, states, steps
  const double tol = c.dtype == DType::bf16 ? 2e-2 : c.max_grad_norm ? 1e-6 : 0;
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<Buffers> got = run_lowered_all(p.node, mine), want = run_ref(p.node, theirs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t r = 0; r < p.node.results.size(); ++r) {
      const host::HostBuffer& g = *(*got)[r];
      const host::HostBuffer& w = *(*want)[r];
      if (g.type().dtype == DType::i64) {
        ASSERT_EQ(g.data<int64_t>()[0], w.data<int64_t>()[0]) << "steps, result " << r;
        continue;
      }
      for (int64_t i = 0; i < g.numel(); ++i) {
        const double a = at(g, i), b = at(w, i);
        if (tol == 0)
          ASSERT_EQ(a, b) << "step " << step << " result " << r << " element " << i;
        else
          ASSERT_NEAR(a, b, tol * std::max(1.0, std::abs(b)))
              << "step " << step << " result " << r << " element " << i;
      }
    }
    for (int j = 0; j < paired; ++j) {
      mine[operand_of(j)] = (*got)[j];
      theirs[operand_of(j)] = (*want)[j];
    }
  }
}

TEST(NeuronOptimizerLowering, SgdPlain) { check({.rule = Rule::sgd}); }
TEST(NeuronOptimizerLowering, SgdMomentumDampeningNesterovWeightDecay) {
  check({.rule = Rule::sgd, .momentum = true, .dampening = true, .weight_decay = true});
  check({.rule = Rule::sgd, .momentum = true, .nesterov = true, .maximize = true});
}
TEST(NeuronOptimizerLowering, Adam) {
  check({.rule = Rule::adam});
  check({.rule = Rule::adam, .amsgrad = true, .maximize = true, .weight_decay = true});
}
TEST(NeuronOptimizerLowering, AdamW) { check({.rule = Rule::adamw, .weight_decay = true}); }
TEST(NeuronOptimizerLowering, Adadelta) {
  check({.rule = Rule::adadelta, .maximize = true, .weight_decay = true});
}
TEST(NeuronOptimizerLowering, ClipGradNorm) {
  // 0.5 clips (the gradients' norm is far larger), 1e6 does not.
  check({.rule = Rule::adamw, .weight_decay = true, .max_grad_norm = 0.5, .return_clipped = true});
  check({.rule = Rule::sgd, .momentum = true, .max_grad_norm = 1e6});
  check({.rule = Rule::adadelta, .max_grad_norm = 0.5}, {77}); // one parameter
}
TEST(NeuronOptimizerLowering, Bf16) {
  check({.rule = Rule::adam, .weight_decay = true, .dtype = DType::bf16});
  check({.rule = Rule::sgd, .momentum = true, .max_grad_norm = 0.5, .dtype = DType::bf16});
}
// 128 * 3000 elements: [128, 3000] in chunks.
TEST(NeuronOptimizerLowering, LargeParameterIsChunked) {
  check({.rule = Rule::adam, .amsgrad = true}, {128 * 3000, 3});
}

TEST(NeuronOptimizerLowering, Refusals) {
  Problem p = make_problem({.rule = Rule::sgd, .max_grad_norm = 1.0}, {10, 20});
  std::vector<TensorType> types;
  for (const auto& b : p.inputs) types.push_back(b->type());
  for (Attr& a : p.node.attrs)
    if (a.name == AttrName::grad_norm_type) a.value = AttrValue(1.0);
  EXPECT_THAT(refusal(p.node, types), HasSubstr("norm type 1: only 2"));
  Problem q = make_problem({.rule = Rule::sgd}, {10, 20});
  types.clear();
  for (const auto& b : q.inputs) types.push_back(b->type());
  types[1].dtype = DType::bf16; // a parameter of another dtype
  EXPECT_THAT(refusal(q.node, types), HasSubstr("parameter #1"));
}

} // namespace
} // namespace mstep::neuron
