// Ref kernels: reduction ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_reduction_kernels(KernelTable&) {}

}  // namespace mstep::ref
