// StableHLO in: a StableHLO module in MLIR text, as JAX prints it
// (`jax.jit(f).lower(...).as_text()`, the pretty op form, or the generic op
// form of `.compiler_ir('stablehlo').operation.get_asm(
// print_generic_op_form=True)`), read into an mstep trace graph, which
// mstep::import_stablehlo (api/StableHloImport.h) records as lazy ops and
// `mstep-opt --mstep-import-stablehlo` prints as an mstep module.
//
// How it is read: no StableHLO C++ library is packaged, and the project
// vendors none, so the module is parsed by MLIR's own parser with
// unregistered dialects allowed. stablehlo ops are then generic operations
// and their dialect attributes (#stablehlo.dot<...>,
// #stablehlo<comparison_direction EQ>) opaque text, which the op table here
// reads. The pretty form needs each op's parser, so a shell `stablehlo`
// dialect (lib/compiler/stablehlo/StableHloSyntax.h) parses the pretty form
// of the supported ops into the same generic operations.
//
// - The function run is @main (or the module's only public function);
//   func.call to private functions is inlined.
// - Ops read (each mapped onto mstep trace ops): constant (splat, up to
//   64 elements, or larger as an input: ImportedStableHlo::constants), iota, add, subtract, multiply, divide, maximum,
//   minimum, power, negate, abs, exponential, exponential_minus_one, log,
//   log_plus_one, sqrt, rsqrt, tanh, logistic, sine, cosine, is_finite,
//   not, and, or (i1), compare, select, convert, broadcast_in_dim,
//   reshape, transpose, slice, concatenate, dot_general (floating point),
//   reduce (one operand; add, maximum, minimum bodies).
// - Anything else (an unsupported op, a custom_call, a dynamic shape, an
//   element type mstep has no dtype for, a body that breaks the op's
//   rules) is InvalidArgument "<file>:<line>:<col>: error: ..." naming the
//   op. Nothing is half-imported.
//
// No MLIR in this header: libmstep includes it. Thread-safe (each call
// parses in its own MLIRContext).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

/// A StableHLO function as an mstep trace graph (no fused ops, no random
/// ops; every input role `input`).
struct ImportedStableHlo {
  TraceGraph graph;
  /// The graph's first inputs are the function's arguments; after them
  /// come its large constants (more than 64 elements that are not all
  /// equal: what JAX writes for arrays a jitted function closes over),
  /// which mstep's scalar constants cannot hold. Each has its bytes here
  /// (row-major, little-endian, one byte per bool).
  size_t num_arguments = 0;
  struct Constant {
    size_t input;
    std::string bytes;
  };
  std::vector<Constant> constants;
  /// Per input: `mstep.name` or `jax.arg_info` when the module gives one,
  /// else "arg<i>"; "constant<k>" for the constants.
  std::vector<std::string> input_names;
  /// Per output: `mstep.name` or `jax.result_info`, else "result<i>".
  std::vector<std::string> output_names;
};

/// Reads `text` (a whole module); `source_name` is the file name that
/// locations in errors give.
absl::StatusOr<ImportedStableHlo> stablehlo_to_trace_graph(absl::string_view text,
                                                           absl::string_view source_name);

}  // namespace mstep
