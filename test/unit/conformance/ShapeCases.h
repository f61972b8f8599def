// Conformance cases: shape ops, data movement, indexing, scatter and the
// data-dependent-shape ops.
#pragma once

#include "test/unit/conformance/ConformanceCase.h"

namespace mstep::conformance {

// ---- shape and data movement ------------------------------------------------

inline void add_shape_cases(CaseTable& t) {
  t.add("reshape", {arg({17, 33})}, unary([](const Tensor& x) { return reshape(x, {33, 17}); }));
  t.add("reshape_infer", {arg({3, 1, 5})}, unary([](const Tensor& x) { return reshape(x, {-1}); }));
  t.add("reshape", {arg({64, 257})}, unary([](const Tensor& x) {
          return reshape(x, {257, 8, 8});
        }));
  t.add("view", {arg({7})}, unary([](const Tensor& x) { return view(x, {7, 1}); }));
  t.add("flatten_1", {arg({2, 3, 4, 5})}, unary([](const Tensor& x) { return flatten(x, 1); }));
  t.add("flatten_1_2", {ints({2, 3, 4, 5}, 0, 9)},
        unary([](const Tensor& x) { return flatten(x, 1, 2); }));
  t.add("permute", {arg({2, 3, 4, 5})}, unary([](const Tensor& x) {
          return permute(x, {3, 1, 0, 2});
        }));
  t.add("permute", {arg({3, 1, 5})}, unary([](const Tensor& x) { return permute(x, {2, 0, 1}); }));
  t.add("permute", {mask({3, 1, 5})}, unary([](const Tensor& x) { return permute(x, {2, 0, 1}); }));
  t.add("permute", {arg({2, 3, 4, 5}, DType::bf16)}, unary([](const Tensor& x) {
          return permute(x, {0, 2, 1, 3});
        }));
  for (Shape s : {Shape{17, 33}, Shape{64, 257}})
    t.add("transpose", {arg(s)}, unary([](const Tensor& x) { return transpose(x, 0, 1); }));
  t.add("transpose", {ints({3, 1, 5}, 0, 9)},
        unary([](const Tensor& x) { return transpose(x, 0, 2); }));
  // Transposed then consumed: a non-contiguous producer feeding math.
  t.add("transpose_then_exp", {arg({17, 33})},
        unary([](const Tensor& x) { return exp(transpose(x, 0, 1)) * 2.0; }));
  t.add("expand", {arg({3, 1, 5})}, unary([](const Tensor& x) { return expand(x, {2, 3, 4, 5}); }));
  t.add("expand", {arg({1})}, unary([](const Tensor& x) { return expand(x, {7}); }));
  t.add("expand_keep", {arg({17, 1})}, unary([](const Tensor& x) { return expand(x, {-1, 33}); }));
  t.add("expand", {mask({1, 5})}, unary([](const Tensor& x) { return expand(x, {3, 5}); }));
  t.add("squeeze_all", {arg({3, 1, 5})}, unary([](const Tensor& x) { return squeeze(x); }));
  t.add("squeeze_1", {arg({3, 1, 5})}, unary([](const Tensor& x) { return squeeze(x, 1); }));
  t.add("squeeze_all", {arg({1})}, unary([](const Tensor& x) { return squeeze(x); }));
  t.add("unsqueeze_0", {arg({17, 33})}, unary([](const Tensor& x) { return unsqueeze(x, 0); }));
  t.add("unsqueeze_last", {arg({7})}, unary([](const Tensor& x) { return unsqueeze(x, -1); }));
  t.add("slice_step3", {arg({17, 33})},
        unary([](const Tensor& x) { return slice(x, 1, 3, 29, 3); }));
  t.add("slice_negative_start", {arg({17, 33})},
        unary([](const Tensor& x) { return slice(x, 0, -5); }));
  t.add("slice_step2", {arg({64, 257})},
        unary([](const Tensor& x) { return slice(x, 1, 1, 256, 2); }));
  t.add("slice_clamped", {arg({3, 1, 5})},
        unary([](const Tensor& x) { return slice(x, 2, 2, 100); }));
  t.add("slice", {ints({17, 33}, 0, 9)},
        unary([](const Tensor& x) { return slice(x, 0, 1, 16, 4); }));
  t.add("cat_d0", {arg({3, 5}), arg({1, 5}), arg({7, 5})},
        [](const Inputs& in, Device) { return Outputs{cat(in, 0)}; });
  t.add("cat_d1", {arg({17, 33}), arg({17, 1}), arg({17, 2})},
        [](const Inputs& in, Device) { return Outputs{cat(in, 1)}; });
  t.add("cat_d1", {ints({3, 2}, 0, 9), ints({3, 5}, 0, 9)},
        [](const Inputs& in, Device) { return Outputs{cat(in, 1)}; });
  t.add("cat_d0", {arg({2, 7}, DType::bf16), arg({5, 7}, DType::bf16)},
        [](const Inputs& in, Device) { return Outputs{cat(in, 0)}; });
  t.add("stack_d0", {arg({3, 1, 5}), arg({3, 1, 5})},
        [](const Inputs& in, Device) { return Outputs{stack(in, 0)}; });
  t.add("stack_dlast", {arg({17, 33}), arg({17, 33}), arg({17, 33})},
        [](const Inputs& in, Device) { return Outputs{stack(in, -1)}; });
  t.add("stack_d1", {mask({7}), mask({7})},
        [](const Inputs& in, Device) { return Outputs{stack(in, 1)}; });
  t.add("chunk_4_d1", {arg({17, 33})}, [](const Inputs& in, Device) { return chunk(in[0], 4, 1); });
  t.add("chunk_3_d0", {arg({7})}, [](const Inputs& in, Device) { return chunk(in[0], 3, 0); });
  t.add("chunk_3_dlast", {arg({64, 257})},
        [](const Inputs& in, Device) { return chunk(in[0], 3, -1); });
}

inline void add_indexing_cases(CaseTable& t) {
  auto gather_on = [](int64_t dim) {
    return binary([dim](const Tensor& x, const Tensor& i) { return gather(x, dim, i); });
  };
  t.add("gather_d1", {arg({17, 33}), ints({17, 5}, 0, 33)}, gather_on(1));
  t.add("gather_d0", {arg({17, 33}), ints({4, 33}, 0, 17)}, gather_on(0));
  t.add("gather_d0", {arg({7}), ints({12}, 0, 7)}, gather_on(0));
  t.add("gather_d2", {arg({3, 1, 5}), ints({3, 1, 2}, 0, 5)}, gather_on(2));
  t.add("gather_d1", {arg({64, 257}), ints({64, 31}, 0, 257)}, gather_on(1));
  t.add("gather_d1", {ints({17, 33}, -9, 9), ints({17, 5}, 0, 33, DType::i32)}, gather_on(1));
  t.add("gather_d1", {arg({17, 33}, DType::bf16), ints({17, 5}, 0, 33)}, gather_on(1));
  auto select_on = [](int64_t dim) {
    return binary([dim](const Tensor& x, const Tensor& i) { return index_select(x, dim, i); });
  };
  t.add("index_select_d0", {arg({17, 33}), ints({9}, 0, 17)}, select_on(0));
  t.add("index_select_d1", {arg({17, 33}), ints({40}, 0, 33)}, select_on(1));
  t.add("index_select_d1", {arg({3, 1, 5}), ints({1}, 0, 1, DType::i32)}, select_on(1));
  t.add("index_select_d0", {ints({7}, -9, 9), ints({3}, 0, 7)}, select_on(0));
  t.add("index_select_d0", {arg({64, 257}, DType::bf16), ints({11}, 0, 64)}, select_on(0));
  auto embed = binary([](const Tensor& w, const Tensor& i) { return embedding(i, w); });
  // Duplicate indices: the weight gradient accumulates.
  t.add("embedding", {arg({17, 33}), ints({3, 5}, 0, 17)}, embed);
  t.add("embedding", {arg({7, 1}), ints({1}, 0, 7)}, embed);
  t.add("embedding", {arg({257, 64}), ints({2, 9}, 0, 257, DType::i32)}, embed);
  t.add("embedding", {arg({17, 33}, DType::bf16), ints({5}, 0, 17)}, embed);
  t.add("pad_last", {arg({3, 1, 5})}, unary([](const Tensor& x) { return pad(x, {1, 2}); }));
  t.add("pad_two_dims", {arg({3, 1, 5})}, unary([](const Tensor& x) {
          return pad(x, {2, 1, 0, 3}, -1.5);
        }));
  t.add("pad_three_dims", {arg({17, 33})}, unary([](const Tensor& x) {
          return pad(x, {0, 1, 3, 0});
        }));
  t.add("pad_last", {ints({7}, 0, 9)}, unary([](const Tensor& x) { return pad(x, {3, 3}, 4); }));
  t.add("pad_last", {arg({64, 257}, DType::bf16)}, unary([](const Tensor& x) {
          return pad(x, {1, 0}, 2);
        }));
  for (int64_t diag : {0, 2, -3}) {
    const std::string sfx = diag < 0 ? absl::StrCat("m", -diag) : absl::StrCat(diag);
    t.add("triu_" + sfx, {arg({17, 33})}, unary([diag](const Tensor& x) { return triu(x, diag); }));
    t.add("tril_" + sfx, {arg({17, 33})}, unary([diag](const Tensor& x) { return tril(x, diag); }));
    t.add("triu_" + sfx, {arg({3, 7, 5})},
          unary([diag](const Tensor& x) { return triu(x, diag); }));
    t.add("tril_" + sfx, {arg({3, 7, 5})},
          unary([diag](const Tensor& x) { return tril(x, diag); }));
  }
  t.add("triu_0", {ints({7, 7}, -9, 9)}, unary([](const Tensor& x) { return triu(x); }));
  t.add("tril_0", {mask({1, 7})}, unary([](const Tensor& x) { return tril(x); }));
  t.add("tril_1", {arg({64, 257}, DType::bf16)}, unary([](const Tensor& x) { return tril(x, 1); }));
}

inline void add_scatter_cases(CaseTable& t) {
  auto scatter_on = [](int64_t dim) {
    return ternary([dim](const Tensor& x, const Tensor& i, const Tensor& s) {
      return scatter_add(x, dim, i, s);
    });
  };
  // Duplicate indices accumulate; the index may be smaller than src.
  t.add("scatter_add_d0", {arg({5, 7}), ints({9, 7}, 0, 5), arg({9, 7})}, scatter_on(0));
  t.add("scatter_add_d1", {arg({7, 5}), ints({7, 6}, 0, 5), arg({7, 9})}, scatter_on(1));
  t.add("scatter_add_d0", {arg({7}), ints({20}, 0, 7), arg({20})}, scatter_on(0));
  t.add("scatter_add_d2", {arg({3, 1, 5}), ints({3, 1, 4}, 0, 5), arg({3, 1, 4})}, scatter_on(2));
  t.add("scatter_add_d1", {arg({64, 257}), ints({64, 300}, 0, 257), arg({64, 300})}, scatter_on(1));
  t.add("scatter_add_d0",
        {ints({5, 7}, -9, 9), ints({9, 7}, 0, 5, DType::i32), ints({9, 7}, -9, 9)}, scatter_on(0));
  t.add("scatter_add_d0", {arg({5, 7}, DType::bf16), ints({9, 7}, 0, 5), arg({9, 7}, DType::bf16)},
        scatter_on(0), 2.0);
  auto index_add_on = [](int64_t dim) {
    return ternary([dim](const Tensor& x, const Tensor& i, const Tensor& s) {
      return index_add(x, dim, i, s);
    });
  };
  t.add("index_add_d0", {arg({17, 33}), ints({9}, 0, 17), arg({9, 33})}, index_add_on(0));
  t.add("index_add_d1", {arg({17, 33}), ints({4}, 0, 33), arg({17, 4})}, index_add_on(1));
  t.add("index_add_d0", {arg({7}), ints({12}, 0, 7), arg({12})}, index_add_on(0));
  t.add("index_add_d1", {arg({3, 1, 5}), ints({3}, 0, 1), arg({3, 3, 5})}, index_add_on(1));
  t.add("index_add_d0", {arg({64, 257}), ints({100}, 0, 64), arg({100, 257})}, index_add_on(0));
  t.add("index_add_d0", {ints({5, 3}, -9, 9), ints({4}, 0, 5), ints({4, 3}, -9, 9)},
        index_add_on(0));
  t.add("slice_scatter_d1_step3", {arg({17, 33}), arg({17, 9})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 1, 3, 29, 3); }));
  t.add("slice_scatter_d0", {arg({17, 33}), arg({7, 33})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 0, 2, 9); }));
  t.add("slice_scatter_d2", {arg({3, 1, 5}), arg({3, 1, 2})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 2, -2); }));
  t.add("slice_scatter_d1_step2", {arg({64, 257}), arg({64, 128})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 1, 1, 256, 2); }));
  t.add("slice_scatter_d0", {ints({7}, -9, 9), ints({3}, -9, 9)},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 0, 4); }));
}

/// Data-dependent shapes: these run eagerly on the host from the inputs'
/// materialized values, and return a tensor on the inputs' device.
inline void add_dynamic_shape_cases(CaseTable& t) {
  t.add("nonzero", {special({17, 33})}, unary([](const Tensor& x) { return nonzero(x); }));
  t.add("nonzero", {mask({3, 1, 5})}, unary([](const Tensor& x) { return nonzero(x); }));
  t.add("nonzero_of_pending", {data({64, 257})},
        unary([](const Tensor& x) { return nonzero(gt(x, 0.2)); }));
  t.add("masked_select", {data({17, 33}), mask({17, 33})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x, m); }));
  t.add("masked_select_broadcast_pending", {data({3, 1, 5}), mask({4, 1})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x * 2.0, m); }));
  t.add("masked_select", {ints({7}, -9, 9), mask({7})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x, m); }));
}

} // namespace mstep::conformance
