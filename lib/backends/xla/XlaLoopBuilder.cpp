// LoopBuilder (XlaLoopBuilder.h).
#include "lib/backends/xla/XlaLoopBuilder.h"

#include <vector>

namespace mstep::xla {

LoopBuilder::LoopBuilder(llvm::Module& module, const std::string& name, size_t operands,
                         size_t results)
    : module_(module), context_(module.getContext()), b_(context_) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(context_);
  auto* type = llvm::FunctionType::get(b_.getInt32Ty(), {ptr, ptr}, false);
  function_ = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, module_);
  entry_ = llvm::BasicBlock::Create(context_, "entry", function_);
  b_.SetInsertPoint(entry_);
  auto pointers = [&](llvm::Value* array, size_t count, std::vector<llvm::Value*>& out) {
    for (size_t i = 0; i < count; ++i)
      out.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, array, i)));
  };
  pointers(function_->getArg(0), operands, operands_);
  pointers(function_->getArg(1), results, results_);
}

void LoopBuilder::loop(llvm::Value* begin, llvm::Value* end, const Body& body, bool parallel) {
  llvm::BasicBlock* before = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(context_, "loop", function_);
  auto* inside = llvm::BasicBlock::Create(context_, "body", function_);
  auto* after = llvm::BasicBlock::Create(context_, "after", function_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* index = b_.CreatePHI(i64(), 2);
  index->addIncoming(begin, before);
  b_.CreateCondBr(b_.CreateICmpSLT(index, end), inside, after);
  b_.SetInsertPoint(inside);
  llvm::MDNode* outer_group = access_group_;
  llvm::MDNode* group = parallel ? llvm::MDNode::getDistinct(context_, {}) : nullptr;
  access_group_ = group;
  body(index);
  access_group_ = outer_group;
  llvm::Value* next = b_.CreateAdd(index, i64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
  index->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* latch = b_.CreateBr(header);
  if (group) {
    llvm::Metadata* enable[] = {
        llvm::MDString::get(context_, "llvm.loop.vectorize.enable"),
        llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(context_))};
    llvm::Metadata* accesses[] = {llvm::MDString::get(context_, "llvm.loop.parallel_accesses"),
                                  group};
    llvm::Metadata* properties[] = {nullptr, llvm::MDNode::get(context_, enable),
                                    llvm::MDNode::get(context_, accesses)};
    llvm::MDNode* id = llvm::MDNode::getDistinct(context_, properties);
    id->replaceOperandWith(0, id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  b_.SetInsertPoint(after);
}

llvm::Value* LoopBuilder::load(llvm::Type* type, llvm::Value* base, llvm::Value* index) {
  llvm::LoadInst* load = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, base, index));
  if (access_group_) load->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
  return load;
}

void LoopBuilder::store(llvm::Value* value, llvm::Value* base, llvm::Value* index) {
  llvm::StoreInst* store =
      b_.CreateStore(value, b_.CreateInBoundsGEP(value->getType(), base, index));
  if (access_group_) store->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
}

llvm::AllocaInst* LoopBuilder::local(llvm::Type* type, llvm::Value* init) {
  llvm::IRBuilder<> at_entry(entry_, entry_->begin());
  llvm::AllocaInst* slot = at_entry.CreateAlloca(type);
  b_.CreateStore(init, slot);
  return slot;
}

llvm::Value* LoopBuilder::get(llvm::AllocaInst* local) {
  return b_.CreateLoad(local->getAllocatedType(), local);
}

void LoopBuilder::set(llvm::AllocaInst* local, llvm::Value* value) { b_.CreateStore(value, local); }

void LoopBuilder::fail_if(llvm::Value* condition) {
  auto* fail = llvm::BasicBlock::Create(context_, "fail", function_);
  auto* next = llvm::BasicBlock::Create(context_, "ok", function_);
  b_.CreateCondBr(condition, fail, next);
  b_.SetInsertPoint(fail);
  b_.CreateRet(b_.getInt32(1));
  b_.SetInsertPoint(next);
}

llvm::Function* LoopBuilder::finish() {
  b_.CreateRet(b_.getInt32(0));
  return function_;
}

} // namespace mstep::xla
