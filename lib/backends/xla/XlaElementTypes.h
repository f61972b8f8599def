// How the xla step function's own loops (XlaOpLoops.h) read and write
// elements of a floating dtype: f32 as is; bf16 and f16 as their 16 bits,
// widened to f32 on load (exact) and rounded from f32 on store exactly as
// BFloat16(float) and Float16(float) round (mstep/core/HalfTypes.h: to
// nearest even, a NaN kept as a quiet NaN of its sign and top payload
// bits), so a loop that computes in f32 or f64 and rounds to f32 stores
// what the ref and cpu kernels store (f64 -> f32 -> bf16 or f16). Scalars
// and vectors alike.
//
// f16 converts with the F16C instructions (LLVM's fpext/fptrunc of half)
// only when the step's target has F16C (compile_xla_program marks the
// module, kF16cModuleFlag; the runtime refuses the object on a CPU without
// the target's features), else with integer and f32 ops that give the same
// bits (checked against both over every f32 and every f16 value).
// Library-internal (the compile half); no MLIR headers.
#pragma once

#include "mstep/core/DType.h"
#include "llvm/IR/IRBuilder.h"

namespace mstep::xla {

class LoopBuilder;

/// Whether `dtype` is a 16-bit float (bf16 or f16), stored as 16 bits and
/// computed in f32.
inline bool is_half(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

/// Whether the loops take elements of `dtype`: f32, or bf16 or f16
/// computed in f32.
inline bool is_loop_float(DType dtype) { return dtype == DType::f32 || is_half(dtype); }

/// Bytes per element of a loop float dtype.
inline int64_t loop_float_bytes(DType dtype) { return is_half(dtype) ? 2 : 4; }

/// The module flag (an i32 1) that says the step's target has F16C.
inline constexpr const char* kF16cModuleFlag = "mstep.xla.f16c";

/// The IR type one element of `dtype` (a loop float) is stored as: float,
/// or i16 holding the bf16 or f16 bits.
llvm::Type* storage_type(llvm::IRBuilder<>& b, DType dtype);

/// f16 bits (i16, a scalar or a vector) as f32, and f32 as f16 bits,
/// rounded to nearest even; with `f16c` LLVM's fpext/fptrunc (the F16C
/// instructions), else integer and f32 ops of the same result.
llvm::Value* widen_f16(llvm::IRBuilder<>& b, llvm::Value* bits, bool f16c);
llvm::Value* round_to_f16(llvm::IRBuilder<>& b, llvm::Value* value, bool f16c);

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
