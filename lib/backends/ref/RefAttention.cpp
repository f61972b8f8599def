// Ref kernels: attention ops. STUB: not implemented yet.
#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

void register_attention_kernels(KernelTable&) {}

}  // namespace mstep::ref
