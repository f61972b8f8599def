// GraphCache: compiled executables keyed by graph structure, shapes and
// dtypes, backend and host constants. It also remembers, per structure,
// which host constants the last compile saw, to warn when a constant
// keeps forcing recompiles. (Issue 5 grows this into the LRU + disk cache.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

/// The key of one cut, built in one pass over its nodes.
struct GraphKey {
  uint64_t structure = 0;  // ops, attributes, wiring
  uint64_t types = 0;      // shapes and dtypes
  uint64_t constants = 0;  // host constant values
  uint64_t backend = 0;
  uint64_t compile_options = 0;  // what changes the compiled code (fusion on/off)

  /// Everything but constants: equal for graphs that differ only in them.
  uint64_t without_constants() const;
  uint64_t full() const;
};

/// A host constant in a compiled graph, for the recompile warning.
struct ConstantSite {
  uint32_t node;        // position in the TraceGraph
  std::string where;    // "constant %4 used by mul %5"
  double value;
};

class GraphCache {
 public:
  struct Entry {
    std::unique_ptr<Executable> executable;
    uint32_t num_nodes = 0;   // cheap collision guard
    uint32_t num_inputs = 0;
  };

  /// The entry for `key`, or nullptr.
  Entry* find(const GraphKey& key, uint32_t num_nodes, uint32_t num_inputs);
  Entry& insert(const GraphKey& key, Entry entry);

  /// What note_compile() learned about a compile.
  struct CompileNote {
    bool constants_only = false;  // same structure and shapes seen before
    std::string warning;          // non-empty once per structure
  };
  /// Records a compile of `key`. The warning is set when the same
  /// structure has now been compiled `threshold` times with different
  /// constants; it names the changing constant and the fix.
  CompileNote note_compile(const GraphKey& key,
                           std::vector<ConstantSite> constants, int threshold);

  size_t size() const { return entries_.size(); }
  void clear();

 private:
  struct ConstantHistory {
    std::vector<ConstantSite> last;
    std::vector<double> changed_values;  // values seen at the changing site
    int compiles = 0;
    bool warned = false;
  };
  absl::flat_hash_map<uint64_t, Entry> entries_;
  absl::flat_hash_map<uint64_t, ConstantHistory> histories_;
};

}  // namespace mstep
