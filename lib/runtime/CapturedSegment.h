// A captured graph's segments: one executable run each, with where its
// inputs come from and which tensors its results go to. Graph (capture and
// replay) and GraphExport (Graph::save) share them. Library-internal.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {
class Tensor;
}

namespace mstep::internal {

/// Where a captured input comes from at replay.
struct InputBinding {
  // segment: an earlier segment's result; segment_input: the buffer an
  // earlier segment read (a tensor updated since, e.g. by a sync point).
  enum class Source : uint8_t { tensor, segment, segment_input, constant, rng };
  Source source = Source::constant;
  // Source::tensor. Held strongly (no weak_ptr lock per replay), but not
  // as a user handle (TensorImpl::has_handles): when none is left, the
  // user freed it.
  std::shared_ptr<TensorImpl> tensor;
  uint32_t segment = 0, slot = 0;    // Source::segment (result) / segment_input (input)
  BufferPtr constant;                // Source::constant; the state buffer for Source::rng
  Backend* backend = nullptr;        // Source::rng: writes the state
};

/// What an input was at capture, for error messages only. Kept apart from
/// InputBinding so that replay's loops walk small, dense bindings: after a
/// step's kernels they run with cold caches.
struct InputInfo {
  TensorType type;
  Device device;
  InputRole role = InputRole::input;
};

struct Segment {
  std::shared_ptr<Executable> executable;
  Device device;  // the executable's, and its bound tensors' at capture
  std::vector<InputBinding> inputs;
  std::vector<InputInfo> input_info;  // parallel to inputs
  std::vector<TensorType> result_types;  // of the executable's results
  // Per input, the result its buffer may hold (TraceGraph::donated_to):
  // replay donates only those, since the executable may use no other.
  std::vector<int32_t> donated_to;
  // The tensors bound to results, with their result's index, in one flat
  // list (a tensor with no user handle left gets no result: nobody can
  // read it). The graph's references are not handles.
  struct OutputBinding {
    uint32_t result;
    // Whether replay may offer the tensor's buffer for its result (see
    // Impl::plan_donations); it does when the tensor also holds it alone.
    bool offerable = false;
    std::shared_ptr<TensorImpl> tensor;
  };
  std::vector<OutputBinding> outputs;
  uint64_t rng_offset = 0;  // relative to the capture's first offset
  // The custom ops the executable calls (Graph::save lists them).
  std::vector<CustomOpNeed> custom_ops;
  // The trace graph the executable was compiled from
  // (Graph::export_stablehlo).
  std::shared_ptr<const TraceGraph> graph;
  // Whether a later segment reads this one's results / inputs. If not,
  // replay drops the segment's references to them as soon as it has run,
  // freeing memory early.
  bool results_read_later = false;
  bool inputs_read_later = false;
  // Replay scratch, kept to avoid allocating each step. `buffers` keeps
  // between replays the entries of constants, of the RNG state and of
  // tensors no later segment reads: while a tensor keeps its buffer (a
  // parameter updated in place), gathering it costs a pointer comparison,
  // not a reference count up and down. The other entries, listed in
  // `transient`, are dropped once the segment has run (what may be donated
  // is decided by plan_donations(), not by who holds a pointer).
  std::vector<BufferPtr> buffers;
  std::vector<uint32_t> transient;
  std::vector<BufferPtr> results;
  // The donation protocol (Executable::run): the inputs replay may donate
  // (see Impl::plan_donations), this replay's flags per input, and per
  // result the buffers this replay offers.
  std::vector<uint32_t> donatable;
  std::vector<uint8_t> donated;
  std::vector<BufferPtr> offered;
};

/// The host bytes of `buffer` (a copy_out on its backend).
std::string download(const BufferPtr& buffer);
/// Writes `bytes` to `path` through a temporary file and a rename, mode
/// 0600; errors name `who` (the calling API).
void write_file(const std::string& path, const std::string& bytes, const char* who);
/// `names` by tensor; an error (naming `who`) when a tensor has two names.
absl::flat_hash_map<const TensorImpl*, std::string> tensor_names(
    const std::map<std::string, Tensor>& names, const char* who);

/// Graph::save: writes `segments` (a finished capture whose step moves
/// the Philox offset by `rng_consumed`) as an exported graph file, naming
/// the tensors of `names`.
void save_captured_graph(const std::string& path, const std::map<std::string, Tensor>& names,
                         const std::vector<Segment>& segments, uint64_t rng_consumed);

/// Graph::export_stablehlo: writes `segments` as one StableHLO function
/// (GraphStableHlo.cpp).
void export_captured_stablehlo(const std::string& path, const std::map<std::string, Tensor>& names,
                               const std::string& values_path,
                               const std::vector<Segment>& segments, uint64_t rng_consumed);

}  // namespace mstep::internal
