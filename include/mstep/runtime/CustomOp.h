// Custom ops: ops a user defines outside the built-in set (Ops.def). An op
// is registered once per process by name, with the names of its
// attributes, a shape and dtype rule, and one kernel per backend. The
// tracer records a call as a `custom` node (mstep::custom_op in
// mstep/api/CustomOp.h), the compiler carries it as `mstep.custom` (a
// fusion boundary), and each backend looks up the kernel registered under
// its own name when it compiles the node.
//
// A kernel is stored type-erased (CustomKernel) under a backend name; the
// backend that looks it up knows which concrete kind it takes. The host
// backends (ref, cpu) take a HostCustomKernel: host pointers, the tensor
// types and the attributes. A device backend defines its own kernel kind
// (a stream and device pointers, say) and registers it the same way.
//
// Not here yet (issue 18): op versions, a typed attribute schema, a
// backward, the C API and exported graphs with custom ops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/Attr.h"

namespace mstep {

/// One attribute of a custom-op call: an int64, a double (a host constant:
/// changing it recompiles, as for built-in ops), an int list or a dtype.
struct CustomAttr {
  std::string name;
  AttrValue value;
};
using CustomAttrs = std::vector<CustomAttr>;

/// The attributes of one call as the shape rule and the kernels see them:
/// the op's declared names with the call's values. A view: valid for the
/// duration of the call it is passed to.
class CustomAttrView {
public:
  /// `values[i].value` is the value of `names[i]` (the `custom_attr`
  /// entries of a node, see custom_attr_values); the spans must outlive the
  /// view.
  CustomAttrView(absl::Span<const std::string> names, absl::Span<const Attr> values)
      : names_(names), values_(values) {}

  /// The value of `name`, or null when the op declares no such attribute.
  const AttrValue* find(absl::string_view name) const;
  /// Typed reads; an error names the attribute when it is missing or holds
  /// another type (an int64 also reads as a double).
  absl::StatusOr<int64_t> get_int(absl::string_view name) const;
  absl::StatusOr<double> get_double(absl::string_view name) const;
  absl::StatusOr<IntList> get_ints(absl::string_view name) const;
  absl::StatusOr<DType> get_dtype(absl::string_view name) const;

private:
  absl::Span<const std::string> names_;
  absl::Span<const Attr> values_;
};

/// The `custom_attr` entries of a custom node's attributes: everything
/// after its leading `custom_op`.
inline absl::Span<const Attr> custom_attr_values(const AttrList& attrs) {
  return absl::MakeConstSpan(attrs).subspan(1);
}

/// The shape and dtype rule: the result types of a call with inputs of
/// `inputs` types and attributes `attrs`, or an error saying what is wrong
/// (the tracer adds the op's name and the inputs' types). Must be a pure
/// function; it may run on any thread that traces.
using CustomShapeRule = std::function<absl::StatusOr<std::vector<TensorType>>(
    absl::Span<const TensorType> inputs, const CustomAttrView& attrs)>;

/// A kernel of one backend, type-erased. kind() names the calling
/// convention; a backend checks it before casting (custom_kernel_as).
class CustomKernel {
public:
  virtual ~CustomKernel() = default;
  virtual absl::string_view kind() const = 0;
};

/// What a host kernel is called with: dense row-major host memory. Inputs
/// are read-only; outputs are allocated with the types the shape rule gave
/// and must be written in full. The pointers are valid for the call only.
struct HostKernelCall {
  absl::Span<const void* const> inputs;
  absl::Span<const TensorType> input_types;
  absl::Span<void* const> outputs;
  absl::Span<const TensorType> output_types;
  const CustomAttrView& attrs;
};

/// The kernel kind of the host-memory backends (ref, cpu). The function
/// must be a pure function of its inputs and attributes (graphs with it
/// are cached and replayed) and safe to call from several threads.
class HostCustomKernel final : public CustomKernel {
public:
  static constexpr absl::string_view kKind = "host";
  using Fn = std::function<absl::Status(const HostKernelCall&)>;

  explicit HostCustomKernel(Fn fn) : fn_(std::move(fn)) {}
  absl::string_view kind() const override { return kKind; }
  absl::Status operator()(const HostKernelCall& call) const { return fn_(call); }

private:
  Fn fn_;
};

/// `kernel` as a `T` (a CustomKernel subclass with a static kKind), or null
/// when it is of another kind.
template <typename T> const T* custom_kernel_as(const CustomKernel* kernel) {
  return kernel != nullptr && kernel->kind() == T::kKind ? static_cast<const T*>(kernel) : nullptr;
}

/// A host kernel from a plain function, for CustomOpDef::kernels.
inline std::shared_ptr<const CustomKernel> host_kernel(HostCustomKernel::Fn fn) {
  return std::make_shared<HostCustomKernel>(std::move(fn));
}

/// Everything registration needs.
struct CustomOpDef {
  std::string name;
  /// The attributes a call must give, each exactly once.
  std::vector<std::string> attr_names;
  CustomShapeRule shape_rule;
  /// (backend name, kernel): "ref", "cpu", or any registered backend's name.
  std::vector<std::pair<std::string, std::shared_ptr<const CustomKernel>>> kernels;
};

/// A registered op. Immutable once registered (add_kernel publishes a new
/// version); shared with every lookup that returned it.
struct CustomOp {
  std::string name;
  /// Stable across processes: the `custom_op` attribute of the op's nodes,
  /// so the name enters the graph's structural hash and cache key.
  uint64_t id = 0;
  std::vector<std::string> attr_names;
  CustomShapeRule shape_rule;
  std::vector<std::pair<std::string, std::shared_ptr<const CustomKernel>>> kernels;

  /// The kernel registered for `backend`, or null.
  const CustomKernel* kernel(absl::string_view backend) const;
};

/// The id of the op named `name` (a stable 64-bit hash of the name).
uint64_t custom_op_id(absl::string_view name);

/// The process's custom ops by name. Thread-safe: every method may be
/// called from any thread; ops are never removed, so what a lookup returns
/// stays valid.
class CustomOpRegistry {
public:
  CustomOpRegistry();
  ~CustomOpRegistry();
  CustomOpRegistry(const CustomOpRegistry&) = delete;
  CustomOpRegistry& operator=(const CustomOpRegistry&) = delete;

  /// The registry the tracer and the backends read.
  static CustomOpRegistry& global();

  /// Registers `def`. AlreadyExists when the name is taken; InvalidArgument
  /// for an empty name, no shape rule, a repeated attribute name, a null
  /// kernel or two kernels for one backend.
  absl::Status add(CustomOpDef def);
  /// Adds a kernel for `backend` to the registered op `name` (a backend
  /// built later brings its own). NotFound for an unknown op;
  /// AlreadyExists when the backend already has a kernel.
  absl::Status add_kernel(absl::string_view name, absl::string_view backend,
                          std::shared_ptr<const CustomKernel> kernel);
  /// The op named `name`, or NotFound listing the registered names.
  absl::StatusOr<std::shared_ptr<const CustomOp>> find(absl::string_view name) const;
  /// The op with id `id` (a node's custom_op attribute), or NotFound.
  absl::StatusOr<std::shared_ptr<const CustomOp>> find(uint64_t id) const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// CustomOpRegistry::global().add(def), throwing mstep::Error on failure.
void register_custom_op(CustomOpDef def);

} // namespace mstep
