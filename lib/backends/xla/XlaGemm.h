// XlaRuntimeCalls::gemm_bf16, matmul_f32 and gemm_bf16_f32 (XlaStep.h),
// in C: the step function's bf16 and f32 matmuls (and the bf16
// convolutions' gemms) as oneDNN matmul primitives over bf16 (f32) memory
// descriptors, the
// primitive the cpu backend runs for a bf16 matmul and for a matmul with a
// bias / gelu / residual epilogue (lib/backends/cpu/OneDnnMatmul.cpp), so
// the products accumulate in f32, the epilogue applies to that f32 sum and
// each element is rounded once to bf16, as there.
//
// One definition for both halves: the runtime (the JIT step's table) and
// every mstep-aot object (XlaAot.cpp links the static library built from
// XlaGemm.c into it), so a stand-alone step needs only oneDNN's C API,
// libc and libm. No C++, no LLVM or MLIR.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The epilogue's activation, after the bias and before the residual
/// (relu runs as a pass over the rounded result, as on cpu).
enum MstepGemmActivation {
  MSTEP_GEMM_NO_ACTIVATION = 0,
  MSTEP_GEMM_RELU = 1,
  MSTEP_GEMM_GELU_ERF = 2,
  MSTEP_GEMM_GELU_TANH = 3,
};

/// c[i] = act(a[i] x b[i] + bias) + residual[i] for i < batch, rounded once
/// to bf16: XlaRuntimeCalls::gemm_f32's operands (a_stride/b_stride 0 for
/// an operand broadcast over the batch, trans_* for an operand stored
/// transposed) over bf16 bits, plus a bias of n values (added to every row)
/// or NULL, an activation (MstepGemmActivation) and a residual of c's shape
/// or NULL. The primitive of each distinct call is made on first use and
/// kept for the process (made under a lock; a call runs under its
/// primitive's lock, so concurrent steps are safe). Where oneDNN has no
/// bf16 matmul (no avx512_core), a plain loop sums each product in f32 in
/// order of k and applies the epilogue in f32 before the one rounding.
__attribute__((visibility("hidden"))) void
mstep_xla_gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                    const uint16_t* a, int64_t a_stride, int64_t trans_b, const uint16_t* b,
                    int64_t b_stride, uint16_t* c, const uint16_t* bias, int64_t activation,
                    const uint16_t* residual);

/// mstep_xla_gemm_bf16's contract over f32 a, b, c, bias and residual: the
/// oneDNN f32 matmul primitive with the same epilogue, which the cpu
/// backend runs for an f32 matmul (with or without one), so the bias,
/// gelu and residual apply to the accumulator with no extra pass and no
/// second rounding. Its primitives are kept as the bf16 ones are: made
/// on a call's first use (with a user scratchpad allocated then), none
/// allocated per call. The plain loop sums in f32 in order of k.
__attribute__((visibility("hidden"))) void
mstep_xla_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a, const float* a,
                   int64_t a_stride, int64_t trans_b, const float* b, int64_t b_stride, float* c,
                   const float* bias, int64_t activation, const float* residual);

/// c[i] = a[i] x b[i] for i < batch over bf16 a and b and an f32 c, with
/// no epilogue: XlaRuntimeCalls::gemm_bf16_f32, the bf16 convolutions'
/// im2col gemms, whose results col2im and the weight gradient's sum over
/// samples add in f32 before the one rounding (mstep_xla_gemm_bf16 would
/// round each product to bf16 first). oneDNN's matmul with bf16 source and
/// weights and an f32 destination: the products exact, the sums f32 (on
/// the CPU's bf16 dot products where it has them, as the cpu backend's
/// oneDNN bf16 convolution). Each thread of a parallel region gets
/// primitives of its own (mstep_xla_gemm_set_thread_index), so the
/// convolutions' per-sample calls on the threads run side by side. Where
/// oneDNN has no bf16 matmul (no avx512_core), and for a batch of tiny
/// products (under 2^16 multiply-adds each: a depthwise conv's, where the
/// primitive is slower than sgemm), a and b are widened to f32 (exact)
/// and multiplied by dnnl_sgemm.
__attribute__((visibility("hidden"))) void
mstep_xla_gemm_bf16_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                        const uint16_t* a, int64_t a_stride, int64_t trans_b, const uint16_t* b,
                        int64_t b_stride, float* c);

/// The data type of a gemm call (mstep_xla_gemm_prepare).
enum MstepGemmType {
  MSTEP_GEMM_BF16 = 0,
  MSTEP_GEMM_F32 = 1,
};

/// The length of one call in a step's gemm table (kXlaGemmCallsSymbol,
/// XlaStep.h): {MstepGemmType, batch, m, n, k, trans_a, a_stride, trans_b,
/// b_stride, has bias, activation, has residual}.
enum { MSTEP_GEMM_CALL_LENGTH = 12 };

/// Makes the primitive of one gemm call (a table entry) at the current
/// thread count, if it is not made yet, so that the step's first run
/// neither makes nor allocates anything for it: the runtime prepares a
/// step's gemms when it loads the step.
__attribute__((visibility("hidden"))) void mstep_xla_gemm_prepare(const int64_t* call);

/// The thread count a primitive is made for and looked up by: oneDNN's
/// primitives keep the thread count they were made under, so a call under
/// another count gets a primitive of its own. The runtime passes
/// omp_get_max_threads; unset (an mstep-aot object, which links no OpenMP
/// runtime), every call counts as 0.
__attribute__((visibility("hidden"))) void mstep_xla_gemm_set_thread_count(int (*query)(void));

/// The calling thread's slot, which a primitive is also looked up by, so
/// threads running gemms at once do not share one (its memories and
/// scratchpad are set per call, under its lock): 0 outside a parallel
/// region, 1 + the thread's index inside one. A primitive for a slot above
/// 0 is made inside `on_one_thread` (runs f(arg) with the calling thread's
/// OpenMP thread count set to 1): it runs on that one thread (oneDNN does
/// not split inside a parallel region), so it plans for one and sizes its
/// scratchpad for one, not for the whole team (T threads would otherwise
/// hold T primitives of T threads' scratchpads). Unset (mstep-aot: its
/// parallel nests run on the calling thread), every call is slot 0.
__attribute__((visibility("hidden"))) void
mstep_xla_gemm_set_thread_slot(int (*slot)(void), void (*on_one_thread)(void (*f)(void*),
                                                                        void* arg));

#ifdef __cplusplus
}
#endif
