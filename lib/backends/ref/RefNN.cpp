// Ref kernels: nn ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_nn_kernels(KernelTable&) {}

}  // namespace mstep::ref
