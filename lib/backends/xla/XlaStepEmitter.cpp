// emit_step_function (XlaStepEmitter.h): IRBuilder code over the layout.
#include "lib/backends/xla/XlaStepEmitter.h"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/OneDnnKernels.h"
#include "lib/backends/xla/XlaGemm.h"
#include "lib/backends/xla/XlaOpLoops.h"
#include "lib/backends/xla/XlaStepFailure.h"
#include "mstep/core/Error.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace mstep::xla {

namespace {

/// The positions of XlaRuntimeCalls' fields (pointers, in order).
enum CallsField : unsigned {
  kGemm = 0,
  kParallelNest = 1,
  kCallout = 2,
  kContext = 3,
  kGemmBf16 = 4,
  kMatmulF32 = 5,
  kGemmBf16F32 = 6,
  kNumCallsFields
};

class StepEmitter {
  struct Gemm; // a native matmul, planned (plan_gemms)

public:
  StepEmitter(llvm::Module& module, const TraceGraph& graph, const XlaLayout& layout)
      : module_(module), context_(module.getContext()), graph_(graph), layout_(layout),
        b_(context_), ptr_(llvm::PointerType::getUnqual(context_)),
        i64_(llvm::Type::getInt64Ty(context_)), i32_(llvm::Type::getInt32Ty(context_)) {}

  absl::StatusOr<std::vector<uint32_t>> emit(const std::vector<cpu::FusionInfo>& fusions) {
    auto* type = llvm::FunctionType::get(i32_, {ptr_, ptr_, ptr_, ptr_}, false);
    function_ =
        llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, kXlaStepSymbol, module_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(context_, "entry", function_));
    // One array of operand pointers and one of result pointers, reused by
    // every call (each call is done with them when it returns).
    size_t most_operands = 1, most_results = 1;
    for (const GraphNode& n : graph_.nodes) {
      most_operands = std::max(most_operands, n.operands.size());
      most_results = std::max(most_results, n.results.size());
    }
    // (+ the runtime pointers a calls_runtime loop reads after them)
    operands_ = b_.CreateAlloca(llvm::ArrayType::get(ptr_, most_operands + kRuntimeOperands));
    results_ = b_.CreateAlloca(llvm::ArrayType::get(ptr_, most_results));
    for (unsigned f = kGemm; f < kNumCallsFields; ++f)
      calls_[f] = load_pointer(function_->getArg(3), f);

    plan_gemms();
    size_t fusion = 0;
    for (uint32_t node = static_cast<uint32_t>(graph_.input_types.size());
         node < graph_.nodes.size(); ++node) {
      const GraphNode& n = graph_.nodes[node];
      const cpu::FusionInfo* info = nullptr;
      if (n.op == OpKind::fusion) {
        if (fusion >= fusions.size())
          return absl::InternalError("xla backend: more fusion nodes than compiled fusions");
        info = &fusions[fusion++];
      }
      // A transpose gemms read through, or one a gemm writes; a fusion a
      // gemm's epilogue computes.
      if (!needed_[node]) continue;
      if (info) {
        if (info->compiled) {
          MSTEP_RETURN_IF_ERROR(emit_fusion(node, *info));
          continue;
        }
      } else if (gemms_[node]) {
        emit_gemm(node);
        continue;
      } else if (n.op == OpKind::reshape) {
        const uint64_t bytes = n.results[0].bytes();
        // The plan puts most reshapes in place (the same arena bytes):
        // nothing to move.
        const ValueLocation& to = layout_.values[layout_.value_base[node]];
        const ValueLocation& from = layout_.values[layout_.value_of(n.operands[0])];
        const bool in_place = to.kind == from.kind && to.at == from.at;
        if (bytes > 0 && !in_place)
          b_.CreateMemMove(value_pointer(layout_.value_base[node]), llvm::MaybeAlign(64),
                           value_pointer(layout_.value_of(n.operands[0])), llvm::MaybeAlign(64),
                           bytes);
        continue;
      }
      if (std::optional<OpLoop> loop = loops_.emit(module_, graph_, node)) {
        emit_loop(node, *loop);
        continue;
      }
      emit_callout(node);
    }
    b_.CreateRet(llvm::ConstantInt::get(i32_, 0));
    emit_gemm_table();
    // The step function (and its gemm table) is the only export; the
    // nests inline into it.
    for (const cpu::FusionInfo& info : fusions)
      for (const cpu::FusionNestInfo& nest : info.nests)
        if (llvm::Function* entry = module_.getFunction(nest.symbol))
          entry->setLinkage(llvm::GlobalValue::InternalLinkage);
    return callouts_;
  }

private:
  llvm::Value* load_pointer(llvm::Value* array, uint64_t position) {
    return b_.CreateLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, array, position));
  }

  /// The address of value `v` (XlaLayout::values). Loads of input and
  /// output pointers are emitted once: the function is one chain of
  /// blocks, so the first load dominates every later use.
  llvm::Value* value_pointer(uint32_t v) {
    const ValueLocation& at = layout_.values[v];
    switch (at.kind) {
    case ValueLocation::Kind::arena:
      return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), function_->getArg(2), at.at);
    case ValueLocation::Kind::input: {
      llvm::Value*& loaded = inputs_[at.at];
      if (!loaded) loaded = load_pointer(function_->getArg(0), at.at);
      return loaded;
    }
    case ValueLocation::Kind::output: {
      llvm::Value*& loaded = outputs_[at.at];
      if (!loaded) loaded = load_pointer(function_->getArg(1), at.at);
      return loaded;
    }
    }
    return nullptr;
  }

  /// Fills the operand and result arrays with node's pointers.
  void store_pointers(uint32_t node) {
    const GraphNode& n = graph_.nodes[node];
    for (size_t i = 0; i < n.operands.size(); ++i)
      b_.CreateStore(value_pointer(layout_.value_of(n.operands[i])),
                     b_.CreateConstInBoundsGEP1_64(ptr_, operands_, i));
    for (size_t r = 0; r < n.results.size(); ++r)
      b_.CreateStore(value_pointer(layout_.value_base[node] + static_cast<uint32_t>(r)),
                     b_.CreateConstInBoundsGEP1_64(ptr_, results_, r));
  }

  absl::Status emit_fusion(uint32_t node, const cpu::FusionInfo& info) {
    store_pointers(node);
    auto* nest_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, i64_, i64_}, false);
    auto* parallel_type =
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, i64_, i64_}, false);
    for (const cpu::FusionNestInfo& nest : info.nests) {
      if (nest.elements == 0) continue;
      llvm::Function* entry = module_.getFunction(nest.symbol);
      if (!entry)
        return absl::InternalError(absl::StrCat("xla backend: no entry '", nest.symbol, "'"));
      if (nest.elements >= cpu::FusionJit::kParallelElements && nest.outer >= 2)
        b_.CreateCall(
            parallel_type, calls_[kParallelNest],
            {entry, operands_, results_, b_.getInt64(nest.outer), b_.getInt64(nest.grain)});
      else
        b_.CreateCall(nest_type, entry,
                      {operands_, results_, b_.getInt64(0), b_.getInt64(nest.outer)});
    }
    return absl::OkStatus();
  }

  /// The gemm of each native matmul, which operands it reads through a
  /// transpose, and which nodes must still run (needed_).
  void plan_gemms() {
    gemms_.assign(graph_.nodes.size(), std::nullopt);
    needed_.assign(graph_.nodes.size(), false);
    absorbed_.assign(graph_.nodes.size(), false);
    node_of_value_.resize(layout_.values.size());
    for (uint32_t n = 0; n < graph_.nodes.size(); ++n)
      for (uint32_t r = 0; r < graph_.nodes[n].results.size(); ++r)
        node_of_value_[layout_.value_base[n] + r] = n;
    for (ValueRef v : graph_.outputs) needed_[v.node] = true;
    for (uint32_t node = 0; node < graph_.nodes.size(); ++node) {
      const GraphNode& n = graph_.nodes[node];
      std::optional<GemmShape> shape = native_gemm_shape(graph_, n);
      if (shape) {
        Gemm gemm{*shape, {n.operands[0], n.operands[1]}, {false, false}};
        // A transposed lhs cannot fold its batch into m.
        const bool folded = graph_.type_of(n.operands[0]).shape.rank() > 2 &&
                            graph_.type_of(n.operands[1]).shape.rank() == 2;
        for (int i = 0; i < 2; ++i) {
          if (i == 0 && folded) continue;
          if (std::optional<ValueRef> source = intact_transposed_source(n.operands[i], node)) {
            gemm.operands[i] = *source;
            gemm.transposed[i] = true;
          }
        }
        gemm.result = layout_.value_base[node];
        if (!folded && transposes_result(node, gemm)) {
          gemm.result = layout_.value_base[node + 1];
          gemm.result_transposed = true;
          absorbed_[node + 1] = true;
        }
        gemms_[node] = gemm;
      }
      for (int i = 0; i < static_cast<int>(n.operands.size()); ++i)
        if (!gemms_[node] || !gemms_[node]->transposed[i]) needed_[n.operands[i].node] = true;
    }
    plan_epilogues();
    // Everything but a transpose that no reader needs or a gemm writes,
    // and a fusion a gemm computes as its epilogue.
    for (uint32_t node = 0; node < graph_.nodes.size(); ++node)
      if (!cpu::is_matrix_transpose(graph_.nodes[node])) needed_[node] = true;
    for (uint32_t node = 0; node < graph_.nodes.size(); ++node)
      if (absorbed_[node]) needed_[node] = false;
  }

  /// A matmul whose only reader is a fusion computing
  /// act(matmul + bias) + residual (cpu::find_matmul_epilogue) runs that
  /// fusion as its gemm's epilogue, as the cpu backend runs the pair
  /// (CpuExecutable): the bias, gelu and residual apply to the f32 sum
  /// before the one rounding (to bf16, or to f32 with no separate pass
  /// that rounds the product first), so both backends give the same bits.
  /// The gemm runs at the matmul's place and writes the fusion's result,
  /// which needs the bias and residual computed by then and the result's
  /// memory free there: the matmul's own bytes (the plan put the fusion in
  /// place), or an output buffer that is no donated input.
  void plan_epilogues() {
    for (uint32_t f = 0; f < graph_.nodes.size(); ++f) {
      if (graph_.nodes[f].op != OpKind::fusion) continue;
      const std::optional<cpu::MatmulEpilogue> e = cpu::find_matmul_epilogue(graph_, f);
      if (!e || !gemms_[e->matmul]) continue;
      Gemm& g = *gemms_[e->matmul];
      if (g.result_transposed) continue;
      if ((e->bias && e->bias->node >= e->matmul) ||
          (e->residual && e->residual->node >= e->matmul))
        continue;
      const ValueLocation& into = layout_.values[layout_.value_base[f]];
      const ValueLocation& product = layout_.values[g.result];
      bool free = into.kind == ValueLocation::Kind::arena && product.kind == into.kind &&
                  product.at == into.at;
      if (into.kind == ValueLocation::Kind::output) {
        free = true;
        for (const XlaLayout::Output& out : layout_.outputs)
          free &= !(out.output == into.at && out.donated_arg >= 0);
      }
      if (!free) continue;
      g.result = layout_.value_base[f];
      g.bias = e->bias;
      g.residual = e->residual;
      if (e->activation >= 0) {
        const GraphNode& act = graph_.nodes[f].body->nodes[e->activation];
        g.activation = act.op == OpKind::relu ? MSTEP_GEMM_RELU
                       : attr_int(act.attrs, AttrName::approximate) != 0 ? MSTEP_GEMM_GELU_TANH
                                                                         : MSTEP_GEMM_GELU_ERF;
      }
      absorbed_[f] = true;
    }
  }

  /// Whether the gemm at `node` may write its result transposed straight
  /// into the result of the next node, a transpose that is its only reader
  /// (a weight gradient): that memory must not hold what the gemm reads.
  bool transposes_result(uint32_t node, const Gemm& gemm) const {
    if (node + 1 >= graph_.nodes.size()) return false;
    const GraphNode& next = graph_.nodes[node + 1];
    const ValueRef result{node, 0};
    if (!cpu::is_matrix_transpose(next) || !(next.operands[0] == result)) return false;
    int readers = 0;
    for (const GraphNode& n : graph_.nodes)
      for (ValueRef v : n.operands) readers += v == result;
    for (ValueRef v : graph_.outputs) readers += v == result;
    if (readers != 1) return false;
    const ValueLocation& into = layout_.values[layout_.value_base[node + 1]];
    const int64_t begin = into.at;
    const int64_t end = begin + static_cast<int64_t>(next.results[0].bytes());
    for (ValueRef operand : gemm.operands) {
      const ValueLocation& read = layout_.values[layout_.value_of(operand)];
      if (into.kind == ValueLocation::Kind::output) {
        // An output may be written into a donated input.
        for (const XlaLayout::Output& out : layout_.outputs)
          if (out.output == into.at && read.kind == ValueLocation::Kind::input &&
              out.donated_arg == read.at)
            return false;
      } else if (read.kind == ValueLocation::Kind::arena) {
        const int64_t b = read.at;
        const int64_t e = b + static_cast<int64_t>(graph_.type_of(operand).bytes());
        if (b < end && begin < e) return false;
      }
    }
    return true;
  }

  /// The source of `v` when `v` is a transpose of the last two dims whose
  /// source's bytes nothing writes from the transpose up to `reader`, so a
  /// gemm at `reader` may read the source transposed.
  std::optional<ValueRef> intact_transposed_source(ValueRef v, uint32_t reader) const {
    const GraphNode& permute = graph_.nodes[v.node];
    // A transpose a gemm writes has no source in memory.
    if (!cpu::is_matrix_transpose(permute) || absorbed_[v.node]) return std::nullopt;
    const ValueRef source = permute.operands[0];
    const ValueLocation& at = layout_.values[layout_.value_of(source)];
    auto writes_between = [&](uint32_t writer) { return writer > v.node && writer <= reader; };
    if (at.kind == ValueLocation::Kind::input) {
      // A donated input is written by the node of the output it holds.
      for (const XlaLayout::Output& out : layout_.outputs)
        if (out.donated_arg == at.at &&
            writes_between(node_of_value_[layout_.output_values[out.output]]))
          return std::nullopt;
    } else if (at.kind == ValueLocation::Kind::arena) {
      const int64_t begin = at.at;
      const int64_t end = begin + static_cast<int64_t>(graph_.type_of(source).bytes());
      for (uint32_t n = v.node + 1; n <= reader; ++n)
        for (uint32_t r = 0; r < graph_.nodes[n].results.size(); ++r) {
          const ValueLocation& written = layout_.values[layout_.value_base[n] + r];
          const int64_t b = written.at;
          const int64_t e = b + static_cast<int64_t>(graph_.nodes[n].results[r].bytes());
          if (written.kind == ValueLocation::Kind::arena && b < end && begin < e)
            return std::nullopt;
        }
    }
    return source; // an output value has a buffer of its own
  }

  /// c = a b, or c^T = b^T a^T when the result is written transposed,
  /// with its epilogue (null bias and residual when none): gemm_bf16 or
  /// matmul_f32, oneDNN's matmul primitive as on the cpu backend.
  void emit_gemm(uint32_t node) {
    const Gemm& g = *gemms_[node];
    const bool bf16 = g.shape.dtype == DType::bf16;
    auto* type = llvm::FunctionType::get(
        b_.getVoidTy(),
        {i64_, i64_, i64_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, ptr_, ptr_, i64_, ptr_},
        false);
    int64_t m = g.shape.m, n = g.shape.n;
    int first = 0, second = 1;
    bool trans_first = g.transposed[0], trans_second = g.transposed[1];
    int64_t first_stride = g.shape.a_stride, second_stride = g.shape.b_stride;
    if (g.result_transposed) {
      std::swap(m, n);
      std::swap(first, second);
      trans_first = !g.transposed[1];
      trans_second = !g.transposed[0];
      std::swap(first_stride, second_stride);
    }
    std::vector<llvm::Value*> args = {
        b_.getInt64(g.shape.batch), b_.getInt64(m), b_.getInt64(n), b_.getInt64(g.shape.k),
        b_.getInt64(trans_first), value_pointer(layout_.value_of(g.operands[first])),
        b_.getInt64(first_stride), b_.getInt64(trans_second),
        value_pointer(layout_.value_of(g.operands[second])), b_.getInt64(second_stride),
        value_pointer(g.result)};
    auto pointer_or_null = [&](const std::optional<ValueRef>& v) -> llvm::Value* {
      return v ? value_pointer(layout_.value_of(*v)) : llvm::ConstantPointerNull::get(ptr_);
    };
    args.insert(args.end(),
                {pointer_or_null(g.bias), b_.getInt64(g.activation), pointer_or_null(g.residual)});
    b_.CreateCall(type, calls_[bf16 ? kGemmBf16 : kMatmulF32], args);
    const std::array<int64_t, MSTEP_GEMM_CALL_LENGTH> call = {
        bf16 ? MSTEP_GEMM_BF16 : MSTEP_GEMM_F32,
        g.shape.batch, m, n, g.shape.k, trans_first, first_stride, trans_second, second_stride,
        g.bias.has_value(), g.activation, g.residual.has_value()};
    if (std::find(gemm_calls_.begin(), gemm_calls_.end(), call) == gemm_calls_.end())
      gemm_calls_.push_back(call);
  }

  /// kXlaGemmCallsSymbol: the distinct gemm calls emit_gemm made.
  void emit_gemm_table() {
    std::vector<llvm::Constant*> values = {b_.getInt64(gemm_calls_.size())};
    for (const std::array<int64_t, MSTEP_GEMM_CALL_LENGTH>& call : gemm_calls_)
      for (int64_t v : call) values.push_back(b_.getInt64(v));
    auto* type = llvm::ArrayType::get(i64_, values.size());
    new llvm::GlobalVariable(module_, type, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantArray::get(type, values), kXlaGemmCallsSymbol);
  }

  /// The node's own loop; one that can fail returns loop_failure_status
  /// from the step when it does.
  void emit_loop(uint32_t node, const OpLoop& loop) {
    store_pointers(node);
    if (loop.calls_runtime) {
      const size_t after = graph_.nodes[node].operands.size();
      llvm::Value* scratch = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), function_->getArg(2),
                                                           layout_.scratch_offset);
      for (auto [slot, pointer] :
           {std::pair{0, scratch}, std::pair{1, calls_[loop.gemm_bf16_f32 ? kGemmBf16F32 : kGemm]},
            std::pair{2, calls_[kParallelNest]}})
        b_.CreateStore(pointer, b_.CreateConstInBoundsGEP1_64(ptr_, operands_, after + slot));
    }
    if (loop.check) stop_unless_zero(node, b_.CreateCall(loop.check, {operands_, results_}));
    if (loop.function->arg_size() == 4) { // a row function: split when large
      auto* row_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, i64_, i64_}, false);
      auto* parallel_type =
          llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_, ptr_, i64_, i64_}, false);
      if (loop.work >= cpu::FusionJit::kParallelElements && loop.rows >= 2)
        b_.CreateCall(parallel_type, calls_[kParallelNest],
                      {loop.function, operands_, results_, b_.getInt64(loop.rows),
                       b_.getInt64(loop.grain)});
      else
        b_.CreateCall(row_type, loop.function,
                      {operands_, results_, b_.getInt64(0), b_.getInt64(loop.rows)});
      if (loop.after_rows) b_.CreateCall(loop.after_rows, {operands_, results_});
      return;
    }
    llvm::Value* status = b_.CreateCall(loop.function, {operands_, results_});
    if (loop.can_fail) stop_unless_zero(node, status);
  }

  /// Returns loop_failure_status(node) from the step when `status` is
  /// nonzero.
  void stop_unless_zero(uint32_t node, llvm::Value* status) {
    auto* fail = llvm::BasicBlock::Create(context_, "loop_failed", function_);
    auto* next = llvm::BasicBlock::Create(context_, "next", function_);
    b_.CreateCondBr(b_.CreateICmpNE(status, llvm::ConstantInt::get(i32_, 0)), fail, next);
    b_.SetInsertPoint(fail);
    b_.CreateRet(
        llvm::ConstantInt::get(i32_, static_cast<uint64_t>(loop_failure_status(node)), true));
    b_.SetInsertPoint(next);
  }

  /// callout k; a nonzero result returns 1 + k from the step.
  void emit_callout(uint32_t node) {
    const int64_t k = static_cast<int64_t>(callouts_.size());
    callouts_.push_back(node);
    store_pointers(node);
    auto* type = llvm::FunctionType::get(i32_, {ptr_, i64_, ptr_, ptr_}, false);
    llvm::Value* failed =
        b_.CreateICmpNE(b_.CreateCall(type, calls_[kCallout],
                                      {calls_[kContext], b_.getInt64(k), operands_, results_}),
                        llvm::ConstantInt::get(i32_, 0));
    auto* fail = llvm::BasicBlock::Create(context_, "callout_failed", function_);
    auto* next = llvm::BasicBlock::Create(context_, "next", function_);
    b_.CreateCondBr(failed, fail, next);
    b_.SetInsertPoint(fail);
    b_.CreateRet(llvm::ConstantInt::get(i32_, k + 1));
    b_.SetInsertPoint(next);
  }

  llvm::Module& module_;
  llvm::LLVMContext& context_;
  const TraceGraph& graph_;
  const XlaLayout& layout_;
  llvm::IRBuilder<> b_;
  llvm::PointerType* ptr_;
  llvm::IntegerType* i64_;
  llvm::IntegerType* i32_;
  llvm::Function* function_ = nullptr;
  llvm::Value* operands_ = nullptr;
  llvm::Value* results_ = nullptr;
  llvm::Value* calls_[kNumCallsFields] = {};
  std::unordered_map<int64_t, llvm::Value*> inputs_, outputs_;
  struct Gemm {
    GemmShape shape;
    ValueRef operands[2]; // the matmul's, or the sources of transposes
    bool transposed[2];
    uint32_t result = 0;            // the value it writes
    bool result_transposed = false; // the next node's, a transpose of its result
    // The gemm's epilogue (plan_epilogues): the fusion's operands.
    std::optional<ValueRef> bias, residual;
    int64_t activation = MSTEP_GEMM_NO_ACTIVATION;
  };
  std::vector<std::optional<Gemm>> gemms_; // per node
  std::vector<bool> absorbed_; // per node: a transpose a gemm writes, or its epilogue's fusion
  std::vector<bool> needed_;               // per node: emitted
  std::vector<uint32_t> node_of_value_;
  std::vector<uint32_t> callouts_;
  std::vector<std::array<int64_t, MSTEP_GEMM_CALL_LENGTH>> gemm_calls_; // distinct, in order
  OpLoops loops_;
};

} // namespace

absl::StatusOr<std::vector<uint32_t>>
emit_step_function(llvm::Module& module, const TraceGraph& graph, const XlaLayout& layout,
                   const std::vector<cpu::FusionInfo>& fusions) {
  return StepEmitter(module, graph, layout).emit(fusions);
}

} // namespace mstep::xla
