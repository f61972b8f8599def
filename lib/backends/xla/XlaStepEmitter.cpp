// emit_step_function (XlaStepEmitter.h): IRBuilder code over the layout.
#include "lib/backends/xla/XlaStepEmitter.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FusionJit.h"
#include "mstep/core/Error.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace mstep::xla {

namespace {

/// The positions of XlaRuntimeCalls' fields (pointers, in order).
enum CallsField : unsigned { kGemm = 0, kParallelNest = 1, kCallout = 2, kContext = 3 };

class StepEmitter {
 public:
  StepEmitter(llvm::Module& module, const TraceGraph& graph, const XlaLayout& layout)
      : module_(module),
        context_(module.getContext()),
        graph_(graph),
        layout_(layout),
        b_(context_),
        ptr_(llvm::PointerType::getUnqual(context_)),
        i64_(llvm::Type::getInt64Ty(context_)),
        i32_(llvm::Type::getInt32Ty(context_)) {}

  absl::StatusOr<std::vector<uint32_t>> emit(const std::vector<cpu::FusionInfo>& fusions) {
    auto* type = llvm::FunctionType::get(i32_, {ptr_, ptr_, ptr_, ptr_}, false);
    function_ = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, kXlaStepSymbol,
                                       module_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(context_, "entry", function_));
    // One array of operand pointers and one of result pointers, reused by
    // every call (each call is done with them when it returns).
    size_t most_operands = 1, most_results = 1;
    for (const GraphNode& n : graph_.nodes) {
      most_operands = std::max(most_operands, n.operands.size());
      most_results = std::max(most_results, n.results.size());
    }
    operands_ = b_.CreateAlloca(llvm::ArrayType::get(ptr_, most_operands));
    results_ = b_.CreateAlloca(llvm::ArrayType::get(ptr_, most_results));
    for (unsigned f = kGemm; f <= kContext; ++f) calls_[f] = load_pointer(function_->getArg(3), f);

    size_t fusion = 0;
    for (uint32_t node = static_cast<uint32_t>(graph_.input_types.size());
         node < graph_.nodes.size(); ++node) {
      const GraphNode& n = graph_.nodes[node];
      if (n.op == OpKind::fusion) {
        if (fusion >= fusions.size())
          return absl::InternalError("xla backend: more fusion nodes than compiled fusions");
        const cpu::FusionInfo& info = fusions[fusion++];
        if (info.compiled) {
          MSTEP_RETURN_IF_ERROR(emit_fusion(node, info));
          continue;
        }
      } else if (std::optional<GemmShape> gemm = native_gemm_shape(graph_, n)) {
        emit_gemm(node, *gemm);
        continue;
      } else if (n.op == OpKind::reshape) {
        const uint64_t bytes = n.results[0].bytes();
        if (bytes > 0)
          b_.CreateMemMove(value_pointer(layout_.value_base[node]), llvm::MaybeAlign(64),
                           value_pointer(layout_.value_of(n.operands[0])), llvm::MaybeAlign(64),
                           bytes);
        continue;
      }
      emit_callout(node);
    }
    b_.CreateRet(llvm::ConstantInt::get(i32_, 0));
    // The step function is the only export; the nests inline into it.
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
        b_.CreateCall(parallel_type, calls_[kParallelNest],
                      {entry, operands_, results_, b_.getInt64(nest.outer),
                       b_.getInt64(nest.grain)});
      else
        b_.CreateCall(nest_type, entry,
                      {operands_, results_, b_.getInt64(0), b_.getInt64(nest.outer)});
    }
    return absl::OkStatus();
  }

  void emit_gemm(uint32_t node, const GemmShape& g) {
    const GraphNode& n = graph_.nodes[node];
    auto* type = llvm::FunctionType::get(
        b_.getVoidTy(), {i64_, i64_, i64_, i64_, ptr_, i64_, ptr_, i64_, ptr_}, false);
    b_.CreateCall(type, calls_[kGemm],
                  {b_.getInt64(g.batch), b_.getInt64(g.m), b_.getInt64(g.n), b_.getInt64(g.k),
                   value_pointer(layout_.value_of(n.operands[0])), b_.getInt64(g.a_stride),
                   value_pointer(layout_.value_of(n.operands[1])), b_.getInt64(g.b_stride),
                   value_pointer(layout_.value_base[node])});
  }

  /// callout k; a nonzero result returns 1 + k from the step.
  void emit_callout(uint32_t node) {
    const int64_t k = static_cast<int64_t>(callouts_.size());
    callouts_.push_back(node);
    store_pointers(node);
    auto* type = llvm::FunctionType::get(i32_, {ptr_, i64_, ptr_, ptr_}, false);
    llvm::Value* failed = b_.CreateICmpNE(
        b_.CreateCall(type, calls_[kCallout],
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
  llvm::Value* calls_[4] = {};
  std::unordered_map<int64_t, llvm::Value*> inputs_, outputs_;
  std::vector<uint32_t> callouts_;
};

}  // namespace

absl::StatusOr<std::vector<uint32_t>> emit_step_function(
    llvm::Module& module, const TraceGraph& graph, const XlaLayout& layout,
    const std::vector<cpu::FusionInfo>& fusions) {
  return StepEmitter(module, graph, layout).emit(fusions);
}

}  // namespace mstep::xla
