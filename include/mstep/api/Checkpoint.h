// Checkpoints: tensors in the safetensors format (the format of Hugging
// Face's `safetensors` package), and module / optimizer state saved and
// loaded through it.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes
// of JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//    "__metadata__": {"<key>": "<string>"}}
// and then the raw little-endian tensor bytes; offsets count from the end
// of the header. mstep reads and writes F32, F64, BF16, F16, I32, I64 and
// BOOL, so files written by PyTorch (safetensors.torch.save_file) load.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep {

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}

/// Writes `tensors` to `path`, replacing the file. Reading the tensors is
/// a sync point (pending ones are computed first). The bytes go to a
/// temporary file that is renamed over `path` at the end, so a failure
/// never leaves a half-written checkpoint. Throws mstep::Error naming the
/// file when it cannot be written.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Every tensor of the file, materialized on the default device. A
/// missing, truncated or corrupt file, a bad header, an unknown dtype or
/// offsets outside the data throw mstep::Error naming the file and the
/// problem; nothing is created then.
std::map<std::string, Tensor> load_safetensors(const std::string& path);

/// The file's "__metadata__" strings (empty when it has none).
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

/// An entry present in both the checkpoint and the target, with a type
/// that cannot be loaded ("f32[2, 3]" expected, "f32[3, 2]" got).
struct LoadMismatch {
  std::string name;
  std::string expected;
  std::string got;
};

/// What a load found besides the entries it loaded.
struct LoadReport {
  std::vector<std::string> missing;      // the target has it, the file does not
  std::vector<std::string> unexpected;   // the file has it, the target does not
  std::vector<LoadMismatch> mismatched;  // both have it, the shapes differ

  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// One line per problem: "missing: fc.bias", "mismatched: fc.weight
  /// expected f32[4, 3], got f32[3, 4]".
  std::string to_string() const;
};

/// Saves module.state_dict() (parameters and buffers by dotted name, the
/// names PyTorch uses) with metadata {"format": "pt", "mstep.module": type}.
/// Data parallel (mstep::distributed, more than one rank): every rank
/// calls it, only rank 0 writes (the ranks hold the same values), and all
/// return once the file is complete (a barrier), so every rank may load it
/// next. `all_ranks` makes every rank write (to a path of its own).
void save(const nn::Module& module, const std::string& path, bool all_ranks = false);

/// Loads `path` into the module's parameters and buffers in place (they
/// keep requires_grad and their identity, so optimizers holding them see
/// the new values). Like torch.nn.Module.load_state_dict, a dtype that
/// differs is converted and a shape that differs is a mismatch. With
/// `strict`, any missing, unexpected or mismatched entry throws one
/// mstep::Error listing every problem, and nothing is loaded; without it,
/// the entries that match are loaded and the report lists the rest.
LoadReport load(nn::Module& module, const std::string& path, bool strict = true);

/// The same from an in-memory state dict.
LoadReport load_state_dict(nn::Module& module, const std::map<std::string, Tensor>& state,
                           bool strict = true);

/// Saves optimizer.state_dict() (names documented in optim/Optimizer.h)
/// with metadata {"mstep.optimizer": name}. Rank 0 only, as for modules.
void save(const optim::Optimizer& optimizer, const std::string& path, bool all_ranks = false);

/// Loads an optimizer checkpoint; see Optimizer::load_state_dict.
LoadReport load(optim::Optimizer& optimizer, const std::string& path, bool strict = true);

}  // namespace mstep
