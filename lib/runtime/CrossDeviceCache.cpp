#include "lib/runtime/CrossDeviceCache.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/CustomOpNeeds.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/core/Error.h"
#include "mstep/core/Hash.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

uint64_t compile_options_key(const RuntimeOptions& options, DeviceType type) {
  uint64_t key = (options.fuse ? 1 : 2) + (options.cuda_row_reduction == "thread" ? 4 : 0) +
                 (options.cuda_optimizer == "per_tensor" ? 8 : 0) +
                 (options.cuda_column_reduction == "thread" ? 16 : 0) +
                 (options.cuda_conv == "direct" ? 32 : 0) +
                 (options.cuda_row_reduction == "block" ? 64 : 0);
  // The xla memory limit changes the xla step's code (values recomputed).
  if (type == DeviceType::xla && !options.xla_memory_limit.empty())
    key = hash_combine(key, hash_string(options.xla_memory_limit));
  return key;
}

absl::StatusOr<DeviceType> cross_device_type(absl::string_view backend_name) {
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(backend_name);
  if (!type.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("MSTEP_CACHE's fourth field names backend '", backend_name,
                     "', which this build does not have (it has ",
                     absl::StrJoin(BackendRegistry::global().names(), ", "), ")"));
  return type;
}

absl::Status store_for_device(DiskCache& disk, absl::string_view other, DeviceType other_type,
                              const GraphKey& key,
                              const TraceGraph& graph, absl::Span<const CustomOpNeed> custom_ops,
                              const RuntimeOptions& options) {
  GraphKey there = key;
  there.backend = hash_combine(static_cast<uint64_t>(other_type), 0);
  there.compile_options = compile_options_key(options, other_type);
  MSTEP_ASSIGN_OR_RETURN(
      std::string stored,
      compile_graph_stored(graph, other, {.fuse = options.fuse, .key = there.full()}, options));
  disk.store(absl::StrFormat("%s-%016x", other, there.full()), there.to_text(),
             [text = with_custom_op_needs(custom_ops, stored)]() mutable { return std::move(text); });
  return absl::OkStatus();
}

}  // namespace mstep
