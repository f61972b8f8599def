// math.ipowi as arithmetic, for the code generators whose lowering has no
// pattern for it (the cpu fusion JIT, the cuda kernels): square-and-
// multiply over the exponent's bits with selects instead of branches (so
// it vectorizes), and PyTorch's integer pow for negative exponents (0
// unless the base is 1 or -1), as ref's pow_kernel. Products wrap.
// (MLIR's math-to-funcs version divides by zero for 0 ** -n.) MLIR.
#pragma once

namespace mlir {
class RewritePatternSet;
}

namespace mstep::passes {

/// Adds the math.ipowi expansion (scalars and vectors) to `patterns`.
void populate_integer_pow_expansion(mlir::RewritePatternSet& patterns);

} // namespace mstep::passes
