// LoopBuilder (XlaLoopBuilder.h).
#include "lib/backends/xla/XlaLoopBuilder.h"

#include <algorithm>
#include <cassert>
#include <vector>

namespace mstep::xla {

LoopBuilder::LoopBuilder(llvm::Module& module, const std::string& name, size_t operands,
                         size_t results)
    : module_(module), context_(module.getContext()), b_(context_) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(context_);
  begin(name, llvm::FunctionType::get(b_.getInt32Ty(), {ptr, ptr}, false), operands, results);
}

LoopBuilder::LoopBuilder(llvm::Module& module, const std::string& name, size_t operands,
                         size_t results, Rows)
    : module_(module), context_(module.getContext()), b_(context_), rows_(true) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(context_);
  begin(name,
        llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, b_.getInt64Ty(), b_.getInt64Ty()},
                                false),
        operands, results);
}

void LoopBuilder::begin(const std::string& name, llvm::FunctionType* type, size_t operands,
                        size_t results) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(context_);
  function_ = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, module_);
  // Called through pointer arrays, often from several places: inlining
  // them into the step function would only grow what LLVM optimizes.
  function_->addFnAttr(llvm::Attribute::NoInline);
  entry_ = llvm::BasicBlock::Create(context_, "entry", function_);
  b_.SetInsertPoint(entry_);
  auto pointers = [&](llvm::Value* array, size_t count, std::vector<llvm::Value*>& out) {
    for (size_t i = 0; i < count; ++i)
      out.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, array, i)));
  };
  pointers(function_->getArg(0), operands, operands_);
  pointers(function_->getArg(1), results, results_);
}

void LoopBuilder::loop(llvm::Value* begin, llvm::Value* end, const Body& body, bool parallel,
                       unsigned vector_width) {
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
    llvm::Metadata* width[] = {
        llvm::MDString::get(context_, "llvm.loop.vectorize.width"),
        llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(b_.getInt32Ty(), vector_width))};
    llvm::SmallVector<llvm::Metadata*, 4> properties = {
        nullptr, llvm::MDNode::get(context_, enable), llvm::MDNode::get(context_, accesses)};
    if (vector_width > 0) properties.push_back(llvm::MDNode::get(context_, width));
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

llvm::Value* LoopBuilder::array(llvm::Type* element, llvm::ArrayRef<llvm::Value*> values) {
  llvm::IRBuilder<> at_entry(entry_, entry_->begin());
  llvm::AllocaInst* slots =
      at_entry.CreateAlloca(llvm::ArrayType::get(element, std::max<size_t>(values.size(), 1)));
  for (size_t i = 0; i < values.size(); ++i)
    b_.CreateStore(values[i], b_.CreateConstInBoundsGEP1_64(element, slots, i));
  return slots;
}

llvm::Value* LoopBuilder::get(llvm::AllocaInst* local) {
  return b_.CreateLoad(local->getAllocatedType(), local);
}

void LoopBuilder::set(llvm::AllocaInst* local, llvm::Value* value) { b_.CreateStore(value, local); }

void LoopBuilder::fail_if(llvm::Value* condition) {
  assert(!rows_ && "xla backend: a row function cannot fail (it returns nothing)");
  auto* fail = llvm::BasicBlock::Create(context_, "fail", function_);
  auto* next = llvm::BasicBlock::Create(context_, "ok", function_);
  b_.CreateCondBr(condition, fail, next);
  b_.SetInsertPoint(fail);
  b_.CreateRet(b_.getInt32(1));
  b_.SetInsertPoint(next);
}

llvm::Value* LoopBuilder::splat_like(llvm::Value* like, llvm::Value* v) {
  if (auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(like->getType()))
    return b_.CreateVectorSplat(vector->getNumElements(), v);
  return v;
}

llvm::Value* LoopBuilder::exp(llvm::Value* x) {
  auto constant = [&](double v) { return splat_like(x, f64(v)); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {a, b, c});
  };
  // Beyond these bounds e^x is inf or 0; a NaN passes both selects.
  x = b_.CreateSelect(b_.CreateFCmpOGT(x, constant(710.0)), constant(710.0), x);
  x = b_.CreateSelect(b_.CreateFCmpOLT(x, constant(-746.0)), constant(-746.0), x);
  llvm::Value* n = b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven,
                                           b_.CreateFMul(x, constant(1.4426950408889634)));
  // r = x - n ln 2, with ln 2 split in two so that n * hi is exact.
  llvm::Value* minus_n = b_.CreateFNeg(n);
  llvm::Value* r = fma(minus_n, constant(6.93147180369123816490e-01), x);
  r = fma(minus_n, constant(1.90821492927058770002e-10), r);
  llvm::Value* y = constant(1.0 / 6227020800.0); // 1/13!
  for (double inverse_factorial :
       {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
        1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    y = fma(y, r, constant(inverse_factorial));
  // y * 2^n as two exact powers of two (n in [-1077, 1025]), one rounding,
  // as _mm512_scalef_pd rounds. (A NaN n saturates to 0; y is NaN then.)
  llvm::Type* ints = x->getType()->getWithNewType(i64());
  llvm::Value* whole = b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {ints, x->getType()}, {n});
  llvm::Value* half = b_.CreateAShr(whole, splat_like(x, i64(1)));
  auto power_of_two = [&](llvm::Value* e) {
    return b_.CreateBitCast(
        b_.CreateShl(b_.CreateAdd(e, splat_like(x, i64(1023))), splat_like(x, i64(52))),
        x->getType());
  };
  return b_.CreateFMul(b_.CreateFMul(y, power_of_two(half)),
                       power_of_two(b_.CreateSub(whole, half)));
}

llvm::Function* LoopBuilder::finish() {
  if (rows_)
    b_.CreateRetVoid();
  else
    b_.CreateRet(b_.getInt32(0));
  return function_;
}

} // namespace mstep::xla
