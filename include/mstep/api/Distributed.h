// Data parallelism (issue 23): the process group and collective ops, in
// the manner of torch.distributed. Ranks are processes started by mpirun
// (Open MPI); each runs the same program on its share of the data.
//
//   mstep::distributed::init();                 // once, before any collective
//   Tensor g = mstep::distributed::all_reduce(grad, ReduceOp::mean);
//   mstep::mark_step();                         // runs it with the step
//   mstep::distributed::finalize();
//
// Without init() the world is one process: rank() is 0, world_size() 1
// and every collective is the identity, so single-process code runs
// unchanged. Collectives are lazy ops (mstep.all_reduce, ... in the step
// graph): they run when the step runs, also inside a captured graph's
// replay, on the cpu and ref backends through MPI's nonblocking calls.
// Every rank must run the same collectives, in the same order, on the
// same shapes: at the first run of a step graph the ranks compare it and
// fail naming the difference; a rank that never arrives fails the others
// after MSTEP_DIST_TIMEOUT seconds (default 300) with an error naming the
// collective and the missing rank. Thread-safety: call from one thread.
#pragma once

#include <cstdint>

#include "mstep/api/Tensor.h"

namespace mstep::distributed {

/// Starts MPI (MPI_Init_thread, unless the program did) and joins the
/// world mpirun set up. MSTEP_RANK / MSTEP_WORLD_SIZE, when set, must
/// agree with MPI's communicator (an error says how they differ). A second
/// call does nothing. Throws mstep::Error when mstep was built without MPI
/// or after finalize().
void init();
/// Whether init() ran (and finalize() did not).
bool is_initialized();
/// This process's rank in [0, world_size()); 0 without init().
int rank();
/// The number of ranks; 1 without init().
int world_size();
/// Returns when every rank has called it; throws naming the ranks that did
/// not arrive within MSTEP_DIST_TIMEOUT.
void barrier();
/// Leaves the world (MPI_Finalize, when init() started MPI). After a
/// collective failed the peers may be stuck in it, so this aborts the whole
/// job (exit code 1) instead of hanging.
void finalize();
/// Ends every rank of the job at once (MPI_Abort) with `code`: after an
/// error from which the ranks cannot continue in step. Never returns.
[[noreturn]] void abort(int code);

/// How all_reduce and reduce_scatter combine the ranks' tensors. mean is
/// the sum divided by world_size() (floating dtypes only).
enum class ReduceOp : uint8_t { sum, mean, max, min };

/// The ranks' tensors combined elementwise, on every rank. Same shape and
/// dtype as `x` (numeric dtypes). Differentiable for sum and mean: the
/// gradient is the all_reduce of the gradient (torch.distributed.nn).
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::sum);
/// The ranks' tensors concatenated along `dim` in rank order: the result's
/// `dim` is world_size() times x's. Gradient: reduce_scatter (sum).
Tensor all_gather(const Tensor& x, int64_t dim = 0);
/// Rank `root`'s tensor on every rank (every rank passes a tensor of the
/// same shape and dtype). Gradient: the sum of the ranks' gradients on the
/// root, zeros elsewhere.
Tensor broadcast(const Tensor& x, int64_t root = 0);
/// This rank's slice along `dim` of the ranks' tensors combined: x's `dim`
/// must divide by world_size(), the result's is x's / world_size(). Rank r
/// gets slice r. Gradient (sum, mean): all_gather of the gradient.
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::sum, int64_t dim = 0);

}  // namespace mstep::distributed
