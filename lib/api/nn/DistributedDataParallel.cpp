// nn::DistributedDataParallel (mstep/api/nn/DistributedDataParallel.h):
// the cross-rank module check, the broadcast of rank 0's state, and the
// gradient buckets, reduced from hooks on the autograd engine's gradient
// accumulation (lib/api/autograd/GradFn.h) and rebuilt once in the order
// the first synced backward made the gradients ready.
#include "mstep/api/nn/DistributedDataParallel.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Creation.h"
#include "mstep/api/Distributed.h"
#include "mstep/api/ShapeOps.h"
#include "mstep/core/DType.h"
#include "mstep/runtime/Graph.h"
#include "mstep/runtime/Runtime.h"

namespace mstep::nn {

struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<size_t> params;         // indices into `params`
    std::vector<Tensor> pending;        // this backward's gradients, by position
    size_t ready = 0;
    bool reduced = false;  // in this backward
  };
  std::vector<std::pair<std::string, Tensor>> params;  // named_parameters()
  std::vector<std::pair<size_t, size_t>> place;        // param -> (bucket, position)
  std::vector<uint64_t> hooks;                         // per param, 0: none
  std::vector<Bucket> buckets;
  std::vector<std::vector<size_t>> bucket_indices;
  double cap_bytes = 0, first_cap_bytes = 0;
  bool as_view = true;
  bool sync = true;       // false under no_sync()
  uint64_t armed_in = 0;  // the backward() whose end callback is queued
  // Bucket rebuild: the parameters in the order their gradients became
  // ready in the first synced backward; done once, at its end.
  bool rebuild_pending = true;
  std::vector<size_t> ready_order;
  std::vector<bool> seen_ready;

  /// Groups `order` (parameter indices) into buckets by the caps and
  /// installs them (buckets, place, bucket_indices).
  void assign_buckets(const std::vector<size_t>& order);
  void on_gradient(size_t param);
  void reduce(Bucket& bucket);
  void end_backward();
  void rebuild_buckets();
};

namespace {

constexpr const char* kOp = "DistributedDataParallel";

/// Where each gradient may start in a bucket: the cuda plan writes a
/// gradient straight into the bucket (no copy kernel) only at a multiple
/// of its arena alignment (kCudaArenaAlignment, lib/backends/cuda/CudaPlan.h;
/// cuBLASLt and cuDNN assume aligned operands).
constexpr int64_t kBucketSlotBytes = 256;

/// The elements of zeros that move `length` elements of `element_bytes`
/// each up to the next slot boundary.
int64_t slot_padding(int64_t length, size_t element_bytes) {
  const int64_t bytes = length * static_cast<int64_t>(element_bytes);
  const int64_t over = bytes % kBucketSlotBytes;
  return over == 0 ? 0 : (kBucketSlotBytes - over) / static_cast<int64_t>(element_bytes);
}

std::string type_text(const Tensor& t) {
  std::vector<std::string> dims;
  for (int64_t d : t.shape().dims()) dims.push_back(absl::StrCat(d));
  return absl::StrCat(dtype_name(t.dtype()), "[", absl::StrJoin(dims, ", "), "]");
}

/// One line per parameter and buffer: "parameter fc1.weight f32[4, 3]".
std::vector<std::string> describe_module(const Module& module) {
  std::vector<std::string> lines;
  for (const auto& [name, p] : module.named_parameters())
    lines.push_back(absl::StrCat("parameter ", name, " ", type_text(p)));
  for (const auto& [name, b] : module.named_buffers())
    lines.push_back(absl::StrCat("buffer ", name, " ", type_text(b)));
  return lines;
}

/// Every rank's description (an all_gather of the bytes, padded to the
/// longest), compared with rank 0's; throws on every rank naming the first
/// difference of the lowest rank that differs.
void check_same_module(const Module& module) {
  const std::string mine = absl::StrJoin(describe_module(module), "\n");
  const int world = distributed::world_size();
  const int64_t longest =
      distributed::all_reduce(from_vector(std::vector<int64_t>{int64_t(mine.size())}, {1}),
                              distributed::ReduceOp::max)
          .to_vector<int64_t>()[0];
  std::vector<int32_t> bytes(std::max<int64_t>(longest, 1), 0);
  for (size_t i = 0; i < mine.size(); ++i) bytes[i] = static_cast<unsigned char>(mine[i]);
  const std::vector<int32_t> all =
      distributed::all_gather(from_vector(bytes, {int64_t(bytes.size())}), 0).to_vector<int32_t>();
  auto lines_of = [&](int r) {
    std::string text;
    for (size_t i = 0; i < bytes.size() && all[r * bytes.size() + i] != 0; ++i)
      text.push_back(static_cast<char>(all[r * bytes.size() + i]));
    return text.empty() ? std::vector<std::string>{}
                        : std::vector<std::string>(absl::StrSplit(text, '\n'));
  };
  const std::vector<std::string> root = lines_of(0);
  for (int r = 1; r < world; ++r) {
    const std::vector<std::string> other = lines_of(r);
    const size_t n = std::min(root.size(), other.size());
    size_t i = 0;
    while (i < n && root[i] == other[i]) ++i;
    if (i == n && root.size() == other.size()) continue;
    std::string what;
    if (i < n)
      what = absl::StrCat("rank ", r, " has ", other[i], " where rank 0 has ", root[i]);
    else if (i < root.size())
      what = absl::StrCat("rank 0 has ", root[i], ", which rank ", r, " lacks");
    else
      what = absl::StrCat("rank ", r, " has ", other[i], ", which rank 0 lacks");
    detail::throw_op_error(kOp, "the ranks' modules differ", what,
                           "Build the same model on every rank (same layers, sizes and dtypes) "
                           "before wrapping it.");
  }
}

/// t <- rank 0's t, recorded lazily.
void broadcast_in_place(Tensor& t) {
  NoGradGuard no_grad;
  t.copy_(distributed::broadcast(t, 0));
}

}  // namespace

void DistributedDataParallel::State::on_gradient(size_t param) {
  // Under no_sync(): the gradient stays this rank's (accumulated by the
  // engine into .grad()); the next synced backward reduces the sum.
  if (!sync) return;
  // The first gradient of each backward() queues the end-of-backward pass
  // (a backward that threw leaves a stale id, which never matches again).
  if (armed_in != autograd::current_backward_id()) {
    armed_in = autograd::current_backward_id();
    autograd::queue_backward_callback([this] { end_backward(); });
    for (Bucket& bucket : buckets) {  // nothing left from a backward that threw
      std::fill(bucket.pending.begin(), bucket.pending.end(), Tensor());
      bucket.ready = 0;
      bucket.reduced = false;
    }
  }
  if (rebuild_pending && !seen_ready[param]) {
    seen_ready[param] = true;
    ready_order.push_back(param);
  }
  auto [b, pos] = place[param];
  Bucket& bucket = buckets[b];
  if (!bucket.pending[pos].defined()) ++bucket.ready;
  bucket.pending[pos] = params[param].second.grad();
  if (bucket.ready == bucket.params.size()) reduce(bucket);
}

void DistributedDataParallel::State::reduce(Bucket& bucket) {
  NoGradGuard no_grad;
  std::vector<Tensor> flat;
  std::vector<int64_t> offsets;  // per gradient: its first element in the bucket
  int64_t length = 0;
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    const Tensor& p = params[bucket.params[k]].second;
    // Zeros up to the next slot boundary, so that every gradient starts at
    // a multiple of kBucketSlotBytes (the reduction is per element: the
    // zeros reduce to zeros and no gradient reads them).
    if (const int64_t pad = slot_padding(length, element_size(p.dtype())); pad > 0) {
      flat.push_back(zeros({pad}, p.dtype(), p.device()));
      length += pad;
    }
    offsets.push_back(length);
    length += p.numel();
    // A parameter this backward did not reach adds what it holds (the
    // gradients accumulated under no_sync()), or zeros: the ranks still
    // run the same collective (PyTorch's reducer does the same).
    const Tensor g = bucket.pending[k].defined() ? bucket.pending[k]
                     : p.grad().defined()       ? p.grad()
                                                : zeros(p.shape(), p.dtype(), p.device());
    flat.push_back(reshape(g.dtype() == p.dtype() ? g : g.to(p.dtype()), {p.numel()}));
  }
  const Tensor buffer = flat.size() == 1 ? flat[0] : cat(flat, 0);
  const Tensor reduced = distributed::all_reduce(buffer, distributed::ReduceOp::mean);
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    Tensor& p = params[bucket.params[k]].second;
    const int64_t offset = offsets[k];
    Tensor view = reshape(slice(reduced, 0, offset, offset + p.numel()), p.shape().dims());
    // Without views, each gradient is a tensor of its own (PyTorch copies
    // the bucket back into the .grad tensors).
    p.set_grad(as_view ? view : view + 0.0);
    bucket.pending[k] = Tensor();
  }
  bucket.ready = 0;
  bucket.reduced = true;
}

void DistributedDataParallel::State::end_backward() {
  armed_in = 0;
  // Buckets this backward left incomplete, or did not reach at all on this
  // rank (a peer's may have): reduced with zeros for the missing
  // gradients, so every rank runs the same collectives.
  for (Bucket& bucket : buckets)
    if (!bucket.reduced) reduce(bucket);
  for (Bucket& bucket : buckets) bucket.reduced = false;
  if (rebuild_pending) rebuild_buckets();
}

void DistributedDataParallel::State::rebuild_buckets() {
  // The parameters this backward reached, in the order their gradients
  // became ready, then those it did not reach, in their bucket order.
  rebuild_pending = false;
  std::vector<size_t> order = ready_order;
  for (const std::vector<size_t>& bucket : bucket_indices)
    for (size_t i : bucket)
      if (!seen_ready[i]) order.push_back(i);
  ready_order.clear();
  seen_ready.clear();
  assign_buckets(order);
}

void DistributedDataParallel::State::assign_buckets(const std::vector<size_t>& order) {
  // In `order`, a bucket per dtype in progress; a bucket closes once it
  // holds at least the cap (PyTorch's compute_bucket_assignment_by_size).
  // The first bucket of each dtype may have a cap of its own (PyTorch's
  // bucket_size_limits: the first limit, then the cap).
  bucket_indices.clear();
  std::map<DType, std::pair<std::vector<size_t>, double>> open;
  std::map<DType, bool> closed_one;
  for (size_t i : order) {
    const Tensor& p = params[i].second;
    auto& [members, bytes] = open[p.dtype()];
    members.push_back(i);
    bytes += double(p.numel()) * double(element_size(p.dtype()));
    if (bytes >= (closed_one[p.dtype()] ? cap_bytes : first_cap_bytes)) {
      bucket_indices.push_back(std::move(members));
      open.erase(p.dtype());
      closed_one[p.dtype()] = true;
    }
  }
  for (auto& [dtype, entry] : open) bucket_indices.push_back(std::move(entry.first));
  buckets.clear();
  for (size_t b = 0; b < bucket_indices.size(); ++b) {
    Bucket bucket;
    bucket.params = bucket_indices[b];
    bucket.pending.resize(bucket.params.size());
    for (size_t k = 0; k < bucket.params.size(); ++k) place[bucket.params[k]] = {b, k};
    buckets.push_back(std::move(bucket));
  }
}

DistributedDataParallel::DistributedDataParallel(Module& module,
                                                 DistributedDataParallelOptions options)
    : module_(module), options_(options), state_(std::make_shared<State>()) {
  if (!(options.bucket_cap_mb > 0))
    detail::throw_op_error(kOp,
                           absl::StrCat("bucket_cap_mb must be > 0, got ", options.bucket_cap_mb),
                           "", "Pass a bucket size in MiB, e.g. {.bucket_cap_mb = 25}.");
  if (!(options.first_bucket_cap_mb >= 0))
    detail::throw_op_error(
        kOp, absl::StrCat("first_bucket_cap_mb must be >= 0, got ", options.first_bucket_cap_mb),
        "", "Pass the first bucket's size in MiB (PyTorch uses 1), or 0 for bucket_cap_mb.");
  if (is_capturing())
    detail::throw_op_error(kOp, "cannot be built inside a Graph capture", "",
                           "Wrap the model before capturing: construction broadcasts rank 0's "
                           "state and runs a step.");
  if (distributed::world_size() > 1) {
    check_same_module(module);
    for (auto& [name, p] : module.named_parameters()) broadcast_in_place(p);
    if (options.broadcast_buffers)
      for (auto& [name, b] : module.named_buffers()) broadcast_in_place(b);
    mark_step();
  }

  State& s = *state_;
  s.as_view = options.gradient_as_bucket_view;
  s.params = module.named_parameters();
  s.place.assign(s.params.size(), {0, 0});
  s.hooks.assign(s.params.size(), 0);
  s.cap_bytes = options.bucket_cap_mb * 1024 * 1024;
  s.first_cap_bytes =
      options.first_bucket_cap_mb > 0 ? options.first_bucket_cap_mb * 1024 * 1024 : s.cap_bytes;
  s.rebuild_pending = options.rebuild_buckets;
  s.seen_ready.assign(s.params.size(), false);
  // Until the rebuild: reverse registration order (PyTorch's guess at the
  // order the backward makes the gradients ready).
  std::vector<size_t> order;
  for (size_t i = s.params.size(); i-- > 0;)
    if (s.params[i].second.requires_grad()) order.push_back(i);
  s.assign_buckets(order);
  std::weak_ptr<State> weak = state_;
  for (size_t b = 0; b < s.buckets.size(); ++b)
    for (size_t i : s.buckets[b].params)
      s.hooks[i] = autograd::add_post_accumulate_hook(s.params[i].second, [weak, i](const Tensor&) {
        if (auto state = weak.lock()) state->on_gradient(i);
      });
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < state_->params.size(); ++i)
    if (state_->hooks[i])
      autograd::remove_post_accumulate_hook(state_->params[i].second, state_->hooks[i]);
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers || distributed::world_size() == 1) return;
  for (auto& [name, b] : module_.named_buffers()) broadcast_in_place(b);
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(std::shared_ptr<State> state)
    : state_(std::move(state)), previous_(state_->sync) {
  state_->sync = false;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : state_(std::move(other.state_)), previous_(other.previous_) {}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (state_) state_->sync = previous_;
}

DistributedDataParallel::NoSyncGuard DistributedDataParallel::no_sync() {
  return NoSyncGuard(state_);
}

bool DistributedDataParallel::require_backward_grad_sync() const { return state_->sync; }

const std::vector<std::vector<size_t>>& DistributedDataParallel::bucket_indices() const {
  return state_->bucket_indices;
}

}  // namespace mstep::nn
