// SDPA forward/backward graphs for cuDNN 9 and their execution.
#include "lib/backends/cuda/CudnnSdpa.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

cudnnDataType_t io_type(DType dtype) {
  return dtype == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

/// [B, H, rows, cols] with the last two dims swapped in memory: the
/// transpose of a packed [B, H, cols, rows] tensor.
std::vector<int64_t> transposed_strides(int64_t b, int64_t h, int64_t rows, int64_t cols) {
  (void)b;
  (void)h;
  return {h * rows * cols, rows * cols, 1, rows};
}

/// The strides of a [B, H, rows, cols] io tensor: the layout's (a view of
/// another value's bytes), or none (packed).
std::vector<int64_t> io_strides(const SdpaStrides& strides) {
  if (strides == SdpaStrides{}) return {};
  return {strides.begin(), strides.end()};
}

/// The strides of [B, H, cols, rows] seen in the bytes of a [B, H, rows,
/// cols] tensor of `strides` (K as K^T, V as V^T).
std::vector<int64_t> io_strides_transposed(const SdpaStrides& strides, const CudnnSdpaConfig& c,
                                           int64_t rows, int64_t cols) {
  if (strides == SdpaStrides{}) return transposed_strides(c.batch, c.heads, cols, rows);
  return {strides[0], strides[1], strides[3], strides[2]};
}

/// What both graphs share: the scores S = Q K^T * scale, the additive
/// mask, the right-padding mask before the softmax (forward) or its
/// subtraction of the stats (backward), and the causal mask.
struct Scores {
  CudnnTensorRef q, kt, scale, negative_inf, mask, seq_q, seq_kv, s;
};

Scores declare_inputs(CudnnGraphBuilder& g, const CudnnSdpaConfig& c) {
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, D = c.head_dim;
  const cudnnDataType_t t = io_type(c.dtype);
  Scores x;
  x.q = g.tensor("q", {B, H, L, D}, t, CudnnTensorKind::io, sdpa_uid::q, io_strides(c.layout.q));
  // K [B, H, S, D] (packed, or the layout's strides), seen as K^T [B, H, D, S].
  x.kt = g.tensor("k", {B, H, D, S}, t, CudnnTensorKind::io, sdpa_uid::k,
                  io_strides_transposed(c.layout.k, c, S, D));
  x.scale =
      g.tensor("scale", {1, 1, 1, 1}, CUDNN_DATA_FLOAT, CudnnTensorKind::by_value, sdpa_uid::scale);
  if (c.mask == SdpaMaskKind::additive)
    x.mask = g.tensor("mask", {c.mask_per_batch ? B : 1, c.mask_per_head ? H : 1, L, S}, t,
                      CudnnTensorKind::io, sdpa_uid::mask);
  if (c.causal || c.padding != SdpaPadding::none)
    x.negative_inf = g.tensor("negative_inf", {1, 1, 1, 1}, CUDNN_DATA_FLOAT,
                              CudnnTensorKind::by_value, sdpa_uid::negative_inf);
  if (c.padding == SdpaPadding::right) {
    x.seq_q =
        g.tensor("seq_len_q", {B, 1, 1, 1}, CUDNN_DATA_INT32, CudnnTensorKind::io, sdpa_uid::seq_q);
    x.seq_kv = g.tensor("seq_len_kv", {B, 1, 1, 1}, CUDNN_DATA_INT32, CudnnTensorKind::io,
                        sdpa_uid::seq_kv);
  }
  return x;
}

/// S = Q K^T * scale [+ mask] [with -inf past the valid lengths].
CudnnTensorRef scores(CudnnGraphBuilder& g, const CudnnSdpaConfig& c, const Scores& x) {
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv;
  const bool padded = c.padding == SdpaPadding::right;
  CudnnTensorRef s = g.virtual_tensor("s", {B, H, L, S}, CUDNN_DATA_FLOAT);
  g.matmul("bmm1 q x k^T", x.q, x.kt, s, x.seq_q, x.seq_kv, {}, /*pad_with_zero=*/padded);
  CudnnTensorRef scaled = g.virtual_tensor("s_scaled", s, CUDNN_DATA_FLOAT);
  g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, s, scaled, CUDNN_DATA_FLOAT, x.scale);
  s = scaled;
  if (c.mask == SdpaMaskKind::additive) {
    CudnnTensorRef masked = g.virtual_tensor("s_masked", s, CUDNN_DATA_FLOAT);
    g.pointwise("add_mask", CUDNN_POINTWISE_ADD, s, masked, CUDNN_DATA_FLOAT, x.mask);
    s = masked;
  }
  if (padded) {
    CudnnTensorRef row = g.virtual_tensor("padding_row", s, CUDNN_DATA_INT32);
    CudnnTensorRef col = g.virtual_tensor("padding_col", s, CUDNN_DATA_INT32);
    g.pointwise("padding_row_index", CUDNN_POINTWISE_GEN_INDEX, s, row, CUDNN_DATA_INT32, {}, {},
                2);
    g.pointwise("padding_col_index", CUDNN_POINTWISE_GEN_INDEX, s, col, CUDNN_DATA_INT32, {}, {},
                3);
    CudnnTensorRef row_ok = g.virtual_tensor("row_lt_seq_q", s, CUDNN_DATA_BOOLEAN);
    CudnnTensorRef col_ok = g.virtual_tensor("col_lt_seq_kv", s, CUDNN_DATA_BOOLEAN);
    g.pointwise("row < seq_len_q", CUDNN_POINTWISE_CMP_LT, row, row_ok, CUDNN_DATA_BOOLEAN,
                x.seq_q);
    g.pointwise("col < seq_len_kv", CUDNN_POINTWISE_CMP_LT, col, col_ok, CUDNN_DATA_BOOLEAN,
                x.seq_kv);
    CudnnTensorRef keep = g.virtual_tensor("padding_keep", s, CUDNN_DATA_BOOLEAN);
    g.pointwise("padding_and", CUDNN_POINTWISE_LOGICAL_AND, row_ok, keep, CUDNN_DATA_BOOLEAN,
                col_ok);
    CudnnTensorRef selected = g.virtual_tensor("s_padded", s, CUDNN_DATA_FLOAT);
    g.pointwise("padding_select", CUDNN_POINTWISE_BINARY_SELECT, s, selected, CUDNN_DATA_FLOAT,
                x.negative_inf, keep);
    s = selected;
  }
  return s;
}

/// -inf where the key is after the row (top-left aligned, as mstep's cpu
/// kernel: key j is kept for row i iff j <= i).
CudnnTensorRef causal(CudnnGraphBuilder& g, const CudnnSdpaConfig& c, const Scores& x,
                      CudnnTensorRef s) {
  if (!c.causal) return s;
  CudnnTensorRef row = g.virtual_tensor("causal_row", s, CUDNN_DATA_INT32);
  CudnnTensorRef col = g.virtual_tensor("causal_col", s, CUDNN_DATA_INT32);
  g.pointwise("causal_row_index", CUDNN_POINTWISE_GEN_INDEX, s, row, CUDNN_DATA_INT32, {}, {}, 2);
  g.pointwise("causal_col_index", CUDNN_POINTWISE_GEN_INDEX, s, col, CUDNN_DATA_INT32, {}, {}, 3);
  CudnnTensorRef keep = g.virtual_tensor("row_ge_col", s, CUDNN_DATA_BOOLEAN);
  g.pointwise("row >= col", CUDNN_POINTWISE_CMP_GE, row, keep, CUDNN_DATA_BOOLEAN, col);
  CudnnTensorRef selected = g.virtual_tensor("s_causal", s, CUDNN_DATA_FLOAT);
  g.pointwise("causal_select", CUDNN_POINTWISE_BINARY_SELECT, s, selected, CUDNN_DATA_FLOAT,
              x.negative_inf, keep);
  return selected;
}

size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

} // namespace


absl::StatusOr<CudnnOperationGraph> build_sdpa_forward_graph(std::shared_ptr<const CudnnApi> api,
                                                             const CudnnSdpaConfig& c) {
  MSTEP_RETURN_IF_ERROR(cudnn_sdpa_expressible(c));
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, Dv = c.dv();
  const cudnnDataType_t t = io_type(c.dtype);
  CudnnGraphBuilder g(std::move(api), absl::StrCat("sdpa forward ", c.to_string()));
  Scores x = declare_inputs(g, c);
  CudnnTensorRef v =
      g.tensor("v", {B, H, S, Dv}, t, CudnnTensorKind::io, sdpa_uid::v, io_strides(c.layout.v));
  CudnnTensorRef o = g.tensor("out", {B, H, L, Dv}, t, CudnnTensorKind::io, sdpa_uid::o,
                              io_strides(c.layout.out));
  CudnnTensorRef stats =
      g.tensor("stats", {B, H, L, 1}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, sdpa_uid::stats);
  CudnnTensorRef s = causal(g, c, x, scores(g, c, x));
  // The softmax with its statistics: stats = max + log(sum(exp(s - max))).
  CudnnTensorRef max = g.virtual_tensor("row_max", {B, H, L, 1}, CUDNN_DATA_FLOAT);
  g.reduction("softmax_max", CUDNN_REDUCE_TENSOR_MAX, s, max);
  CudnnTensorRef shifted = g.virtual_tensor("s_minus_max", s, CUDNN_DATA_FLOAT);
  g.pointwise("softmax_sub", CUDNN_POINTWISE_SUB, s, shifted, CUDNN_DATA_FLOAT, max);
  CudnnTensorRef e = g.virtual_tensor("exp", s, CUDNN_DATA_FLOAT);
  g.pointwise("softmax_exp", CUDNN_POINTWISE_EXP, shifted, e);
  CudnnTensorRef sum = g.virtual_tensor("row_sum", {B, H, L, 1}, CUDNN_DATA_FLOAT);
  g.reduction("softmax_sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  CudnnTensorRef log = g.virtual_tensor("log_sum", {B, H, L, 1}, CUDNN_DATA_FLOAT);
  g.pointwise("softmax_log", CUDNN_POINTWISE_LOG, sum, log);
  g.pointwise("softmax_stats", CUDNN_POINTWISE_ADD, max, stats, CUDNN_DATA_FLOAT, log);
  CudnnTensorRef p = g.virtual_tensor("p", s, t); // the probabilities in the io type, for bmm2
  g.pointwise("softmax_div", CUDNN_POINTWISE_DIV, e, p, CUDNN_DATA_FLOAT, sum);
  g.matmul("bmm2 p x v", p, v, o, x.seq_q, {}, x.seq_kv);
  return g.finalize();
}

absl::StatusOr<CudnnOperationGraph> build_sdpa_backward_graph(std::shared_ptr<const CudnnApi> api,
                                                              const CudnnSdpaConfig& c) {
  MSTEP_RETURN_IF_ERROR(cudnn_sdpa_expressible(c));
  const int64_t B = c.batch, H = c.heads, L = c.seq_q, S = c.seq_kv, D = c.head_dim, Dv = c.dv();
  const cudnnDataType_t t = io_type(c.dtype);
  CudnnGraphBuilder g(std::move(api), absl::StrCat("sdpa backward ", c.to_string()));
  Scores x = declare_inputs(g, c);
  // V [B, H, S, Dv] (packed, or the layout's strides), seen as V^T [B, H, Dv, S].
  CudnnTensorRef vt = g.tensor("v", {B, H, Dv, S}, t, CudnnTensorKind::io, sdpa_uid::v,
                               io_strides_transposed(c.layout.v, c, S, Dv));
  CudnnTensorRef o = g.tensor("out", {B, H, L, Dv}, t, CudnnTensorKind::io, sdpa_uid::o,
                              io_strides(c.layout.out));
  CudnnTensorRef d_o = g.tensor("grad_out", {B, H, L, Dv}, t, CudnnTensorKind::io,
                                sdpa_uid::grad_o, io_strides(c.layout.grad_out));
  CudnnTensorRef stats =
      g.tensor("stats", {B, H, L, 1}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, sdpa_uid::stats);
  CudnnTensorRef dq = g.tensor("grad_q", {B, H, L, D}, t, CudnnTensorKind::io, sdpa_uid::grad_q,
                               io_strides(c.layout.grad_q));
  CudnnTensorRef dk = g.tensor("grad_k", {B, H, S, D}, t, CudnnTensorKind::io, sdpa_uid::grad_k,
                               io_strides(c.layout.grad_k));
  CudnnTensorRef dv = g.tensor("grad_v", {B, H, S, Dv}, t, CudnnTensorKind::io, sdpa_uid::grad_v,
                               io_strides(c.layout.grad_v));
  CudnnTensorRef one =
      g.tensor("one", {1, 1, 1, 1}, CUDNN_DATA_FLOAT, CudnnTensorKind::by_value, sdpa_uid::one);
  // Workspace tensors (CudnnSdpa places them after cuDNN's workspace).
  CudnnTensorRef row_dot = g.tensor("softmax_sum", {B, H, L, 1}, CUDNN_DATA_FLOAT,
                                    CudnnTensorKind::io, sdpa_uid::softmax_sum);
  CudnnTensorRef dq_accum = g.tensor("grad_q_accum", {B, H, L, D}, CUDNN_DATA_FLOAT,
                                     CudnnTensorKind::io, sdpa_uid::grad_q_accum);

  // D = rowsum(dO * O) (no dropout: its inverse scale is 1).
  // (Packed, whatever dO's strides.)
  CudnnTensorRef d_o_o = g.virtual_tensor("grad_out_x_out", {B, H, L, Dv}, CUDNN_DATA_FLOAT);
  g.pointwise("mul_grad_out_out", CUDNN_POINTWISE_MUL, d_o, d_o_o, CUDNN_DATA_FLOAT, o);
  CudnnTensorRef dot = g.virtual_tensor("row_dot", {B, H, L, 1}, CUDNN_DATA_FLOAT);
  g.reduction("reduce_grad_out_out", CUDNN_REDUCE_TENSOR_ADD, d_o_o, dot);
  g.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, dot, row_dot, CUDNN_DATA_FLOAT, one);

  // P = exp(S - stats), with the masks as in the forward.
  CudnnTensorRef s = scores(g, c, x);
  CudnnTensorRef shifted = g.virtual_tensor("s_minus_stats", s, CUDNN_DATA_FLOAT);
  g.pointwise("sub_stats", CUDNN_POINTWISE_SUB, s, shifted, CUDNN_DATA_FLOAT, stats);
  shifted = causal(g, c, x, shifted);
  CudnnTensorRef p = g.virtual_tensor("p", shifted, CUDNN_DATA_FLOAT);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, shifted, p);

  // dV = P^T dO.
  CudnnTensorRef pt = g.virtual_tensor("p^T", {B, H, S, L}, t, transposed_strides(B, H, S, L));
  g.reshape("transpose_p", p, pt);
  g.matmul("bmm p^T x grad_out", pt, d_o, dv, x.seq_kv, {}, x.seq_q);

  // dS = P * (dO V^T - D) * scale.
  CudnnTensorRef dp = g.virtual_tensor("grad_p", {B, H, L, S}, CUDNN_DATA_FLOAT);
  g.matmul("bmm grad_out x v^T", d_o, vt, dp, x.seq_q, x.seq_kv);
  CudnnTensorRef dp_minus = g.virtual_tensor("grad_p_minus_dot", dp, CUDNN_DATA_FLOAT);
  g.pointwise("sub_row_dot", CUDNN_POINTWISE_SUB, dp, dp_minus, CUDNN_DATA_FLOAT, row_dot);
  CudnnTensorRef ds_unscaled = g.virtual_tensor("grad_s_unscaled", dp, CUDNN_DATA_FLOAT);
  g.pointwise("mul_p", CUDNN_POINTWISE_MUL, dp_minus, ds_unscaled, CUDNN_DATA_FLOAT, p);
  CudnnTensorRef ds = g.virtual_tensor("grad_s", dp, CUDNN_DATA_FLOAT);
  g.pointwise("mul_attn_scale", CUDNN_POINTWISE_MUL, ds_unscaled, ds, CUDNN_DATA_FLOAT, x.scale);

  // dK = dS^T Q.
  CudnnTensorRef dst =
      g.virtual_tensor("grad_s^T", {B, H, S, L}, t, transposed_strides(B, H, S, L));
  g.reshape("transpose_grad_s", ds, dst);
  g.matmul("bmm grad_s^T x q", dst, x.q, dk, x.seq_kv, {}, x.seq_q);

  // dQ = dS K, accumulated in fp32, then converted.
  CudnnTensorRef k = g.virtual_tensor("k_again", {B, H, S, D}, t);
  g.reshape("transpose_k^T", x.kt, k);
  g.matmul("bmm grad_s x k", ds, k, dq_accum, x.seq_q, {}, x.seq_kv);
  g.pointwise("convert_grad_q", CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
  return g.finalize();
}

// ---- execution --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudnnSdpa>>
CudnnSdpa::create(const CudnnHandle& handle, const CudnnSdpaConfig& config, Direction direction) {
  std::unique_ptr<CudnnSdpa> sdpa(new CudnnSdpa());
  sdpa->config_ = config;
  sdpa->direction_ = direction;
  sdpa->scale_ = static_cast<float>(config.scale);
  sdpa->negative_inf_ = -std::numeric_limits<float>::infinity();
  const std::shared_ptr<const CudnnApi>& api = handle.shared_api();
  // Before 9.6 the fp32 dQ accumulator had to be zeroed by the caller
  // (cudnn-frontend did); this module does not, so it asks for 9.6.
  if (direction == Direction::backward && api->version < 90600)
    return absl::UnimplementedError(
        absl::StrCat("cudnn sdpa backward ", config.to_string(), ": cuDNN ", api->version,
                     " is older than 9.6, whose SDPA backward this needs"));
  if (direction == Direction::forward) {
    MSTEP_ASSIGN_OR_RETURN(sdpa->graph_, build_sdpa_forward_graph(api, config));
  } else {
    MSTEP_ASSIGN_OR_RETURN(sdpa->graph_, build_sdpa_backward_graph(api, config));
  }
  MSTEP_ASSIGN_OR_RETURN(sdpa->plan_, CudnnExecutionPlan::create(handle, sdpa->graph_));
  size_t size = align_up(static_cast<size_t>(sdpa->plan_->workspace_size()));
  if (direction == Direction::backward) {
    const size_t rows = static_cast<size_t>(config.batch * config.heads * config.seq_q);
    sdpa->softmax_sum_offset_ = size;
    size += align_up(rows * sizeof(float));
    sdpa->grad_q_accum_offset_ = size;
    size += align_up(rows * static_cast<size_t>(config.head_dim) * sizeof(float));
  }
  sdpa->workspace_size_ = size;
  return sdpa;
}

namespace {

absl::Status require(CUdeviceptr p, absl::string_view name, const CudnnSdpaConfig& c,
                     absl::string_view direction) {
  if (p != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("cudnn sdpa ", direction, " ", c.to_string(), ": no device pointer for ", name));
}

void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

} // namespace

/// The bindings both directions add for the config's options: the mask,
/// -inf for causal or padded scores, and the valid lengths.
void CudnnSdpa::bind_options(CUdeviceptr mask, CUdeviceptr valid_seq_len,
                             std::vector<std::pair<int64_t, void*>>& b) const {
  const CudnnSdpaConfig& c = config_;
  if (c.mask != SdpaMaskKind::none) b.push_back({sdpa_uid::mask, ptr(mask)});
  if (c.causal || c.padding != SdpaPadding::none)
    b.push_back({sdpa_uid::negative_inf, const_cast<float*>(&negative_inf_)});
  if (c.padding != SdpaPadding::none) {
    b.push_back({sdpa_uid::seq_q, ptr(valid_seq_len)});
    b.push_back({sdpa_uid::seq_kv, ptr(valid_seq_len)});
  }
}

absl::Status CudnnSdpa::forward(const CudnnHandle& handle, const CudnnSdpaForwardArgs& a,
                                CUdeviceptr workspace) const {
  const CudnnSdpaConfig& c = config_;
  if (direction_ != Direction::forward)
    return absl::FailedPreconditionError(
        absl::StrCat("cudnn sdpa ", c.to_string(), ": forward() on a backward plan"));
  for (auto [p, name] : std::initializer_list<std::pair<CUdeviceptr, const char*>>{
           {a.q, "q"}, {a.k, "k"}, {a.v, "v"}, {a.out, "out"}, {a.stats, "stats"}})
    MSTEP_RETURN_IF_ERROR(require(p, name, c, "forward"));
  if (c.mask != SdpaMaskKind::none) MSTEP_RETURN_IF_ERROR(require(a.mask, "mask", c, "forward"));
  if (c.padding != SdpaPadding::none)
    MSTEP_RETURN_IF_ERROR(require(a.valid_seq_len, "valid_seq_len", c, "forward"));
  if (workspace_size_ > 0) MSTEP_RETURN_IF_ERROR(require(workspace, "the workspace", c, "forward"));
  std::vector<std::pair<int64_t, void*>> b = {
      {sdpa_uid::q, ptr(a.q)},         {sdpa_uid::k, ptr(a.k)},
      {sdpa_uid::v, ptr(a.v)},         {sdpa_uid::o, ptr(a.out)},
      {sdpa_uid::stats, ptr(a.stats)}, {sdpa_uid::scale, const_cast<float*>(&scale_)}};
  bind_options(a.mask, a.valid_seq_len, b);
  return plan_->execute(handle, b, ptr(workspace));
}

absl::Status CudnnSdpa::backward(const CudnnHandle& handle, const CudnnSdpaBackwardArgs& a,
                                 CUdeviceptr workspace) const {
  const CudnnSdpaConfig& c = config_;
  if (direction_ != Direction::backward)
    return absl::FailedPreconditionError(
        absl::StrCat("cudnn sdpa ", c.to_string(), ": backward() on a forward plan"));
  for (auto [p, name] :
       std::initializer_list<std::pair<CUdeviceptr, const char*>>{{a.q, "q"},
                                                                  {a.k, "k"},
                                                                  {a.v, "v"},
                                                                  {a.out, "out"},
                                                                  {a.stats, "stats"},
                                                                  {a.grad_out, "grad_out"},
                                                                  {a.grad_q, "grad_q"},
                                                                  {a.grad_k, "grad_k"},
                                                                  {a.grad_v, "grad_v"},
                                                                  {workspace, "the workspace"}})
    MSTEP_RETURN_IF_ERROR(require(p, name, c, "backward"));
  if (c.mask != SdpaMaskKind::none) MSTEP_RETURN_IF_ERROR(require(a.mask, "mask", c, "backward"));
  if (c.padding != SdpaPadding::none)
    MSTEP_RETURN_IF_ERROR(require(a.valid_seq_len, "valid_seq_len", c, "backward"));
  std::vector<std::pair<int64_t, void*>> b = {
      {sdpa_uid::q, ptr(a.q)},
      {sdpa_uid::k, ptr(a.k)},
      {sdpa_uid::v, ptr(a.v)},
      {sdpa_uid::o, ptr(a.out)},
      {sdpa_uid::stats, ptr(a.stats)},
      {sdpa_uid::grad_o, ptr(a.grad_out)},
      {sdpa_uid::grad_q, ptr(a.grad_q)},
      {sdpa_uid::grad_k, ptr(a.grad_k)},
      {sdpa_uid::grad_v, ptr(a.grad_v)},
      {sdpa_uid::softmax_sum, ptr(workspace + softmax_sum_offset_)},
      {sdpa_uid::grad_q_accum, ptr(workspace + grad_q_accum_offset_)},
      {sdpa_uid::scale, const_cast<float*>(&scale_)},
      {sdpa_uid::one, const_cast<float*>(&one_)}};
  bind_options(a.mask, a.valid_seq_len, b);
  return plan_->execute(handle, b, ptr(workspace));
}

} // namespace mstep::cuda
