// Ref kernels: linalg ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_linalg_kernels(KernelTable&) {}

}  // namespace mstep::ref
