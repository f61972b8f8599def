// The cpu backend's kernel interface. compile() turns each top-level node
// of the step graph into one CpuKernel, built once; run() then calls the
// kernels in order with raw pointers into the arena or into argument
// buffers. A kernel keeps everything it needs (oneDNN primitives, JIT
// function pointers, loop bounds) so a call does no lookup and no
// allocation.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::cpu {

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  /// `operands[i]` points at the data of the node's operand i and
  /// `results[j]` at the memory of its result j (dense row-major, sized by
  /// the result type). A result may share memory with an operand when the
  /// memory plan put it in place (elementwise kernels only).
  virtual void run(const void* const* operands, void* const* results) = 0;
  /// For logs and traces: "onednn.matmul", "jit.fusion", "flash.sdpa", ...
  virtual absl::string_view name() const = 0;
  /// Whether run() can fail on the data it reads (an index out of range).
  /// The executable then checks last_error() right after the call and
  /// stops the step before any later kernel writes a donated parameter.
  virtual bool can_fail() const { return false; }
  /// The failure of the latest run(), or OK.
  virtual absl::Status last_error() const { return absl::OkStatus(); }
  /// Whether the call matters besides its results (a collective's wait):
  /// it is kept although nothing reads what it writes.
  virtual bool has_effects() const { return false; }
};

/// What a kernel family is asked to build: node `index` of `graph`.
/// `graph.type_of(operand)` gives each operand's type.
struct KernelRequest {
  const TraceGraph& graph;
  uint32_t index;
  /// Per node: a `permute` whose source a matmul may read directly
  /// (transposed) although the source is an intermediate value: the
  /// executor checked that the arena keeps it intact until every reader
  /// of the permute ran. Null: only graph inputs are read through.
  const std::vector<bool>* see_through_permutes = nullptr;
  const GraphNode& node() const { return graph.nodes[index]; }
};

/// Whether `node` is a permute that swaps the last two dims and keeps the
/// others (a matrix transpose, batched or not).
inline bool is_matrix_transpose(const GraphNode& node) {
  if (node.op != OpKind::permute) return false;
  const IntList& perm = attr_ints(node.attrs, AttrName::perm);
  const int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2) return false;
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d) return false;
  return true;
}

/// A kernel family's factory: a kernel for the node, nullptr when the
/// family does not handle it (op, dtype or attributes), or an error when it
/// should handle it and cannot.
using KernelFactory = absl::StatusOr<std::unique_ptr<CpuKernel>> (*)(const KernelRequest&);

}  // namespace mstep::cpu
