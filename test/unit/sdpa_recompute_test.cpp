// SdpaOptions::recompute = false (FusedSDPA's recompute_mode off): the
// forward `sdpa` node keeps the pre-dropout probabilities as a hidden last
// result and `sdpa_grad` reads them. Checked here: gradients equal those of
// recompute mode (causal, masks, valid_seq_len padding, dropout), a
// finite-difference check, and that the mode really changes the graph.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "mstep/ir/Node.h"
#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using testing::gradcheck;
using V = std::vector<Tensor>;
using Grads = std::vector<std::vector<double>>;

/// Deterministic pseudo-random f64 values in [-1, 1).
Tensor filled(Shape s, int seed) {
  std::vector<double> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.731 * i + 1.37 * seed);
  return from_vector(v, s);
}

/// Gradients of sum(out * w) for every floating input of `in` (q, k, v and
/// a float mask as the fourth input), converted to `dtype`. With dropout
/// the seed is fixed, so both modes draw the same keep mask.
Grads grads(const V& in, SdpaOptions o, DType dtype, bool recompute) {
  V leaves;
  for (const Tensor& t : in)
    leaves.push_back(is_floating(t.dtype()) ? to(t, dtype).detach().requires_grad_() : t);
  if (leaves.size() > 3) o.attn_mask = leaves[3];
  o.recompute = recompute;
  manual_seed(21);
  Tensor out = scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], o);
  sum(out * to(filled(out.shape(), 99), dtype)).backward();
  mark_step();
  Grads g;
  for (const Tensor& t : leaves)
    if (is_floating(t.dtype())) g.push_back(t.grad().to_vector<double>());
  return g;
}

struct Case {
  const char* name;
  std::function<V()> inputs;
  std::function<SdpaOptions()> options;
};

/// Bool mask [3, 4] whose row 2 attends to nothing.
Tensor bool_mask() {
  return from_vector(std::vector<bool>{true, false, true, true,  //
                                       false, true, false, true, //
                                       false, false, false, false},
                     {3, 4});
}

SdpaOptions valid_len(PaddingSide side) {
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int64_t>{2, 4, 0}, {3});
  o.padding_side = side;
  return o;
}

const Case kCases[] = {
    {"causal",
     [] {
       return V{filled({2, 2, 4, 3}, 1), filled({2, 2, 5, 3}, 2), filled({2, 2, 5, 2}, 3)};
     },
     [] {
       SdpaOptions o;
       o.is_causal = true;
       return o;
     }},
    {"float_mask_with_grad",
     [] {
       return V{filled({2, 2, 3, 4}, 4), filled({2, 2, 5, 4}, 5), filled({2, 2, 5, 3}, 6),
                filled({2, 1, 1, 5}, 7)};
     },
     [] { return SdpaOptions{}; }},
    {"bool_mask",
     [] {
       return V{filled({2, 3, 4}, 8), filled({2, 4, 4}, 9), filled({2, 4, 3}, 10)};
     },
     [] {
       SdpaOptions o;
       o.attn_mask = bool_mask();
       return o;
     }},
    {"valid_len_right",
     [] {
       return V{filled({3, 4, 3}, 11), filled({3, 4, 3}, 12), filled({3, 4, 2}, 13)};
     },
     [] { return valid_len(PaddingSide::right); }},
    {"valid_len_left_causal",
     [] {
       return V{filled({3, 4, 3}, 14), filled({3, 4, 3}, 15), filled({3, 4, 2}, 16)};
     },
     [] {
       SdpaOptions o = valid_len(PaddingSide::left);
       o.is_causal = true;
       return o;
     }},
    {"valid_len_left_float_mask",
     [] {
       return V{filled({3, 2, 4, 3}, 17), filled({3, 2, 4, 3}, 18), filled({3, 2, 4, 2}, 19),
                filled({4, 4}, 20)};
     },
     [] { return valid_len(PaddingSide::left); }},
    {"dropout",
     [] {
       return V{filled({2, 6, 4}, 21), filled({2, 7, 4}, 22), filled({2, 7, 4}, 23)};
     },
     [] {
       SdpaOptions o;
       o.dropout_p = 0.3;
       return o;
     }},
    {"dropout_valid_len_float_mask",
     [] {
       return V{filled({3, 4, 3}, 24), filled({3, 4, 3}, 25), filled({3, 4, 2}, 26),
                filled({3, 4, 4}, 27)};
     },
     [] {
       SdpaOptions o = valid_len(PaddingSide::right);
       o.dropout_p = 0.4;
       return o;
     }},
};

TEST(SdpaRecompute, SavedProbabilitiesGiveTheRecomputedGradients) {
  for (const Case& c : kCases)
    for (auto [dtype, tol] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 1e-5}}) {
      const V in = c.inputs();
      const Grads want = grads(in, c.options(), dtype, /*recompute=*/true);
      const Grads got = grads(in, c.options(), dtype, /*recompute=*/false);
      ASSERT_EQ(got.size(), want.size()) << c.name;
      double norm = 0;
      for (size_t i = 0; i < want.size(); ++i)
        for (size_t j = 0; j < want[i].size(); ++j) {
          norm += std::fabs(want[i][j]);
          EXPECT_NEAR(got[i][j], want[i][j], tol * (1 + std::fabs(want[i][j])))
              << c.name << " " << dtype_name(dtype) << " input " << i << " element " << j;
        }
      EXPECT_GT(norm, 0) << c.name; // a real gradient, not all zeros
    }
}

TEST(SdpaRecompute, DropoutGradientsMatchAcrossAStepBetweenForwardAndBackward) {
  // The saved probabilities outlive the forward's step in the autograd graph.
  auto run = [](bool recompute, bool step_between) {
    Tensor q = filled({2, 5, 4}, 30).requires_grad_(), k = filled({2, 6, 4}, 31).requires_grad_();
    Tensor v = filled({2, 6, 3}, 32).requires_grad_();
    SdpaOptions o;
    o.dropout_p = 0.5;
    o.recompute = recompute;
    manual_seed(8);
    Tensor out = scaled_dot_product_attention(q, k, v, o);
    if (step_between) mark_step();
    sum(out * filled(out.shape(), 33)).backward();
    mark_step();
    return Grads{q.grad().to_vector<double>(), k.grad().to_vector<double>(),
                 v.grad().to_vector<double>()};
  };
  const Grads want = run(true, false);
  for (bool step_between : {false, true}) {
    const Grads got = run(false, step_between);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < want[i].size(); ++j)
        EXPECT_NEAR(got[i][j], want[i][j], 1e-12) << step_between << " " << i << " " << j;
  }
}

/// f(q, k, v[, float mask]) with recompute = false.
testing::OpFn saved_probs_attention(SdpaOptions o) {
  return [o](const V& in) {
    SdpaOptions opts = o;
    opts.recompute = false;
    if (in.size() > 3) opts.attn_mask = in[3];
    return scaled_dot_product_attention(in[0], in[1], in[2], opts);
  };
}

TEST(SdpaRecompute, GradcheckWithSavedProbabilities) {
  for (const Case& c : kCases) {
    if (c.options().dropout_p > 0) continue; // finite differences redraw the mask
    EXPECT_TRUE(gradcheck(saved_probs_attention(c.options()), c.inputs())) << c.name;
  }
}

// ---- The mode is structural -------------------------------------------------

/// The trace node that produced the pending tensor `t`.
const Node& node_of(const Tensor& t) {
  EXPECT_TRUE(t.is_pending());
  return *t.impl()->pending().node;
}

/// The first node of kind `op` reachable from `from` through operands.
const Node* find_node(const Node& from, OpKind op) {
  if (from.op() == op) return &from;
  for (const Value& v : from.operands())
    if (const Node* n = find_node(*v.node, op)) return n;
  return nullptr;
}

TEST(SdpaRecompute, SavingAddsAHiddenResultAndChangesTheGraph) {
  Tensor q = filled({2, 3, 4}, 40).requires_grad_(), k = filled({2, 5, 4}, 41);
  Tensor v = filled({2, 5, 2}, 42);
  SdpaOptions o;
  o.recompute = true;
  Tensor kept = scaled_dot_product_attention(q, k, v, o);
  o.recompute = false;
  Tensor saved = scaled_dot_product_attention(q, k, v, o);
  const Node &a = node_of(kept), &b = node_of(saved);
  ASSERT_EQ(b.op(), OpKind::sdpa);
  EXPECT_EQ(a.results().size(), 1u);
  ASSERT_EQ(b.results().size(), 2u); // out, saved probabilities [2, 3, 5]
  EXPECT_EQ(b.result(1), (TensorType{Shape{2, 3, 5}, DType::f64}));
  EXPECT_EQ(attr_int(a.attrs(), AttrName::recompute), 1);
  EXPECT_EQ(attr_int(b.attrs(), AttrName::recompute), 0);
  EXPECT_NE(a.structural_hash(), b.structural_hash());

  // The backward's sdpa_grad takes the saved result as its last operand.
  sum(saved).backward();
  const Node* grad = find_node(node_of(q.grad()), OpKind::sdpa_grad);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->operands().size(), 5u); // grad_out, q, k, v, probs
  EXPECT_EQ(grad->operands()[4].node.get(), &b);
  EXPECT_EQ(grad->operands()[4].index, 1u);
  mark_step();
}

TEST(SdpaRecompute, TheTwoModesCompileDifferentGraphs) {
  auto step = [](bool recompute) {
    Tensor q = filled({1, 3, 7, 5}, 43).requires_grad_();
    SdpaOptions o;
    o.recompute = recompute;
    sum(scaled_dot_product_attention(q, filled({1, 3, 7, 5}, 44), filled({1, 3, 7, 5}, 45), o))
        .backward();
    mark_step();
  };
  reset_metrics();
  step(true);
  step(false);
  EXPECT_EQ(metrics().cache_misses, 2);
  step(true);
  step(false);
  EXPECT_EQ(metrics().cache_misses, 2);
  EXPECT_EQ(metrics().cache_hits, 2);
}

TEST(SdpaRecompute, NothingIsSavedWithoutABackward) {
  Tensor q = filled({2, 3, 4}, 46), k = filled({2, 5, 4}, 47), v = filled({2, 5, 2}, 48);
  SdpaOptions o;
  o.recompute = false;
  // No input requires grad, then grad mode off: one result, recompute = 1.
  Tensor plain = scaled_dot_product_attention(q, k, v, o);
  q.requires_grad_();
  Tensor no_grad;
  {
    NoGradGuard guard;
    no_grad = scaled_dot_product_attention(q, k, v, o);
  }
  for (const Tensor& t : {plain, no_grad}) {
    EXPECT_EQ(node_of(t).results().size(), 1u);
    EXPECT_EQ(attr_int(node_of(t).attrs(), AttrName::recompute), 1);
  }
  mark_step();
}

TEST(SdpaRecompute, ReturnedProbabilitiesStayPostDropout) {
  // The user's probabilities (after dropout) and mask keep their places;
  // the saved pre-dropout probabilities come last and are not returned.
  auto run = [](bool recompute) {
    Tensor q = filled({2, 4, 3}, 49).requires_grad_();
    SdpaOptions o;
    o.dropout_p = 0.5;
    o.return_attn_probs = true;
    o.return_dropout_mask = true;
    o.recompute = recompute;
    manual_seed(3);
    SdpaResult r = fused_sdpa(q, filled({2, 5, 3}, 50), filled({2, 5, 3}, 51), o);
    EXPECT_EQ(node_of(r.out).results().size(), recompute ? 3u : 4u);
    EXPECT_EQ(r.attn_probs.impl()->pending().index, 1u);
    EXPECT_EQ(r.dropout_mask.impl()->pending().index, 2u);
    sum(r.out).backward();
    mark_step();
    return std::pair{r.attn_probs.to_vector<double>(), q.grad().to_vector<double>()};
  };
  auto [probs_a, dq_a] = run(true);
  auto [probs_b, dq_b] = run(false);
  EXPECT_EQ(probs_a, probs_b);
  int64_t dropped = 0;
  for (double p : probs_b) dropped += p == 0;
  EXPECT_GT(dropped, 0); // post-dropout: some zeros
  for (size_t i = 0; i < dq_a.size(); ++i) EXPECT_NEAR(dq_b[i], dq_a[i], 1e-12) << i;
}

} // namespace
} // namespace mstep
