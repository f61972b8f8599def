// Benchmark peers implemented with libtorch (Debian's libtorch-dev). Kept in
// their own translation unit: the torch headers are slow to compile and
// clash with nothing else this way.
#pragma once

#include <cstdint>

namespace mstep::bench {

/// Runs `ops` eager libtorch elementwise ops on an 8-element f32 tensor
/// (the same chain as trace_bench's mstep side); returns a checksum so the
/// work cannot be optimized away.
double torch_elementwise_chain(int64_t ops);

/// Which BLAS libtorch was built against, for the report.
const char* torch_blas_info();

/// libtorch's version ("1.13.1") and its intra-op thread count.
const char* torch_version();
int torch_threads();

}  // namespace mstep::bench
