// instruction_cycles: the issue's per-instruction cycle table.
#include "lib/backends/neuron/InstructionCost.h"

#include <algorithm>
#include <cstdlib>

namespace mstep::neuron {

namespace {

bool strided(const AccessPattern& ap) {
  return !ap.dims.empty() &&
         std::abs(ap.dims.back().stride) * static_cast<int64_t>(element_size(ap.dtype)) > 16;
}

double stride_factor(const Instruction& inst, const CostParams& p) {
  bool any = strided(inst.dst);
  for (const AccessPattern& s : inst.srcs) any = any || strided(s);
  return any ? p.strided_penalty : 1.0;
}

/// The issue's formula `formula` with the fixed access cost: the engine
/// streams `streamed` cycles after its ~60 cycles of access setup.
double with_access_cost(double formula, double streamed, const CostParams& p) {
  return std::max(formula, p.access_fixed_cycles + streamed);
}

} // namespace

int64_t contiguous_run(const AccessPattern& ap) {
  int64_t run = 1;
  for (auto d = ap.dims.rbegin(); d != ap.dims.rend(); ++d) {
    if (d->size == 1) continue;
    if (d->stride != run) break;
    run *= d->size;
  }
  return run;
}

double dma_transfer_bytes(const Instruction& inst, const CostParams& p) {
  const double bytes = dma_bytes(inst);
  if (p.dma_descriptor_bytes <= 0 || bytes <= 0) return bytes;
  const int64_t run = std::min(contiguous_run(inst.dst), contiguous_run(inst.srcs[0]));
  const double run_bytes = static_cast<double>(run) * element_size(inst.dst.dtype);
  return bytes / run_bytes * std::max(run_bytes, p.dma_descriptor_bytes);
}

double engine_ghz(Engine engine, const CostParams& p) {
  switch (engine) {
  case Engine::tensor:
    return p.tensor_ghz;
  case Engine::vector:
    return p.vector_ghz;
  case Engine::scalar:
    return p.scalar_ghz;
  case Engine::gpsimd:
    return p.gpsimd_ghz;
  case Engine::sync:
    return p.sync_ghz;
  }
  return 1.0;
}

double dma_bytes(const Instruction& inst) {
  const double rmw = inst.opcode == Opcode::dma_indirect && inst.accumulate ? 2.0 : 1.0;
  return rmw * static_cast<double>(inst.dst.elements()) *
         static_cast<double>(element_size(inst.dst.dtype));
}

double instruction_cycles(const Instruction& inst, const CostParams& p) {
  const double n = static_cast<double>(inst.srcs.empty() ? inst.dst.free_elements()
                                                         : inst.srcs[0].free_elements()) *
                   stride_factor(inst, p);
  switch (inst.opcode) {
  case Opcode::dma_copy:
  case Opcode::dma_indirect:
    return p.dma_issue_cycles;
  case Opcode::nc_matmul: {
    const double m = static_cast<double>(inst.srcs[0].free_elements());
    const double cols = static_cast<double>(inst.srcs[1].free_elements()) * stride_factor(inst, p);
    const double rate = inst.srcs[0].dtype == DType::f32 ? 4.0 : 1.0;
    return with_access_cost(std::max(std::min(64.0, m), cols) * rate, cols * rate, p) +
           p.matmul_overhead_cycles;
  }
  case Opcode::activation:
  case Opcode::tensor_scalar:
  case Opcode::tensor_copy:
  case Opcode::bn_stats:
  case Opcode::select: // as a fast tensor_tensor (an estimate, no public figure)
    return with_access_cost(std::max(p.fixed_cycles, n), n, p);
  case Opcode::bn_aggr:
    return with_access_cost(std::max(p.fixed_cycles, 13 * n / 3), 13 * n / 3, p);
  case Opcode::tensor_tensor: {
    const bool fast =
        inst.srcs[0].kind != BufferKind::psum && inst.srcs[1].kind != BufferKind::psum;
    const double streamed = fast ? n : 2 * n;
    return with_access_cost(std::max(p.fixed_cycles, streamed), streamed, p);
  }
  case Opcode::iota:
  case Opcode::affine_select:
    return with_access_cost(p.affine_fixed_cycles + n, n, p);
  case Opcode::philox_uniform: { // n counts the state's 4 words: use dst's size
    const double streamed =
        p.philox_cycles_per_element * static_cast<double>(inst.dst.free_elements());
    return with_access_cost(p.affine_fixed_cycles + streamed, streamed, p);
  }
  case Opcode::tensor_reduce: {
    const bool half =
        inst.srcs[0].dtype == DType::bf16 && (inst.alu == AluOp::add || inst.alu == AluOp::max);
    const double streamed = half ? n / 2 : n;
    return with_access_cost(std::max(1.0, streamed), streamed, p);
  }
  }
  return p.fixed_cycles;
}

} // namespace mstep::neuron
