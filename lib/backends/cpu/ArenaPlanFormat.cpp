// ArenaPlan <-> bytes, for the cpu executable's native form. No MLIR: this
// is the loader's half (ArenaPlan.cpp reads the plan off MLIR). Layout:
//   i64 arena_bytes | i64 alignment | u32 ops
//   | per op: u32 results, per result: i64 offset, i64 aliased_arg
// The checks mirror what mstep-plan-memory's verifier guarantees (aligned,
// inside the arena, or in a donated argument), so that running a loaded
// plan never writes outside the arena or a buffer.
#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/ArenaPlan.h"
#include "mstep/core/ByteStream.h"

namespace mstep::cpu {

namespace {
// Larger arenas or alignments than these are corruption.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 48;
constexpr int64_t kMaxAlignment = int64_t{1} << 20;
}  // namespace

std::string serialize_arena_plan(const ArenaPlan& plan) {
  ByteWriter w;
  w.i64(plan.arena_bytes);
  w.i64(plan.alignment);
  w.u32(static_cast<uint32_t>(plan.ops.size()));
  for (const ArenaPlan::OpPlacement& op : plan.ops) {
    w.u32(static_cast<uint32_t>(op.offsets.size()));
    for (size_t r = 0; r < op.offsets.size(); ++r) {
      w.i64(op.offsets[r]);
      w.i64(op.aliased_arg[r]);
    }
  }
  return w.take();
}

absl::StatusOr<ArenaPlan> deserialize_arena_plan(absl::string_view bytes, const TraceGraph& graph) {
  ByteReader r(bytes, "cpu executable arena plan");
  ArenaPlan plan;
  plan.arena_bytes = r.i64("the arena size");
  plan.alignment = r.i64("the alignment");
  if (r.ok() && (plan.arena_bytes < 0 || plan.arena_bytes > kMaxArenaBytes))
    r.fail(absl::StrCat("arena size ", plan.arena_bytes, " is not in [0, 2^48]"));
  if (r.ok() && (plan.alignment <= 0 || plan.alignment > kMaxAlignment ||
                 (plan.alignment & (plan.alignment - 1)) != 0))
    r.fail(absl::StrCat("alignment ", plan.alignment, " is not a power of two up to 2^20"));
  const size_t num_args = graph.input_types.size();
  const uint32_t num_ops = r.count("the op count", 4);
  if (r.ok() && num_args + num_ops != graph.nodes.size())
    r.fail(absl::StrCat("the plan covers ", num_ops, " ops, the step has ",
                        graph.nodes.size(), " nodes and ", num_args, " arguments"));
  for (uint32_t k = 0; k < num_ops && r.ok(); ++k) {
    const GraphNode& node = graph.nodes[num_args + k];
    const std::string where = absl::StrCat("op ", k, " (", op_name(node.op), ")");
    const uint32_t num_results = r.count("a result count", 16);
    if (r.ok() && num_results != node.results.size()) {
      r.fail(absl::StrCat(where, " has ", num_results, " placements for ", node.results.size(),
                          " results"));
      break;
    }
    ArenaPlan::OpPlacement& p = plan.ops.emplace_back();
    for (uint32_t i = 0; i < num_results && r.ok(); ++i) {
      const int64_t offset = r.i64("an arena offset");
      const int64_t arg = r.i64("a donated argument");
      if (!r.ok()) break;
      const int64_t bytes = static_cast<int64_t>(node.results[i].bytes());
      if (offset >= 0) {
        if (arg != -1 || offset % plan.alignment != 0 || offset > plan.arena_bytes - bytes)
          r.fail(absl::StrCat(where, " result ", i, ": ", bytes, " bytes at offset ", offset,
                              arg != -1 ? " and in a donated argument" : "",
                              " is not at an aligned offset inside the ", plan.arena_bytes,
                              "-byte arena"));
      } else if (offset != -1 || arg < 0 || arg >= static_cast<int64_t>(num_args)) {
        r.fail(absl::StrCat(where, " result ", i, " has offset ", offset,
                            " and donated argument ", arg, " of ", num_args));
      } else if (static_cast<int64_t>(graph.input_types[arg].bytes()) < bytes) {
        r.fail(absl::StrCat(where, " result ", i, " (", bytes, " bytes) is written into argument ",
                            arg, " of ", graph.input_types[arg].bytes(), " bytes"));
      }
      p.offsets.push_back(offset);
      p.aliased_arg.push_back(arg);
    }
  }
  r.expect_end();
  if (!r.ok()) return r.status();
  return plan;
}

}  // namespace mstep::cpu
