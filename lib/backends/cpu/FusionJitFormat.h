// What a FusionJit holds besides machine code, and its serialized form for
// the disk cache: the target the code was generated for, per fusion its
// operand and result types and the entry symbol of each loop nest, then one
// ELF shared object. Library-internal; no MLIR or LLVM headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/TensorType.h"

namespace mstep::cpu {

/// The entry point of one loop nest. It computes the nest's results for
/// positions [begin, end) of the nest's outer dimension; `operands` and
/// `results` are the fusion node's pointers (CpuKernel::run's arguments).
/// Disjoint ranges may run concurrently.
using FusionEntry = void (*)(const void* const* operands, void* const* results, int64_t begin,
                             int64_t end);

/// One loop nest of a compiled fusion: it writes the fusion results of one
/// shape (a fusion whose results differ in shape has one nest per shape).
struct FusionNestInfo {
  std::string symbol;
  /// The extent of the outer dimension: one call over [0, outer) computes
  /// the whole nest.
  int64_t outer = 0;
  /// Elements the nest writes per result over [0, outer).
  int64_t elements = 0;
  /// Chunk boundaries of a split run are multiples of `grain` (a whole
  /// vector when the outer dimension is the innermost one).
  int64_t grain = 1;
};

struct FusionInfo {
  /// False when the fusion holds an op without a scalar form.
  bool compiled = false;
  /// Why the fusion was skipped (for logs).
  std::string skip_reason;
  std::vector<TensorType> operand_types;
  std::vector<TensorType> result_types;
  /// In the order they must run: a nest that reads an operand runs before
  /// a nest whose result may have been planned over that operand.
  std::vector<FusionNestInfo> nests;
};

/// What the code was generated for: the code runs on a host of the same
/// architecture whose CPU has every feature (another CPU model is fine).
struct FusionTarget {
  /// As LLVM's triple names it: "x86_64".
  std::string arch;
  /// LLVM's name of the CPU the code is tuned for ("znver4"), for messages.
  std::string cpu;
  /// The target features LLVM generated the code with, as LLVM names them
  /// ("avx512f"), sorted; HostCpuFeatures.h checks them without LLVM.
  std::vector<std::string> features;
};

struct FusionObject {
  FusionTarget target;
  /// One entry per top-level mstep.fusion of func @step, in program order.
  std::vector<FusionInfo> fusions;
  /// An ELF shared object that exports every nest's entry; empty when no
  /// fusion was compiled.
  std::string shared_object;
};

/// A self-checking byte string: a header with a version, the payload's
/// size and checksum, then the index and the object bytes.
std::string serialize_fusion_object(const FusionObject& object);

/// The inverse of serialize_fusion_object. A truncated, corrupt or foreign
/// string is an error (never a crash); the target is not checked here.
absl::StatusOr<FusionObject> parse_fusion_object(absl::string_view bytes);

} // namespace mstep::cpu
