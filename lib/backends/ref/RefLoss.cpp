// Ref kernels: loss ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_loss_kernels(KernelTable&) {}

}  // namespace mstep::ref
