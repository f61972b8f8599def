// CudaAttentionLowering: see CudaAttentionLowering.h.
#include "lib/backends/cuda/CudaAttentionLowering.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaAttentionLoops.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

class Lowering {
public:
  Lowering(mlir::Operation* op, std::string origin) : op_(op), origin_(std::move(origin)) {}

  /// "cuda: op 'mstep.sdpa' (mstep.sdpa #3, bf16[2, 4, 128, 64]) is not yet
  /// lowered for cuda: <why>".
  absl::Status not_lowered(absl::string_view why) const {
    return absl::UnimplementedError(absl::StrCat(prefix(), " is not yet lowered for cuda: ", why));
  }
  std::string prefix() const {
    return absl::StrCat("cuda: op '", op_->getName().getStringRef().str(), "' (", origin_,
                        q_type_.empty() ? "" : ", ", q_type_, ")");
  }

  /// The config of the node's shapes and options, checked by
  /// cudnn_sdpa_expressible (its refusals named as not lowered).
  absl::StatusOr<CudnnSdpaConfig> config(const AttentionOperands& a, bool mask_grad,
                                         bool saved_probs_in) {
    MSTEP_ASSIGN_OR_RETURN(TensorType q, tensor_type_from_mlir(a.q.getType()));
    q_type_ = q.to_string();
    MSTEP_ASSIGN_OR_RETURN(TensorType k, tensor_type_from_mlir(a.k.getType()));
    MSTEP_ASSIGN_OR_RETURN(TensorType v, tensor_type_from_mlir(a.v.getType()));
    const std::vector<int64_t> dims(q.shape.dims().begin(), q.shape.dims().end());
    const size_t r = dims.size();
    if (r < 2 || k.shape.rank() != r || v.shape.rank() != r)
      return not_lowered(absl::StrCat("query, key and value of ranks ", r, ", ", k.shape.rank(),
                                      " and ", v.shape.rank()));
    CudnnSdpaConfig c;
    c.batch = r >= 3 ? dims[0] : 1;
    c.heads = 1;
    for (size_t d = 1; d + 2 < r; ++d) c.heads *= dims[d];
    c.seq_q = dims[r - 2];
    c.head_dim = dims[r - 1];
    c.seq_kv = k.shape.dims()[r - 2];
    c.head_dim_v = v.shape.dims()[r - 1] == c.head_dim ? 0 : v.shape.dims()[r - 1];
    c.dtype = q.dtype;
    c.scale = a.scale;
    c.causal = a.causal;
    c.dropout_p = a.dropout_p;
    c.softmax_mode_none = a.softmax_mode_none;
    c.saved_probs = saved_probs_in || !a.recompute;
    c.mask_grad = mask_grad;
    if (a.mask) {
      MSTEP_ASSIGN_OR_RETURN(TensorType m, tensor_type_from_mlir(a.mask.getType()));
      c.mask = m.dtype == DType::boolean ? SdpaMaskKind::boolean : SdpaMaskKind::additive;
      if (c.mask == SdpaMaskKind::additive && m.dtype != q.dtype)
        return not_lowered(absl::StrCat("a mask ", m.to_string(), " of another type than query"));
      // Right-aligned to [..., L, S]: cuDNN's is [B or 1, H or 1, L, S].
      std::vector<int64_t> md(r > m.shape.rank() ? r - m.shape.rank() : 0, 1);
      md.insert(md.end(), m.shape.dims().begin(), m.shape.dims().end());
      if (md.size() != r || md[r - 2] != c.seq_q || md[r - 1] != c.seq_kv)
        return not_lowered(absl::StrCat("a mask ", m.to_string(),
                                        " broadcast over query rows or keys (cuDNN's mask is "
                                        "[B or 1, H or 1, L, S])"));
      c.mask_per_batch = r < 3 || md[0] == dims[0];
      bool all_heads = true, no_heads = true;
      for (size_t d = 1; d + 2 < r; ++d) {
        all_heads = all_heads && md[d] == dims[d];
        no_heads = no_heads && md[d] == 1;
      }
      if (!all_heads && !no_heads)
        return not_lowered(
            absl::StrCat("a mask ", m.to_string(), " broadcast over some head dims but not all"));
      c.mask_per_head = all_heads;
    }
    if (a.valid_seq_len) {
      MSTEP_ASSIGN_OR_RETURN(TensorType lens, tensor_type_from_mlir(a.valid_seq_len.getType()));
      c.padding = a.left_padding ? SdpaPadding::left : SdpaPadding::right;
      // i64 lengths: converted to i32 (cudnn_option_ids).
      if (lens.dtype != DType::i32 && lens.dtype != DType::i64)
        return not_lowered(absl::StrCat("valid_seq_len is ", lens.to_string()));
    }
    if (absl::Status ok = cudnn_sdpa_expressible(c); !ok.ok()) {
      if (ok.code() == absl::StatusCode::kUnimplemented) return not_lowered(ok.message());
      return absl::Status(ok.code(), absl::StrCat(prefix(), ": ", ok.message()));
    }
    return c;
  }

private:
  mlir::Operation* op_;
  std::string origin_;
  std::string q_type_;
};

/// The step of plan.attentions' new entry `info`.
void add_step(CudaPlan& plan, CudaAttentionInfo info, std::vector<int> args,
              std::vector<int> writes) {
  CudaLaunchStep step;
  step.attention = static_cast<int>(plan.attentions.size());
  step.args = std::move(args);
  step.writes = std::move(writes);
  plan.attentions.push_back(std::move(info));
  plan.launches.push_back(std::move(step));
}

/// q, k, v as plan values.
std::vector<int> input_ids(const AttentionOperands& a,
                           const llvm::DenseMap<mlir::Value, int>& ids) {
  return {ids.at(a.q), ids.at(a.k), ids.at(a.v)};
}

/// [mask] [, valid_seq_len] as plan values.
std::vector<int> option_ids(const AttentionOperands& a,
                            const llvm::DenseMap<mlir::Value, int>& ids) {
  std::vector<int> args;
  if (a.mask) args.push_back(ids.at(a.mask));
  if (a.valid_seq_len) args.push_back(ids.at(a.valid_seq_len));
  return args;
}

/// `value`'s plan id: the one it has (a strided view the caller added), or
/// a new value.
absl::StatusOr<int> result_id(CudaPlan& plan, llvm::DenseMap<mlir::Value, int>& ids,
                              mlir::Value value) {
  if (auto it = ids.find(value); it != ids.end()) return it->second;
  return add_plan_result(plan, ids, value);
}

/// The strides `views` gives `value`, or packed.
SdpaStrides strides_of(const CudaViews& views, mlir::Value value) {
  if (!value) return {};
  return views.attention_strides(value).value_or(SdpaStrides{});
}

/// Whether `a` and `b` are the same attention but for their layouts (a
/// backward matching its forward: the forward has no gradients).
bool same_but_layout(CudnnSdpaConfig a, const CudnnSdpaConfig& b) {
  a.layout = b.layout;
  return a == b;
}

} // namespace

bool CudaAttentionLowering::is_attention(mlir::Operation* op) {
  return mlir::isa<dialect::SdpaOp, dialect::SdpaBackwardOp>(op);
}

bool CudaAttentionLowering::runs_on_cudnn(mlir::Operation* op) {
  Lowering lowering(op, "");
  const AttentionOperands a = attention_operands(op);
  if (auto sdpa = mlir::dyn_cast<dialect::SdpaOp>(op))
    return lowering.config(a, false, false).ok() && !sdpa.getReturnAttnProbs() &&
           !sdpa.getReturnDropoutMask();
  auto grad = mlir::cast<dialect::SdpaBackwardOp>(op);
  return lowering
      .config(a, static_cast<bool>(grad.getGradMask()), static_cast<bool>(grad.getSavedProbs()))
      .ok();
}

absl::Status CudaAttentionLowering::lower(mlir::Operation* op, const std::string& origin,
                                          const std::string& name, const CudaViews& views,
                                          llvm::DenseMap<mlir::Value, int>& ids, CudaPlan& plan) {
  Lowering lowering(op, origin);
  // What cuDNN refuses is composed of cuBLASLt matmuls and kernels of our
  // own; what neither takes is an error naming both reasons.
  auto composed = [&](const absl::Status& refused) -> absl::Status {
    absl::Status status = composed_.lower(op, origin, name, ids, plan);
    if (status.code() != absl::StatusCode::kUnimplemented) return status;
    return absl::UnimplementedError(
        absl::StrCat(refused.message(),
                     "; nor does the composed attention (cuBLASLt and kernels of its own) "
                     "take ",
                     status.message()));
  };
  auto stats_type = [](const CudnnSdpaConfig& c) {
    return TensorType{Shape({c.batch, c.heads, c.seq_q, 1}), DType::f32};
  };
  auto concat = [](std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  if (auto sdpa = mlir::dyn_cast<dialect::SdpaOp>(op)) {
    const AttentionOperands a = attention_operands(op);
    absl::StatusOr<CudnnSdpaConfig> cudnn = lowering.config(a, false, false);
    if (cudnn.status().code() == absl::StatusCode::kUnimplemented) return composed(cudnn.status());
    MSTEP_ASSIGN_OR_RETURN(CudnnSdpaConfig config, std::move(cudnn));
    if (sdpa.getReturnAttnProbs() || sdpa.getReturnDropoutMask())
      return composed(lowering.not_lowered("returned probabilities or dropout mask"));
    config.layout.q = strides_of(views, a.q);
    config.layout.k = strides_of(views, a.k);
    config.layout.v = strides_of(views, a.v);
    config.layout.out = strides_of(views, sdpa.getOut());
    MSTEP_ASSIGN_OR_RETURN(int out, result_id(plan, ids, sdpa.getOut()));
    const int stats = add_plan_value(plan, stats_type(config));
    own_slots_.push_back(stats);
    MSTEP_ASSIGN_OR_RETURN(std::vector<int> options,
                           cudnn_option_ids(op, a, name, origin, ids, plan));
    add_step(plan, {origin, false, config}, concat(input_ids(a, ids), options), {out, stats});
    forwards_.push_back({{a.q, a.k, a.v, a.mask, a.valid_seq_len}, config, out, stats});
    return absl::OkStatus();
  }
  auto grad = mlir::cast<dialect::SdpaBackwardOp>(op);
  const AttentionOperands a = attention_operands(op);
  absl::StatusOr<CudnnSdpaConfig> cudnn = lowering.config(a, static_cast<bool>(grad.getGradMask()),
                                                          static_cast<bool>(grad.getSavedProbs()));
  if (cudnn.status().code() == absl::StatusCode::kUnimplemented) return composed(cudnn.status());
  MSTEP_ASSIGN_OR_RETURN(CudnnSdpaConfig config, std::move(cudnn));
  config.layout.q = strides_of(views, a.q);
  config.layout.k = strides_of(views, a.k);
  config.layout.v = strides_of(views, a.v);
  config.layout.grad_out = strides_of(views, grad.getGradOut());
  config.layout.grad_q = strides_of(views, grad.getGradQuery());
  config.layout.grad_k = strides_of(views, grad.getGradKey());
  config.layout.grad_v = strides_of(views, grad.getGradValue());
  const std::vector<mlir::Value> key = {a.q, a.k, a.v, a.mask, a.valid_seq_len};
  auto forward = std::find_if(forwards_.begin(), forwards_.end(), [&](const Forward& f) {
    return f.key == key && same_but_layout(f.config, config);
  });
  int out = -1, stats = -1;
  if (forward != forwards_.end()) {
    // The forward's out is read after its last use in the step graph (the
    // bytes of the value it is a strided view of, when it is one).
    out = forward->out;
    stats = forward->stats;
    config.layout.out = forward->config.layout.out;
    const CudaAlias* alias = plan.alias_of(out);
    own_slots_.push_back(alias ? alias->root : out);
  } else {
    // No forward in this step: one of its own, for cuDNN's out and stats.
    MSTEP_ASSIGN_OR_RETURN(TensorType out_type, tensor_type_from_mlir(grad.getGradOut().getType()));
    out = add_plan_value(plan, std::move(out_type));
    stats = add_plan_value(plan, stats_type(config));
    own_slots_.insert(own_slots_.end(), {out, stats});
    MSTEP_ASSIGN_OR_RETURN(std::vector<int> options,
                           cudnn_option_ids(op, a, name, origin, ids, plan));
    add_step(plan, {absl::StrCat(origin, " (its forward)"), false, config},
             concat(input_ids(a, ids), std::move(options)), {out, stats});
    forwards_.push_back({key, config, out, stats});
  }
  std::vector<int> args = input_ids(a, ids);
  args.insert(args.end(), {out, stats, ids.at(grad.getGradOut())});
  MSTEP_ASSIGN_OR_RETURN(std::vector<int> options, cudnn_option_ids(op, a, name, origin, ids, plan));
  args = concat(std::move(args), std::move(options));
  std::vector<int> writes;
  for (mlir::Value result : {grad.getGradQuery(), grad.getGradKey(), grad.getGradValue()}) {
    MSTEP_ASSIGN_OR_RETURN(int id, result_id(plan, ids, result));
    writes.push_back(id);
  }
  add_step(plan, {origin, true, config}, std::move(args), std::move(writes));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> CudaAttentionLowering::cudnn_option_ids(
    mlir::Operation* op, const AttentionOperands& a, const std::string& name,
    const std::string& origin, const llvm::DenseMap<mlir::Value, int>& ids, CudaPlan& plan) {
  std::vector<int> options = option_ids(a, ids);
  if (!a.valid_seq_len) return options;
  auto lens = mlir::cast<mlir::RankedTensorType>(a.valid_seq_len.getType());
  if (!lens.getElementType().isInteger(64)) return options;
  auto found = lengths_i32_.find(a.valid_seq_len);
  if (found == lengths_i32_.end()) {
    auto i32 = mlir::RankedTensorType::get(lens.getShape(), mlir::IntegerType::get(op->getContext(), 32));
    const int converted =
        add_plan_value(plan, TensorType{Shape(lens.getShape()), DType::i32});
    own_slots_.push_back(converted);  // read by later steps: kept apart
    const std::string kernel = name + "_lengths";
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels,
                           generate_loop_kernels(op, kernel, {lens, i32},
                                                 [](mlir::func::FuncOp func) {
                                                   build_lengths_as_i32(func);
                                                   return absl::OkStatus();
                                                 },
                                                 codegen_));
    MSTEP_RETURN_IF_ERROR(sink_(std::move(kernels), kernel, {ids.at(a.valid_seq_len), converted}, 1,
                                absl::StrCat(origin, ": valid_seq_len as i32")));
    found = lengths_i32_.try_emplace(a.valid_seq_len, converted).first;
  }
  options.back() = found->second;  // the lengths come last
  return options;
}

absl::Status CudaAttentionLowering::place_in_arena(CudaPlan& plan) const {
  if (plan.arena_offsets.empty()) return absl::OkStatus();
  place_own_slots(plan);
  composed_.place_in_arena(plan);
  return absl::OkStatus();
}

void CudaAttentionLowering::place_own_slots(CudaPlan& plan) const {
  place_in_own_arena_slots(plan, own_slots_);
}

} // namespace mstep::cuda
