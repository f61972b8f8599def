// lower_custom_op: see CudaCustomLowering.h.
#include "lib/backends/cuda/CudaCustomLowering.h"

#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/backends/cuda/CudaNvrtc.h"
#include "lib/backends/cuda/CudaPtxas.h"
#include "lib/ir/import/CustomOpAttrs.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/CudaCustomKernel.h"

namespace mstep::cuda {

namespace {

/// The PTX target of custom kernels, as for mstep's own (CudaKernelGen.h):
/// sm_80 and sm_90 assemble from it, newer GPUs JIT it.
constexpr absl::string_view kVirtualArch = "compute_80";

/// NVRTC's PTX and ptxas's cubins and reports for one kernel.
struct BuiltKernel {
  NvrtcOutput nvrtc;
  std::vector<CudaCubin> cubins;
  std::vector<PtxasKernelReport> reports;
};

/// Compiles (source, entry, options) for `archs` once per process.
absl::StatusOr<BuiltKernel> build_kernel(const CudaSourceKernelDef& def, const std::string& entry,
                                         const std::string& program,
                                         const std::vector<std::string>& archs) {
  static std::mutex mutex;
  static auto* built = new std::map<std::string, BuiltKernel>();
  const std::string key =
      absl::StrCat(def.source.size(), ":", def.source, "\n", entry, "\n",
                   absl::StrJoin(def.options, "\n"), "\n", absl::StrJoin(archs, ","));
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = built->find(key); it != built->end()) return it->second;
  }
  MSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const NvrtcApi> api, default_nvrtc());
  BuiltKernel kernel;
  MSTEP_ASSIGN_OR_RETURN(
      kernel.nvrtc, nvrtc_compile(*api, def.source, program, entry, kVirtualArch, def.options));
  for (const std::string& arch : archs) {
    MSTEP_ASSIGN_OR_RETURN(AssembledPtx assembled,
                           assemble_ptx(kernel.nvrtc.ptx, arch, absl::StrCat("kernel ", entry)));
    kernel.cubins.push_back({arch, std::move(assembled.cubin)});
    for (PtxasKernelReport& report : assembled.reports) {
      report.arch = arch;
      kernel.reports.push_back(std::move(report));
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  return built->emplace(key, std::move(kernel)).first->second;
}

/// A scalar parameter of `type` holding `value`.
absl::StatusOr<CudaKernelSlot> scalar_slot(CudaScalarType type, const CudaScalarValue& value) {
  CudaKernelSlot slot;
  const bool is_int = std::holds_alternative<int64_t>(value);
  const int64_t i = is_int ? std::get<int64_t>(value) : 0;
  const double d = is_int ? static_cast<double>(i) : std::get<double>(value);
  switch (type) {
  case CudaScalarType::i32:
    if (!is_int) return absl::InvalidArgumentError("an int32_t parameter got a float value");
    if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())
      return absl::InvalidArgumentError(absl::StrCat(i, " does not fit an int32_t parameter"));
    slot.bytes = 4;
    slot.bits = static_cast<uint32_t>(static_cast<int32_t>(i));
    return slot;
  case CudaScalarType::i64:
    if (!is_int) return absl::InvalidArgumentError("an int64_t parameter got a float value");
    slot.bits = static_cast<uint64_t>(i);
    return slot;
  case CudaScalarType::f32: {
    const float f = static_cast<float>(d);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    slot.bytes = 4;
    slot.floating = true;
    slot.bits = bits;
    return slot;
  }
  case CudaScalarType::f64:
    slot.floating = true;
    std::memcpy(&slot.bits, &d, sizeof d);
    return slot;
  }
  return absl::InvalidArgumentError("an unknown scalar type");
}

/// The value of an int, float or bool attribute as a kernel parameter.
absl::StatusOr<CudaScalarValue> attr_value(const CustomAttrView& attrs, const std::string& name) {
  MSTEP_ASSIGN_OR_RETURN(CustomAttrValue value, attrs.get(name));
  if (const auto* i = std::get_if<int64_t>(&value)) return CudaScalarValue(*i);
  if (const auto* d = std::get_if<double>(&value)) return CudaScalarValue(*d);
  if (const auto* b = std::get_if<bool>(&value)) return CudaScalarValue(int64_t{*b});
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", name,
                   "' is not an int, float or bool; compute the kernel's parameter from it with "
                   "CudaKernelArg::scalar"));
}

absl::StatusOr<std::vector<TensorType>> types_of(mlir::TypeRange types) {
  std::vector<TensorType> out;
  for (mlir::Type t : types) {
    MSTEP_ASSIGN_OR_RETURN(TensorType type, to_tensor_type(t));
    out.push_back(type);
  }
  return out;
}

/// The launch's parameter slots, in the kernel's order.
absl::StatusOr<std::vector<CudaKernelSlot>> slots_of(const CudaSourceKernelDef& def,
                                                     const CudaKernelCall& call) {
  const int inputs = static_cast<int>(call.input_types.size());
  const int outputs = static_cast<int>(call.output_types.size());
  std::vector<bool> passed(outputs, false);
  std::vector<CudaKernelSlot> slots;
  for (size_t p = 0; p < def.args.size(); ++p) {
    const CudaKernelArg& arg = def.args[p];
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("kernel parameter ", p, ": ", why));
    };
    switch (arg.kind) {
    case CudaKernelArg::Kind::input:
      if (arg.index < 0 || arg.index >= inputs)
        return bad(absl::StrCat("input ", arg.index, " of an op with ", inputs, " inputs"));
      slots.push_back({.arg = arg.index});
      break;
    case CudaKernelArg::Kind::output:
      if (arg.index < 0 || arg.index >= outputs)
        return bad(absl::StrCat("output ", arg.index, " of an op with ", outputs, " outputs"));
      passed[arg.index] = true;
      slots.push_back({.arg = inputs + arg.index});
      break;
    case CudaKernelArg::Kind::attr:
    case CudaKernelArg::Kind::scalar: {
      absl::StatusOr<CudaScalarValue> value =
          arg.kind == CudaKernelArg::Kind::attr ? attr_value(call.attrs, arg.name)
          : arg.value                           ? arg.value(call)
                                                : absl::InvalidArgumentError("no value function");
      if (!value.ok()) return bad(absl::StrCat("'", arg.name, "': ", value.status().message()));
      absl::StatusOr<CudaKernelSlot> slot = scalar_slot(arg.type, *value);
      if (!slot.ok()) return bad(absl::StrCat("'", arg.name, "': ", slot.status().message()));
      slots.push_back(*slot);
      break;
    }
    }
  }
  for (int o = 0; o < outputs; ++o)
    if (!passed[o])
      return absl::InvalidArgumentError(
          absl::StrCat("output ", o, " is not among the kernel's parameters (it must write it)"));
  return slots;
}

absl::Status check_launch(const CudaLaunchShape& shape) {
  for (unsigned v : shape.grid)
    if (v == 0) return absl::InvalidArgumentError("the launch rule gave a grid with a 0 size");
  uint64_t threads = 1;
  for (unsigned v : shape.block) {
    if (v == 0) return absl::InvalidArgumentError("the launch rule gave a block with a 0 size");
    threads *= v;
  }
  if (threads > 1024)
    return absl::InvalidArgumentError(
        absl::StrCat("the launch rule gave ", threads, " threads a block (1024 at most)"));
  return absl::OkStatus();
}

} // namespace

absl::Status lower_custom_op(dialect::CustomOp op, const std::string& origin,
                             const std::vector<int>& operands, const std::vector<int>& results,
                             const std::vector<std::string>& archs, CudaPlan& plan) {
  const std::string name = op.getOpName().str();
  const int64_t version = custom_op_version(op);
  absl::StatusOr<std::shared_ptr<const CustomOp>> found =
      CustomOpRegistry::global().find(name, version);
  if (!found.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: ", origin, ": ", found.status().message()));
  const CustomOp& custom = **found;
  const std::string what = absl::StrCat("cuda: custom op '", custom.label(), "' (", origin, ")");
  const CustomKernel* kernel = custom.kernel("cuda");
  if (kernel == nullptr) {
    std::vector<absl::string_view> have;
    for (const auto& [backend, k] : custom.kernels) have.push_back(backend);
    return absl::FailedPreconditionError(absl::StrCat(
        what, " has no CUDA kernel (it has kernels for: ",
        have.empty() ? "none" : absl::StrJoin(have, ", "),
        "); register CUDA C++ source for it under \"cuda\" with mstep::cuda_source_kernel "
        "(mstep/runtime/CudaCustomKernel.h). A cuda step runs on the device only: there is no "
        "host fallback"));
  }
  const auto* source = custom_kernel_as<CudaSourceKernel>(kernel);
  if (source == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the kernel registered for \"cuda\" is a '", kernel->kind(),
                     "' kernel; cuda takes CUDA C++ source (mstep::cuda_source_kernel)"));
  const CudaSourceKernelDef& def = source->def();
  if (def.source.empty() || (def.entry.empty() && !def.entry_for) || !def.launch)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": its CUDA kernel needs a source, an entry and a launch rule"));

  MSTEP_ASSIGN_OR_RETURN(std::vector<TensorType> input_types, types_of(op.getInputs().getTypes()));
  MSTEP_ASSIGN_OR_RETURN(std::vector<TensorType> output_types,
                         types_of(op.getResults().getTypes()));
  AttrList attrs;
  if (absl::Status s = append_custom_attrs(op, custom, attrs); !s.ok())
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  const CustomAttrView view(custom.schema.attrs, attrs);
  const CudaKernelCall call{input_types, output_types, view};
  auto fail = [&](absl::string_view step, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", step, ": ", s.message()));
  };

  std::string entry = def.entry;
  if (def.entry_for) {
    absl::StatusOr<std::string> chosen = def.entry_for(call);
    if (!chosen.ok()) return fail("its entry rule", chosen.status());
    entry = *chosen;
  }
  absl::StatusOr<CudaLaunchShape> shape = def.launch(call);
  if (!shape.ok()) return fail("its launch rule", shape.status());
  if (absl::Status s = check_launch(*shape); !s.ok()) return fail("its launch rule", s);
  absl::StatusOr<std::vector<CudaKernelSlot>> slots = slots_of(def, call);
  if (!slots.ok()) return fail(absl::StrCat("kernel '", entry, "'"), slots.status());
  absl::StatusOr<BuiltKernel> built = build_kernel(def, entry, name + ".cu", archs);
  if (!built.ok())
    return fail(absl::StrCat("compiling kernel '", entry, "' with NVRTC"), built.status());

  CudaKernelInfo info;
  info.name = built->nvrtc.lowered_entry;
  info.origin = absl::StrCat(origin, " '", custom.label(), "'");
  info.grid = shape->grid;
  info.block = shape->block;
  info.shared_bytes = shape->shared_bytes;
  info.ptx = built->nvrtc.ptx;
  info.cubins = built->cubins;
  info.reports = built->reports;
  info.slots = std::move(*slots);
  CudaLaunchStep launch;
  launch.kernel = static_cast<int>(plan.kernels.size());
  launch.args = operands;
  launch.args.insert(launch.args.end(), results.begin(), results.end());
  launch.writes = results;
  plan.kernels.push_back(std::move(info));
  plan.launches.push_back(std::move(launch));
  return absl::OkStatus();
}

} // namespace mstep::cuda
