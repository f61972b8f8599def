// StableHloText: writes the body of one StableHLO function as MLIR text in
// the generic op form ("stablehlo.add"(%a, %b) : (...) -> ...), which both
// consumers checked here parse: the MLIR bundled with jaxlib (XLA) and
// iree-compile. No StableHLO C++ library is packaged, so the exporter prints
// text instead of building ops; each helper prints one op (or a few for a
// broadcast or a keepdim reshape) and returns the value it defines.
//
// Library-internal (lib/compiler/stablehlo). No MLIR headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace mstep::stablehlo {

/// A value of the function being written: its SSA name, static shape and
/// element type in MLIR's spelling ("f32", "i64", "i1", "ui32", ...).
struct Value {
  std::string name;
  std::vector<int64_t> shape;
  std::string elem;
};

enum class Reducer { add, max, min };

class FunctionText {
 public:
  /// `functions` collects the private functions (add_function) of every
  /// function of one module, so that their names are unique in it.
  explicit FunctionText(std::shared_ptr<std::vector<std::string>> functions =
                            std::make_shared<std::vector<std::string>>())
      : functions_(std::move(functions)) {}

  /// "tensor<2x3xf32>".
  static std::string type(absl::Span<const int64_t> shape, const std::string& elem);
  static std::string type(const Value& v) { return type(v.shape, v.elem); }
  static bool is_float(const std::string& elem);
  static bool is_unsigned(const std::string& elem) { return elem.rfind("ui", 0) == 0; }

  /// One generic op: `%N = "stablehlo.<op>"(operands) {attrs} : (...) -> type`.
  /// `attrs` is the attribute dictionary's inside ("" for none).
  Value op(const std::string& name, absl::Span<const Value> operands,
           std::vector<int64_t> shape, const std::string& elem, const std::string& attrs = "");
  /// An op with several results, named `%N#0`, `%N#1`, ..., and
  /// optionally a region (FunctionText::region).
  std::vector<Value> op_results(const std::string& name, absl::Span<const Value> operands,
                                absl::Span<const Value> result_types, const std::string& attrs,
                                const std::string& region = "");
  /// Elementwise op whose result has the first operand's shape and type.
  Value same(const std::string& name, absl::Span<const Value> operands);

  /// A 0-d constant (a float printed exactly, an integer, a bool).
  Value constant(double value, const std::string& elem);
  Value constant_u64(uint64_t value, const std::string& elem);
  /// `value` (0-d) broadcast to `shape`.
  Value splat(double value, std::vector<int64_t> shape, const std::string& elem);

  /// NumPy-style broadcast (dimensions aligned from the right) to `shape`;
  /// `v` itself when it has that shape already.
  Value broadcast(const Value& v, std::vector<int64_t> shape);
  /// broadcast_in_dim with explicit dimensions.
  Value broadcast_in_dim(const Value& v, std::vector<int64_t> shape,
                         absl::Span<const int64_t> dims);
  Value reshape(const Value& v, std::vector<int64_t> shape);
  /// stablehlo.slice [start, limit) with `strides` (all 1 when empty).
  Value slice(const Value& v, absl::Span<const int64_t> start, absl::Span<const int64_t> limit,
              std::vector<int64_t> strides = {});
  /// stablehlo.pad with `fill` (0-d): `low`/`high` elements before/after
  /// and `interior` between neighbours along each dim (all >= 0).
  Value pad(const Value& v, const Value& fill, absl::Span<const int64_t> low,
            absl::Span<const int64_t> high, absl::Span<const int64_t> interior);
  Value transpose(const Value& v, absl::Span<const int64_t> perm);
  Value convert(const Value& v, const std::string& elem);
  Value bitcast(const Value& v, const std::string& elem);
  /// compare with the compare_type the element type implies (FLOAT,
  /// SIGNED, UNSIGNED for unsigned and i1).
  Value compare(const Value& a, const Value& b, const std::string& direction);
  Value select(const Value& pred, const Value& a, const Value& b);
  Value iota(std::vector<int64_t> shape, int64_t dim, const std::string& elem);
  /// stablehlo.reduce over `dims` with a region applying `reducer`,
  /// starting from `init` (0-d, v's element type).
  Value reduce(const Value& v, absl::Span<const int64_t> dims, Reducer reducer,
               const Value& init);
  /// The identity of `reducer` for `elem` (0, -inf / the lowest integer, ...).
  Value reduce_init(Reducer reducer, const std::string& elem);
  /// The `({ ^bb0(%lhs, %rhs): reducer })` region of reduce and scatter.
  static std::string region(Reducer reducer, const std::string& elem);
  /// The same with any elementwise binary op (`stablehlo.or`, ...).
  static std::string region(const std::string& op_name, const std::string& elem);
  /// A region `({ ^bb0(params): ...; stablehlo.return results })` whose
  /// body `body` writes into a FunctionText of its own, its values named
  /// `%<tag>N` so that they cannot clash with the enclosing function's.
  /// `params` name the block arguments (`%a`, ...).
  static std::string region(const std::string& tag, absl::Span<const Value> params,
                            const std::function<std::vector<Value>(FunctionText&)>& body);

  /// A private function of the module that this one calls (a composite's
  /// decomposition): `body` writes its ops into a fresh FunctionText given
  /// its arguments (`%arg<i>` of `args`' types) and returns its results.
  /// Returns the function's symbol, `@<base>_<n>`.
  std::string add_function(const std::string& base, absl::Span<const Value> args,
                           const std::function<std::vector<Value>(FunctionText&,
                                                                  const std::vector<Value>&)>& body);
  /// The private functions added, each a whole `func.func` (the module
  /// writer appends them after its functions).
  const std::vector<std::string>& functions() const { return *functions_; }

  const std::string& text() const { return text_; }

 private:
  std::string fresh() { return "%" + tag_ + std::to_string(next_++); }
  std::string text_;
  std::string tag_;  // prefix of the value names (regions' own values)
  int next_ = 0;
  // Shared with the functions added and the module's other functions.
  std::shared_ptr<std::vector<std::string>> functions_;
};

/// "array<i64: 1, 2>".
std::string i64_array(absl::Span<const int64_t> values);
/// "dense<[[1, 1], [0, 2]]> : tensor<2x2xi64>": (low, high) per dim, the
/// form of convolution's and reduce_window's `padding`.
std::string padding_attr(absl::Span<const int64_t> low, absl::Span<const int64_t> high);

}  // namespace mstep::stablehlo
