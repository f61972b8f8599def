// bf16 and f16 loads and stores of the step function's loops
// (XlaElementTypes.h).
#include "lib/backends/xla/XlaElementTypes.h"

#include "lib/backends/xla/XlaLoopBuilder.h"
#include "llvm/IR/Module.h"

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

llvm::Value* splat_f32(llvm::IRBuilder<>& b, llvm::Type* like, float v) {
  llvm::Constant* c = llvm::ConstantFP::get(b.getFloatTy(), v);
  if (auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(like))
    return llvm::ConstantVector::getSplat(vector->getElementCount(), c);
  return c;
}

/// Whether the module being emitted into targets a CPU with F16C.
bool module_has_f16c(llvm::IRBuilder<>& b) {
  const llvm::Module* module = b.GetInsertBlock()->getModule();
  return module && module->getModuleFlag(kF16cModuleFlag) != nullptr;
}

} // namespace

llvm::Value* widen_f16(llvm::IRBuilder<>& b, llvm::Value* bits, bool f16c) {
  llvm::Type* floats = with_element(bits->getType(), b.getFloatTy());
  if (f16c) return b.CreateFPExt(b.CreateBitCast(bits, with_element(bits->getType(), b.getHalfTy())), floats);
  // The magnitude's exponent and mantissa moved to f32's places, the
  // exponent rebiased (+112); inf and NaN rebiased to 255 with the NaN made
  // quiet (as vcvtph2ps and libgcc do); a subnormal (or zero) as the
  // normal 2^-14 * (1 + m) less 2^-14, exact in f32.
  llvm::Type* i32s = with_element(bits->getType(), b.getInt32Ty());
  llvm::IRBuilder<>::FastMathFlagGuard exact(b);
  b.clearFastMathFlags();
  llvm::Value* h = b.CreateZExt(bits, i32s);
  llvm::Value* sign = b.CreateShl(b.CreateAnd(h, splat(b, i32s, 0x8000)), splat(b, i32s, 16));
  llvm::Value* o = b.CreateShl(b.CreateAnd(h, splat(b, i32s, 0x7FFF)), splat(b, i32s, 13));
  llvm::Value* exponent = b.CreateAnd(o, splat(b, i32s, 0x0F800000));
  llvm::Value* normal = b.CreateAdd(o, splat(b, i32s, 112u << 23));
  llvm::Value* mantissa = b.CreateAnd(o, splat(b, i32s, 0x007FFFFF));
  llvm::Value* quiet = b.CreateSelect(b.CreateICmpNE(mantissa, splat(b, i32s, 0)),
                                      splat(b, i32s, 0x00400000), splat(b, i32s, 0));
  llvm::Value* special = b.CreateOr(b.CreateAdd(normal, splat(b, i32s, 112u << 23)), quiet);
  llvm::Value* small_f = b.CreateFSub(
      b.CreateBitCast(b.CreateAdd(normal, splat(b, i32s, 1u << 23)), floats),
      splat_f32(b, floats, 0x1.0p-14f));
  llvm::Value* small = b.CreateBitCast(small_f, i32s);
  llvm::Value* magnitude = b.CreateSelect(
      b.CreateICmpEQ(exponent, splat(b, i32s, 0x0F800000)), special,
      b.CreateSelect(b.CreateICmpEQ(exponent, splat(b, i32s, 0)), small, normal));
  return b.CreateBitCast(b.CreateOr(magnitude, sign), floats);
}

llvm::Value* round_to_f16(llvm::IRBuilder<>& b, llvm::Value* value, bool f16c) {
  llvm::Type* i16s = with_element(value->getType(), b.getInt16Ty());
  if (f16c)
    return b.CreateBitCast(
        b.CreateFPTrunc(value, with_element(value->getType(), b.getHalfTy())), i16s);
  // NaN: quiet, its top payload bits; from 65520 up: inf; a normal f16:
  // the exponent rebiased (-112) and the mantissa rounded to nearest even
  // by adding 0xFFF + its lowest kept bit; below 2^-14: the f32 sum
  // |x| + 0.5 rounds |x| to the multiple of 2^-24 (the f16 subnormals),
  // nearest even, in its low bits.
  llvm::Type* i32s = with_element(value->getType(), b.getInt32Ty());
  llvm::IRBuilder<>::FastMathFlagGuard exact(b);
  b.clearFastMathFlags();
  llvm::Value* u = b.CreateBitCast(value, i32s);
  llvm::Value* sign = b.CreateAnd(b.CreateLShr(u, splat(b, i32s, 16)), splat(b, i32s, 0x8000));
  llvm::Value* a = b.CreateAnd(u, splat(b, i32s, 0x7FFFFFFF));
  llvm::Value* nan = b.CreateOr(b.CreateAnd(b.CreateLShr(a, splat(b, i32s, 13)), splat(b, i32s, 0x3FF)),
                                splat(b, i32s, 0x7E00));
  llvm::Value* odd = b.CreateAnd(b.CreateLShr(a, splat(b, i32s, 13)), splat(b, i32s, 1));
  llvm::Value* normal = b.CreateLShr(
      b.CreateAdd(a, b.CreateAdd(splat(b, i32s, 0xC8000FFF), odd)), splat(b, i32s, 13));
  llvm::Value* small_f = b.CreateFAdd(b.CreateBitCast(a, value->getType()),
                                      splat_f32(b, value->getType(), 0.5f));
  llvm::Value* small = b.CreateSub(b.CreateBitCast(small_f, i32s), splat(b, i32s, 0x3F000000));
  llvm::Value* magnitude = b.CreateSelect(
      b.CreateICmpUGT(a, splat(b, i32s, 0x7F800000)), nan,
      b.CreateSelect(b.CreateICmpUGE(a, splat(b, i32s, 0x477FF000)), splat(b, i32s, 0x7C00),
                     b.CreateSelect(b.CreateICmpUGE(a, splat(b, i32s, 0x38800000)), normal,
                                    small)));
  return b.CreateTrunc(b.CreateOr(magnitude, sign), i16s);
}

llvm::Type* storage_type(llvm::IRBuilder<>& b, DType dtype) {
  return is_half(dtype) ? static_cast<llvm::Type*>(b.getInt16Ty()) : b.getFloatTy();
}

llvm::Value* widen_to_f32(llvm::IRBuilder<>& b, DType dtype, llvm::Value* stored) {
  if (dtype == DType::f16) return widen_f16(b, stored, module_has_f16c(b));
  if (dtype != DType::bf16) return stored;
  llvm::Type* i32s = with_element(stored->getType(), b.getInt32Ty());
  llvm::Value* high = b.CreateShl(b.CreateZExt(stored, i32s), splat(b, i32s, 16));
  return b.CreateBitCast(high, with_element(stored->getType(), b.getFloatTy()));
}

llvm::Value* round_to_storage(llvm::IRBuilder<>& b, DType dtype, llvm::Value* value) {
  if (dtype == DType::f16) return round_to_f16(b, value, module_has_f16c(b));
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
  if (!is_half(dtype))
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
                      llvm::Align(loop_float_bytes(dtype)), mask);
}

} // namespace mstep::xla
