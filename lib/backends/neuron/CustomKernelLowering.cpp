// NeuronKernelBuilder (mstep/runtime/NeuronCustomKernel.h) over the
// internal TileBuilder and DependencyTracker, and the lowering of custom
// nodes with it. Stores are held back until the next load (or until
// something overwrites what they read), as RowKit does: the Sync queue is
// in order, so a store emitted at once would hold the next load back behind
// the compute it waits for.
#include "lib/backends/neuron/CustomKernelLowering.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/TileBuilder.h"
#include "mstep/core/Error.h"

namespace mstep {

using neuron::AccessPattern;
using neuron::BufferKind;
using neuron::Engine;

namespace {

BufferKind kind_of(NeuronMemory m) {
  switch (m) {
  case NeuronMemory::hbm:
    return BufferKind::hbm;
  case NeuronMemory::sbuf:
    return BufferKind::sbuf;
  case NeuronMemory::psum:
    return BufferKind::psum;
  }
  return BufferKind::sbuf;
}

Engine engine_of(NeuronEngine e) {
  switch (e) {
  case NeuronEngine::vector:
    return Engine::vector;
  case NeuronEngine::scalar:
    return Engine::scalar;
  case NeuronEngine::gpsimd:
    return Engine::gpsimd;
  }
  return Engine::vector;
}

neuron::AluOp alu_of(NeuronAlu op) {
  switch (op) {
  case NeuronAlu::add:
    return neuron::AluOp::add;
  case NeuronAlu::subtract:
    return neuron::AluOp::subtract;
  case NeuronAlu::multiply:
    return neuron::AluOp::multiply;
  case NeuronAlu::max:
    return neuron::AluOp::max;
  case NeuronAlu::min:
    return neuron::AluOp::min;
  case NeuronAlu::divide:
    return neuron::AluOp::divide;
  case NeuronAlu::is_ge:
    return neuron::AluOp::is_ge;
  }
  return neuron::AluOp::add;
}

neuron::ActivationFunction function_of(NeuronActivation f) {
  using neuron::ActivationFunction;
  switch (f) {
  case NeuronActivation::identity:
    return ActivationFunction::identity;
  case NeuronActivation::exp:
    return ActivationFunction::exp;
  case NeuronActivation::tanh:
    return ActivationFunction::tanh;
  case NeuronActivation::relu:
    return ActivationFunction::relu;
  case NeuronActivation::sigmoid:
    return ActivationFunction::sigmoid;
  case NeuronActivation::square:
    return ActivationFunction::square;
  case NeuronActivation::rsqrt:
    return ActivationFunction::rsqrt;
  case NeuronActivation::log:
    return ActivationFunction::log;
  case NeuronActivation::sqrt:
    return ActivationFunction::sqrt;
  }
  return ActivationFunction::identity;
}

AccessPattern pattern_of(const NeuronAccess& a) {
  AccessPattern p;
  p.kind = kind_of(a.memory);
  p.buffer = a.buffer;
  p.start_partition = a.start_partition;
  p.partitions = a.partitions;
  p.partition_stride = a.partition_stride;
  p.offset = a.offset;
  for (const NeuronDim& d : a.dims) p.dims.push_back({d.size, d.stride});
  p.dtype = a.dtype;
  return p;
}

neuron::AffineExpr affine_of(int64_t offset, int64_t channel_multiplier,
                             std::vector<int64_t> steps) {
  neuron::AffineExpr e;
  e.offset = offset;
  e.channel_multiplier = channel_multiplier;
  e.steps.assign(steps.begin(), steps.end());
  return e;
}

} // namespace

NeuronAccess NeuronAccess::part(int32_t start, int32_t count) const {
  NeuronAccess v = *this;
  if (memory == NeuronMemory::hbm)
    v.offset += start * partition_stride;
  else
    v.start_partition += start;
  v.partitions = count;
  return v;
}

NeuronAccess NeuronAccess::free(int64_t off, std::initializer_list<NeuronDim> d) const {
  NeuronAccess v = *this;
  v.offset += off;
  v.dims.assign(d.begin(), d.end());
  return v;
}

int64_t NeuronAccess::free_elements() const {
  int64_t n = 1;
  for (const NeuronDim& d : dims) n *= d.size;
  return n;
}

struct NeuronKernelBuilder::Impl {
  Impl(std::string name, std::vector<TensorType> in, std::vector<TensorType> out)
      : b(std::move(name)), deps(b), inputs(std::move(in)), outputs(std::move(out)) {
    for (size_t i = 0; i < inputs.size(); ++i)
      b.hbm_tensor(absl::StrCat("in", i), inputs[i].dtype, inputs[i].numel());
    for (size_t o = 0; o < outputs.size(); ++o) {
      b.hbm_tensor(absl::StrCat("out", o), outputs[o].dtype, outputs[o].numel());
      written.emplace_back(outputs[o].numel(), false);
    }
  }

  /// Records the first misuse; true when the builder may go on.
  bool check(bool ok, absl::string_view call, absl::string_view why) {
    if (!status.ok()) return false;
    if (!ok) status = absl::InvalidArgumentError(absl::StrCat(call, ": ", why));
    return ok;
  }

  /// Emits the held-back stores now if one reads the tile `dst` writes.
  void before_write(const NeuronAccess& dst) {
    for (const auto& [to, from] : pending)
      if (from.buffer == dst.buffer) return flush();
  }
  void flush() {
    for (const auto& [to, from] : pending) deps.track(b.dma_copy(to, from));
    pending.clear();
  }
  /// Tracks instruction `index` (a compute instruction writing `dst`).
  void track(int64_t index) { deps.track(index); }

  /// Marks the output elements an HBM store pattern writes.
  void mark_written(const AccessPattern& ap) {
    const int64_t t = ap.buffer - static_cast<int64_t>(inputs.size());
    std::vector<bool>& w = written[t];
    const int64_t total = static_cast<int64_t>(w.size());
    const int64_t per = ap.free_elements();
    for (int64_t p = 0; p < ap.partitions; ++p)
      for (int64_t k = 0; k < per; ++k) {
        int64_t off = ap.offset + p * ap.partition_stride, rest = k;
        for (size_t d = ap.dims.size(); d-- > 0;) {
          off += (rest % ap.dims[d].size) * ap.dims[d].stride;
          rest /= ap.dims[d].size;
        }
        if (off >= 0 && off < total) w[off] = true;
      }
  }

  neuron::TileBuilder b;
  neuron::DependencyTracker deps;
  std::vector<TensorType> inputs, outputs;
  std::vector<std::pair<AccessPattern, AccessPattern>> pending;
  std::vector<std::vector<bool>> written; ///< per output element: stored
  absl::Status status;
};

NeuronKernelBuilder::NeuronKernelBuilder(std::string name, std::vector<TensorType> inputs,
                                         std::vector<TensorType> outputs)
    : impl_(std::make_unique<Impl>(std::move(name), std::move(inputs), std::move(outputs))) {}

NeuronKernelBuilder::~NeuronKernelBuilder() = default;

int NeuronKernelBuilder::num_inputs() const { return static_cast<int>(impl_->inputs.size()); }
int NeuronKernelBuilder::num_outputs() const { return static_cast<int>(impl_->outputs.size()); }
absl::Status NeuronKernelBuilder::status() const { return impl_->status; }

namespace {

NeuronAccess hbm_view(int32_t tensor, DType dtype, int64_t row_length, int64_t row0,
                      int32_t partitions, int64_t col0, int64_t cols) {
  NeuronAccess a;
  a.memory = NeuronMemory::hbm;
  a.buffer = tensor;
  a.partitions = partitions;
  a.partition_stride = row_length;
  a.offset = row0 * row_length + col0;
  a.dims = {{cols, 1}};
  a.dtype = dtype;
  return a;
}

} // namespace

NeuronAccess NeuronKernelBuilder::input(int i, int64_t row_length, int64_t row0, int32_t partitions,
                                        int64_t col0, int64_t cols) {
  if (!impl_->check(i >= 0 && i < num_inputs(), "input()",
                    absl::StrCat("input ", i, " of a kernel with ", num_inputs(), " inputs")))
    return {};
  return hbm_view(i, impl_->inputs[i].dtype, row_length, row0, partitions, col0, cols);
}

NeuronAccess NeuronKernelBuilder::output(int o, int64_t row_length, int64_t row0,
                                         int32_t partitions, int64_t col0, int64_t cols) {
  if (!impl_->check(o >= 0 && o < num_outputs(), "output()",
                    absl::StrCat("output ", o, " of a kernel with ", num_outputs(), " outputs")))
    return {};
  return hbm_view(num_inputs() + o, impl_->outputs[o].dtype, row_length, row0, partitions, col0,
                  cols);
}

NeuronAccess NeuronKernelBuilder::tile(NeuronMemory memory, DType dtype, int64_t free_elements,
                                       std::string name) {
  if (!impl_->check(memory != NeuronMemory::hbm, "tile()",
                    "a tile is in SBUF or PSUM (HBM holds the inputs and outputs)") ||
      !impl_->check(free_elements >= 1, "tile()",
                    absl::StrCat("'", name, "' of ", free_elements, " elements")))
    return {};
  NeuronAccess a;
  a.memory = memory;
  a.buffer = impl_->b.allocate(
      kind_of(memory), free_elements * static_cast<int64_t>(element_size(dtype)), std::move(name));
  a.partitions = neuron::kPartitions;
  a.dims = {{free_elements, 1}};
  a.dtype = dtype;
  return a;
}

void NeuronKernelBuilder::load(const NeuronAccess& dst, const NeuronAccess& src) {
  Impl& m = *impl_;
  if (!m.check(src.memory == NeuronMemory::hbm && src.buffer >= 0 && src.buffer < num_inputs(),
               "load()", "the source must be an input's HBM view (builder.input())") ||
      !m.check(dst.memory == NeuronMemory::sbuf, "load()", "the destination must be an SBUF tile"))
    return;
  m.before_write(dst);
  m.track(m.b.dma_copy(pattern_of(dst), pattern_of(src)));
  m.flush();
}

void NeuronKernelBuilder::store(const NeuronAccess& dst, const NeuronAccess& src) {
  Impl& m = *impl_;
  if (!m.check(dst.memory == NeuronMemory::hbm && dst.buffer >= num_inputs() &&
                   dst.buffer < num_inputs() + num_outputs(),
               "store()", "the destination must be an output's HBM view (builder.output())") ||
      !m.check(src.memory == NeuronMemory::sbuf, "store()", "the source must be an SBUF tile"))
    return;
  const AccessPattern to = pattern_of(dst);
  m.mark_written(to);
  m.pending.emplace_back(to, pattern_of(src));
}

void NeuronKernelBuilder::tensor_tensor(NeuronEngine engine, const NeuronAccess& dst,
                                        const NeuronAccess& a, const NeuronAccess& b,
                                        NeuronAlu op) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(impl_->b.tensor_tensor(engine_of(engine), pattern_of(dst), pattern_of(a),
                                      pattern_of(b), alu_of(op)));
}

void NeuronKernelBuilder::tensor_scalar(NeuronEngine engine, const NeuronAccess& dst,
                                        const NeuronAccess& src, NeuronAlu op, float scalar) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(impl_->b.tensor_scalar(engine_of(engine), pattern_of(dst), pattern_of(src),
                                      alu_of(op), scalar));
}

void NeuronKernelBuilder::tensor_scalar(NeuronEngine engine, const NeuronAccess& dst,
                                        const NeuronAccess& src, NeuronAlu op, float scalar,
                                        NeuronAlu op2, float scalar2) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  const int64_t i = impl_->b.tensor_scalar(engine_of(engine), pattern_of(dst), pattern_of(src),
                                           alu_of(op), scalar);
  impl_->b.at(i).alu2 = alu_of(op2);
  impl_->b.at(i).scalar2 = scalar2;
  impl_->track(i);
}

void NeuronKernelBuilder::activation(const NeuronAccess& dst, const NeuronAccess& src,
                                     NeuronActivation f, float scale, float bias) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(impl_->b.activation(pattern_of(dst), pattern_of(src), function_of(f), scale, bias));
}

void NeuronKernelBuilder::tensor_copy(NeuronEngine engine, const NeuronAccess& dst,
                                      const NeuronAccess& src) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(impl_->b.tensor_copy(engine_of(engine), pattern_of(dst), pattern_of(src)));
}

void NeuronKernelBuilder::tensor_reduce(NeuronEngine engine, const NeuronAccess& dst,
                                        const NeuronAccess& src, NeuronAlu op) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(
      impl_->b.tensor_reduce(engine_of(engine), pattern_of(dst), pattern_of(src), alu_of(op)));
}

void NeuronKernelBuilder::iota(const NeuronAccess& dst, int64_t offset, int64_t channel_multiplier,
                               std::vector<int64_t> steps) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(
      impl_->b.iota(pattern_of(dst), affine_of(offset, channel_multiplier, std::move(steps))));
}

void NeuronKernelBuilder::affine_select(const NeuronAccess& dst, const NeuronAccess& src,
                                        int64_t offset, int64_t channel_multiplier,
                                        std::vector<int64_t> steps, NeuronCmp cmp, float fill) {
  if (!impl_->status.ok()) return;
  impl_->before_write(dst);
  impl_->track(impl_->b.affine_select(
      pattern_of(dst), pattern_of(src), affine_of(offset, channel_multiplier, std::move(steps)),
      cmp == NeuronCmp::equal ? neuron::CmpOp::equal : neuron::CmpOp::greater_equal, fill));
}

void NeuronKernelBuilder::matmul(const NeuronAccess& psum_dst, const NeuronAccess& stationary,
                                 const NeuronAccess& moving, bool accumulate) {
  if (!impl_->status.ok()) return;
  impl_->before_write(psum_dst);
  impl_->track(impl_->b.matmul(pattern_of(psum_dst), pattern_of(stationary), pattern_of(moving),
                               accumulate));
}

/// What the backend needs of a finished builder.
struct NeuronKernelBuilderAccess {
  static NeuronKernelBuilder::Impl& impl(NeuronKernelBuilder& b) { return *b.impl_; }
};

namespace neuron {

namespace {

bool engine_dtype(DType d) {
  return d == DType::f32 || d == DType::bf16 || d == DType::f16 || d == DType::i32;
}

/// Unimplemented naming `label`: the call runs on the host.
absl::Status host_instead(absl::string_view label, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("neuron: custom op '", label, "': ", why, "; it runs on the host"));
}

} // namespace

absl::StatusOr<LoweredOp> build_neuron_kernel(absl::string_view label,
                                              const NeuronTileKernel& kernel,
                                              absl::Span<const TensorType> inputs,
                                              absl::Span<const TensorType> outputs,
                                              const CustomAttrView& attrs) {
  for (size_t i = 0; i < inputs.size() + outputs.size(); ++i) {
    const bool in = i < inputs.size();
    const TensorType& t = in ? inputs[i] : outputs[i - inputs.size()];
    const std::string what =
        absl::StrCat(in ? "input " : "output ", in ? i : i - inputs.size(), " ", t.to_string());
    if (!engine_dtype(t.dtype))
      return host_instead(label, absl::StrCat(what, " has no NeuronCore dtype (bf16, f16, f32, "
                                                    "int32)"));
    if (t.numel() == 0) return host_instead(label, absl::StrCat(what, " has no elements"));
  }
  const std::string what = absl::StrCat("neuron: custom op '", label, "': its NeuronCore kernel");
  // The program's (and the NKI function's) name: the op's, as an identifier.
  std::string name = absl::StrCat("custom_", label);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  NeuronKernelBuilder builder(name, std::vector<TensorType>(inputs.begin(), inputs.end()),
                              std::vector<TensorType>(outputs.begin(), outputs.end()));
  absl::Status s = kernel.fn()(builder, NeuronKernelCall{inputs, outputs, attrs});
  if (absl::IsUnimplemented(s)) return host_instead(label, s.message());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, " failed: ", s.message()));
  auto& m = NeuronKernelBuilderAccess::impl(builder);
  if (!m.status.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", m.status.message()));
  m.flush();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int64_t missing = std::count(m.written[o].begin(), m.written[o].end(), false);
    if (missing > 0)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " stores ", outputs[o].numel() - missing, " of the ",
                       outputs[o].numel(), " elements of output ", o, " (", outputs[o].to_string(),
                       "); it must store every element"));
  }
  LoweredOp out;
  out.program = m.b.take();
  for (size_t i = 0; i < inputs.size(); ++i) out.hbm_binding.push_back(static_cast<int32_t>(i));
  for (size_t o = 0; o < outputs.size(); ++o)
    out.hbm_binding.push_back(-1 - static_cast<int32_t>(o));
  // estimate_cost validates first: nothing unvalidated runs.
  absl::StatusOr<CostReport> cost = estimate_cost(out.program);
  if (!cost.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(what, " breaks a hardware rule: ", cost.status().message()));
  out.cost = *std::move(cost);
  return out;
}

namespace {

absl::StatusOr<std::shared_ptr<const CustomOp>> op_of(const GraphNode& node) {
  return CustomOpRegistry::global().find(
      static_cast<uint64_t>(attr_int(node.attrs, AttrName::custom_op)));
}

} // namespace

absl::StatusOr<LoweredOp> lower_custom_op(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types) {
  absl::StatusOr<std::shared_ptr<const CustomOp>> found = op_of(node);
  if (!found.ok()) return refuse(node.op, found.status().message());
  const CustomOp& op = **found;
  const CustomKernel* kernel = op.kernel("neuron");
  if (kernel == nullptr)
    return host_instead(op.label(), "no NeuronCore kernel is registered under \"neuron\"");
  const auto* tile = custom_kernel_as<NeuronTileKernel>(kernel);
  if (tile == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("neuron: custom op '", op.label(), "': the kernel registered for \"neuron\" ",
                     "is a '", kernel->kind(),
                     "' kernel; register a tile kernel with mstep::neuron_kernel "
                     "(mstep/runtime/NeuronCustomKernel.h)"));
  const CustomAttrView attrs(op.schema.attrs, custom_attr_values(node.attrs));
  return build_neuron_kernel(op.label(), *tile, operand_types, node.results, attrs);
}

std::string custom_op_label(const GraphNode& node) {
  absl::StatusOr<std::shared_ptr<const CustomOp>> found = op_of(node);
  return found.ok() ? absl::StrCat("custom ", (*found)->label()) : std::string("custom");
}

} // namespace neuron
} // namespace mstep
