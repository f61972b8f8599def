// The runtime half's XlaRuntimeCalls::gemm_bf16 (XlaStep.h): the step
// function's bf16 matmuls as oneDNN matmul primitives over bf16 memory
// descriptors, the primitive the cpu backend runs for a bf16 matmul
// (lib/backends/cpu/OneDnnMatmul.cpp), so the products accumulate in f32
// and round once to bf16 as there. No LLVM or MLIR.
#pragma once

#include <cstdint>

namespace mstep::xla {

/// XlaRuntimeCalls::gemm_bf16. Each thread keeps the primitives of the
/// shapes it ran (created on first use; creating one takes far longer
/// than looking it up), so concurrent steps share none.
void gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a, const uint16_t* a,
               int64_t a_stride, int64_t trans_b, const uint16_t* b, int64_t b_stride, uint16_t* c);

} // namespace mstep::xla
