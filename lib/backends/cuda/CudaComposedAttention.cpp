// CudaComposedAttention: see CudaComposedAttention.h.
#include "lib/backends/cuda/CudaComposedAttention.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaAttentionLoops.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

template <typename Op> AttentionOperands operands_of(Op op) {
  AttentionOperands a;
  a.q = op.getQuery();
  a.k = op.getKey();
  a.v = op.getValue();
  a.mask = op.getMask();
  a.valid_seq_len = op.getValidSeqLen();
  a.rng = op.getRngState();
  a.scale = op.getScale().convertToDouble();
  a.dropout_p = op.getDropoutP().convertToDouble();
  a.rng_offset = static_cast<int64_t>(op.getRngOffset().value_or(0));
  a.causal = op.getIsCausal();
  a.softmax_mode_none = op.getSoftmaxMode() == dialect::SoftmaxMode::none;
  a.recompute = op.getRecomputeMode();
  a.left_padding = op.getPaddingSide() == dialect::PaddingSide::left;
  return a;
}

/// Row-major strides of `dims`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * dims[d];
  return strides;
}

/// The shapes and options of one node, and its types.
struct Node {
  AttentionRows rows;
  int64_t E = 0, Ev = 0;
  DType dtype = DType::f32;
  mlir::RankedTensorType scores_type; ///< [..., L, S] in q's element type
};

absl::StatusOr<Node> node_of(const AttentionOperands& a) {
  MSTEP_ASSIGN_OR_RETURN(TensorType q, tensor_type_from_mlir(a.q.getType()));
  MSTEP_ASSIGN_OR_RETURN(TensorType k, tensor_type_from_mlir(a.k.getType()));
  MSTEP_ASSIGN_OR_RETURN(TensorType v, tensor_type_from_mlir(a.v.getType()));
  const size_t r = q.shape.rank();
  if (r < 2 || k.shape.rank() != r || v.shape.rank() != r)
    return absl::UnimplementedError(absl::StrCat("query, key and value of ranks ", r, ", ",
                                                 k.shape.rank(), " and ", v.shape.rank()));
  if (q.dtype != DType::f32 && q.dtype != DType::bf16 && q.dtype != DType::f16)
    return absl::UnimplementedError(absl::StrCat(
        "dtype ", dtype_name(q.dtype), " (its matmuls are cuBLASLt's: f32, bf16 or f16)"));
  Node node;
  node.dtype = q.dtype;
  AttentionRows& rows = node.rows;
  rows.scores_shape.assign(q.shape.dims().begin(), q.shape.dims().end());
  rows.L = q.shape.dims()[r - 2];
  rows.S = k.shape.dims()[r - 2];
  rows.scores_shape[r - 1] = rows.S;
  node.E = q.shape.dims()[r - 1];
  node.Ev = v.shape.dims()[r - 1];
  for (size_t d = 0; d + 2 < r; ++d) rows.batch_heads *= rows.scores_shape[d];
  for (size_t d = 1; d + 2 < r; ++d) rows.rows_per_b0 *= rows.scores_shape[d];
  rows.scale = a.scale;
  rows.dropout_p = a.dropout_p;
  rows.rng_offset = a.rng_offset;
  rows.causal = a.causal;
  rows.left_padding = a.left_padding;
  if (a.mask) {
    MSTEP_ASSIGN_OR_RETURN(TensorType m, tensor_type_from_mlir(a.mask.getType()));
    // Right-aligned onto [..., L, S]; a dim of 1 (or a missing one) broadcasts.
    const std::vector<int64_t> dims(m.shape.dims().begin(), m.shape.dims().end());
    const std::vector<int64_t> strides = strides_of(dims);
    if (dims.size() > r)
      return absl::InvalidArgumentError(
          absl::StrCat("a mask ", m.to_string(), " of rank over ", r));
    rows.mask_strides.assign(r, 0);
    for (size_t d = 0; d < dims.size(); ++d) {
      const size_t at = r - dims.size() + d;
      if (dims[d] != 1) rows.mask_strides[at] = strides[d];
    }
    rows.boolean_mask = m.dtype == DType::boolean;
  }
  if (a.valid_seq_len) {
    MSTEP_ASSIGN_OR_RETURN(TensorType lens, tensor_type_from_mlir(a.valid_seq_len.getType()));
    if (lens.dtype != DType::i32 && lens.dtype != DType::i64)
      return absl::UnimplementedError(
          absl::StrCat("valid_seq_len ", lens.to_string(), " (i32 or i64 lengths)"));
  }
  auto q_type = mlir::cast<mlir::RankedTensorType>(a.q.getType());
  node.scores_type = mlir::RankedTensorType::get(rows.scores_shape, q_type.getElementType());
  return node;
}

/// A cuBLASLt step: `batch` row-major products C = op(A) op(B) of
/// [m, k] x [k, n] (A stored [k, m] when transpose_a, B [n, k] when
/// transpose_b), each matrix the next `stride` elements on.
struct Gemm {
  int a = -1, b = -1, c = -1;
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  const char* what = "";
};

void add_gemm(CudaPlan& plan, const Node& node, const std::string& origin, const Gemm& g) {
  CudaMatmulInfo info;
  info.origin = absl::StrCat(origin, ": ", g.what);
  info.shape.m = g.m;
  info.shape.n = g.n;
  info.shape.k = g.k;
  info.shape.transpose_a = g.transpose_a;
  info.shape.transpose_b = g.transpose_b;
  info.shape.dtype = node.dtype;
  info.batch = node.rows.batch_heads;
  info.a_stride = g.m * g.k;
  info.b_stride = g.k * g.n;
  info.c_stride = g.m * g.n;
  CudaLaunchStep step;
  step.matmul = static_cast<int>(plan.matmuls.size());
  step.args = {g.a, g.b};
  step.writes = {g.c};
  plan.matmuls.push_back(std::move(info));
  plan.launches.push_back(std::move(step));
}

/// The read-only parameters the row kernels share: [mask] [valid_seq_len]
/// [rng], each set in `params` and added to `values` / `types`.
void option_params(const AttentionOperands& a, bool rng,
                   const llvm::DenseMap<mlir::Value, int>& ids, AttentionParams& params,
                   std::vector<int>& values, std::vector<mlir::Type>& types) {
  auto add = [&](mlir::Value value, int& slot) {
    if (!value) return;
    slot = static_cast<int>(values.size());
    values.push_back(ids.at(value));
    types.push_back(value.getType());
  };
  add(a.mask, params.mask);
  add(a.valid_seq_len, params.valid_seq_len);
  if (rng) add(a.rng, params.rng);
}

} // namespace

AttentionOperands attention_operands(mlir::Operation* op) {
  if (auto sdpa = mlir::dyn_cast<dialect::SdpaOp>(op)) return operands_of(sdpa);
  return operands_of(mlir::cast<dialect::SdpaBackwardOp>(op));
}

absl::Status CudaComposedAttention::lower(mlir::Operation* op, const std::string& origin,
                                          const std::string& name,
                                          llvm::DenseMap<mlir::Value, int>& ids, CudaPlan& plan) {
  const AttentionOperands a = attention_operands(op);
  MSTEP_ASSIGN_OR_RETURN(Node node, node_of(a));
  const AttentionRows& rows = node.rows;
  const int64_t L = rows.L, S = rows.S;
  MSTEP_ASSIGN_OR_RETURN(TensorType scores_type, tensor_type_from_mlir(node.scores_type));
  // The probs kernel on `scores` (read and written in place), also
  // writing `extra`'s results (saved, returned probabilities, dropout mask).
  struct Extra {
    mlir::Value saved, returned, dropout_mask;
  };
  auto probs_kernel = [&](int scores, bool dropout, const std::string& kernel,
                          const Extra& extra) -> absl::Status {
    AttentionParams params;
    std::vector<int> values;
    std::vector<mlir::Type> types;
    option_params(a, dropout && a.rng, ids, params, values, types);
    params.scores = static_cast<int>(values.size());
    values.push_back(scores);
    types.push_back(node.scores_type);
    for (auto [value, slot] : {std::pair{extra.saved, &params.saved},
                               std::pair{extra.returned, &params.returned},
                               std::pair{extra.dropout_mask, &params.dropout_mask}}) {
      if (!value) continue;
      MSTEP_ASSIGN_OR_RETURN(int id, add_plan_result(plan, ids, value));
      *slot = static_cast<int>(values.size());
      values.push_back(id);
      types.push_back(value.getType());
    }
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels, generate_loop_kernels(
                                                         op, kernel, types,
                                                         [&](mlir::func::FuncOp func) {
                                                           build_attention_probs(func, rows, params,
                                                                                 dropout);
                                                           return absl::OkStatus();
                                                         },
                                                         codegen_));
    const size_t first_written = static_cast<size_t>(params.scores);
    return sink_(std::move(kernels), kernel, std::move(values), first_written,
                 absl::StrCat(origin, ": probabilities"));
  };
  // A kernel of `build` over `values` (the first `first_written` read).
  auto loop_kernel = [&](const std::string& kernel, const std::vector<int>& values,
                         const std::vector<mlir::Type>& types, size_t first_written,
                         const std::string& what,
                         const std::function<void(mlir::func::FuncOp)>& build) -> absl::Status {
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels,
                           generate_loop_kernels(op, kernel, types,
                                                 [&](mlir::func::FuncOp func) {
                                                   build(func);
                                                   return absl::OkStatus();
                                                 },
                                                 codegen_));
    return sink_(std::move(kernels), kernel, values, first_written, absl::StrCat(origin, what));
  };

  if (auto sdpa = mlir::dyn_cast<dialect::SdpaOp>(op)) {
    MSTEP_ASSIGN_OR_RETURN(int out, add_plan_result(plan, ids, sdpa.getOut()));
    const int scores = add_plan_value(plan, scores_type);
    scratch_.push_back({scores});
    add_gemm(plan, node, origin,
             {ids.at(a.q), ids.at(a.k), scores, L, S, node.E, false, true, "scores = q·kᵀ"});
    MSTEP_RETURN_IF_ERROR(probs_kernel(
        scores, true, name + "_probs",
        {sdpa.getSavedProbs(), sdpa.getAttnProbs(), sdpa.getDropoutMask()}));
    add_gemm(plan, node, origin,
             {scores, ids.at(a.v), out, L, node.Ev, S, false, false, "out = probs·v"});
    return absl::OkStatus();
  }

  auto grad = mlir::cast<dialect::SdpaBackwardOp>(op);
  const int g = ids.at(grad.getGradOut()), q = ids.at(a.q), k = ids.at(a.k), v = ids.at(a.v);
  std::vector<int> results;
  for (mlir::Value result : {grad.getGradQuery(), grad.getGradKey(), grad.getGradValue()}) {
    MSTEP_ASSIGN_OR_RETURN(int id, add_plan_result(plan, ids, result));
    results.push_back(id);
  }
  const int probs = add_plan_value(plan, scores_type), dprobs = add_plan_value(plan, scores_type);
  // The mask's gradient sums dS, kept in f64 until then (ref's order and
  // rounding).
  const int ds = grad.getGradMask()
                     ? add_plan_value(plan, TensorType{Shape(rows.scores_shape), DType::f64})
                     : -1;
  scratch_.push_back(ds >= 0 ? std::vector<int>{probs, dprobs, ds} : std::vector<int>{probs, dprobs});
  if (mlir::Value saved = grad.getSavedProbs()) {
    // P as the forward saved it (before dropout), into the scratch that
    // the softmax backward overwrites.
    MSTEP_RETURN_IF_ERROR(loop_kernel(name + "_saved_probs", {ids.at(saved), probs},
                                      {saved.getType(), node.scores_type}, 1,
                                      ": saved probabilities", [](mlir::func::FuncOp func) {
                                        loops::Nest nest(func);
                                        nest.copy(0, 1);
                                        nest.b.create<mlir::func::ReturnOp>();
                                      }));
  } else {
    add_gemm(plan, node, origin, {q, k, probs, L, S, node.E, false, true, "scores = q·kᵀ"});
    MSTEP_RETURN_IF_ERROR(probs_kernel(probs, false, name + "_probs", {}));
  }
  add_gemm(plan, node, origin, {g, v, dprobs, L, S, node.Ev, false, true, "dprobs = g·vᵀ"});
  {
    AttentionParams params;
    std::vector<int> values;
    std::vector<mlir::Type> types;
    if (a.rng) {
      params.rng = 0;
      values.push_back(ids.at(a.rng));
      types.push_back(a.rng.getType());
    }
    const size_t first_written = values.size();
    params.probs = static_cast<int>(values.size());
    params.dprobs = params.probs + 1;
    values.insert(values.end(), {probs, dprobs});
    types.insert(types.end(), {node.scores_type, node.scores_type});
    if (ds >= 0) {
      params.ds = static_cast<int>(values.size());
      values.push_back(ds);
      types.push_back(mlir::RankedTensorType::get(rows.scores_shape,
                                                  mlir::Float64Type::get(op->getContext())));
    }
    const std::string kernel = name + "_probs_grad";
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels, generate_loop_kernels(
                                                         op, kernel, types,
                                                         [&](mlir::func::FuncOp func) {
                                                           build_attention_probs_grad(func, rows,
                                                                                      params);
                                                           return absl::OkStatus();
                                                         },
                                                         codegen_));
    MSTEP_RETURN_IF_ERROR(sink_(std::move(kernels), kernel, std::move(values), first_written,
                                absl::StrCat(origin, ": softmax backward")));
  }
  if (mlir::Value grad_mask = grad.getGradMask()) {
    MSTEP_ASSIGN_OR_RETURN(int id, add_plan_result(plan, ids, grad_mask));
    MSTEP_RETURN_IF_ERROR(loop_kernel(
        name + "_mask_grad", {ds, id},
        {mlir::RankedTensorType::get(rows.scores_shape, mlir::Float64Type::get(op->getContext())),
         grad_mask.getType()},
        1, ": the mask's gradient", [&rows](mlir::func::FuncOp func) {
          AttentionParams params;
          params.ds = 0;
          params.grad_mask = 1;
          build_attention_mask_grad(func, rows, params);
        }));
  }
  add_gemm(plan, node, origin,
           {probs, g, results[2], S, node.Ev, L, true, false, "grad_v = probsᵀ·g"});
  add_gemm(plan, node, origin,
           {dprobs, k, results[0], L, node.E, S, false, false, "grad_q = dscores·k"});
  add_gemm(plan, node, origin,
           {dprobs, q, results[1], S, node.E, L, true, false, "grad_k = dscoresᵀ·q"});
  return absl::OkStatus();
}

void CudaComposedAttention::place_in_arena(CudaPlan& plan) const {
  place_scratch_at_arena_end(plan, scratch_);
}

int add_plan_value(CudaPlan& plan, TensorType type) {
  plan.values.push_back(std::move(type));
  return static_cast<int>(plan.values.size()) - 1;
}

absl::StatusOr<int> add_plan_result(CudaPlan& plan, llvm::DenseMap<mlir::Value, int>& ids,
                                    mlir::Value value) {
  MSTEP_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_mlir(value.getType()));
  ids[value] = add_plan_value(plan, std::move(type));
  return ids[value];
}

} // namespace mstep::cuda
