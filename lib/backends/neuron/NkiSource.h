// NKI source of a tile program (issue 19, part 5): the equivalent NKI
// kernel in the NKI 0.2+ style (every output a dst= argument, DMA as
// nisa.dma_copy), one statement per tile instruction in program order.
//   - HBM tensors are the kernel's arguments (flat, as the tile program
//     addresses them); every access is `t.ap(pattern=[[step, num], ...],
//     offset=...)`, partition dimension first;
//   - SBUF/PSUM allocations are nl.ndarray((nl.par_dim(128), n), dtype,
//     buffer=nl.sbuf / nl.psum) declared up front, with the byte offset and
//     live range the tile program gave them in a comment; a contiguous
//     access is a slice a[p0:p1, c0:c1], any other an .ap(...);
//   - each statement's comment names the instruction, its waits and
//     signals (the NKI compiler inserts its own synchronisation).
// It is not compiled against the Neuron SDK (not available here); the
// header says so. Tests check it is valid Python and keep a golden copy of
// the attention kernel.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// The NKI kernel of `program`, a Python module.
std::string nki_source(const TileProgram& program);

/// Writes nki_source(program) to `dir`/neuron_nki/<program name>_<n>.py
/// (n counts the kernels written by this process); returns the path.
absl::StatusOr<std::string> write_nki_source(const std::string& dir, const TileProgram& program);

} // namespace mstep::neuron
