// TileProgram: HBM tensors, explicit SBUF/PSUM allocations with their live
// ranges, and the instructions in program order. An engine's queue is its
// instructions in that order (engine_queues()).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lib/backends/neuron/TileInstruction.h"

namespace mstep::neuron {

/// A tensor in HBM: row-major elements of `dtype`.
struct HbmTensor {
  std::string name;
  DType dtype = DType::f32;
  int64_t elements = 0;
};

/// An SBUF or PSUM region: bytes [byte_offset, byte_offset + bytes) of
/// every partition, live for the instructions [allocated_at, released_at).
struct Allocation {
  std::string name;
  BufferKind kind = BufferKind::sbuf;
  int64_t byte_offset = 0;
  int64_t bytes_per_partition = 0;
  int64_t allocated_at = 0;
  int64_t released_at = std::numeric_limits<int64_t>::max();

  bool live_at(int64_t index) const { return allocated_at <= index && index < released_at; }
};

struct TileProgram {
  std::string name;
  std::vector<HbmTensor> hbm;
  std::vector<Allocation> allocations;
  std::vector<Instruction> instructions;
  int32_t num_semaphores = 0;

  /// Each engine's instruction indices, in program order.
  std::array<std::vector<int64_t>, kNumEngines> engine_queues() const;
};

} // namespace mstep::neuron
