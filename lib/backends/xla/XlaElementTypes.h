// How the xla step function's own loops (XlaOpLoops.h) read and write
// elements of a floating dtype: f32 as is; bf16 as its 16 bits, widened to
// f32 on load (exact) and rounded from f32 on store exactly as
// BFloat16(float) rounds (mstep/core/HalfTypes.h: to nearest even, a NaN
// kept as a quiet NaN of its sign and top payload bits), so a loop that
// computes in f32 or f64 and rounds to f32 stores what the ref and cpu
// kernels store (f64 -> f32 -> bf16). Scalars and vectors alike.
// Library-internal (the compile half); no MLIR headers.
#pragma once

#include "mstep/core/DType.h"
#include "llvm/IR/IRBuilder.h"

namespace mstep::xla {

class LoopBuilder;

/// Whether the loops take elements of `dtype`: f32, or bf16 computed in f32.
inline bool is_f32_or_bf16(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16; }

/// The IR type one element of `dtype` (f32 or bf16) is stored as: float,
/// or i16 holding the bf16 bits.
llvm::Type* storage_type(llvm::IRBuilder<>& b, DType dtype);

/// Stored elements of `dtype` (a scalar or a vector) as f32.
llvm::Value* widen_to_f32(llvm::IRBuilder<>& b, DType dtype, llvm::Value* stored);

/// f32 values (a scalar or a vector) as stored elements of `dtype`.
llvm::Value* round_to_storage(llvm::IRBuilder<>& b, DType dtype, llvm::Value* value);

/// Element `index` of `dtype` at `base` as f32 (LoopBuilder::load).
llvm::Value* load_f32(LoopBuilder& lb, DType dtype, llvm::Value* base, llvm::Value* index);
/// Stores the f32 `value` as element `index` of `dtype` at `base`
/// (LoopBuilder::store).
void store_f32(LoopBuilder& lb, DType dtype, llvm::Value* value, llvm::Value* base,
               llvm::Value* index);

/// `lanes` elements of `dtype` at `pointer` as an f32 vector, reading only
/// the lanes of `mask`; the others are `fill` (an f32 vector).
llvm::Value* masked_load_f32(llvm::IRBuilder<>& b, DType dtype, unsigned lanes,
                             llvm::Value* pointer, llvm::Value* mask, llvm::Value* fill);
/// Stores the lanes of `mask` of the f32 vector `value` as elements of
/// `dtype` at `pointer`.
void masked_store_f32(llvm::IRBuilder<>& b, DType dtype, llvm::Value* value, llvm::Value* pointer,
                      llvm::Value* mask);

} // namespace mstep::xla
