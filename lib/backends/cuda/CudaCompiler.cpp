// The cuda compile half: compile_cuda_step (see CudaCompiler.h) and its
// registration with the compiler driver.
#include "lib/backends/cuda/CudaCompiler.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaAttentionLowering.h"
#include "lib/backends/cuda/CudaAutocastBias.h"
#include "lib/backends/cuda/CudaCatLoops.h"
#include "lib/backends/cuda/CudaConvLoops.h"
#include "lib/backends/cuda/CudaColumnSumBatches.h"
#include "lib/backends/cuda/CudaConvLowering.h"
#include "lib/backends/cuda/CudaElementwiseBatches.h"
#include "lib/backends/cuda/CudaCustomLowering.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "lib/backends/cuda/CudaPtxas.h"
#include "lib/backends/cuda/CudaRowGroupLoops.h"
#include "lib/backends/cuda/CudaOpGroups.h"
#include "lib/backends/cuda/CudaRowGroups.h"
#include "lib/backends/cuda/CudaSliceScatterFusions.h"
#include "lib/backends/cuda/CudaViews.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/MemoryPlan.h"

namespace mstep::cuda {

namespace {

/// The step value type of an MLIR tensor type.
absl::StatusOr<TensorType> value_type(mlir::Value value, mlir::Operation* user) {
  MSTEP_ASSIGN_OR_RETURN(TensorType type, tensor_type_from_mlir(value.getType()));
  return type;
}

/// The product of dims [begin, end) of `shape`.
int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape.dims()[d];
  return n;
}

/// Before lowering: an operand of a batched mstep.matmul whose batch dims
/// broadcast partly onto the result's ([2, 1] against [2, 3]) is expanded
/// to the result's batch dims (an mstep.expand kernel), so that the call
/// takes it at a stride of one matrix; one strided call covers only batch
/// dims that are all the result's or all 1.
void expand_partly_broadcast_batches(mlir::func::FuncOp step) {
  step.walk([](dialect::MatmulOp matmul) {
    auto result = mlir::cast<mlir::RankedTensorType>(matmul.getResult().getType());
    const int64_t out_rank = result.getRank();
    if (mlir::cast<mlir::RankedTensorType>(matmul->getOperand(1).getType()).getRank() == 2) return;
    const llvm::ArrayRef<int64_t> out_batch = result.getShape().drop_back(2);
    for (unsigned i = 0; i < 2; ++i) {
      mlir::Value operand = matmul->getOperand(i);
      auto type = mlir::cast<mlir::RankedTensorType>(operand.getType());
      llvm::SmallVector<int64_t> padded(out_rank - type.getRank(), 1);
      llvm::append_range(padded, type.getShape().drop_back(2));
      if (llvm::ArrayRef<int64_t>(padded) == out_batch ||
          llvm::all_of(padded, [](int64_t d) { return d == 1; }))
        continue;
      llvm::SmallVector<int64_t> dims(out_batch);
      llvm::append_range(dims, type.getShape().take_back(2));
      mlir::OpBuilder b(matmul);
      mlir::Value expanded = b.create<dialect::ExpandOp>(
          matmul.getLoc(), mlir::RankedTensorType::get(dims, type.getElementType()), operand);
      matmul->setOperand(i, expanded);
    }
  });
}

/// mstep.matmul as a cuBLASLt step: lhs [..., m, k] x rhs [..., k, n]. A 2-D
/// rhs folds lhs's batch dims into m (one matmul); otherwise one strided
/// batched call over the result's batch dims, where each operand's batch
/// dims (padded with 1s on the left) are the result's (stride: its matrix)
/// or all 1 (stride 0: broadcast); expand_partly_broadcast_batches has
/// made every batched matmul so. Dtypes other than f32 / bf16 / f16 are
/// not lowered yet.
absl::StatusOr<CudaMatmulInfo> matmul_info(const TensorType& lhs, const TensorType& rhs,
                                           const TensorType& result, std::string origin) {
  auto unimplemented = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat("cuda: op 'mstep.matmul' (", origin, ", ",
                                                 lhs.to_string(), " x ", rhs.to_string(),
                                                 ") is not yet lowered for cuda: ", why));
  };
  if (lhs.dtype != DType::f32 && lhs.dtype != DType::bf16 && lhs.dtype != DType::f16)
    return unimplemented("cuBLASLt steps take f32, bf16 or f16");
  const size_t lr = lhs.shape.rank(), rr = rhs.shape.rank();
  CudaMatmulInfo info;
  info.origin = origin;
  info.shape.dtype = lhs.dtype;
  info.shape.k = lhs.shape.dims()[lr - 1];
  info.shape.n = rhs.shape.dims()[rr - 1];
  const int64_t rows = lhs.shape.dims()[lr - 2];
  if (rr == 2) {
    info.shape.m = product(lhs.shape, 0, lr - 1);
  } else {
    // The result's batch dims, and whether an operand has them all or none.
    const size_t out_rank = result.shape.rank();
    const std::vector<int64_t> out_batch(result.shape.dims().begin(),
                                         result.shape.dims().end() - 2);
    const auto batch_stride = [&](const Shape& s, int64_t matrix) -> std::optional<int64_t> {
      std::vector<int64_t> padded(out_rank - s.rank(), 1);
      padded.insert(padded.end(), s.dims().begin(), s.dims().end() - 2);
      if (padded == out_batch) return matrix;
      if (std::all_of(padded.begin(), padded.end(), [](int64_t d) { return d == 1; })) return 0;
      return std::nullopt;
    };
    const std::optional<int64_t> a_stride = batch_stride(lhs.shape, rows * info.shape.k);
    const std::optional<int64_t> b_stride = batch_stride(rhs.shape, info.shape.k * info.shape.n);
    if (!a_stride || !b_stride)
      return unimplemented(
          "its batch dims broadcast partly (each operand's must be the result's or all 1)");
    info.shape.m = rows;
    info.batch = product(result.shape, 0, out_rank - 2);
    info.a_stride = *a_stride;
    info.b_stride = *b_stride;
    info.c_stride = rows * info.shape.n;
  }
  if (product(result.shape, 0, result.shape.rank()) != info.batch * info.shape.m * info.shape.n)
    return unimplemented(absl::StrCat("the result ", result.to_string(), " is not the product's"));
  return info;
}

/// mstep.matmul `op` as a cuBLASLt step: its operands (a folded transpose
/// read through the step's transpose flag), and its product, or the
/// transpose of it that a permute would have made (C^T = B^T A^T: the
/// operands swap, each transpose flag flips), or the result of the bias
/// add and activation its epilogue applies (the bias its third operand);
/// and the bias gradient it writes too (its second write, `written_value`'s
/// id for the sum's result, listed in `own_slots`: the call writes it
/// before or after the sum's place in the step, so it gets arena bytes no
/// other value shares). An epilogue's fallback (CudaMatmulInfo::fallback)
/// is the kernels of the ops it absorbs, over C in place, or of the sum,
/// over the summed operand's bytes: `add_fallback(op, name, params,
/// launches)` appends op's kernels on plan values `params` to `launches`.
template <typename AddValue, typename WrittenValue, typename AddFallback>
absl::Status lower_matmul(mlir::Operation& op, int index, const CudaViews& views,
                          llvm::DenseMap<mlir::Value, int>& ids, AddValue& add_value,
                          WrittenValue& written_value, AddFallback& add_fallback,
                          std::vector<int>& own_slots, CudaPlan& plan) {
  CudaLaunchStep step_launch;
  for (mlir::Value operand : op.getOperands()) step_launch.args.push_back(ids.at(operand));
  MSTEP_ASSIGN_OR_RETURN(TensorType product, value_type(op.getResult(0), &op));
  MSTEP_ASSIGN_OR_RETURN(CudaMatmulInfo info,
                         matmul_info(plan.values[step_launch.args[0]],
                                     plan.values[step_launch.args[1]], product,
                                     absl::StrCat("mstep.matmul #", index)));
  info.shape.transpose_a = views.read_transposed(op.getOperand(0));
  info.shape.transpose_b = views.read_transposed(op.getOperand(1));
  int result = -1;
  if (mlir::Operation* permute = views.transposed_result(&op)) {
    MSTEP_ASSIGN_OR_RETURN(result, add_value(permute->getResult(0), permute));
    ids[op.getResult(0)] = result;  // only the permute read it
    std::swap(step_launch.args[0], step_launch.args[1]);
    MatmulShape& s = info.shape;
    std::swap(s.m, s.n);
    const bool transpose_a = s.transpose_a;
    s.transpose_a = !s.transpose_b;
    s.transpose_b = !transpose_a;
    std::swap(info.a_stride, info.b_stride);
  } else if (const CudaMatmulEpilogue* epilogue = views.epilogue(&op)) {
    // The bias add (and activation) it absorbs: it writes their result.
    MSTEP_ASSIGN_OR_RETURN(result, add_value(epilogue->result, epilogue->result.getDefiningOp()));
    ids[op.getResult(0)] = result;  // only the absorbed ops read it
    for (mlir::Operation* user : op.getResult(0).getUsers())
      for (mlir::Value between : user->getResults()) ids.try_emplace(between, result);
    step_launch.args.push_back(ids.at(epilogue->bias));
    info.shape.bias = true;
    info.shape.epilogue = epilogue->activation;
    for (size_t i = 0; i < epilogue->ops.size(); ++i) {
      mlir::Operation* absorbed = epilogue->ops[i];
      std::vector<int> params;
      for (mlir::Value operand : absorbed->getOperands()) params.push_back(ids.at(operand));
      for (mlir::Value between : absorbed->getResults()) params.push_back(ids.at(between));
      MSTEP_RETURN_IF_ERROR(add_fallback(absorbed, absl::StrCat("op", index, "_epilogue", i),
                                         std::move(params), info.fallback));
    }
  } else {
    MSTEP_ASSIGN_OR_RETURN(result, add_value(op.getResult(0), &op));
  }
  step_launch.writes.push_back(result);
  if (const CudaMatmulBiasGrad* grad = views.bias_grad(&op)) {
    MSTEP_ASSIGN_OR_RETURN(int sum, written_value(grad->sum->getResult(0), grad->sum));
    step_launch.writes.push_back(sum);
    own_slots.push_back(sum);
    // Summed over k: lhs or rhs as written, the other once a transposed
    // result swapped them.
    const bool lhs = (grad->operand == 0) != (views.transposed_result(&op) != nullptr);
    info.shape.bias_grad = lhs ? MatmulBiasGrad::lhs : MatmulBiasGrad::rhs;
    // The sum's kernels read the matrix's bytes (its input is them,
    // through reshapes that may come later in the step).
    MSTEP_RETURN_IF_ERROR(add_fallback(grad->sum, absl::StrCat("op", index, "_bias_grad"),
                                       {ids.at(grad->matrix), sum}, info.fallback));
  }
  step_launch.matmul = static_cast<int>(plan.matmuls.size());
  plan.matmuls.push_back(std::move(info));
  plan.launches.push_back(std::move(step_launch));
  return absl::OkStatus();
}

/// A collective node's attributes (CudaCollectiveInfo).
absl::StatusOr<CudaCollectiveInfo> collective_info(mlir::Operation* op, std::string origin) {
  CudaCollectiveInfo info;
  info.origin = std::move(origin);
  if (auto c = mlir::dyn_cast<dialect::AllReduceOp>(op)) {
    info.op = OpKind::all_reduce;
    info.reduce_op = static_cast<int64_t>(c.getReduceOp());
    info.world_size = static_cast<int64_t>(c.getWorldSize());
  } else if (auto c = mlir::dyn_cast<dialect::AllGatherOp>(op)) {
    info.op = OpKind::all_gather;
    info.dim = static_cast<int64_t>(c.getDim());
    info.world_size = static_cast<int64_t>(c.getWorldSize());
  } else if (auto c = mlir::dyn_cast<dialect::BroadcastOp>(op)) {
    info.op = OpKind::broadcast;
    info.root = static_cast<int64_t>(c.getRoot());
    info.world_size = static_cast<int64_t>(c.getWorldSize());
  } else if (auto c = mlir::dyn_cast<dialect::ReduceScatterOp>(op)) {
    info.op = OpKind::reduce_scatter;
    info.reduce_op = static_cast<int64_t>(c.getReduceOp());
    info.dim = static_cast<int64_t>(c.getDim());
    info.world_size = static_cast<int64_t>(c.getWorldSize());
  } else {
    return absl::InternalError(absl::StrCat("cuda: ", info.origin, " is not a collective"));
  }
  return info;
}

/// The memory plan (CudaPlan::arena_offsets): the shared arena planner
/// (MemoryPlan.h) over the step's ops, with nothing in place (the kernels'
/// buffers are restrict), the returned values outside the arena (each
/// run returns fresh buffers; the arena is the executable's) and `views`'
/// values in their roots' bytes (the plan's aliases: no offset of their
/// own). The caller validates it once the attention steps' own values are
/// placed.
absl::Status plan_arena(mlir::func::FuncOp step, const llvm::DenseMap<mlir::Value, int>& ids,
                        const CudaViews& views, CudaPlan& plan) {
  DiagnosticCollector diagnostics(*step.getContext());
  const passes::MemoryPlanOptions options{
      .alignment = kCudaArenaAlignment,
      .in_place = false,
      .returned_in_arena = false,
      .views = [&](mlir::OpResult result) { return views.view_of(result); }};
  mlir::FailureOr<passes::MemoryPlan> memory = passes::plan_memory(step, options);
  if (mlir::failed(memory) || mlir::failed(passes::verify_memory_plan(*memory, step)))
    return absl::InternalError(
        absl::StrCat("cuda: planning the step's arena failed:", diagnostics.text()));
  plan.arena_offsets.assign(plan.values.size(), -1);
  plan.arena_bytes = memory->arena_bytes;
  for (const passes::PlannedValue& planned : memory->values) {
    auto id = ids.find(planned.value);
    if (planned.view_of || planned.arena_offset < 0 || id == ids.end())
      continue;  // an alias, returned, or no plan value
    plan.arena_offsets[id->second] = planned.arena_offset;
  }
  return absl::OkStatus();
}

/// Adds `kernels` (the launches of func @<name>) to the plan: each
/// kernel assembled for every arch of `options`, a launch with a plan
/// value per parameter (`params`, then a new value per temporary; those
/// from `first_written` on written), and the func's tiled loop nest.
/// `fallback`: the launches go there (an epilogue's fallback), not into
/// the plan's launches, and the kernels are not assembled (PTX only).
absl::Status add_kernels(GeneratedKernels kernels, const std::string& name, std::vector<int> params,
                         size_t first_written, const std::string& origin,
                         const CudaCompileOptions& options, CompiledCudaStep& compiled,
                         std::vector<CudaLaunchStep>* fallback = nullptr) {
  CudaPlan& plan = compiled.plan;
  // The op's temporaries: values of the plan that no other op reads, but
  // the error word, one value the whole plan shares (CudaErrorWord.h).
  for (size_t t = 0; t < kernels.temporaries.size(); ++t) {
    if (static_cast<int>(t) == kernels.error_word) {
      if (plan.error_word < 0) {
        plan.error_word = static_cast<int>(plan.values.size());
        plan.values.push_back(kernels.temporaries[t]);
      }
      params.push_back(plan.error_word);
      continue;
    }
    params.push_back(static_cast<int>(plan.values.size()));
    plan.values.push_back(kernels.temporaries[t]);
  }
  TiledOp tiled{name, std::move(kernels.tiled_loops), params, {}, fallback != nullptr};
  for (GeneratedLaunch& launch : kernels.launches) {
    CudaKernelInfo info;
    info.name = launch.kernel;
    info.origin = origin;
    info.grid = launch.grid;
    info.block = launch.block;
    // A fallback's kernels keep their PTX only, which the driver JITs where
    // a device takes the fallback: ptxas -O3 takes 0.3-0.4 s per column
    // sum and architecture, most of what the fallbacks would add to a
    // compile.
    const std::vector<std::string> ptx_only;
    for (const std::string& arch : fallback != nullptr ? ptx_only : options.archs) {
      MSTEP_ASSIGN_OR_RETURN(
          AssembledPtx assembled,
          assemble_ptx(launch.ptx, arch,
                       absl::StrCat("kernel ", info.name, " (", info.origin, ")")));
      info.cubins.push_back({arch, std::move(assembled.cubin)});
      for (PtxasKernelReport& report : assembled.reports) {
        report.arch = arch;
        info.reports.push_back(std::move(report));
      }
    }
    info.ptx = std::move(launch.ptx);
    CudaLaunchStep step_launch;
    step_launch.kernel = static_cast<int>(plan.kernels.size());
    // A launch that only reads a written parameter (a temporary) lists it
    // as a write too (harmless: the same stream).
    for (unsigned arg : launch.args) {
      step_launch.args.push_back(params.at(arg));
      if (arg >= first_written) step_launch.writes.push_back(params.at(arg));
    }
    tiled.kernels.push_back(step_launch.kernel);
    plan.kernels.push_back(std::move(info));
    (fallback != nullptr ? *fallback : plan.launches).push_back(std::move(step_launch));
  }
  compiled.tiled.push_back(std::move(tiled));
  return absl::OkStatus();
}

/// A row group's kernel (CudaRowGroupLoops.h), an elementwise batch's
/// (CudaElementwiseBatches.h), a column-sum batch's
/// (CudaColumnSumBatches.h) or a fusion's with its slice_scatters
/// (CudaSliceScatterFusions.h), on its inputs' and results' plan values
/// `params`, into the plan.
absl::Status lower_op_group(mlir::Operation& group, const std::string& name, int index,
                            std::vector<int> params, const CudaCompileOptions& options,
                            CompiledCudaStep& compiled) {
  const bool rows = is_row_group(&group), columns = is_column_sum_batch(&group),
             scatters = is_slice_scatter_fusion(&group);
  llvm::SmallVector<mlir::Value> inputs = op_group_inputs(&group);
  llvm::SmallVector<mlir::Type> types;
  for (mlir::Value input : inputs) types.push_back(input.getType());
  llvm::append_range(types, group.getResultTypes());
  // Its origin counts the ops it holds: "row group #12 over [8, 256, 256]
  // (4 mstep.mean, 5 mstep.fusion)", "elementwise batch #30 (14
  // mstep.fusion)".
  std::vector<std::pair<std::string, int>> counts;
  for (mlir::Operation& op : group.getRegion(0).front().without_terminator()) {
    const std::string kind = op.getName().getStringRef().str();
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& c) { return c.first == kind; });
    if (it == counts.end()) counts.push_back({kind, 1}); else ++it->second;
  }
  std::string origin =
      rows ? absl::StrCat("row group #", index, " over [",
                          absl::StrJoin(row_group_shape(&group), ", "), "] (")
      : columns  ? absl::StrCat("column-sum batch #", index, " (")
      : scatters ? absl::StrCat("fusion with its slice_scatters #", index, " (")
                : absl::StrCat("elementwise batch #", index, " (");
  for (size_t i = 0; i < counts.size(); ++i)
    absl::StrAppend(&origin, i ? ", " : "", counts[i].second, " ", counts[i].first);
  absl::StrAppend(&origin, ")");
  MSTEP_ASSIGN_OR_RETURN(
      GeneratedKernels kernels,
      generate_loop_kernels(&group, name, types,
                            [&](mlir::func::FuncOp func) {
                              if (rows) return build_row_group_loops(&group, func);
                              if (scatters) return build_slice_scatter_fusion_loops(&group, func);
                              if (columns)
                                return build_column_sum_batch_loops(&group, func,
                                                                    options.codegen);
                              return build_elementwise_batch_loops(&group, func);
                            },
                            options.codegen));
  return add_kernels(std::move(kernels), name, std::move(params), inputs.size(), origin, options,
                     compiled);
}

/// `op`'s generated kernels: a cat with operands written in place or
/// filled gets its loops per operand (CudaCatLoops.h).
absl::StatusOr<GeneratedKernels> op_kernels(mlir::Operation& op, const std::string& name,
                                            const CudaViews& views,
                                            const CudaCodegenOptions& options) {
  const llvm::SmallVector<CatOperandWay>* ways = views.cat_ways(&op);
  if (!ways) return generate_op_kernels(&op, name, options);
  llvm::SmallVector<mlir::Type> params(op.getOperandTypes());
  llvm::append_range(params, op.getResultTypes());
  return generate_loop_kernels(
      &op, name, params,
      [&](mlir::func::FuncOp func) {
        build_cat_func(mlir::cast<dialect::CatOp>(op), *ways, func);
        return absl::OkStatus();
      },
      options);
}

}  // namespace

CudaCompileOptions default_cuda_compile_options() {
  CudaCompileOptions options;
  options.codegen.toolkit = configured_cuda_toolkit();
  return options;
}

CudaCompileOptions cuda_compile_options(const RuntimeOptions& runtime) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = runtime.cuda_row_reduction == "thread" ? CudaRowReduction::thread
                                  : runtime.cuda_row_reduction == "block"
                                      ? CudaRowReduction::block
                                      : CudaRowReduction::fused;
  options.codegen.column_reduction = runtime.cuda_column_reduction == "thread"
                                         ? CudaColumnReduction::thread
                                         : CudaColumnReduction::split;
  options.codegen.multi_tensor_launch = runtime.cuda_optimizer != "per_tensor";
  options.codegen.conv = runtime.cuda_conv == "direct" ? CudaConvForm::direct : CudaConvForm::im2col;
  return options;
}

absl::StatusOr<CompiledCudaStep> compile_cuda_step(mlir::ModuleOp caller_module,
                                                   const CudaCompileOptions& options) {
  // The rewrites below (row groups among them) are the plan's business:
  // the caller's module stays as it was.
  mlir::OwningOpRef<mlir::ModuleOp> module = caller_module.clone();
  auto step = module->lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) return absl::InvalidArgumentError("cuda backend: the module has no func @step");
  expand_partly_broadcast_batches(step);
  hoist_bias_casts(step);
  sink_bias_grad_casts(step);
  CompiledCudaStep compiled;
  CudaPlan& plan = compiled.plan;
  // Row groups and batches leave the ops the views analysis gives a role
  // outside them; the analysis then runs again on the step with them.
  if (options.codegen.row_reduction == CudaRowReduction::fused) {
    group_rows(step, CudaViews(step, &CudaAttentionLowering::runs_on_cudnn), options.codegen);
    fuse_slice_scatters(step, CudaViews(step, &CudaAttentionLowering::runs_on_cudnn));
    batch_elementwise(step, CudaViews(step, &CudaAttentionLowering::runs_on_cudnn));
    batch_column_sums(step, CudaViews(step, &CudaAttentionLowering::runs_on_cudnn),
                      options.codegen);
  }
  const CudaViews views(step, &CudaAttentionLowering::runs_on_cudnn);
  llvm::DenseMap<mlir::Value, int> ids;
  // A new plan value; a view is an alias of its root (the root of the
  // value it views, added first when it is a later value: an output or a
  // cat the op writes into).
  std::function<absl::StatusOr<int>(mlir::Value, mlir::Operation*)> add_value =
      [&](mlir::Value value, mlir::Operation* op) -> absl::StatusOr<int> {
    MSTEP_ASSIGN_OR_RETURN(TensorType type, value_type(value, op));
    std::optional<passes::ViewOf> view = views.view_of(value);
    if (view && !ids.count(view->value))
      MSTEP_RETURN_IF_ERROR(add_value(view->value, view->value.getDefiningOp()).status());
    const int id = static_cast<int>(plan.values.size());
    ids[value] = id;
    plan.values.push_back(type);
    if (view) {
      CudaAlias alias{id, ids.at(view->value), view->offset};
      if (const CudaAlias* outer = plan.alias_of(alias.root))
        alias.root = outer->root, alias.byte_offset += outer->byte_offset;
      plan.aliases.push_back(alias);
    }
    return id;
  };
  // The id of a value an op writes: its own, or, when it is written
  // straight into a later output, an alias of the output's (added first).
  auto written_value = [&](mlir::Value value, mlir::Operation* op) -> absl::StatusOr<int> {
    if (auto it = ids.find(value); it != ids.end()) return it->second;
    if (std::optional<passes::ViewOf> view = views.view_of(value); view && !ids.count(view->value))
      MSTEP_RETURN_IF_ERROR(add_value(view->value, view->value.getDefiningOp()).status());
    return add_value(value, op);
  };
  // Values the arena planner cannot place (written by another op than
  // their own): bytes of their own at the arena's end.
  std::vector<int> own_slots;
  for (mlir::BlockArgument arg : step.getArguments()) {
    MSTEP_RETURN_IF_ERROR(add_value(arg, nullptr).status());
  }
  plan.num_inputs = plan.values.size();
  // Kernels the attention and convolution lowerings generate, into the plan.
  const CudaKernelSink add_op_kernels = [&](GeneratedKernels kernels,
                                            const std::string& kernel_name,
                                            std::vector<int> params, size_t first_written,
                                            const std::string& kernel_origin) {
    return add_kernels(std::move(kernels), kernel_name, std::move(params), first_written,
                       kernel_origin, options, compiled);
  };
  CudaAttentionLowering attention(options.codegen, add_op_kernels);
  CudaConvLowering convolutions(options.codegen, add_op_kernels);
  // An epilogue's fallback: op's kernels, on plan values `params`
  // (operands, then results), into `launches`.
  auto add_fallback = [&](mlir::Operation* op, const std::string& kernel_name,
                          std::vector<int> params,
                          std::vector<CudaLaunchStep>& launches) -> absl::Status {
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels,
                           generate_op_kernels(op, kernel_name, options.codegen));
    const std::string origin = absl::StrCat(op->getName().getStringRef().str(), " (",
                                            kernel_name, ", an epilogue's fallback)");
    return add_kernels(std::move(kernels), kernel_name, std::move(params), op->getNumOperands(),
                       origin, options, compiled, &launches);
  };
  int op_index = 0;
  for (mlir::Operation& op : step.getBody().front()) {
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (mlir::Value value : ret.getOperands()) plan.outputs.push_back(ids.at(value));
      continue;
    }
    const std::string name = absl::StrCat("op", op_index);
    std::string origin = absl::StrCat(op.getName().getStringRef().str(), " #", op_index++);
    if (views.launches_nothing(&op)) {
      // A view of its operand (an alias), or a value another op writes
      // (that has its id already, or gets it here: a matmul's bias
      // gradient before the matmul).
      for (mlir::Value result : op.getResults())
        MSTEP_RETURN_IF_ERROR(written_value(result, &op).status());
      continue;
    }
    // A result written straight into a later output: the output first, so
    // that the result is an alias of it.
    for (mlir::Value result : op.getResults())
      if (std::optional<passes::ViewOf> view = views.view_of(result);
          view && !ids.count(view->value) && !mlir::isa<dialect::MatmulOp>(op))
        MSTEP_RETURN_IF_ERROR(add_value(view->value, view->value.getDefiningOp()).status());
    if (mlir::isa<dialect::AllReduceOp, dialect::AllGatherOp, dialect::BroadcastOp,
                  dialect::ReduceScatterOp>(op)) {
      // A collective is one NCCL call on the backend's stream (CudaCollective.h).
      MSTEP_ASSIGN_OR_RETURN(CudaCollectiveInfo info, collective_info(&op, origin));
      CudaLaunchStep step_launch;
      step_launch.args.push_back(ids.at(op.getOperand(0)));
      MSTEP_ASSIGN_OR_RETURN(int result, add_value(op.getResult(0), &op));
      step_launch.writes.push_back(result);
      MSTEP_RETURN_IF_ERROR(check_cuda_collective(info, plan.values[step_launch.args[0]],
                                                  plan.values[result]));
      step_launch.collective = static_cast<int>(plan.collectives.size());
      plan.collectives.push_back(std::move(info));
      plan.launches.push_back(std::move(step_launch));
      continue;
    }
    if (mlir::isa<dialect::MatmulOp>(op)) {
      // A matmul is a cuBLASLt call, not a generated kernel.
      MSTEP_RETURN_IF_ERROR(
          lower_matmul(op, op_index - 1, views, ids, add_value, written_value, add_fallback,
                       own_slots, plan));
      continue;
    }
    if (CudaAttentionLowering::is_attention(&op)) {
      // Attention is a cuDNN SDPA step, not a generated kernel. A result
      // it writes at strides into a permute's result is an alias of it.
      for (mlir::Value result : op.getResults())
        if (views.attention_strides(result))
          MSTEP_RETURN_IF_ERROR(add_value(result, &op).status());
      MSTEP_RETURN_IF_ERROR(attention.lower(&op, origin, name, views, ids, plan));
      continue;
    }
    if (builds_conv_loops(&op)) {
      // A convolution: im2col kernels around a cuBLASLt matmul, or the
      // direct loops (CudaConvLowering.h); its origin says which.
      const std::string direct = conv_direct_reason(&op, options.codegen);
      if (direct.empty()) {
        MSTEP_ASSIGN_OR_RETURN(int result, written_value(op.getResult(0), &op));
        MSTEP_RETURN_IF_ERROR(convolutions.lower(&op, origin, name, ids, result, plan));
        continue;
      }
      absl::StrAppend(&origin, ": direct loops (", direct, ")");
    }
    if (auto custom = mlir::dyn_cast<dialect::CustomOp>(op)) {
      // A custom op's own CUDA C++ kernel, compiled with NVRTC.
      std::vector<int> operands, results;
      for (mlir::Value operand : op.getOperands()) operands.push_back(ids.at(operand));
      for (mlir::Value result : op.getResults()) {
        MSTEP_ASSIGN_OR_RETURN(int id, add_value(result, &op));
        results.push_back(id);
      }
      MSTEP_RETURN_IF_ERROR(lower_custom_op(custom, origin, operands, results, options.archs, plan));
      continue;
    }
    if (is_row_group(&op) || is_elementwise_batch(&op) || is_column_sum_batch(&op) ||
        is_slice_scatter_fusion(&op)) {
      std::vector<int> params;
      for (mlir::Value input : op_group_inputs(&op)) params.push_back(ids.at(input));
      for (mlir::Value result : op.getResults()) {
        MSTEP_ASSIGN_OR_RETURN(int id, written_value(result, &op));
        params.push_back(id);
      }
      MSTEP_RETURN_IF_ERROR(
          lower_op_group(op, name, op_index - 1, std::move(params), options, compiled));
      continue;
    }
    MSTEP_ASSIGN_OR_RETURN(GeneratedKernels kernels, op_kernels(op, name, views, options.codegen));
    std::vector<int> params;
    for (mlir::Value operand : op.getOperands()) params.push_back(ids.at(operand));
    // (A cat's result has its id already when an operand's op wrote into it.)
    for (mlir::Value result : op.getResults()) {
      MSTEP_ASSIGN_OR_RETURN(int id, written_value(result, &op));
      params.push_back(id);
    }
    MSTEP_RETURN_IF_ERROR(add_kernels(std::move(kernels), name, std::move(params),
                                      op.getNumOperands(), origin, options, compiled));
  }
  MSTEP_RETURN_IF_ERROR(plan_arena(step, ids, views, plan));
  place_in_own_arena_slots(plan, std::move(own_slots));
  MSTEP_RETURN_IF_ERROR(attention.place_in_arena(plan));
  convolutions.place_in_arena(plan);
  MSTEP_RETURN_IF_ERROR(validate_cuda_definitions(plan));
  MSTEP_RETURN_IF_ERROR(validate_cuda_arena(plan));
  return compiled;
}

namespace {

/// Writes the plan (launches, ptxas reports), each kernel's tiled loop
/// nest and PTX under MSTEP_DUMP_DIR as cuda_<n>/.
void dump(const std::string& dir, const CompiledCudaStep& compiled) {
  static std::atomic<int> counter{0};
  const std::string base = absl::StrCat(dir, "/cuda_", counter++);
  std::error_code ignored;
  std::filesystem::create_directories(base, ignored);
  std::ofstream(base + "/plan.txt") << describe_cuda_plan(compiled.plan);
  for (const CudaKernelInfo& kernel : compiled.plan.kernels)
    std::ofstream(absl::StrCat(base, "/", kernel.name, ".ptx")) << kernel.ptx;
  for (const TiledOp& op : compiled.tiled)
    std::ofstream(absl::StrCat(base, "/", op.name, ".tiled.mlir")) << op.module;
}

class CudaCompiler final : public BackendCompiler {
 public:
  absl::string_view backend_name() const override { return "cuda"; }

  void get_dependent_dialects(mlir::DialectRegistry& registry) const override {
    declare_cuda_codegen_dialects(registry);
  }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend& backend,
                                                      const RuntimeOptions& options) override {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    if (cuda == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda compiler: the backend is '", backend.name(), "', not a cuda backend"));
    MSTEP_ASSIGN_OR_RETURN(CompiledCudaStep compiled,
                           compile_cuda_step(module, cuda_compile_options(options)));
    if (!options.dump_dir.empty()) dump(options.dump_dir, compiled);
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> exe,
                           CudaExecutable::create(*cuda, std::move(compiled.plan)));
    return std::unique_ptr<Executable>(std::move(exe));
  }

  /// The plan needs no device to be made: CudaExecutable::serialize()'s
  /// form, loaded on the GPU machine by the runtime half alone.
  absl::StatusOr<std::string> compile_stored(mlir::ModuleOp module,
                                             const RuntimeOptions& options) override {
    MSTEP_ASSIGN_OR_RETURN(CompiledCudaStep compiled,
                           compile_cuda_step(module, cuda_compile_options(options)));
    if (!options.dump_dir.empty()) dump(options.dump_dir, compiled);
    return serialize_cuda_plan(compiled.plan);
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "cuda", [] { return std::unique_ptr<BackendCompiler>(new CudaCompiler()); });
  return true;
}();

}  // namespace
}  // namespace mstep::cuda
