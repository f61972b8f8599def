// A custom op's kernel for the neuron backend (issue 19 §6): the op's author
// describes its NeuronCore tile program with a small builder, for the
// call's input and output types, and registers it under the backend name
// "neuron" next to the host and CUDA kernels:
//
//   def.kernels.push_back({"neuron", neuron_kernel(
//       [](NeuronKernelBuilder& b, const NeuronKernelCall& c) -> absl::Status {
//         // y = 2 exp(x) for x f32[128, F]: row p on partition p.
//         const int64_t f = c.input_types[0].shape[1];
//         const NeuronAccess x = b.tile(NeuronMemory::sbuf, DType::f32, f, "x");
//         b.load(x, b.input(0, f, 0, 128, 0, f));          // HBM rows -> SBUF partitions
//         b.activation(x, x, NeuronActivation::exp);        // Scalar engine
//         b.tensor_scalar(NeuronEngine::vector, x, x, NeuronAlu::multiply, 2.0f);
//         b.store(b.output(0, f, 0, 128, 0, f), x);        // SBUF -> HBM
//         return absl::OkStatus();
//       })});
//
// When a step that calls the op compiles for neuron, the backend runs the
// function once for the node's types and attributes. The program it builds
// is the same tile IR as the backend's own lowerings: the validator checks
// it (a breach is the compile's error, naming the custom op, the
// instruction and the rule), then it runs on the simulator (values in their
// dtypes, fp32 engine arithmetic, NaN-filled fresh SBUF/PSUM), the cost
// model times it (metrics().simulated, the Chrome trace's engine tracks)
// and MSTEP_DUMP_DIR gets its NKI source. The builder orders the engines
// itself: every instruction waits (by semaphores) for the earlier ones on
// other engines that wrote what it reads or use what it overwrites, per
// tile; the author only picks tiles, engines and instructions.
//
// The model (the NeuronCore-v2 rules the validator enforces):
//   - an operand is an access pattern: dimension 0 the partitions (1..128;
//     more than 64 start at partition 0, 33-64 at 0 or 64, up to 32 at 0,
//     32, 64 or 96), then up to 4 free dimensions of (size, stride), in
//     elements of the operand's dtype, innermost last;
//   - HBM is reached by DMA only (load: an input to SBUF; store: SBUF to an
//     output); Vector and Scalar read and write SBUF and PSUM, GpSimd SBUF
//     only, the Tensor engine (matmul) reads SBUF and writes PSUM (fp32);
//   - SBUF is 192 KiB per partition, PSUM 16 KiB (8 banks of 2 KiB); a
//     tile lives for the whole kernel;
//   - dtypes bf16, f16, f32, int32; the engines compute in fp32.
//
// The kernel must store every element of its outputs (checked: an output
// element no store writes is an error), must store each element once
// (checked: two stores of one element run on different DMA engines, which
// the validator refuses as a race), and reads its inputs only. A call
// whose tensors have a dtype the engines lack (f64, int64, bool) runs the
// op's host kernel instead, as a counted host fallback; so does a call the
// function declines by returning an Unimplemented status. A custom op
// without a "neuron" kernel runs its "ref" host kernel the same way
// (MSTEP_LOG_FALLBACK=1 lists it).
//
// This header is the runtime's: no MLIR, no LLVM, no internal header.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// What a neuron kernel's function is given: the call's tensor types and
/// attributes. Valid for the call only.
struct NeuronKernelCall {
  absl::Span<const TensorType> input_types;
  absl::Span<const TensorType> output_types;
  const CustomAttrView& attrs;
};

/// The compute engines an elementwise instruction may run on.
enum class NeuronEngine : uint8_t { vector, scalar, gpsimd };
/// Where an operand lives.
enum class NeuronMemory : uint8_t { hbm, sbuf, psum };
/// The ALU operations of tensor_tensor, tensor_scalar and tensor_reduce;
/// is_ge gives 1.0 where a >= b, else 0.0.
enum class NeuronAlu : uint8_t { add, subtract, multiply, max, min, divide, is_ge };
/// The Scalar engine's functions: f(x * scale + bias).
enum class NeuronActivation : uint8_t {
  identity,
  exp,
  tanh,
  relu,
  sigmoid,
  square,
  rsqrt,
  log,
  sqrt
};
/// The predicate of affine_select: cmp(expression, 0).
enum class NeuronCmp : uint8_t { greater_equal, equal };

/// One free dimension of an access pattern: `size` elements `stride`
/// elements apart (stride 0 repeats one element: a broadcast).
struct NeuronDim {
  int64_t size = 1;
  int64_t stride = 1;
};

/// An operand: partitions [start_partition, start_partition + partitions)
/// of an on-chip tile, or rows of an HBM tensor (row p at element offset +
/// p * partition_stride: 0 repeats one row on every partition), each walked
/// from `offset` along `dims`. Made by NeuronKernelBuilder::tile, input and
/// output; part() and free() re-view it, and the fields may be set directly
/// (the validator checks whatever results).
struct NeuronAccess {
  NeuronMemory memory = NeuronMemory::sbuf;
  int32_t buffer = -1; ///< the builder's id of the tile or HBM tensor
  int32_t start_partition = 0;
  int32_t partitions = 1;
  int64_t partition_stride = 0; ///< HBM only
  int64_t offset = 0;
  absl::InlinedVector<NeuronDim, 4> dims;
  DType dtype = DType::f32;

  /// Partitions [start, start + count) of this view (HBM: rows).
  NeuronAccess part(int32_t start, int32_t count) const;
  /// The same partitions walked from element `offset` past this view's
  /// along `dims` (innermost last), e.g. x.free(k, {{n, 4}}): every 4th
  /// element from element k, n of them.
  NeuronAccess free(int64_t offset, std::initializer_list<NeuronDim> dims) const;
  /// Elements per partition: the product of the free sizes.
  int64_t free_elements() const;
};

/// Builds one NeuronCore tile program. Instructions are appended in program
/// order; each engine runs its own in that order, and the builder adds the
/// semaphores that order the engines by the tiles they share. A misuse (an
/// input index out of range, a load into HBM, ...) is recorded and ends the
/// build with an error naming the call (status()); later calls are ignored.
/// The backend owns the builder: a kernel function uses it during its call
/// only, from its own thread (a builder is not thread-safe; the backend may
/// build several kernels at once, each with its own builder).
class NeuronKernelBuilder {
public:
  /// A builder for a kernel named `name` (the tile program's and the NKI
  /// function's name) over HBM tensors of these types; the backend makes it.
  NeuronKernelBuilder(std::string name, std::vector<TensorType> inputs,
                      std::vector<TensorType> outputs);
  ~NeuronKernelBuilder();
  NeuronKernelBuilder(const NeuronKernelBuilder&) = delete;
  NeuronKernelBuilder& operator=(const NeuronKernelBuilder&) = delete;

  /// Input i (output o) in HBM, read as a row-major [rows, row_length]
  /// matrix: rows [row0, row0 + partitions) on consecutive partitions,
  /// columns [col0, col0 + cols) the one free dimension.
  NeuronAccess input(int i, int64_t row_length, int64_t row0, int32_t partitions, int64_t col0,
                     int64_t cols);
  NeuronAccess output(int o, int64_t row_length, int64_t row0, int32_t partitions, int64_t col0,
                      int64_t cols);

  /// A new tile of `free_elements` elements of `dtype` on each of the 128
  /// partitions, in SBUF or PSUM (PSUM tiles start on a bank), live for the
  /// whole kernel. The view returned is all of it: [128, free_elements].
  NeuronAccess tile(NeuronMemory memory, DType dtype, int64_t free_elements, std::string name);

  /// DMA: an input's HBM view into an SBUF view (same dtype and shape).
  void load(const NeuronAccess& dst, const NeuronAccess& src);
  /// DMA: an SBUF view into an output's HBM view.
  void store(const NeuronAccess& dst, const NeuronAccess& src);

  /// dst = a <op> b, elementwise (Vector or GpSimd).
  void tensor_tensor(NeuronEngine engine, const NeuronAccess& dst, const NeuronAccess& a,
                     const NeuronAccess& b, NeuronAlu op);
  /// dst = src <op> scalar (Vector or GpSimd).
  void tensor_scalar(NeuronEngine engine, const NeuronAccess& dst, const NeuronAccess& src,
                     NeuronAlu op, float scalar);
  /// dst = (src <op> scalar) <op2> scalar2, one instruction.
  void tensor_scalar(NeuronEngine engine, const NeuronAccess& dst, const NeuronAccess& src,
                     NeuronAlu op, float scalar, NeuronAlu op2, float scalar2);
  /// Scalar engine: dst = f(src * scale + bias).
  void activation(const NeuronAccess& dst, const NeuronAccess& src, NeuronActivation f,
                  float scale = 1.0f, float bias = 0.0f);
  /// dst = src, converting the dtype (Vector, Scalar or GpSimd).
  void tensor_copy(NeuronEngine engine, const NeuronAccess& dst, const NeuronAccess& src);
  /// dst [P, 1] = the <op>-reduction of src along its innermost free
  /// dimension (Vector or GpSimd).
  void tensor_reduce(NeuronEngine engine, const NeuronAccess& dst, const NeuronAccess& src,
                     NeuronAlu op);
  /// GpSimd: dst = offset + partition * channel_multiplier + sum of each
  /// free index times its step (one step per free dim of dst, innermost
  /// last; the partition counted from dst's first). NKI's iota.
  void iota(const NeuronAccess& dst, int64_t offset, int64_t channel_multiplier,
            std::vector<int64_t> steps);
  /// GpSimd: dst = cmp(expression, 0) ? src : fill, the expression as
  /// iota's. NKI's affine_select (a causal mask, say).
  void affine_select(const NeuronAccess& dst, const NeuronAccess& src, int64_t offset,
                     int64_t channel_multiplier, std::vector<int64_t> steps, NeuronCmp cmp,
                     float fill);
  /// Tensor engine: PSUM dst [M, N] (+)= stationary [K, M]^T . moving [K, N]
  /// (K <= 128 partitions, M <= 128, N <= 512 fp32 in one PSUM bank).
  /// With a ones column as `moving`, it sums `stationary` across partitions.
  void matmul(const NeuronAccess& psum_dst, const NeuronAccess& stationary,
              const NeuronAccess& moving, bool accumulate);

  int num_inputs() const;
  int num_outputs() const;
  /// OK, or the first misuse.
  absl::Status status() const;

private:
  struct Impl;
  friend struct NeuronKernelBuilderAccess; // the backend takes the program
  std::unique_ptr<Impl> impl_;
};

/// The function that builds a kernel for one call; it must be pure (the
/// program is built when a step compiles, and the step is cached) and safe
/// to call from several threads at once (steps may compile concurrently).
using NeuronKernelFn =
    std::function<absl::Status(NeuronKernelBuilder& builder, const NeuronKernelCall& call)>;

/// The kernel kind of the neuron backend: a tile-program builder.
class NeuronTileKernel final : public CustomKernel {
public:
  static constexpr absl::string_view kKind = "neuron_tile";
  explicit NeuronTileKernel(NeuronKernelFn fn) : fn_(std::move(fn)) {}
  absl::string_view kind() const override { return kKind; }
  const NeuronKernelFn& fn() const { return fn_; }

private:
  NeuronKernelFn fn_;
};

/// A neuron kernel for CustomOpDef::kernels (under "neuron") or add_kernel.
inline std::shared_ptr<const CustomKernel> neuron_kernel(NeuronKernelFn fn) {
  return std::make_shared<NeuronTileKernel>(std::move(fn));
}

} // namespace mstep
