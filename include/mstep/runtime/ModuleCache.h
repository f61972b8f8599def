// ModuleCache: the in-memory LRU of compiled graphs, keyed by structure ⊕
// shapes/dtypes ⊕ backend ⊕ compile options ⊕ host constants (the
// non-tensor arguments). It also remembers, per structure, the last graph
// compiled, so a miss can say which key component changed
// (MSTEP_LOG_RECOMPILES) and a host constant that keeps forcing compiles
// is called out once. The disk cache (lib/runtime/DiskCache.h) sits
// behind it; the tracer consults both.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// The key of one cut, built in one pass over its nodes.
struct GraphKey {
  uint64_t structure = 0;  // ops, attributes, wiring
  uint64_t types = 0;      // shapes and dtypes
  uint64_t constants = 0;  // host constant values (non-tensor arguments)
  uint64_t backend = 0;
  uint64_t compile_options = 0;  // what changes the compiled code (fusion on/off)

  /// Everything but constants: equal for graphs that differ only in them.
  uint64_t without_constants() const;
  uint64_t full() const;
  /// Every component, for the disk cache's collision check.
  std::string to_text() const;
};

/// A host constant in a compiled graph, for the recompile warning.
struct ConstantSite {
  uint32_t node;        // position in the TraceGraph
  std::string where;    // "constant %4 used by mul %5"
  double value;
};

class ModuleCache {
 public:
  struct Entry {
    std::shared_ptr<Executable> executable;  // shared: captured graphs outlive eviction
    uint32_t num_nodes = 0;   // cheap collision guard
    uint32_t num_inputs = 0;
    /// The graph, kept only while something needs it (the NaN guard, a
    /// capture: Graph::export_stablehlo).
    std::shared_ptr<const TraceGraph> graph;
    /// TraceGraph::donated_to: which inputs a capture may donate.
    std::vector<int32_t> donated_to;
    /// The custom ops the graph calls; an exported graph lists them.
    std::vector<CustomOpNeed> custom_ops;
    /// The graph's collectives (dist::collective_signature, empty when it
    /// has none) and its input types: a graph with collectives is compared
    /// across ranks at its first run (`ranks_compared` then).
    std::string collectives;
    std::string input_types;
    bool ranks_compared = false;
  };

  explicit ModuleCache(size_t max_entries = 256) : max_entries_(max_entries) {}

  /// The entry for `key`, or nullptr; a hit becomes the most recent.
  Entry* find(const GraphKey& key, uint32_t num_nodes, uint32_t num_inputs);
  /// Inserts `entry`, evicting the least recently used beyond the limit.
  /// Returns the entry and how many were evicted.
  Entry& insert(const GraphKey& key, Entry entry, int* evicted = nullptr);

  /// Why `key` missed, against the last graph compiled with its structure:
  /// a short category for the metrics and a sentence naming the component
  /// that changed. Call before note_compile().
  struct MissReason {
    std::string category;  // "new structure", "input shape changed", ...
    std::string detail;
  };
  MissReason explain_miss(const GraphKey& key, const TraceGraph& graph) const;

  /// What note_compile() learned about a compile.
  struct CompileNote {
    bool constants_only = false;  // same structure and shapes seen before
    std::string warning;          // non-empty once per structure
  };
  /// Records a compile of `key`. The warning is set when the same
  /// structure has now been compiled `threshold` times with different
  /// constants; it names the changing constant and the fix.
  CompileNote note_compile(const GraphKey& key, const TraceGraph& graph, int threshold);

  size_t size() const { return entries_.size(); }
  size_t max_entries() const { return max_entries_; }
  /// Shrinks (evicting the oldest) or grows the limit.
  void set_max_entries(size_t n);
  void clear();

 private:
  struct Slot {
    uint64_t key;
    Entry entry;
  };
  /// One compiled signature of a structure.
  struct Signature {
    GraphKey key;
    std::vector<TensorType> input_types;
    std::vector<ConstantSite> constants;
  };
  /// The recent compiles of one structure (the last one first).
  struct StructureHistory {
    std::vector<Signature> recent;  // at most kRecentSignatures
    std::vector<double> changed_values;  // values seen at the changing site
    int compiles = 0;
    bool warned = false;
  };
  void evict_to(size_t n, int* evicted);
  static constexpr size_t kRecentSignatures = 8;

  size_t max_entries_;
  std::list<Slot> lru_;  // most recent first
  absl::flat_hash_map<uint64_t, std::list<Slot>::iterator> entries_;
  absl::flat_hash_set<uint64_t> evicted_keys_;  // to say "evicted" on a re-miss
  absl::flat_hash_map<uint64_t, StructureHistory> histories_;  // by structure
};

}  // namespace mstep
