// Calling a user-registered op (registration: mstep/runtime/CustomOp.h).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/api/Tensor.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// Which registered op a call means: a name (its newest version) or a name
/// and a version.
struct CustomOpRef {
  CustomOpRef(const char* name) : name(name) {}
  CustomOpRef(absl::string_view name) : name(name) {}
  CustomOpRef(const std::string& name) : name(name) {}
  CustomOpRef(absl::string_view name, int64_t version) : name(name), version(version) {}

  absl::string_view name;
  int64_t version = 0; // 0: the newest registered
};

/// Records a call of the custom op `op` on `inputs` with `attrs` and
/// returns its results, lazy like every op. Checked at the call against the
/// op's schema: the op is registered, the input count and the inputs'
/// dtypes, each attribute is declared, has the declared type (an int is
/// accepted for a float) and is given once, attributes left out have a
/// default; then the shape rule accepts the inputs' types and gives the
/// declared number of results, an output that may alias an input has its
/// type. When grad mode is on and a differentiable input (see
/// CustomInputSpec::differentiable) requires grad, the op has a backward
/// (else an error) and the outputs join autograd; a backward op (form (b))
/// must then be registered, take the op's inputs and output gradients,
/// declare its attributes and give one output per differentiable input.
/// Each failure throws mstep::Error naming the op and the inputs' types,
/// and records nothing. The kernel is picked when the graph compiles: the
/// one registered for the tensors' backend.
std::vector<Tensor> custom_op(CustomOpRef op, absl::Span<const Tensor> inputs,
                              const CustomAttrs& attrs = {});

/// custom_op under the short name:
/// `mstep::custom("giou_loss", {pred, target}, {{"reduction", "mean"}})`.
inline std::vector<Tensor> custom(CustomOpRef op, absl::Span<const Tensor> inputs,
                                  const CustomAttrs& attrs = {}) {
  return custom_op(op, inputs, attrs);
}

/// What a backward function (form (a)) is called with. The spans and the
/// view are valid for the call only; the tensors may be kept.
struct CustomGradContext {
  /// The forward call's inputs and outputs (outputs detached).
  absl::Span<const Tensor> inputs;
  absl::Span<const Tensor> outputs;
  /// The gradient of each output; zeros for an output that was not used.
  absl::Span<const Tensor> grad_outputs;
  /// The forward call's attributes.
  const CustomAttrView& attrs;
  /// Per input: whether its gradient is wanted (it is differentiable and
  /// requires grad); others may be left undefined.
  const std::vector<bool>& needs_input_grad;
};

/// A backward function: one gradient per input, each of its input's type,
/// or an undefined Tensor for none. It records lazy ops (built-in or custom)
/// and runs with grad mode off (no gradients of gradients). It runs on the
/// thread that calls backward().
using CustomGradFunction = std::function<std::vector<Tensor>(const CustomGradContext&)>;

/// Form (a) of CustomOpDef::backward: `fn` records the gradients.
CustomBackward backward_function(CustomGradFunction fn);
/// Form (b) of CustomOpDef::backward: the registered custom op `op` (version
/// `version`, 0: the newest) computes them from (inputs..., grad_outputs...)
/// and the forward call's attributes, one result per differentiable input.
CustomBackward backward_op(std::string op, int64_t version = 0);

namespace detail {

/// A call site of one custom op (TypedCustomOp's): calls through it skip
/// the registry lookup and, while the inputs' types and the attributes are
/// those of this thread's previous call through the site, the schema
/// checks, the attribute encoding and the shape rule (rules are pure), whose
/// results are kept per thread. Checks that depend on more than the types
/// (devices, requires-grad, the backward) run on every call; a registry
/// change drops what was kept.
class CustomCallSite {
public:
  CustomCallSite(std::string name, int64_t version);
  /// custom_op(name, version) for an op with one output.
  Tensor call1(absl::Span<const Tensor> inputs, const CustomAttrs& attrs) const;
  std::vector<Tensor> call(absl::Span<const Tensor> inputs, const CustomAttrs& attrs) const {
    return custom_op(CustomOpRef(name_, version_), inputs, attrs);
  }
  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }

private:
  std::string name_;
  int64_t version_;
  uint64_t id_; // unique per site, the key of what threads keep
};

} // namespace detail

/// A custom op with `N` outputs as a callable: registers `def` when
/// constructed (again is fine: an equal definition is idempotent; another
/// schema under the same name and version throws) and calls that version,
/// returning a Tensor for one output and std::array<Tensor, N> otherwise.
///
///   static const TypedCustomOp<1> giou(giou_def());
///   Tensor loss = giou({pred, target}, {{"reduction", "mean"}});
template <size_t N> class TypedCustomOp {
  static_assert(N >= 1, "a custom op has one output at least");

public:
  using Result = std::conditional_t<N == 1, Tensor, std::array<Tensor, N>>;

  explicit TypedCustomOp(CustomOpDef def) : site_(def.name, def.version) {
    if (def.schema.num_outputs != static_cast<int>(N))
      throw Error(absl::InvalidArgumentError(
          "TypedCustomOp<" + std::to_string(N) + "> for custom op '" + site_.name() +
          "', whose schema declares " + std::to_string(def.schema.num_outputs) + " outputs"));
    register_custom_op(std::move(def));
  }

  Result operator()(absl::Span<const Tensor> inputs, const CustomAttrs& attrs = {}) const {
    if constexpr (N == 1) {
      return site_.call1(inputs, attrs);
    } else {
      std::vector<Tensor> out = site_.call(inputs, attrs);
      std::array<Tensor, N> result;
      for (size_t i = 0; i < N; ++i) result[i] = out[i];
      return result;
    }
  }

  const std::string& name() const { return site_.name(); }
  int64_t version() const { return site_.version(); }

private:
  detail::CustomCallSite site_;
};

} // namespace mstep
