// nn::DistributedDataParallel: data-parallel training across the ranks of
// mstep::distributed (issue 23), modelled on torch.nn.parallel.
// DistributedDataParallel.
//
//   mstep::distributed::init();
//   auto model = std::make_shared<Net>();
//   nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 25});
//   ...each step, on this rank's share of the batch:
//   Tensor loss = loss_fn(model->forward(x), y);
//   loss.backward();          // each bucket's all_reduce recorded as soon
//   opt.step();               // as its last gradient is; grads are means
//   mark_step();
//
// Construction broadcasts rank 0's parameters and buffers to every rank
// (a sync point: it runs a step) after checking that every rank has the
// same parameter and buffer names, shapes and dtypes; a difference throws
// on every rank, naming the first one.
//
// Buckets: the parameters are grouped, in reverse order of
// named_parameters() (PyTorch's guess at the order their gradients become
// ready in the backward), into buckets of one dtype, each closed once it
// holds bucket_cap_mb megabytes (MiB, as PyTorch; first_bucket_cap_mb for
// the first bucket of each dtype when set).
//
// A hook on each parameter's gradient accumulation records, when a
// bucket's last gradient has been computed, the bucket's flat buffer (the
// gradients concatenated, each starting at a multiple of 256 bytes, zeros
// in the gaps: the cuda plan then writes every gradient straight into the
// bucket) and one mstep.all_reduce (mean) of it, in the middle of the backward's ops: the
// optimizer update of a parameter depends only on its own bucket. With
// gradient_as_bucket_view every .grad() becomes a view (slice and
// reshape, no copy) of the reduced bucket; without it each is a copy.
// Works in lazy mode and inside a Graph capture (the collectives are ops
// of the captured step and replay with it).
//
// Bucket rebuild (rebuild_buckets, on by default, as PyTorch): the first
// backward() that all-reduces records the order in which its gradients
// become ready, and when it ends the buckets are formed again, by the same
// caps, in that order (the parameters it did not reach last, in their old
// order); once. A gradient is "ready" when the autograd engine has
// accumulated it into .grad(): the engine (lib/api/autograd/Engine.cpp)
// runs the backward graph in Kahn's topological order with a LIFO ready
// list, and each parameter's gradient accumulation is a node of that
// graph, so the order depends only on the forward's recorded ops: the same
// on every rank running the same step graph (a rank whose order differs
// has another step graph, which the first step's graph-key check reports).
// After the rebuild a bucket's all_reduce is recorded as soon as the
// backward has computed its last gradient, so the first buckets' reduction
// starts early in the backward. The reduction is per element, so the
// rebuild changes where a gradient sits in a bucket, never its value.
//
// A parameter that gets no gradient in a backward() on this rank (unused
// in the forward) adds its current .grad() (zeros when it has none) to its
// bucket when the backward ends, so the ranks still run the same
// collectives (PyTorch's find_unused_parameters).
// Gradient accumulation over several backward() calls without zero_grad
// all-reduces after each, as PyTorch's DDP outside no_sync(); inside
// no_sync() the gradients accumulate locally and the next backward()
// outside it all-reduces the sum:
//
//   for (int j = 0; j + 1 < k; ++j) {
//     auto guard = ddp.no_sync();          // no collective in this backward
//     loss_fn(model->forward(x[j]), y[j]).backward();
//   }
//   loss_fn(model->forward(x[k - 1]), y[k - 1]).backward();  // all_reduce
//   opt.step();
//
// Buffers: PyTorch broadcasts rank 0's buffers before every forward
// (broadcast_buffers). mstep modules have no common forward signature, so
// the wrapper cannot call it for you: run the forward through
// ddp.forward([&] { return model->forward(x); }), which broadcasts the
// buffers first (as PyTorch, also under no_sync()), or call
// sync_buffers() yourself before the forward.
//
// The wrapper keeps a reference to the module: the module must outlive
// it. Not copyable or movable (the hooks point at it). One thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/api/nn/Module.h"

namespace mstep::nn {

struct DistributedDataParallelOptions {
  /// The most bytes of gradient per bucket, in MiB (> 0).
  double bucket_cap_mb = 25;
  /// Gradients are views into the reduced bucket buffers (no copy).
  bool gradient_as_bucket_view = true;
  /// Broadcast rank 0's buffers at construction, at sync_buffers() and at
  /// every forward() (as PyTorch before every forward).
  bool broadcast_buffers = true;
  /// The cap of the first bucket (the gradients ready first, from the last
  /// parameters), in MiB; 0: bucket_cap_mb. PyTorch uses 1 MiB there when
  /// bucket_cap_mb is left at its default, so that the first all_reduce
  /// starts early in the backward.
  double first_bucket_cap_mb = 0;
  /// Re-form the buckets once, at the end of the first backward() that
  /// all-reduces, in the order its gradients became ready (as PyTorch's DDP
  /// does after its first iteration); false keeps the construction's.
  bool rebuild_buckets = true;
};

class DistributedDataParallel {
 public:
  struct State;  // library-internal

  /// Checks the ranks agree on the module's parameters and buffers, then
  /// broadcasts rank 0's values (runs a step: mark_step()). Throws
  /// mstep::Error on bad options, outside a capture only.
  explicit DistributedDataParallel(Module& module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Module& module() const { return module_; }
  const DistributedDataParallelOptions& options() const { return options_; }

  /// Records the broadcast of rank 0's buffers into every rank's (lazy:
  /// it runs with the step), as PyTorch's DDP does before each forward
  /// when broadcast_buffers is on. A no-op when it is off.
  void sync_buffers();

  /// Runs `forward` (this rank's forward pass, e.g. [&] { return
  /// model->forward(x); }) after what PyTorch's DDP does before each
  /// forward: sync_buffers(). Returns what `forward` returns.
  template <typename F>
  decltype(auto) forward(F&& forward) {
    sync_buffers();
    return std::forward<F>(forward)();
  }

  /// PyTorch's no_sync(): while the returned guard lives, backward()
  /// accumulates the gradients on this rank only (no collective); the
  /// first backward() after it all-reduces the accumulated gradients.
  /// Every rank must use it around the same backward() calls. Guards nest;
  /// each restores what was in effect when it was made.
  class [[nodiscard]] NoSyncGuard {
   public:
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    friend class DistributedDataParallel;
    explicit NoSyncGuard(std::shared_ptr<State> state);
    std::shared_ptr<State> state_;
    bool previous_ = true;
  };
  NoSyncGuard no_sync();
  /// Whether backward() all-reduces now (false under no_sync()).
  bool require_backward_grad_sync() const;

  /// The buckets: each lists indices into module().named_parameters(), in
  /// the order their gradients are laid out in the bucket buffer (the
  /// rebuilt buckets once the first synced backward() has ended).
  const std::vector<std::vector<size_t>>& bucket_indices() const;

 private:
  Module& module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace mstep::nn
