// The functional simulator of one NeuronCore: it validates a tile program,
// then runs it in an ExecutionOrder over simulated SBUF, PSUM and HBM.
// Values are stored in their declared dtypes; Vector and Scalar compute in
// fp32; PSUM accumulates fp32; an allocation is NaN-filled (all bits set)
// when it becomes live, so a read before write shows as NaN.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// The contents of a program's HBM tensors, one byte vector each, in the
/// order of TileProgram::hbm.
using HbmContents = std::vector<std::vector<std::byte>>;

struct SimulationStats {
  int64_t instructions = 0;
  /// Elements produced (elementwise, DMA) plus multiply-adds (nc_matmul).
  int64_t element_ops = 0;
};

class Simulator {
public:
  Simulator();

  /// Validates `program` and runs it on `hbm` (sizes must match its HBM
  /// tensors). SBUF and PSUM persist between runs, as on the device.
  absl::StatusOr<SimulationStats> run(const TileProgram& program, HbmContents& hbm);

private:
  std::vector<std::byte> sbuf_;
  std::vector<std::byte> psum_;
};

} // namespace mstep::neuron
