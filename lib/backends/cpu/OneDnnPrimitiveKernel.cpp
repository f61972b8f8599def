// PrimitiveKernel and the helpers the oneDNN kernel families share.
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace mstep::cpu::onednn {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::optional<dnnl::memory::data_type> data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    default: return std::nullopt;
  }
}

dnnl::memory::dims dims_of(const Shape& shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc dense_desc(const dnnl::memory::dims& dims, dnnl::memory::data_type type) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dims[d + 1];
  return dnnl::memory::desc(dims, type, strides);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

PrimitiveKernel::PrimitiveKernel(std::string name)
    : name_(std::move(name)), stream_(cpu_engine()) {}

dnnl::memory PrimitiveKernel::bind_operand(int index, const dnnl::memory::desc& desc) {
  dnnl::memory memory(desc, cpu_engine(), DNNL_MEMORY_NONE);
  operand_bindings_.push_back({memory, index});
  return memory;
}

dnnl::memory PrimitiveKernel::bind_result(int index, const dnnl::memory::desc& desc) {
  dnnl::memory memory(desc, cpu_engine(), DNNL_MEMORY_NONE);
  result_bindings_.push_back({memory, index});
  return memory;
}

dnnl::memory PrimitiveKernel::owned(const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, cpu_engine());  // oneDNN allocates and frees it
}

void PrimitiveKernel::add_step(const dnnl::primitive_desc_base& pd,
                               const dnnl::primitive& primitive,
                               std::unordered_map<int, dnnl::memory> args) {
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (scratchpad.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = owned(scratchpad);
  Step step{primitive, {}};
  for (auto& [arg, memory] : args) {
    step.args.push_back({arg, memory.get()});
    memories_.push_back(memory);
  }
  steps_.push_back(std::move(step));
}

void PrimitiveKernel::add_reorder(const dnnl::memory& from, const dnnl::memory& to) {
  const dnnl::reorder::primitive_desc pd(from, to, user_scratchpad_attr());
  add_step(pd, dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

dnnl::memory PrimitiveKernel::reordered_to(const dnnl::memory& from,
                                           const dnnl::memory::desc& desc) {
  if (from.get_desc() == desc) return from;
  dnnl::memory to = owned(desc);
  add_reorder(from, to);
  return to;
}

PrimitiveKernel::Result PrimitiveKernel::bind_result_as(int index, const dnnl::memory::desc& user,
                                                        const dnnl::memory::desc& produced) {
  dnnl::memory user_memory = bind_result(index, user);
  return {user_memory, produced == user ? user_memory : owned(produced)};
}

void PrimitiveKernel::finish_result(const Result& result) {
  if (result.produced != result.user) add_reorder(result.produced, result.user);
}

void PrimitiveKernel::run(const void* const* operands, void* const* results) {
  // oneDNN takes non-const handles; it never writes a primitive's inputs.
  for (const Binding& b : operand_bindings_)
    b.memory.set_data_handle(const_cast<void*>(operands[b.index]));
  for (const Binding& b : result_bindings_) b.memory.set_data_handle(results[b.index]);
  for (const Step& step : steps_) {
    const dnnl_status_t status =
        dnnl_primitive_execute(step.primitive.get(), stream_.get(),
                               static_cast<int>(step.args.size()), step.args.data());
    if (status != dnnl_success) {
      // The primitive was built for exactly these descs at compile time,
      // so a failure here is a bug, not a user error: stop loudly rather
      // than hand back unwritten results.
      std::fprintf(stderr, "mstep: oneDNN kernel %s failed to execute (status %d)\n",
                   name_.c_str(), static_cast<int>(status));
      std::abort();
    }
  }
  stream_.wait();
}

absl::StatusOr<std::unique_ptr<CpuKernel>> build_or_decline(
    const std::string& what, const std::function<std::unique_ptr<CpuKernel>()>& build) {
  try {
    return build();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return nullptr;
    return absl::InternalError(absl::StrCat("oneDNN could not build a kernel for ", what, ": ",
                                            e.what(), " (status ", static_cast<int>(e.status),
                                            "). This is a cpu-backend bug; please report "
                                            "the op and shapes."));
  }
}

bool has_native_bf16() {
  constexpr unsigned bf16 = dnnl_cpu_isa_avx512_core_bf16;  // ISAs include their subsets' bits
  return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
}

absl::StatusOr<std::unique_ptr<CpuKernel>> build_or_widen(
    const std::string& what, dnnl::memory::data_type type,
    const std::function<std::unique_ptr<CpuKernel>(dnnl::memory::data_type compute)>& build,
    bool widen_emulated) {
  constexpr auto kBf16 = dnnl::memory::data_type::bf16, kF32 = dnnl::memory::data_type::f32;
  if (type == kBf16 && widen_emulated && !has_native_bf16())
    return build_or_decline(what, [&] { return build(kF32); });
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel =
      build_or_decline(what, [&] { return build(type); });
  if (!kernel.ok() || *kernel != nullptr || type != kBf16) return kernel;
  return build_or_decline(what, [&] { return build(kF32); });
}

dnnl::memory::desc in_compute(const dnnl::memory::desc& desc, dnnl::memory::data_type compute) {
  return desc.data_type() == compute ? desc : dense_desc(desc.dims(), compute);
}

std::string describe_node(const KernelRequest& request) {
  const GraphNode& node = request.node();
  std::string text(op_name(node.op));
  for (size_t i = 0; i < node.operands.size(); ++i)
    absl::StrAppend(&text, i == 0 ? " " : ", ", request.graph.type_of(node.operands[i]).to_string());
  return text;
}

}  // namespace mstep::cpu::onednn
