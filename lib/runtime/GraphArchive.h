// GraphArchive: a captured step as data, the content of an exported graph
// file (Graph::save writes it, load_graph reads it). Everything a replay
// needs and nothing of the process that captured it: each executable in its
// backend's serialized form, where each of its inputs comes from, where its
// results go, the RNG offsets it consumes, and the tensors it reads and
// writes (slots) with their values at export, and the custom ops (name,
// version) its executables call, which load_graph checks are registered
// before any executable is loaded.
//
//   seal("MSTEPXGR", kGraphArchiveVersion, body)   (core/ByteStream.h)
//
// Decoding is for untrusted bytes: every index and type is checked, so a
// decoded archive can be replayed without further checks (the executables'
// own blobs are checked by their backend when loaded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/InputRole.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// Version 2 added the custom-op list. Version 1 files (written before
/// it) still load, as graphs that need no custom op: the exporter of the
/// time wrote no list, and a version-1 graph that does call one fails
/// when its backend loads the executable (no kernel), never runs it.
/// Version 3 added the world size of the graph's collectives; older files
/// load as graphs without collectives (one that has some fails when it
/// runs in another world, as it did).
inline constexpr uint32_t kGraphArchiveVersion = 3;

struct GraphArchive {
  /// A tensor the step reads or writes: a static input, a parameter, an
  /// optimizer state, or an output (the loss). Names are unique.
  struct Slot {
    std::string name;
    InputRole role = InputRole::input;
    /// Whether a segment's result is bound to it (the step writes it).
    bool written = false;
    TensorType type;
    /// Its value at export (type.bytes() bytes).
    std::string value;
  };
  /// Where input j of a segment comes from.
  struct Binding {
    enum class Source : uint8_t {
      slot,            // slots[index]
      segment_result,  // result `slot` of the earlier segment `index`
      segment_input,   // what input `slot` of the earlier segment `index` read
      constant,        // constants[index]
      rng,             // the Philox state (seed, offset) of this segment
    };
    Source source = Source::constant;
    uint32_t index = 0;
    uint32_t slot = 0;
  };
  struct Output {
    uint32_t result = 0;  // of the segment
    uint32_t slot = 0;    // in slots
  };
  /// One executable run of the step.
  struct Segment {
    /// Executable::serialize() of the backend named in `backend`.
    std::string executable;
    std::vector<TensorType> input_types;
    std::vector<TensorType> result_types;
    std::vector<Binding> inputs;  // parallel to input_types
    std::vector<Output> outputs;
    /// This segment's Philox offset, relative to the step's first.
    uint64_t rng_offset = 0;
  };
  struct Constant {
    TensorType type;
    std::string value;
  };

  /// The backend every segment runs on (BackendRegistry name).
  std::string backend;
  /// The custom ops the segments call, each once.
  std::vector<CustomOpNeed> custom_ops;
  /// The number of processes the graph's collectives were recorded for
  /// (mstep::distributed::world_size() at capture); 0 when it has none.
  /// load_graph refuses the graph in a world of another size.
  uint32_t world_size = 0;
  uint64_t rng_seed = 0;
  /// The offset the next step starts from, and how far one step moves it.
  uint64_t rng_offset = 0;
  uint64_t rng_consumed = 0;
  std::vector<Slot> slots;
  std::vector<Constant> constants;
  std::vector<Segment> segments;
};

/// The file's bytes.
std::string encode_graph_archive(const GraphArchive& archive);
/// The archive in `bytes`; `what` (the file name) starts every error, which
/// names the failed check. Never crashes on malformed bytes.
absl::StatusOr<GraphArchive> decode_graph_archive(absl::string_view bytes,
                                                  absl::string_view what);

}  // namespace mstep
