// Custom ops: ops a user defines outside the built-in set (Ops.def). An op
// is registered by name and version with a schema (its tensor inputs,
// typed attributes, output count, aliasing and determinism), a shape and
// dtype rule, and one kernel per backend. The tracer records a call as a
// `custom` node (mstep::custom_op in mstep/api/CustomOp.h), the compiler
// carries it as `mstep.custom` (a fusion boundary), and each backend looks
// up the kernel registered under its own name when it compiles the node.
//
// A kernel is stored type-erased (CustomKernel) under a backend name; the
// backend that looks it up knows which concrete kind it takes. The host
// backends (ref, cpu) take a HostCustomKernel: host pointers, the tensor
// types and the attributes. A device backend defines its own kernel kind
// (a stream and device pointers, say) and registers it the same way.
//
// An op may have a backward (CustomOpDef::backward): a function recording
// the input gradients with lazy ops, or another registered custom op. The
// cpu kernels split work over the cores with cpu_parallel_for.
//
// An elementwise op may declare a scalar form (CustomScalarForm.h):
// mstep-fuse-elementwise then fuses it like a built-in elementwise op on
// the compiling backends (cpu; ref keeps running the kernel). Declared
// aliases let the cpu arena planner run the kernel in place when the
// input dies at the call (HostKernelCall says what the kernel must allow).
//
// Exported graphs and disk-cache entries record the ops they call
// (CustomOpNeed); a process loads them only where it has registered those
// names and versions, from its own code or from a plugin (runtime/Plugin.h:
// `mstep-run --plugin`, `mstep-opt --load-plugin`). The `mstep.custom`
// verifier runs the registered op's shape rule.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/Attr.h"
#include "mstep/runtime/CustomScalarForm.h"

namespace mstep {

/// The type of a custom-op attribute.
enum class CustomAttrType : uint8_t { int64, float64, boolean, int_list, string, dtype };
/// "int", "float", "bool", "int list", "string", "dtype".
absl::string_view custom_attr_type_name(CustomAttrType type);

/// An attribute value as a caller gives it and a kernel reads it. A
/// float64 is a host constant (changing it recompiles, as for built-in
/// ops); every other type is part of the graph's structure.
using CustomAttrValue = std::variant<int64_t, double, bool, IntList, std::string, DType>;

/// One attribute of a custom-op call.
struct CustomAttr {
  std::string name;
  CustomAttrValue value;
};
using CustomAttrs = std::vector<CustomAttr>;

/// One tensor input of a custom op: an optional name (for messages) and the
/// dtypes it accepts (empty: any).
struct CustomInputSpec {
  std::string name;
  std::vector<DType> dtypes;
  /// Whether a gradient flows to this input through the op's backward
  /// (false: an index, a mask, a target that is never trained). Inputs of
  /// an integer dtype never get one either way.
  bool differentiable = true;
  bool operator==(const CustomInputSpec&) const = default;
};

/// One named attribute: its type and, optionally, the value a call that
/// leaves it out gets.
struct CustomAttrSpec {
  std::string name;
  CustomAttrType type = CustomAttrType::int64;
  std::optional<CustomAttrValue> default_value;
  bool operator==(const CustomAttrSpec&) const = default;
};

/// Output `output` may share the buffer of input `input` (an in-place op:
/// the kernel must then be correct when the two pointers are equal). The
/// cpu backend's arena planner gives the output the input's storage when
/// the input dies at the call: no later reader, not a graph output, not a
/// parameter or other graph input unless that input donates its buffer to
/// the output. Otherwise the output has its own buffer (the pointers then
/// differ and never overlap). The ref backend never shares.
struct CustomAlias {
  int output = 0;
  int input = 0;
  bool operator==(const CustomAlias&) const = default;
};

/// What a call of the op looks like. Registering a name and version again
/// is allowed only with an equal schema.
struct CustomOpSchema {
  std::vector<CustomInputSpec> inputs;
  std::vector<CustomAttrSpec> attrs;
  int num_outputs = 1;
  std::vector<CustomAlias> aliases;
  /// Whether the kernels give bit-identical results for identical inputs.
  bool deterministic = true;
  /// What one element of each output is, when the op is elementwise
  /// (every input and output of one shape and floating dtype): lets
  /// mstep-fuse-elementwise fuse calls. Checked at registration against
  /// the inputs, outputs and attributes above; part of the op's identity
  /// (a changed form needs a new version) and of its id.
  std::optional<CustomScalarForm> scalar_form;
  bool operator==(const CustomOpSchema&) const = default;
};
/// OK without a scalar form; otherwise InvalidArgument naming `op` when the
/// form is malformed, gives another number of outputs, reads an input or
/// attribute the schema lacks (or a string/list/dtype attribute), or when
/// an input may have a non-floating dtype (the form computes in floating
/// point). CustomOpRegistry::add runs it.
absl::Status check_scalar_form(absl::string_view op, const CustomOpSchema& schema);
/// "(pred: f32|f64, target) {reduction: string = \"mean\"} -> 1 output".
std::string to_string(const CustomOpSchema& schema);

/// The trace form of `value` for the attribute `spec` (an int converts to
/// a float, a bool is 0 or 1, a string a packed int list), or
/// InvalidArgument naming the attribute, its type and the value's type.
absl::StatusOr<AttrValue> encode_custom_attr(const CustomAttrSpec& spec,
                                             const CustomAttrValue& value);
/// The value of `stored` (made by encode_custom_attr for `spec`) as a
/// caller gave it; InvalidArgument when `stored` cannot hold `spec`'s type.
absl::StatusOr<CustomAttrValue> decode_custom_attr(const CustomAttrSpec& spec,
                                                   const AttrValue& stored);

/// The attributes of one call as the shape rule and the kernels see them:
/// the op's declared attributes with the call's values (defaults filled
/// in). A view: valid for the duration of the call it is passed to.
class CustomAttrView {
public:
  /// `values[i].value` is the trace form of `specs[i]` (the `custom_attr`
  /// entries of a node, see custom_attr_values); the spans must outlive the
  /// view.
  CustomAttrView(absl::Span<const CustomAttrSpec> specs, absl::Span<const Attr> values)
      : specs_(specs), values_(values) {}

  /// Whether the op declares `name`.
  bool has(absl::string_view name) const;
  /// The value of `name`; an error names the attribute when the op does
  /// not declare it.
  absl::StatusOr<CustomAttrValue> get(absl::string_view name) const;
  /// Typed reads; an error names the attribute when it is missing or has
  /// another type (an int also reads as a double).
  absl::StatusOr<int64_t> get_int(absl::string_view name) const;
  absl::StatusOr<double> get_double(absl::string_view name) const;
  absl::StatusOr<bool> get_bool(absl::string_view name) const;
  absl::StatusOr<IntList> get_ints(absl::string_view name) const;
  absl::StatusOr<std::string> get_string(absl::string_view name) const;
  absl::StatusOr<DType> get_dtype(absl::string_view name) const;

private:
  absl::Span<const CustomAttrSpec> specs_;
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

/// The rule of an op with one result of input `index`'s type (an
/// elementwise op, say); a call with fewer inputs is refused.
CustomShapeRule same_type_as_input(size_t index = 0);

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
/// An output and an input never overlap, except that an output the schema
/// declares may alias an input (CustomAlias) may be that input's very
/// buffer (outputs[o] == inputs[i]): the kernel then runs in place and
/// must read each input element before it writes that output element.
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

/// A backward written over lazy tensors, type-erased: the runtime does not
/// know tensors. mstep::backward_function (mstep/api/CustomOp.h) makes the
/// one kind there is; kind() names it.
class CustomBackwardFn {
public:
  virtual ~CustomBackwardFn() = default;
  virtual absl::string_view kind() const = 0;
};

/// How the gradients of a custom op's inputs are computed; exactly one of
/// `fn` and `op` is set. Build it with mstep::backward_function or
/// mstep::backward_op (mstep/api/CustomOp.h).
struct CustomBackward {
  /// (a) A function of (inputs, outputs, grad_outputs, attributes) that
  /// records the input gradients with lazy ops (custom ops included).
  std::shared_ptr<const CustomBackwardFn> fn;
  /// (b) The name of another registered custom op, called on
  /// (inputs..., grad_outputs...) with the forward call's attributes (it
  /// declares them all); it returns one gradient per differentiable input
  /// (CustomInputSpec::differentiable), in input order.
  std::string op;
  /// The version of `op`; 0: the newest registered.
  int64_t op_version = 0;
};

/// Everything registration needs.
struct CustomOpDef {
  std::string name;
  /// A new version of an op is a different op to the caches: graphs with
  /// the old one are never reused for it. At least 1.
  int64_t version = 1;
  CustomOpSchema schema;
  /// Runs at each call, after the schema's checks; it must give
  /// schema.num_outputs types.
  CustomShapeRule shape_rule;
  /// (backend name, kernel): "ref", "cpu", or any registered backend's name.
  std::vector<std::pair<std::string, std::shared_ptr<const CustomKernel>>> kernels;
  /// How gradients flow through the op; without one, a call whose
  /// differentiable inputs require grad is an error (under no-grad it runs).
  /// Not part of the schema: registering again keeps the first backward.
  std::optional<CustomBackward> backward;
};

/// A registered op. Immutable once registered (add_kernel publishes a new
/// copy); shared with every lookup that returned it.
struct CustomOp {
  std::string name;
  int64_t version = 1;
  /// Stable across processes: the `custom_op` attribute of the op's nodes,
  /// so the name and version (and the scalar form, if any) enter the
  /// graph's structural hash and cache key.
  uint64_t id = 0;
  CustomOpSchema schema;
  CustomShapeRule shape_rule;
  std::vector<std::pair<std::string, std::shared_ptr<const CustomKernel>>> kernels;

  /// The kernel registered for `backend`, or null.
  const CustomKernel* kernel(absl::string_view backend) const;
  /// "name" for version 1, "name v3" otherwise (for messages).
  std::string label() const;

  /// CustomOpDef::backward.
  std::optional<CustomBackward> backward;
};

/// The id of version `version` of the op named `name` (a stable 64-bit
/// hash of both), for an op without a scalar form.
uint64_t custom_op_id(absl::string_view name, int64_t version = 1);
/// The id of an op with `schema`: custom_op_id(name, version), with the
/// scalar form's fingerprint folded in when it has one (so a process that
/// registered another form under the same version never reuses a cached
/// graph compiled with this one).
uint64_t custom_op_id(absl::string_view name, int64_t version, const CustomOpSchema& schema);

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

  /// Registers `def` under its name and version. Registering an equal
  /// schema under the same name and version again is allowed and changes
  /// nothing (a plugin loaded twice); another schema there is
  /// AlreadyExists. InvalidArgument for an empty name, a version below 1,
  /// no shape rule, fewer than one output, a repeated input or attribute
  /// name, a default of the wrong type, a bad alias, a null kernel or two
  /// kernels for one backend.
  absl::Status add(CustomOpDef def);
  /// Adds a kernel for `backend` to the newest version of the registered op
  /// `name` (a backend built later brings its own). NotFound for an unknown
  /// op; AlreadyExists when the backend already has a kernel.
  absl::Status add_kernel(absl::string_view name, absl::string_view backend,
                          std::shared_ptr<const CustomKernel> kernel);
  /// The newest version of the op named `name`, or NotFound listing the
  /// registered names.
  absl::StatusOr<std::shared_ptr<const CustomOp>> find(absl::string_view name) const;
  /// Version `version` of the op `name`, or NotFound naming the versions
  /// that are registered.
  absl::StatusOr<std::shared_ptr<const CustomOp>> find(absl::string_view name,
                                                       int64_t version) const;
  /// The op with id `id` (a node's custom_op attribute), or NotFound.
  absl::StatusOr<std::shared_ptr<const CustomOp>> find(uint64_t id) const;

  /// Forgets every version of `name` (lookups that hold one keep it). For
  /// tests that need a process without the op; never needed otherwise.
  void remove_for_testing(absl::string_view name);

private:
  struct State;
  std::unique_ptr<State> state_;
};

/// CustomOpRegistry::global().add(def), throwing mstep::Error on failure.
void register_custom_op(CustomOpDef def);

/// A custom op that a compiled graph calls, as an exported graph
/// (Graph::save) and a disk-cache entry record it: a process runs the graph
/// only when it has registered this name and version.
struct CustomOpNeed {
  std::string name;
  int64_t version = 1;
  bool operator==(const CustomOpNeed&) const = default;
};

/// The number of threads cpu_parallel_for splits work over: the cpu
/// backend's (OpenMP's, set by OMP_NUM_THREADS).
int cpu_thread_count();

/// For cpu kernels: calls `fn(begin, end)` on disjoint ranges that cover
/// [0, n) exactly once, in parallel on the threads the cpu backend's own
/// kernels use (one range per thread at most), each range `grain` indices
/// long at least (a grain below 1 counts as 1). Runs `fn(0, n)` on the
/// calling thread when n < 2 * grain, when there is one thread, or when
/// called from inside another cpu_parallel_for or OpenMP parallel region
/// (nesting is safe, and serial inside). Nothing is called for n <= 0.
/// Returns when every range is done; if `fn` throws, the other ranges still
/// finish and the first exception is rethrown here. `fn` must be safe to
/// call from several threads at once.
void cpu_parallel_for(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn);

} // namespace mstep
