// Conformance cases: linear algebra, convolution and pooling,
// softmax/norms/dropout, attention, losses and optimizer steps.
#pragma once

#include <limits>
#include <utility>
#include <vector>

#include "test/unit/conformance/ConformanceCase.h"

namespace mstep::conformance {

// ---- linear algebra, convolution, pooling --------------------------------------

inline void add_linalg_cases(CaseTable& t) {
  auto mm = binary([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  t.add("matmul", {arg({17, 33}), arg({33, 7})}, mm);
  t.add("matmul", {arg({1, 1}), arg({1, 1})}, mm);
  t.add("matmul_vec_mat", {arg({7}), arg({7, 5})}, mm);
  t.add("matmul_mat_vec", {arg({3, 7}), arg({7})}, mm);
  t.add("matmul_dot", {arg({7}), arg({7})}, mm);
  t.add("matmul_batched_broadcast", {arg({2, 3, 4, 5}), arg({5, 6})}, mm);
  t.add("matmul_batch_dims_broadcast", {arg({2, 1, 4, 5}), arg({3, 5, 2})}, mm);
  t.add("matmul", {arg({3, 1, 5}), arg({3, 5, 1})}, mm);
  t.add("matmul", {arg({64, 257}), arg({257, 33})}, mm, 2.0);
  t.add("matmul", {arg({17, 33}, DType::bf16), arg({33, 7}, DType::bf16)}, mm);
  t.add("matmul", {arg({64, 257}, DType::bf16), arg({257, 33}, DType::bf16)}, mm, 2.0);
  t.add("matmul_transposed_operand", {arg({33, 17}), arg({33, 7})},
        binary([](const Tensor& a, const Tensor& b) { return matmul(transpose(a, 0, 1), b); }));
  auto bm = binary([](const Tensor& a, const Tensor& b) { return bmm(a, b); });
  t.add("bmm", {arg({3, 4, 5}), arg({3, 5, 6})}, bm);
  t.add("bmm", {arg({1, 7, 1}), arg({1, 1, 7})}, bm);
  t.add("bmm", {arg({4, 17, 33}), arg({4, 33, 9})}, bm);
  t.add("bmm", {arg({2, 7, 5}, DType::bf16), arg({2, 5, 3}, DType::bf16)}, bm);
  auto lin =
      ternary([](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); });
  auto lin_nobias = binary([](const Tensor& x, const Tensor& w) { return linear(x, w); });
  t.add("linear", {arg({7, 5}), arg({3, 5}), arg({3})}, lin);
  t.add("linear", {arg({2, 3, 5}), arg({4, 5}), arg({4})}, lin);
  t.add("linear", {arg({1}), arg({7, 1}), arg({7})}, lin);
  t.add("linear_no_bias", {arg({2, 3, 5}), arg({4, 5})}, lin_nobias);
  t.add("linear", {arg({64, 257}), arg({33, 257}), arg({33})}, lin, 2.0);
  t.add("linear", {arg({17, 33}, DType::bf16), arg({9, 33}, DType::bf16), arg({9}, DType::bf16)},
        lin);
  // Linear followed by activations: what a matmul + eltwise post-op fusion sees.
  t.add("linear_gelu", {arg({17, 33}), arg({9, 33}), arg({9})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return gelu(linear(x, w, b));
        }));
  t.add("linear_relu_scale", {arg({17, 33}), arg({9, 33}), arg({9})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return relu(linear(x, w, b)) * 0.5 + 1.0;
        }));
}

inline void add_conv_pool_cases(CaseTable& t) {
  using Ints = std::vector<int64_t>;
  struct Conv {
    const char* label;
    Shape input, weight;
    bool bias;
    Ints stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Conv> convs = {
      {"basic", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {1}, {0}, {1}, 1},
      {"stride2_pad1", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {2}, {1}, {1}, 1},
      {"stride_pad_per_dim", {1, 2, 8, 5}, {3, 2, 3, 2}, false, {2, 1}, {1, 0}, {1}, 1},
      {"dilation2", {2, 3, 9, 9}, {2, 3, 3, 3}, true, {1}, {2}, {2}, 1},
      {"groups2", {1, 4, 6, 5}, {6, 2, 3, 2}, true, {1}, {1}, {1}, 2},
      {"depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, false, {1}, {1}, {1}, 3},
      {"pointwise", {1, 5, 1, 7}, {4, 5, 1, 1}, true, {1}, {0}, {1}, 1},
      {"larger", {4, 16, 17, 17}, {8, 16, 3, 3}, true, {1}, {1}, {1}, 1},
  };
  for (const Conv& c : convs) {
    std::vector<InputSpec> in = {arg(c.input), arg(c.weight)};
    if (c.bias) in.push_back(arg({c.weight[0]}));
    t.add(
        absl::StrCat("conv2d_", c.label), in,
        [c](const Inputs& x, Device) {
          return Outputs{conv2d(x[0], x[1], c.bias ? x[2] : Tensor(), c.stride, c.padding,
                                c.dilation, c.groups)};
        },
        c.input.numel() > 10000 ? 2.0 : 1.0);
  }
  t.add("conv2d_basic", {arg({2, 3, 7, 9}, DType::bf16), arg({4, 3, 3, 3}, DType::bf16)},
        binary([](const Tensor& x, const Tensor& w) { return conv2d(x, w); }), 2.0);
  t.add("conv2d_relu_pool", {arg({2, 3, 8, 8}), arg({4, 3, 3, 3}), arg({4})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return max_pool2d(relu(conv2d(x, w, b, {1}, {1})), {2});
        }));

  struct Pool {
    const char* label;
    Shape input;
    Ints kernel, stride, padding, dilation;
    bool ceil_mode, count_include_pad;
  };
  const std::vector<Pool> pools = {
      {"k2", {2, 3, 8, 8}, {2}, {}, {0}, {1}, false, true},
      {"k3_s1_p1", {1, 2, 7, 9}, {3}, {1}, {1}, {1}, false, true},
      {"k3_s2_ceil", {1, 2, 7, 9}, {3}, {2}, {0}, {1}, true, true},
      {"k2x3_s2x1_p1x0", {2, 1, 7, 5}, {2, 3}, {2, 1}, {1, 0}, {1}, false, true},
      {"k3_s2_p1_no_pad_count", {1, 3, 9, 9}, {3}, {2}, {1}, {1}, false, false},
      {"k3_s2_p1_ceil_no_pad_count", {1, 3, 8, 8}, {3}, {2}, {1}, {1}, true, false},
      {"k1", {1, 1, 1, 7}, {1}, {}, {0}, {1}, false, true},
      {"larger_k3_s2", {4, 16, 33, 33}, {3}, {2}, {1}, {1}, false, true},
  };
  for (const Pool& p : pools) {
    t.add(absl::StrCat("max_pool2d_", p.label), {arg(p.input)}, unary([p](const Tensor& x) {
            return max_pool2d(x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
          }));
    t.add(absl::StrCat("avg_pool2d_", p.label), {arg(p.input)}, unary([p](const Tensor& x) {
            return avg_pool2d(x, p.kernel, p.stride, p.padding, p.ceil_mode, p.count_include_pad);
          }));
  }
  t.add("max_pool2d_dilation2", {arg({1, 2, 9, 9})},
        unary([](const Tensor& x) { return max_pool2d(x, {3}, {1}, {0}, {2}); }));
  t.add("max_pool2d_k2", {arg({2, 3, 8, 8}, DType::bf16)},
        unary([](const Tensor& x) { return max_pool2d(x, {2}); }));
  t.add("avg_pool2d_k2", {arg({2, 3, 8, 8}, DType::bf16)},
        unary([](const Tensor& x) { return avg_pool2d(x, {2}); }));
}

// ---- softmax, norms, dropout --------------------------------------------------

inline void add_nn_cases(CaseTable& t) {
  const std::vector<std::pair<Shape, int64_t>> softmax_layouts = {
      {{7}, 0}, {{3, 1, 5}, 1}, {{3, 1, 5}, -1}, {{17, 33}, 0}, {{17, 33}, -1}, {{64, 257}, -1}};
  for (const auto& [s, dim] : softmax_layouts) {
    const std::string d = dim < 0 ? "dlast" : absl::StrCat("d", dim);
    t.add("softmax_" + d, {arg(s)}, unary([dim](const Tensor& x) { return softmax(x, dim); }));
    t.add("log_softmax_" + d, {arg(s)},
          unary([dim](const Tensor& x) { return log_softmax(x, dim); }));
  }
  t.add("softmax_dlast", {arg({17, 33}, DType::bf16)},
        unary([](const Tensor& x) { return softmax(x, -1); }));
  t.add("log_softmax_dlast", {arg({17, 33}, DType::bf16)},
        unary([](const Tensor& x) { return log_softmax(x, -1); }));
  // Large logits: the max subtraction matters.
  t.add("softmax_scaled_logits", {arg({17, 33})},
        unary([](const Tensor& x) { return softmax(x * 80.0, -1); }));

  auto ln = ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(x, w.shape().dims(), w, b);
  });
  t.add("layer_norm", {arg({17, 33}), arg({33}), arg({33})}, ln);
  t.add("layer_norm", {arg({3, 1, 5}), arg({1, 5}), arg({1, 5})}, ln);
  t.add("layer_norm", {arg({2, 3, 7}), arg({3, 7}), arg({3, 7})}, ln);
  t.add("layer_norm", {arg({64, 257}), arg({257}), arg({257})}, ln, 2.0);
  t.add("layer_norm", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16), arg({33}, DType::bf16)},
        ln, 2.0);
  t.add("layer_norm_no_affine", {arg({17, 33})},
        unary([](const Tensor& x) { return layer_norm(x, {33}); }));
  t.add("layer_norm_eps_0_1", {arg({7}), arg({7}), arg({7})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return layer_norm(x, {7}, w, b, 0.1);
        }));
  auto rms = binary(
      [](const Tensor& x, const Tensor& w) { return rms_norm(x, w.shape().dims(), w, 1e-6); });
  t.add("rms_norm", {arg({17, 33}), arg({33})}, rms);
  t.add("rms_norm", {arg({3, 1, 5}), arg({5})}, rms);
  t.add("rms_norm", {arg({64, 257}), arg({257})}, rms, 2.0);
  t.add("rms_norm", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)}, rms, 2.0);
  t.add("rms_norm_default_eps_no_weight", {arg({2, 3, 7})}, unary([](const Tensor& x) {
          return rms_norm(x, {3, 7});
        }));

  // Dropout: the runner seeds both backends alike, so the keep masks must
  // be identical; the second output compares them exactly.
  auto dropout_case = [](double p, bool train = true) {
    return [p, train](const Inputs& in, Device) {
      Tensor y = dropout(in[0], p, train);
      return Outputs{y, eq(y, 0.0)};
    };
  };
  for (Shape s : {Shape{7}, Shape{3, 1, 5}, Shape{17, 33}, Shape{64, 257}}) {
    t.add("dropout_p0_3", {arg(s)}, dropout_case(0.3));
    t.add("dropout_p0_5", {arg(s)}, dropout_case(0.5));
  }
  t.add("dropout_eval", {arg({17, 33})}, dropout_case(0.5, false));
  t.add("dropout_p0", {arg({17, 33})}, dropout_case(0.0));
  t.add("dropout_p0_2", {arg({17, 33}, DType::bf16)}, dropout_case(0.2));
  // Two draws in one graph: each takes its own slice of the Philox stream.
  t.add("dropout_twice", {arg({17, 33})},
        unary([](const Tensor& x) { return dropout(dropout(x, 0.3) + 1.0, 0.4); }));
}

// ---- attention ------------------------------------------------------------------

/// One attention case: q, k, v shapes, the options and which extra inputs
/// (mask, valid_seq_len) it takes.
struct SdpaCase {
  std::string label;
  Shape q, k, v;
  DType dtype = DType::f32;
  std::function<SdpaOptions()> options;
  std::vector<InputSpec> extra; // attn_mask (float or bool), then valid_seq_len
  bool fused = false;           // fused_sdpa returning probabilities and mask
};

inline SdpaOptions sdpa_opts(bool causal = false, double dropout_p = 0, bool recompute = true) {
  SdpaOptions o;
  o.is_causal = causal;
  o.dropout_p = dropout_p;
  o.recompute = recompute;
  return o;
}

inline void add_sdpa_case(CaseTable& t, const SdpaCase& c) {
  std::vector<InputSpec> in = {arg(c.q, c.dtype), arg(c.k, c.dtype), arg(c.v, c.dtype)};
  for (const InputSpec& e : c.extra) in.push_back(e);
  const bool has_mask =
      !c.extra.empty() && c.extra[0].dtype != DType::i64 && c.extra[0].dtype != DType::i32;
  const bool has_len = c.extra.size() == 2 || (!c.extra.empty() && !has_mask);
  t.add((c.fused ? "fused_sdpa_" : "sdpa_") + c.label, in,
        [c, has_mask, has_len](const Inputs& x, Device) {
          SdpaOptions o = c.options();
          if (has_mask) o.attn_mask = x[3];
          if (has_len) o.valid_seq_len = x.back();
          if (!c.fused) return Outputs{scaled_dot_product_attention(x[0], x[1], x[2], o)};
          o.return_attn_probs = true;
          o.return_dropout_mask = o.dropout_p > 0;
          SdpaResult r = fused_sdpa(x[0], x[1], x[2], o);
          // The probabilities are not differentiable (only `out` is).
          Outputs out = {r.out, r.attn_probs.detach()};
          if (r.dropout_mask.defined()) out.push_back(r.dropout_mask);
          return out;
        },
        c.dtype == DType::bf16 ? 2.0 : 1.0);
}

inline void add_attention_cases(CaseTable& t) {
  auto plain = [] { return sdpa_opts(); };
  auto causal = [] { return sdpa_opts(true); };
  auto right = [](bool is_causal, double p, bool recompute) {
    return [=] {
      SdpaOptions o = sdpa_opts(is_causal, p, recompute);
      o.padding_side = PaddingSide::right;
      return o;
    };
  };
  auto left = [](bool is_causal, double p, bool recompute) {
    return [=] {
      SdpaOptions o = sdpa_opts(is_causal, p, recompute);
      o.padding_side = PaddingSide::left;
      return o;
    };
  };
  const InputSpec lens = literal({2, 6, 1}, {3});
  const InputSpec lens_with_zero = literal({0, 3}, {2}, DType::i32);
  // clang-format off
  const std::vector<SdpaCase> cases = {
      {"basic", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain},
      {"single_query_key", {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, DType::f32, plain},
      {"rank4_causal", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32, causal},
      {"causal_L_lt_S", {1, 2, 5, 4}, {1, 2, 7, 4}, {1, 2, 7, 6}, DType::f32, causal},
      {"causal_L_gt_S", {1, 2, 7, 4}, {1, 2, 5, 4}, {1, 2, 5, 6}, DType::f32, causal},
      {"scale_0_5", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, [] {
         SdpaOptions o;
         o.scale = 0.5;
         return o;
       }},
      {"bool_mask", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain, {mask({5, 7})}},
      {"bool_mask_broadcast_heads", {2, 2, 6, 4}, {2, 2, 6, 4}, {2, 2, 6, 4}, DType::f32, plain,
       {mask({2, 1, 6, 6})}},
      // A float mask that requires grad: its gradient is compared too.
      {"float_mask", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 3}, DType::f32, plain, {arg({2, 1, 5, 7})}},
      {"valid_len_right", {3, 4, 6, 8}, {3, 4, 6, 8}, {3, 4, 6, 8}, DType::f32, right(false, 0, true), {lens}},
      {"valid_len_left", {3, 4, 6, 8}, {3, 4, 6, 8}, {3, 4, 6, 8}, DType::f32, left(false, 0, true), {lens}},
      {"valid_len_right_causal", {3, 6, 8}, {3, 6, 8}, {3, 6, 5}, DType::f32, right(true, 0, true), {lens}},
      {"valid_len_left_causal", {3, 6, 8}, {3, 6, 8}, {3, 6, 5}, DType::f32, left(true, 0, true), {lens}},
      {"valid_len_zero_left", {2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}, DType::f32, left(false, 0, true),
       {lens_with_zero}},
      {"valid_len_left_float_mask", {3, 2, 6, 4}, {3, 2, 6, 4}, {3, 2, 6, 4}, DType::f32,
       left(false, 0, true), {arg({6, 6}), lens}},
      {"dropout", {2, 6, 4}, {2, 7, 4}, {2, 7, 4}, DType::f32, [] { return sdpa_opts(false, 0.3); }},
      {"dropout_causal_valid_len_right", {3, 2, 6, 4}, {3, 2, 6, 4}, {3, 2, 6, 4}, DType::f32,
       right(true, 0.25, true), {lens}},
      {"recompute_off", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32,
       [] { return sdpa_opts(false, 0, false); }},
      {"recompute_off_causal_dropout", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32,
       [] { return sdpa_opts(true, 0.2, false); }},
      {"recompute_off_valid_len_left_dropout", {3, 6, 8}, {3, 6, 8}, {3, 6, 8}, DType::f32,
       left(false, 0.3, false), {lens}},
      {"recompute_off_float_mask", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32,
       [] { return sdpa_opts(false, 0, false); }, {arg({5, 7})}},
      // Sizes where a tiled (flash) kernel takes several blocks, odd tails.
      {"larger_causal", {2, 4, 64, 32}, {2, 4, 64, 32}, {2, 4, 64, 32}, DType::f32, causal},
      {"larger_odd", {1, 2, 129, 64}, {1, 2, 257, 64}, {1, 2, 257, 64}, DType::f32, plain},
      {"larger_valid_len_left_causal", {3, 2, 70, 16}, {3, 2, 70, 16}, {3, 2, 70, 16}, DType::f32,
       left(true, 0, true), {literal({70, 33, 1}, {3})}},
      {"basic", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::bf16, plain},
      {"rank4_causal", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::bf16, causal},
  };
  for (const SdpaCase& c : cases) add_sdpa_case(t, c);
  std::vector<SdpaCase> fused = {
      {"probs", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain},
      {"probs_mask_dropout", {2, 2, 6, 4}, {2, 2, 7, 4}, {2, 2, 7, 4}, DType::f32,
       [] { return sdpa_opts(false, 0.3); }},
      {"probs_mask_dropout_causal_valid_len_left", {3, 6, 8}, {3, 6, 8}, {3, 6, 8}, DType::f32,
       left(true, 0.3, true), {lens}},
      {"probs_recompute_off_dropout", {2, 6, 4}, {2, 6, 4}, {2, 6, 4}, DType::f32,
       [] { return sdpa_opts(false, 0.4, false); }},
  };
  // clang-format on
  for (SdpaCase& c : fused) {
    c.fused = true;
    add_sdpa_case(t, c);
  }
}

// ---- losses -----------------------------------------------------------------------

inline void add_loss_cases(CaseTable& t) {
  auto ce = [](Reduction r, int64_t ignore = -100, double smoothing = 0) {
    return binary([=](const Tensor& x, const Tensor& y) {
      return cross_entropy(x, y, r, ignore, smoothing);
    });
  };
  t.add("cross_entropy_mean", {arg({7, 5}), ints({7}, 0, 5)}, ce(Reduction::mean));
  t.add("cross_entropy_sum", {arg({17, 33}), ints({17}, 0, 33)}, ce(Reduction::sum));
  t.add("cross_entropy_none", {arg({17, 33}), ints({17}, 0, 33)}, ce(Reduction::none));
  t.add("cross_entropy_one_row", {arg({1, 1}), ints({1}, 0, 1)}, ce(Reduction::mean));
  t.add("cross_entropy_ignore_index", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        ce(Reduction::mean));
  t.add("cross_entropy_ignore_index_3", {arg({7, 5}), literal({0, 3, 4, 3, 3, 1, 2}, {7})},
        ce(Reduction::none, 3));
  t.add("cross_entropy_label_smoothing", {arg({17, 33}), ints({17}, 0, 33)},
        ce(Reduction::mean, -100, 0.1));
  t.add("cross_entropy_smoothing_ignore", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        ce(Reduction::sum, -100, 0.2));
  t.add("cross_entropy_mean", {arg({64, 257}), ints({64}, 0, 257)}, ce(Reduction::mean));
  t.add("cross_entropy_mean", {arg({17, 33}), ints({17}, 0, 33, DType::i32)}, ce(Reduction::mean));
  t.add("cross_entropy_mean", {arg({17, 33}, DType::bf16), ints({17}, 0, 33)}, ce(Reduction::mean),
        2.0);
  auto nll = [](Reduction r, int64_t ignore = -100) {
    return binary([=](const Tensor& x, const Tensor& y) { return nll_loss(x, y, r, ignore); });
  };
  t.add("nll_loss_mean", {arg({7, 5}), ints({7}, 0, 5)}, nll(Reduction::mean));
  t.add("nll_loss_sum", {arg({17, 33}), ints({17}, 0, 33)}, nll(Reduction::sum));
  t.add("nll_loss_none_ignore", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        nll(Reduction::none));
  t.add("nll_loss_of_log_softmax", {arg({64, 257}), ints({64}, 0, 257)},
        binary([](const Tensor& x, const Tensor& y) { return nll_loss(log_softmax(x, 1), y); }));
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string sfx = r == Reduction::mean ? "mean" : r == Reduction::sum ? "sum" : "none";
    auto mse = binary([r](const Tensor& a, const Tensor& b) { return mse_loss(a, b, r); });
    auto bce = binary([r](const Tensor& a, const Tensor& b) {
      return binary_cross_entropy_with_logits(a, b, r);
    });
    for (Shape s : {Shape{1}, Shape{3, 1, 5}, Shape{17, 33}}) {
      t.add("mse_loss_" + sfx, {arg(s), arg(s)}, mse);
      t.add("bce_with_logits_" + sfx, {arg(s), data(s, DType::f32, Fill::probability)}, bce);
    }
  }
  t.add("mse_loss_mean", {arg({64, 257}), arg({64, 257})},
        binary([](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }), 4.0);
  // Large logits: the log-sum-exp form must stay finite.
  t.add("bce_with_logits_large_logits",
        {arg({17, 33}), data({17, 33}, DType::f32, Fill::probability)},
        binary([](const Tensor& a, const Tensor& b) {
          return binary_cross_entropy_with_logits(a * 60.0, b, Reduction::none);
        }));
  t.add("mse_loss_mean", {arg({17, 33}, DType::bf16), arg({17, 33}, DType::bf16)},
        binary([](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }), 2.0);
}

// ---- optimizer steps ------------------------------------------------------------------

using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

/// Two steps of `make` on parameters [17, 33] and [33] (f32 or bf16) with
/// loss = sum(tanh(x @ w + b) * target); returns the updated parameters and
/// every state tensor the optimizer keeps. With `clip`, the gradients are
/// clipped to total `norm_type`-norm 0.5 first.
inline CaseFn optimizer_steps(OptimizerFactory make, bool clip = false, double norm_type = 2.0) {
  return [make, clip, norm_type](const Inputs& in, Device device) {
    Tensor w = in[0], b = in[1];
    std::unique_ptr<optim::Optimizer> opt = make({w, b});
    const Tensor x = to(fixed_tensor({8, 17}, 1, device), w.dtype());
    const Tensor target = to(fixed_tensor({8, 33}, 2, device), w.dtype());
    for (int step = 0; step < 2; ++step) {
      opt->zero_grad();
      sum(tanh(matmul(x, w) + b) * target).backward();
      if (clip) optim::clip_grad_norm_(opt->parameters(), 0.5, norm_type);
      opt->step();
      mark_step();
    }
    Outputs out = {w, b};
    for (const auto& [name, value] : opt->state_dict())
      if (name.rfind("state.", 0) == 0) out.push_back(value);
    return out;
  };
}

inline void add_optimizer_cases(CaseTable& t) {
  const std::vector<std::pair<const char*, OptimizerFactory>> optimizers = {
      {"sgd",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1});
       }},
      {"sgd_momentum_dampening_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p,
             optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"sgd_nesterov",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
       }},
      {"adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01});
       }},
      {"adam_amsgrad_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(
             p, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"adamw",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01});
       }},
      {"adamw_amsgrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(
             p, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"adadelta",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions{.lr = 1.0});
       }},
  };
  for (const auto& [name, make] : optimizers) {
    t.add_without_grads(absl::StrCat("optim_", name), {arg({17, 33}), arg({33})},
                        optimizer_steps(make));
  }
  t.add_without_grads("optim_adamw_clip_grad_norm", {arg({17, 33}), arg({33})},
                      optimizer_steps(optimizers[5].second, /*clip=*/true));
  // The other norm types: the largest |g|, the sum of |g|, a p-norm.
  for (const auto& [label, norm_type] : std::vector<std::pair<const char*, double>>{
           {"inf", std::numeric_limits<double>::infinity()}, {"l1", 1.0}, {"p3", 3.0}})
    t.add_without_grads(absl::StrCat("optim_sgd_momentum_clip_grad_norm_", label),
                        {arg({17, 33}), arg({33})},
                        optimizer_steps(optimizers[1].second, /*clip=*/true, norm_type));
  t.add_without_grads("optim_adamw", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(optimizers[5].second));
  t.add_without_grads("optim_sgd_momentum", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(optimizers[1].second));
}

} // namespace mstep::conformance
