// Attention at the heads' strides (issue 19; NeuronBackend.cpp's
// fold_head_permutes_into_attention): sdpa and sdpa_grad fed by head
// permutes [B, S, H, D] -> [B, H, S, D] and returning through the inverse
// permute, as GPT-mini's step does. With the fold, the attention programs
// read q, k, v, grad_out and write out, dq, dk, dv in the [B, S, H, D]
// bytes and the permutes run no program. Checked, per case, against the
// ref backend's run of the same graph (the oracle the conformance suite
// checks against PyTorch; tolerances AttentionRefCheck.h's, the
// conformance suite's for sdpa) and bit for bit against the neuron run
// with the fold off (MSTEP_NEURON_HEAD_STRIDES=0: the permutes run as DMA
// programs; a permute moves bytes exactly, so nothing may differ). Causal,
// bool attn_mask and valid_seq_len cases; a permute with another consumer
// (or a result also returned) keeps its program.
#include <cstdlib>
#include <cstring>

#include "AttentionRefCheck.h"
#include "LoweringTestUtil.h"
#include "lib/backends/neuron/AttentionLowering.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {
namespace {

using testing::Buffers;
using testing::param;

struct Case {
  int64_t batch = 2, heads = 3, len = 150, dim = 64;
  DType dtype = DType::bf16;
  bool causal = true, mask = false, lengths = false;
  bool backward = true;
  /// The q permute also feeds a tanh that is returned: it keeps its program.
  bool q_read_elsewhere = false;
  /// The forward's output is also returned as it is: written contiguous.
  bool out_returned = false;
};

/// Sets MSTEP_NEURON_HEAD_STRIDES for its lifetime.
class FoldSwitch {
public:
  explicit FoldSwitch(bool on) {
    if (!on) setenv("MSTEP_NEURON_HEAD_STRIDES", "0", 1);
  }
  ~FoldSwitch() { unsetenv("MSTEP_NEURON_HEAD_STRIDES"); }
};

GraphNode permuted(uint32_t src, const TensorType& t) {
  const Shape& s = t.shape;
  GraphNode p =
      testing::op(OpKind::permute, {src}, TensorType{Shape({s[0], s[2], s[1], s[3]}), t.dtype});
  p.attrs.push_back({AttrName::perm, AttrValue(IntList{0, 2, 1, 3})});
  return p;
}

struct Built {
  TraceGraph graph;
  Buffers inputs;
  size_t foldable = 0; ///< head permutes the fold should leave without a program
};

/// Inputs x_q, x_k, x_v [B, S, H, D] (grad [B, S, H, D]) [, mask [S, S]
/// bool] [, lengths i32 [B]]; q, k, v their head permutes; outputs
/// permute(sdpa(q, k, v)) (and permute(dq), permute(dk), permute(dv)).
Built build(const Case& c) {
  Built b;
  TraceGraph& g = b.graph;
  const TensorType x{Shape({c.batch, c.len, c.heads, c.dim}), c.dtype};
  auto input = [&](const TensorType& t) {
    g.input_types.push_back(t);
    g.nodes.push_back(param(static_cast<int64_t>(g.input_types.size() - 1), t));
    return static_cast<uint32_t>(g.nodes.size() - 1);
  };
  auto add = [&](GraphNode n) {
    g.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(g.nodes.size() - 1);
  };
  unsigned seed = 7;
  const uint32_t xq = input(x), xk = input(x), xv = input(x);
  for (int i = 0; i < 3; ++i)
    b.inputs.push_back(testing::buffer(x, testing::random_values(x.numel(), -2, 2, seed++)));
  const uint32_t xg = c.backward ? input(x) : 0;
  if (c.backward)
    b.inputs.push_back(testing::buffer(x, testing::random_values(x.numel(), -1, 1, seed++)));
  uint32_t mask = 0, lengths = 0;
  if (c.mask) {
    const TensorType t{Shape({c.len, c.len}), DType::boolean};
    mask = input(t);
    auto m = std::make_shared<host::HostBuffer>(t);
    std::vector<float> r = testing::random_values(t.numel(), 0, 1, seed++);
    for (int64_t i = 0; i < t.numel(); ++i) m->data<bool>()[i] = r[i] < 0.7f || i % 151 == 0;
    b.inputs.push_back(m);
  }
  if (c.lengths) {
    const TensorType t{Shape({c.batch}), DType::i32};
    lengths = input(t);
    auto l = std::make_shared<host::HostBuffer>(t);
    for (int64_t i = 0; i < c.batch; ++i)
      l->data<int32_t>()[i] = static_cast<int32_t>(c.len - 40 * i);
    b.inputs.push_back(l);
  }
  const uint32_t q = add(permuted(xq, x)), k = add(permuted(xk, x)), v = add(permuted(xv, x));
  const TensorType heads = g.nodes[q].results[0];
  auto attention = [&](OpKind kind, std::vector<uint32_t> operands, size_t results) {
    GraphNode n{kind, {}, {}, {}, nullptr};
    n.attrs = testing::sdpa_attrs(c.causal, 0.125, c.mask, c.lengths, false);
    if (c.mask) operands.push_back(mask);
    if (c.lengths) operands.push_back(lengths);
    for (uint32_t o : operands) n.operands.push_back(ValueRef{o, 0});
    n.results.assign(results, heads);
    return add(std::move(n));
  };
  const uint32_t out = attention(OpKind::sdpa, {q, k, v}, 1);
  g.outputs.push_back(ValueRef{add(permuted(out, heads)), 0});
  b.foldable = 4; // q, k, v, out
  if (c.out_returned) {
    g.outputs.push_back(ValueRef{out, 0});
    b.foldable -= 1;
  }
  if (c.backward) {
    const uint32_t dout = add(permuted(xg, x));
    const uint32_t grad = attention(OpKind::sdpa_grad, {dout, q, k, v}, 3);
    for (uint32_t r = 0; r < 3; ++r) {
      GraphNode p = permuted(grad, heads);
      p.operands[0].index = r;
      g.outputs.push_back(ValueRef{add(std::move(p)), 0});
    }
    b.foldable += 4; // grad_out, dq, dk, dv
  }
  if (c.q_read_elsewhere) {
    g.outputs.push_back(ValueRef{add(testing::op(OpKind::tanh, {q}, heads)), 0});
    b.foldable -= 1;
  }
  return b;
}

absl::StatusOr<Buffers> run_neuron(Executable& exe, const Buffers& in) {
  absl::StatusOr<Backend*> be = BackendRegistry::get("neuron");
  if (!be.ok()) return be.status();
  std::vector<BufferPtr> args;
  for (const auto& h : in) {
    MSTEP_ASSIGN_OR_RETURN(BufferPtr d, (*be)->allocate(h->type()));
    MSTEP_RETURN_IF_ERROR((*be)->copy_in(*d, h->bytes(), h->type().bytes()));
    args.push_back(std::move(d));
  }
  MSTEP_ASSIGN_OR_RETURN(std::vector<BufferPtr> outs, exe.run(args));
  Buffers got;
  for (const BufferPtr& o : outs) {
    got.push_back(std::make_shared<host::HostBuffer>(o->type()));
    MSTEP_RETURN_IF_ERROR((*be)->copy_out(*o, got.back()->bytes(), o->type().bytes()));
  }
  return got;
}

void check(const Case& c) {
  const Built b = build(c);
  absl::StatusOr<std::unique_ptr<Executable>> ref = ref::make_ref_executable(b.graph);
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::vector<BufferPtr> ref_args(b.inputs.begin(), b.inputs.end());
  absl::StatusOr<std::vector<BufferPtr>> want = (*ref)->run(ref_args);
  ASSERT_TRUE(want.ok()) << want.status();

  Buffers got[2]; // fold off, on
  for (int on = 0; on < 2; ++on) {
    FoldSwitch fold(on);
    absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(b.graph);
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_EQ((*exe)->host_fallbacks().size(), 0u);
    const NeuronLoweringStats stats = lowering_stats(**exe);
    const size_t attention = c.backward ? 2 : 1, permutes = c.backward ? 8 : 4;
    const size_t tanh = c.q_read_elsewhere ? 1 : 0;
    EXPECT_EQ(stats.head_permutes_folded, on ? b.foldable : 0u);
    EXPECT_EQ(stats.lowered_ops, attention + tanh + permutes - (on ? b.foldable : 0u));
    absl::StatusOr<Buffers> r = run_neuron(**exe, b.inputs);
    ASSERT_TRUE(r.ok()) << r.status();
    got[on] = *std::move(r);
  }
  ASSERT_EQ(got[0].size(), want->size());
  ASSERT_EQ(got[1].size(), want->size());
  for (size_t o = 0; o < want->size(); ++o) {
    SCOPED_TRACE(::testing::Message() << "output " << o);
    const auto& w = static_cast<const host::HostBuffer&>(*(*want)[o]);
    testing::expect_attention_matches(w, *got[1][o], c.dtype, "folded");
    ASSERT_EQ(got[1][o]->type(), got[0][o]->type());
    EXPECT_EQ(std::memcmp(got[1][o]->bytes(), got[0][o]->bytes(), w.type().bytes()), 0)
        << "the fold changed bits";
  }
}

TEST(NeuronAttentionHeadStrides, Bf16CausalForwardAndBackward) { check({}); }

TEST(NeuronAttentionHeadStrides, F32NotCausalBoolMask) {
  check({.heads = 2, .len = 200, .dim = 32, .dtype = DType::f32, .causal = false, .mask = true});
}

TEST(NeuronAttentionHeadStrides, F32CausalValidSeqLen) {
  check({.heads = 2, .len = 130, .dim = 64, .dtype = DType::f32, .lengths = true});
}

TEST(NeuronAttentionHeadStrides, PermuteWithAnotherConsumerStillRuns) {
  check({.q_read_elsewhere = true});
}

TEST(NeuronAttentionHeadStrides, ReturnedResultIsWrittenContiguous) {
  check({.backward = false, .out_returned = true});
}

/// [B, S, H, D] <-> [B, H, S, D] of a host buffer (dims of the source).
std::shared_ptr<host::HostBuffer> swap12(const host::HostBuffer& in) {
  const Shape& s = in.type().shape;
  auto out = std::make_shared<host::HostBuffer>(
      TensorType{Shape({s[0], s[2], s[1], s[3]}), in.type().dtype});
  const size_t es = element_size(in.type().dtype);
  for (int64_t a = 0; a < s[0]; ++a)
    for (int64_t b = 0; b < s[1]; ++b)
      for (int64_t c = 0; c < s[2]; ++c)
        std::memcpy(out->bytes() + (((a * s[2] + c) * s[1] + b) * s[3]) * es,
                    in.bytes() + (((a * s[1] + b) * s[2] + c) * s[3]) * es, s[3] * es);
  return out;
}

// The programs alone, one operand or result at a time at the heads'
// strides (Bf16 [2, 3, 150, 64]: ragged Q tiles, odd heads): the results
// (permuted back on the host where strided) are the contiguous program's
// bits.
TEST(NeuronAttentionHeadStrides, EachOperandAndResultAlone) {
  const TensorType t{Shape({2, 3, 150, 64}), DType::bf16};
  for (const bool backward : {false, true}) {
    GraphNode n{backward ? OpKind::sdpa_grad : OpKind::sdpa, {}, {}, {t}, nullptr};
    if (backward) n.results = {t, t, t};
    n.attrs = testing::sdpa_attrs(true, 0.125, false, false, false);
    const size_t operands = backward ? 4 : 3, results = n.results.size();
    Buffers in;
    for (size_t i = 0; i < operands; ++i)
      in.push_back(testing::buffer(t, testing::random_values(t.numel(), -1, 1, 30 + i)));
    absl::StatusOr<Buffers> plain = testing::run_lowered_all(n, in);
    ASSERT_TRUE(plain.ok()) << plain.status();
    for (size_t which = 0; which < operands + results; ++which) {
      SCOPED_TRACE(::testing::Message() << (backward ? "sdpa_grad " : "sdpa ")
                                        << (which < operands ? "operand " : "result ")
                                        << (which < operands ? which : which - operands));
      AttentionHeadStrides strided;
      strided.operands.assign(operands, false);
      strided.results.assign(results, false);
      Buffers args = in;
      if (which < operands) {
        strided.operands[which] = true;
        args[which] = swap12(*in[which]);
      } else {
        strided.results[which - operands] = true;
      }
      absl::StatusOr<LoweredOp> low =
          lower_attention_at_head_strides(n, std::vector<TensorType>(operands, t), strided);
      ASSERT_TRUE(low.ok()) << low.status();
      Simulator sim;
      absl::StatusOr<Buffers> got =
          testing::run_all(n, args, [&](auto& i, auto& o) { return run_lowered(*low, sim, i, o); });
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t r = 0; r < results; ++r) {
        const bool permuted = which == operands + r;
        std::shared_ptr<host::HostBuffer> g = (*got)[r];
        if (permuted) { // stored as [B, L, H, D]: its bytes, read back as [B, H, L, D]
          auto view =
              std::make_shared<host::HostBuffer>(TensorType{Shape({2, 150, 3, 64}), DType::bf16});
          std::memcpy(view->bytes(), g->bytes(), t.bytes());
          g = swap12(*view);
        }
        EXPECT_EQ(std::memcmp(g->bytes(), (*plain)[r]->bytes(), t.bytes()), 0) << "result " << r;
      }
    }
  }
}

TEST(NeuronAttentionHeadStrides, FlagsOnMaskOrLengthsAreRefused) {
  const TensorType t{Shape({2, 3, 64, 32}), DType::f32}, m{Shape({64, 64}), DType::boolean};
  GraphNode n{OpKind::sdpa, {}, {}, {t}, nullptr};
  n.attrs = testing::sdpa_attrs(false, 0.125, true, false, false);
  AttentionHeadStrides strided{{false, false, false, true}, {}};
  absl::StatusOr<LoweredOp> low = lower_attention_at_head_strides(n, {t, t, t, m}, strided);
  ASSERT_FALSE(low.ok());
  EXPECT_THAT(std::string(low.status().message()),
              ::testing::HasSubstr("only q, k, v and grad_out can be read heads-strided"));
}
} // namespace
} // namespace mstep::neuron
