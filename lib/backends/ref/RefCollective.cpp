// Ref kernels of the collectives (mstep.all_reduce, all_gather, broadcast,
// reduce_scatter): the MPI call started and waited for at once, on the
// node's host buffers (lib/runtime/distributed/Communicator.h).
#include "lib/backends/ref/RefKernels.h"
#include "lib/runtime/distributed/Communicator.h"

namespace mstep::ref {

namespace {

absl::Status collective_kernel(const KernelArgs& a) {
  return dist::run_collective(dist::Collective::of(a.node, a.in(0).type()), a.in(0).bytes(),
                              a.out().bytes());
}

}  // namespace

void register_collective_kernels(KernelTable& t) {
  for (OpKind op : {OpKind::all_reduce, OpKind::all_gather, OpKind::broadcast,
                    OpKind::reduce_scatter})
    t[static_cast<int>(op)] = collective_kernel;
}

}  // namespace mstep::ref
