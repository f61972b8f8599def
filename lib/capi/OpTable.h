// The op table of the C API: every op mstep_op() and mstep_graph_builder_op()
// can record, by name, as a call into the C++ API (so type promotion,
// broadcasting, shape checks and autograd are the C++ API's own), and the
// typed view of an op call's mstep_attr list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "mstep-c/mstep.h"
#include "mstep/api/Tensor.h"

namespace mstep::capi {

/// Typed access to the attributes of one op call. Getters throw mstep::Error
/// (InvalidArgument) naming the op and the attribute when it is missing
/// without a default or has a kind that does not convert (int <-> float and
/// int -> bool convert; nothing converts to ints or strings). Every getter
/// marks its attribute used, and finish() rejects the ones no getter asked
/// for: a misspelled name must not be silently ignored.
class OpAttrs {
 public:
  /// Validates the list: non-null names, known kinds, no duplicates, a
  /// non-null `ints` when num_ints > 0, a non-null `s` for strings.
  OpAttrs(std::string_view op, const mstep_attr* attrs, size_t count);

  bool has(std::string_view name) const;
  int64_t get_int(std::string_view name, std::optional<int64_t> fallback = std::nullopt);
  double get_float(std::string_view name, std::optional<double> fallback = std::nullopt);
  bool get_bool(std::string_view name, std::optional<bool> fallback = std::nullopt);
  std::vector<int64_t> get_ints(std::string_view name,
                                std::optional<std::vector<int64_t>> fallback = std::nullopt);
  DType get_dtype(std::string_view name, std::optional<DType> fallback = std::nullopt);
  /// nullopt when absent.
  std::optional<DType> get_optional_dtype(std::string_view name);
  std::string get_string(std::string_view name,
                         std::optional<std::string> fallback = std::nullopt);
  /// A host scalar operand: an int attribute gives an integer Scalar, a
  /// bool a bool Scalar and a float a floating one, so the C++ API's type
  /// promotion sees the kind the host passed (full(value: 2) is i64).
  Scalar get_scalar(std::string_view name, std::optional<Scalar> fallback = std::nullopt);
  /// The op name given at construction, for messages.
  std::string_view op() const { return op_; }
  /// Throws when an attribute was given that no getter asked for, naming it
  /// and the signature of the op.
  void finish(std::string_view signature) const;

 private:
  const mstep_attr* find(std::string_view name);
  std::string op_;
  absl::Span<const mstep_attr> attrs_;
  std::vector<bool> used_;
};

/// One op the C API can record.
struct OpEntry {
  /// The name hosts pass ("matmul", "sum", "nll_loss", ...): the C++ API's
  /// function name.
  const char* name;
  /// "sum(x; dims: ints = [], keepdim: bool = false)": tensor operands
  /// before the ';' (a '?' suffix marks an optional one, passed as NULL),
  /// attributes after it with their kinds and defaults.
  const char* signature;
  /// Fewest and most tensor operands (-1: any number, as for "cat").
  int min_inputs;
  int max_inputs;
  /// Calls the C++ API. `inputs` may hold undefined tensors where the host
  /// passed NULL for an optional operand. Reads its attributes from
  /// `attrs`; the caller runs attrs.finish() afterwards.
  std::vector<Tensor> (*call)(absl::Span<const Tensor> inputs, OpAttrs& attrs);
};

/// The entry named `name`, or null.
const OpEntry* find_op(std::string_view name);
/// Every signature, one per line, sorted by name (mstep_op_signatures()).
const std::string& op_signatures();

}  // namespace mstep::capi
