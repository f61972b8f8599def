// neuron's runtime half (issue 19, first slice): a NeuronCore's HBM kept
// opaque to the rest of mstep (only copy_in and copy_out reach a buffer's
// bytes; wrap_host is Unimplemented) and executables that run the ops
// Lowering.h tiles on the simulator and every other op on the host as a
// counted fallback (MSTEP_LOG_FALLBACK=1 lists them). Synchronous: run() is done when it
// returns. Fresh buffers are 0xFF bytes (NaN for floats, -1 for integers),
// so a read of memory nothing wrote shows. Each run reports its simulated
// time (SimulatedTimeline.h: metrics().simulated and the Chrome trace).
// Registered as the `neuron` device in libmstep_runtime; the compile half
// (NeuronCompiler.cpp) is in libmstep_compiler.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/neuron/TileProgram.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Metrics.h"

namespace mstep::neuron {

/// A tensor in the simulated HBM.
class NeuronBuffer final : public Buffer {
public:
  explicit NeuronBuffer(TensorType type);
  /// A buffer over host memory the executable produced (moved in, no copy).
  NeuronBuffer(TensorType type, std::shared_ptr<host::HostBuffer> storage);

  /// The bytes, for this backend's executables and copies only.
  const std::shared_ptr<host::HostBuffer>& storage() const { return storage_; }

private:
  std::shared_ptr<host::HostBuffer> storage_;
};

class NeuronBackend final : public Backend {
public:
  absl::string_view name() const override { return "neuron"; }
  DeviceType device_type() const override { return DeviceType::neuron; }

  /// Rebuilds an executable from its serialize() form (the graph; lowered
  /// again here). DataLoss for a corrupt blob.
  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override;

  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override;
  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override;
  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override;
  absl::Status synchronize() override { return absl::OkStatus(); }
  /// Nothing runs natively yet: every op is a host fallback.
  bool supports(OpKind op, DType dtype) const override { return false; }
};

/// The executable of `graph`: each node Lowering.h can tile runs as its
/// validated tile program on the simulator; every other node runs its ref
/// kernel on the buffers' host bytes and is reported as a host fallback.
absl::StatusOr<std::unique_ptr<Executable>> make_neuron_executable(TraceGraph graph);

/// What of a neuron executable runs as tile programs.
struct NeuronLoweringStats {
  size_t lowered_ops = 0;
  /// The cost model's estimate of one run of all its tile programs.
  double estimated_ns = 0;
  /// Copy ops that need no program (CopyLowering.h: layout aliases).
  size_t aliased_ops = 0;
  /// Matrix transposes that need no program: every use is a 2-d matmul
  /// that reads the transpose's operand as its A^T or B^T
  /// (lower_matmul_of_transposes), or the transpose is the only use of a
  /// 2-d matmul that stores its result transposed.
  size_t transposes_read_by_matmuls = 0;
  /// Head permutes that need no program: attention reads their operand or
  /// writes their result at the heads' strides (NeuronBackend.cpp's
  /// fold_head_permutes_into_attention; MSTEP_NEURON_HEAD_STRIDES=0: none).
  size_t head_permutes_folded = 0;
};
/// The stats of a make_neuron_executable result (zeros for any other).
NeuronLoweringStats lowering_stats(const Executable& exe);
/// The simulated figures one run of a make_neuron_executable result adds to
/// metrics().simulated (zeros for any other executable).
SimulatedTime simulated_per_run(const Executable& exe);
/// The tile programs of a make_neuron_executable result, in node order
/// (none for any other executable).
std::vector<const TileProgram*> lowered_programs(const Executable& exe);

/// A lowered node of a make_neuron_executable result: its op, a name
/// ("matmul #12 bf16[2048, 768]": op, node index, first result) and its
/// tile program (owned by the executable).
struct LoweredKernel {
  OpKind op;
  std::string name;
  const TileProgram* program;
};
/// The lowered nodes, in node order (none for any other executable).
std::vector<LoweredKernel> lowered_kernels(const Executable& exe);

} // namespace mstep::neuron
