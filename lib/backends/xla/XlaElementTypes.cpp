// bf16 loads and stores of the step function's loops (XlaElementTypes.h).
#include "lib/backends/xla/XlaElementTypes.h"

#include "lib/backends/xla/XlaLoopBuilder.h"

namespace mstep::xla {

namespace {

/// `type` with i32 (or `element`) lanes in place of its own.
llvm::Type* with_element(llvm::Type* type, llvm::Type* element) {
  return type->getWithNewType(element);
}

llvm::Value* splat(llvm::IRBuilder<>& b, llvm::Type* like, uint32_t v) {
  llvm::Constant* c = b.getInt32(v);
  if (auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(like))
    return llvm::ConstantVector::getSplat(vector->getElementCount(), c);
  return c;
}

} // namespace

llvm::Type* storage_type(llvm::IRBuilder<>& b, DType dtype) {
  return dtype == DType::bf16 ? static_cast<llvm::Type*>(b.getInt16Ty()) : b.getFloatTy();
}

llvm::Value* widen_to_f32(llvm::IRBuilder<>& b, DType dtype, llvm::Value* stored) {
  if (dtype != DType::bf16) return stored;
  llvm::Type* i32s = with_element(stored->getType(), b.getInt32Ty());
  llvm::Value* high = b.CreateShl(b.CreateZExt(stored, i32s), splat(b, i32s, 16));
  return b.CreateBitCast(high, with_element(stored->getType(), b.getFloatTy()));
}

llvm::Value* round_to_storage(llvm::IRBuilder<>& b, DType dtype, llvm::Value* value) {
  if (dtype != DType::bf16) return value;
  // u + 0x7FFF + (bit 16 of u), then the high half: round to nearest even;
  // a NaN keeps its high half, made quiet.
  llvm::Type* i32s = with_element(value->getType(), b.getInt32Ty());
  llvm::Value* u = b.CreateBitCast(value, i32s);
  llvm::Value* high = b.CreateLShr(u, splat(b, i32s, 16));
  llvm::Value* odd = b.CreateAnd(high, splat(b, i32s, 1));
  llvm::Value* rounded =
      b.CreateLShr(b.CreateAdd(u, b.CreateAdd(splat(b, i32s, 0x7FFF), odd)), splat(b, i32s, 16));
  llvm::Value* nan = b.CreateFCmpUNO(value, value);
  llvm::Value* bits = b.CreateSelect(nan, b.CreateOr(high, splat(b, i32s, 0x40)), rounded);
  return b.CreateTrunc(bits, with_element(value->getType(), b.getInt16Ty()));
}

llvm::Value* load_f32(LoopBuilder& lb, DType dtype, llvm::Value* base, llvm::Value* index) {
  return widen_to_f32(lb.b(), dtype, lb.load(storage_type(lb.b(), dtype), base, index));
}

void store_f32(LoopBuilder& lb, DType dtype, llvm::Value* value, llvm::Value* base,
               llvm::Value* index) {
  lb.store(round_to_storage(lb.b(), dtype, value), base, index);
}

llvm::Value* masked_load_f32(llvm::IRBuilder<>& b, DType dtype, unsigned lanes,
                             llvm::Value* pointer, llvm::Value* mask, llvm::Value* fill) {
  if (dtype != DType::bf16)
    return b.CreateMaskedLoad(llvm::FixedVectorType::get(b.getFloatTy(), lanes), pointer,
                              llvm::Align(4), mask, fill);
  auto* i16s = llvm::FixedVectorType::get(b.getInt16Ty(), lanes);
  llvm::Value* bits =
      b.CreateMaskedLoad(i16s, pointer, llvm::Align(2), mask, llvm::Constant::getNullValue(i16s));
  return b.CreateSelect(mask, widen_to_f32(b, dtype, bits), fill);
}

void masked_store_f32(llvm::IRBuilder<>& b, DType dtype, llvm::Value* value, llvm::Value* pointer,
                      llvm::Value* mask) {
  b.CreateMaskedStore(round_to_storage(b, dtype, value), pointer,
                      llvm::Align(dtype == DType::bf16 ? 2 : 4), mask);
}

} // namespace mstep::xla
