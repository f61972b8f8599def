// XlaRuntimeCalls::gemm_bf16 (XlaStep.h), in C: the step function's bf16
// matmuls as oneDNN matmul primitives over bf16 memory descriptors, the
// primitive the cpu backend runs for a bf16 matmul and for a matmul with a
// bias / gelu / residual epilogue (lib/backends/cpu/OneDnnMatmul.cpp), so
// the products accumulate in f32, the epilogue applies to that f32 sum and
// each element is rounded once to bf16, as there.
//
// One definition for both halves: the runtime (the JIT step's table) and
// every mstep-aot object (XlaAot.cpp links the static library built from
// XlaGemmBf16.c into it), so a stand-alone step needs only oneDNN's C API,
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

/// Makes mstep_xla_gemm_bf16 key its primitives by `thread_count()` too, so
/// that a new OpenMP thread count gets a primitive created for it (oneDNN
/// may fix a primitive's thread split at creation). The runtime passes
/// omp_get_max_threads (XlaExecutable.cpp); a stand-alone mstep-aot object,
/// which calls nothing outside oneDNN, libc and libm, does not: each of its
/// primitives keeps the count of its first call.
__attribute__((visibility("hidden"))) void
mstep_xla_gemm_bf16_key_threads_by(int (*thread_count)(void));

#ifdef __cplusplus
}
#endif
