// The xla executable <-> its stored form (see XlaFormat.h), and
// XlaExecutable::serialize.
#include "lib/backends/xla/XlaFormat.h"

#include "lib/backends/xla/XlaExecutable.h"

#include "absl/strings/str_cat.h"
#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"
#include "mstep/ir/GraphSerialize.h"

namespace mstep::xla {

namespace {
constexpr absl::string_view kMagic = "MSTEPXLA";
constexpr absl::string_view kWhat = "xla executable";

absl::Status corrupt(absl::string_view message) {
  return absl::DataLossError(absl::StrCat(kWhat, ": ", message));
}
} // namespace

std::string write_xla_format(const XlaProgram& program) {
  ByteWriter body;
  body.bytes(serialize_graph(program.graph));
  body.bytes(cpu::serialize_arena_plan(program.plan));
  body.bytes(program.target.arch);
  body.bytes(program.target.cpu);
  body.u32(static_cast<uint32_t>(program.target.features.size()));
  for (const std::string& feature : program.target.features) body.bytes(feature);
  body.u32(static_cast<uint32_t>(program.callouts.size()));
  for (uint32_t node : program.callouts) body.u32(node);
  body.bytes(program.shared_object);
  return seal(kMagic, kXlaFormatVersion, body.data());
}

absl::StatusOr<std::string> XlaExecutable::serialize(absl::string_view) const {
  return write_xla_format(program_);
}

absl::StatusOr<XlaProgram> read_xla_format(absl::string_view blob) {
  MSTEP_ASSIGN_OR_RETURN(absl::string_view body, unseal(blob, kMagic, kXlaFormatVersion, kWhat));
  ByteReader r(body, kWhat);
  const absl::string_view graph = r.bytes("the graph section");
  const absl::string_view plan = r.bytes("the arena plan section");
  XlaProgram program;
  program.target.arch = std::string(r.bytes("the target's architecture"));
  program.target.cpu = std::string(r.bytes("the target's CPU"));
  const uint32_t features = r.count("the target's feature count", 8);
  for (uint32_t i = 0; i < features && r.ok(); ++i)
    program.target.features.emplace_back(r.bytes("a target feature"));
  const uint32_t callouts = r.count("the callout count", 4);
  for (uint32_t i = 0; i < callouts && r.ok(); ++i) program.callouts.push_back(r.u32("a callout"));
  program.shared_object = std::string(r.bytes("the shared object section"));
  r.expect_end();
  MSTEP_RETURN_IF_ERROR(r.status());

  absl::StatusOr<TraceGraph> decoded = deserialize_graph(graph);
  if (!decoded.ok()) return corrupt(decoded.status().message());
  program.graph = *std::move(decoded);
  MSTEP_ASSIGN_OR_RETURN(program.plan, cpu::deserialize_arena_plan(plan, program.graph));
  absl::StatusOr<XlaLayout> layout = lay_out_step(program.graph, program.plan);
  if (!layout.ok()) return corrupt(layout.status().message());
  program.layout = *std::move(layout);
  // A callout is an op of the step: the code indexes the kernels by them.
  const size_t num_args = program.graph.input_types.size();
  for (uint32_t node : program.callouts)
    if (node < num_args || node >= program.graph.nodes.size())
      return corrupt(absl::StrCat("callout node ", node, " is not an op of the step's ",
                                  program.graph.nodes.size(), " nodes"));
  if (program.shared_object.empty()) return corrupt("the shared object section is empty");
  return program;
}

} // namespace mstep::xla
