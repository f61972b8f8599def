// Ref kernels: shape ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_shape_kernels(KernelTable&) {}

}  // namespace mstep::ref
