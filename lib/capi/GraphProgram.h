// What a compiled graph of the C API runs: a GraphProgram re-records a fixed
// function of its inputs as lazy ops, which the tracer then cuts, keys and
// finds in the module cache (compiled once, a cache hit afterwards), or
// which a capture records once for replay.
//
// Two programs exist: the tape a graph builder recorded (calls into the op
// table, so the C++ API's checks apply), and the nodes of an MLIR module a
// host handed over.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "lib/capi/OpTable.h"
#include "mstep-c/mstep.h"
#include "mstep/api/Tensor.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::capi {

/// Runs op `name` of the op table: checks the operand count against the
/// entry, calls it and rejects attributes it did not read. Throws
/// CapiError (unknown op) or mstep::Error.
std::vector<Tensor> call_op(const char* name, absl::Span<const Tensor> inputs,
                            const mstep_attr* attrs, size_t num_attrs);

/// An mstep_attr with its own storage, kept on a builder's tape.
struct OwnedAttr {
  explicit OwnedAttr(const mstep_attr& a);
  mstep_attr view() const;
  std::string name;
  mstep_attr_kind kind;
  int64_t i;
  double f;
  std::vector<int64_t> ints;
  std::string s;
};

/// The ops a graph builder recorded. Values are numbered: inputs, captured
/// tensors and op results each get the next id when they first appear.
struct Tape {
  enum class Source { input, captured, result };
  struct ValueInfo {
    Source source;
    int32_t index;  // input number, captured-tensor number, or op number
  };
  struct Op {
    const OpEntry* entry;
    std::vector<int32_t> operands;  // value ids, -1 for an omitted optional operand
    std::vector<OwnedAttr> attrs;
    std::vector<int32_t> results;   // value ids
  };
  Device device;
  std::vector<TensorType> input_types;
  std::vector<Tensor> captured;           // tensors from outside, read at each run
  std::vector<int32_t> captured_values;   // parallel: each one's value id
  std::vector<ValueInfo> values;
  std::vector<Op> ops;
};

/// A builder's state, shared with the tensors it made (they name their
/// value in its tape).
struct BuilderState {
  Tape tape;
};

/// A function from input tensors to output tensors, re-recorded on demand.
class GraphProgram {
 public:
  virtual ~GraphProgram() = default;
  /// Records the function on `inputs` (already checked against the
  /// signature) and returns its outputs, pending.
  virtual std::vector<Tensor> record(absl::Span<const Tensor> inputs) const = 0;

  Device device;
  std::vector<TensorType> input_types;
  std::vector<TensorType> output_types;
};

/// The program of a builder's tape up to now, reduced to what `outputs`
/// (value ids) need.
std::shared_ptr<const GraphProgram> make_tape_program(const Tape& tape,
                                                      const std::vector<int32_t>& outputs,
                                                      std::vector<TensorType> output_types);
/// The program of an MLIR module's function (trace_graph_from_mlir).
/// Throws for ops a host module may not use (fused ops, random ops that
/// need the runtime's RNG state).
std::shared_ptr<const GraphProgram> make_node_program(TraceGraph graph, Device device);

/// Throws INVALID_ARGUMENT naming the input when `inputs` does not match
/// `program`'s signature (count, dtype, shape, device).
void check_signature(const GraphProgram& program, absl::Span<const Tensor> inputs,
                     const char* what);

}  // namespace mstep::capi
