// The public tile builder (mstep/runtime/NeuronCustomKernel.h) as the
// backend builds it (build_neuron_kernel): the program it makes orders the
// engines by semaphores from the tiles they share (the simulator runs the
// lowest ready program index first, so values alone would not show a
// missing wait), holds a store back behind the next load, binds the HBM
// tensors to the call's inputs and outputs, and is validated and costed;
// calls with tensors the engines cannot hold are left to the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "lib/backends/neuron/CustomKernelLowering.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron {
namespace {

/// y = exp(x) * 2 over f32[n]: [128, n / 128], then n mod 128 elements
/// one per partition, through the same two tiles.
NeuronTileKernel exp2_kernel() {
  return NeuronTileKernel([](NeuronKernelBuilder& b, const NeuronKernelCall& c) {
    const int64_t n = c.input_types[0].numel(), f = n / 128, r = n % 128;
    const NeuronAccess x = b.tile(NeuronMemory::sbuf, DType::f32, std::max<int64_t>(f, 1), "x");
    const NeuronAccess y = b.tile(NeuronMemory::sbuf, DType::f32, std::max<int64_t>(f, 1), "y");
    auto piece = [&](int64_t row_len, int64_t row0, int32_t parts, int64_t w) {
      const NeuronAccess xv = x.part(0, parts).free(0, {{w, 1}});
      const NeuronAccess yv = y.part(0, parts).free(0, {{w, 1}});
      b.load(xv, b.input(0, row_len, row0, parts, 0, w));
      b.activation(yv, xv, NeuronActivation::exp);
      b.tensor_scalar(NeuronEngine::vector, yv, yv, NeuronAlu::multiply, 2.0f);
      b.store(b.output(0, row_len, row0, parts, 0, w), yv);
    };
    if (f > 0) piece(f, 0, 128, f);
    if (r > 0) piece(1, 128 * f, static_cast<int32_t>(r), 1);
    return absl::OkStatus();
  });
}

absl::StatusOr<LoweredOp> build(const TensorType& type) {
  const CustomAttrView no_attrs({}, {});
  return build_neuron_kernel("exp2", exp2_kernel(), {type}, {type}, no_attrs);
}

/// Whether instruction `i` waits (by a semaphore) until `j` has completed:
/// one of its waits needs at least as many signals as there are up to and
/// including j's on that semaphore.
bool waits_for(const TileProgram& p, int64_t i, int64_t j) {
  for (int32_t sem : p.instructions[j].signals) {
    int32_t signals = 0;
    for (int64_t k = 0; k <= j; ++k)
      signals += static_cast<int32_t>(
          std::count(p.instructions[k].signals.begin(), p.instructions[k].signals.end(), sem));
    for (const SemaphoreWait& w : p.instructions[i].waits)
      if (w.semaphore == sem && w.value >= signals) return true;
  }
  return false;
}

/// The indices of the instructions with `opcode` (DMAs: loads when `to_hbm`
/// is false, stores when true).
std::vector<int64_t> find(const TileProgram& p, Opcode opcode, bool to_hbm = false) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < static_cast<int64_t>(p.instructions.size()); ++i) {
    const Instruction& inst = p.instructions[i];
    if (inst.opcode == opcode &&
        (opcode != Opcode::dma_copy || (inst.dst.kind == BufferKind::hbm) == to_hbm))
      out.push_back(i);
  }
  return out;
}

TEST(NeuronCustomKernelBuilder, EnginesWaitForTheTilesTheyShare) {
  absl::StatusOr<LoweredOp> op = build({Shape({300}), DType::f32});
  ASSERT_TRUE(op.ok()) << op.status();
  const TileProgram& p = op->program;
  const auto loads = find(p, Opcode::dma_copy), stores = find(p, Opcode::dma_copy, true),
             acts = find(p, Opcode::activation), muls = find(p, Opcode::tensor_scalar);
  ASSERT_EQ(loads.size(), 2u);
  ASSERT_EQ(stores.size(), 2u);
  ASSERT_EQ(acts.size(), 2u);
  ASSERT_EQ(muls.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(waits_for(p, acts[k], loads[k])) << k;  // Scalar reads what DMA wrote
    EXPECT_TRUE(waits_for(p, muls[k], acts[k])) << k;   // Vector after Scalar
    EXPECT_TRUE(waits_for(p, stores[k], muls[k])) << k; // DMA after Vector
  }
  // The second piece reuses the tiles: its load waits for the Scalar read of
  // x, its exp for the store reading y.
  EXPECT_TRUE(waits_for(p, loads[1], acts[0]));
  EXPECT_TRUE(waits_for(p, acts[1], stores[0]));
  // The first store is held back behind the second load (in-order Sync
  // queue: the load is not kept waiting for the first piece's compute).
  EXPECT_GT(stores[0], loads[1]);
  EXPECT_EQ(op->hbm_binding, (std::vector<int32_t>{0, -1}));
  EXPECT_GT(op->cost.total_ns, 0);
  EXPECT_TRUE(validate(p).ok()) << validate(p);
}

TEST(NeuronCustomKernelBuilder, TensorsTheEnginesCannotHoldAreLeftToTheHost) {
  absl::StatusOr<LoweredOp> f64 = build({Shape({300}), DType::f64});
  EXPECT_TRUE(absl::IsUnimplemented(f64.status())) << f64.status();
  EXPECT_NE(f64.status().message().find("input 0 f64[300] has no NeuronCore dtype"),
            std::string::npos)
      << f64.status();
  absl::StatusOr<LoweredOp> empty = build({Shape({0}), DType::f32});
  EXPECT_TRUE(absl::IsUnimplemented(empty.status())) << empty.status();
  EXPECT_NE(empty.status().message().find("has no elements"), std::string::npos) << empty.status();
}

} // namespace
} // namespace mstep::neuron
