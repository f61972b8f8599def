// TileDependencies::track: per allocation, the last writer and the readers
// since; each dependency becomes a wait on the producer's own completion
// semaphore (signalled once, so the wait is for >= 1).
#include "lib/backends/neuron/TileDependencies.h"

#include <algorithm>

namespace mstep::neuron {

int32_t TileDependencies::semaphore_of(int64_t index) {
  if (static_cast<int64_t>(semaphore_.size()) <= index) semaphore_.resize(index + 1, -1);
  if (semaphore_[index] < 0) {
    semaphore_[index] = b_.semaphore();
    b_.signal(index, semaphore_[index]);
  }
  return semaphore_[index];
}

void TileDependencies::depend(int64_t index, int64_t on) {
  if (on < 0 || on == index) return;
  const Engine e = b_.at(index).engine, f = b_.at(on).engine;
  if (e == f && e != Engine::sync) return; // one in-order queue
  const int32_t sem = semaphore_of(on);
  for (const SemaphoreWait& w : b_.at(index).waits)
    if (w.semaphore == sem) return;
  b_.wait(index, sem, 1);
}

int64_t TileDependencies::track(int64_t index) {
  const Instruction inst = b_.at(index); // a copy: depend() edits the program
  auto on_chip = [](const AccessPattern& ap) { return ap.kind != BufferKind::hbm; };
  auto uses = [&](const AccessPattern& ap) -> Uses& {
    if (static_cast<int32_t>(uses_.size()) <= ap.buffer) uses_.resize(ap.buffer + 1);
    return uses_[ap.buffer];
  };
  std::vector<const AccessPattern*> reads, writes;
  for (const AccessPattern& s : inst.srcs) reads.push_back(&s);
  if (inst.bias) reads.push_back(&*inst.bias);
  if (inst.scale_column) reads.push_back(&*inst.scale_column);
  // nc_matmul accumulating reads its PSUM destination too.
  if (inst.opcode == Opcode::nc_matmul && inst.accumulate) reads.push_back(&inst.dst);
  writes.push_back(&inst.dst);
  if (inst.accum) writes.push_back(&*inst.accum);
  for (const AccessPattern* r : reads)
    if (on_chip(*r)) depend(index, uses(*r).writer);
  for (const AccessPattern* w : writes) {
    if (!on_chip(*w)) continue;
    Uses& u = uses(*w);
    depend(index, u.writer);
    for (int64_t r : u.reader) depend(index, r);
    for (int64_t r : u.dma_readers) depend(index, r);
  }
  for (const AccessPattern* r : reads) {
    if (!on_chip(*r)) continue;
    Uses& u = uses(*r);
    if (inst.engine == Engine::sync)
      u.dma_readers.push_back(index);
    else
      u.reader[static_cast<int>(inst.engine)] = index;
  }
  for (const AccessPattern* w : writes) {
    if (!on_chip(*w)) continue;
    Uses& u = uses(*w);
    u.writer = index;
    u.reader.fill(-1);
    u.dma_readers.clear();
  }
  return index;
}

} // namespace mstep::neuron
