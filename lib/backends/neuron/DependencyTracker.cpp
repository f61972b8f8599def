// DependencyTracker: waits from allocation reads and writes.
#include "lib/backends/neuron/DependencyTracker.h"

namespace mstep::neuron {

DependencyTracker::DependencyTracker(TileBuilder& b) : b_(b) {
  for (int32_t& s : semaphore_) s = b_.semaphore();
}

int64_t DependencyTracker::track(int64_t index, bool partial_write) {
  const Instruction& inst = b_.program().instructions[index];
  const int q = completion_queue(inst);
  if (static_cast<int64_t>(queue_.size()) <= index) {
    queue_.resize(index + 1, -1);
    ordinal_.resize(index + 1, 0);
  }
  uses_.resize(b_.program().allocations.size());

  std::vector<int32_t> reads, writes;
  auto on_chip = [](const AccessPattern& ap) { return ap.kind != BufferKind::hbm; };
  for (const AccessPattern& s : inst.srcs)
    if (on_chip(s)) reads.push_back(s.buffer);
  if (inst.bias && on_chip(*inst.bias)) reads.push_back(inst.bias->buffer);
  if (inst.scale_column && on_chip(*inst.scale_column)) reads.push_back(inst.scale_column->buffer);
  if (inst.opcode == Opcode::nc_matmul && inst.accumulate) reads.push_back(inst.dst.buffer);
  if (on_chip(inst.dst)) writes.push_back(inst.dst.buffer);
  if (inst.accum && on_chip(*inst.accum)) writes.push_back(inst.accum->buffer);

  // Per other queue, the latest ordinal this instruction must follow.
  std::array<int32_t, kQueues> need{};
  auto after = [&](int64_t other) {
    const int oq = queue_[other];
    if (oq != q && ordinal_[other] > need[oq]) need[oq] = ordinal_[other];
  };
  for (int32_t a : reads)
    for (int64_t w : uses_[a].writes) after(w);
  for (int32_t a : writes) {
    if (!partial_write || !uses_[a].reads.empty())
      for (int64_t w : uses_[a].writes) after(w);
    for (int64_t r : uses_[a].reads) after(r);
  }
  for (int oq = 0; oq < kQueues; ++oq)
    if (need[oq] > 0) b_.wait(index, semaphore_[oq], need[oq]);
  b_.signal(index, semaphore_[q]);
  queue_[index] = q;
  ordinal_[index] = ++issued_[q];

  for (int32_t a : reads) uses_[a].reads.push_back(index);
  for (int32_t a : writes) {
    Uses& u = uses_[a];
    if (!partial_write || !u.reads.empty()) {
      u.writes.clear();
      u.reads.clear();
    }
    u.writes.push_back(index);
  }
  return index;
}

} // namespace mstep::neuron
