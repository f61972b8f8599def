// The custom-op list of a disk-cache payload (CustomOpNeeds.h). Layout, in
// text so a dump of an entry shows it:
//
//   custom-ops <count>\n
//   <version> <name length> <name>\n      (count times)
//   <the backend's payload>
#include "lib/runtime/CustomOpNeeds.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

namespace {

constexpr absl::string_view kTag = "custom-ops ";

void collect(const TraceGraph& graph, absl::flat_hash_set<uint64_t>& seen,
             std::vector<CustomOpNeed>& out) {
  for (const GraphNode& n : graph.nodes) {
    if (n.body) collect(*n.body, seen, out);
    if (n.op != OpKind::custom) continue;
    const auto id = static_cast<uint64_t>(attr_int(n.attrs, AttrName::custom_op));
    if (!seen.insert(id).second) continue;
    // The graph was traced in this process, so its ops are registered.
    if (auto op = CustomOpRegistry::global().find(id); op.ok())
      out.push_back({(*op)->name, (*op)->version});
  }
}

/// Reads "<decimal><sep>" from the front of `in`.
bool read_number(absl::string_view& in, char sep, int64_t& value) {
  const size_t end = in.find(sep);
  if (end == absl::string_view::npos || !absl::SimpleAtoi(in.substr(0, end), &value)) return false;
  in.remove_prefix(end + 1);
  return true;
}

} // namespace

std::vector<CustomOpNeed> custom_op_needs(const TraceGraph& graph) {
  absl::flat_hash_set<uint64_t> seen;
  std::vector<CustomOpNeed> needs;
  collect(graph, seen, needs);
  return needs;
}

absl::Status check_custom_ops_registered(absl::Span<const CustomOpNeed> needs) {
  std::vector<std::string> missing, others;
  for (const CustomOpNeed& need : needs) {
    if (CustomOpRegistry::global().find(need.name, need.version).ok()) continue;
    missing.push_back(absl::StrCat("'", need.name, "' version ", need.version));
    if (auto newest = CustomOpRegistry::global().find(need.name); newest.ok())
      others.push_back(absl::StrCat("'", need.name, "' version ", (*newest)->version));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "needs custom op ", absl::StrJoin(missing, ", "), ", which this process has not registered",
      others.empty() ? "" : absl::StrCat(" (it has ", absl::StrJoin(others, ", "), ")")));
}

std::string with_custom_op_needs(absl::Span<const CustomOpNeed> needs, absl::string_view payload) {
  std::string out = absl::StrCat(kTag, needs.size(), "\n");
  for (const CustomOpNeed& op : needs)
    absl::StrAppend(&out, op.version, " ", op.name.size(), " ", op.name, "\n");
  out.append(payload.data(), payload.size());
  return out;
}

std::string with_custom_op_needs(const TraceGraph& graph, absl::string_view payload) {
  return with_custom_op_needs(custom_op_needs(graph), payload);
}

absl::StatusOr<absl::string_view> check_custom_op_needs(absl::string_view entry) {
  auto malformed = [] {
    return absl::DataLossError("the entry's list of custom ops is malformed");
  };
  if (!absl::ConsumePrefix(&entry, kTag)) return malformed();
  int64_t count = 0;
  if (!read_number(entry, '\n', count) || count < 0) return malformed();
  std::vector<CustomOpNeed> needs;
  for (int64_t i = 0; i < count; ++i) {
    int64_t version = 0, size = 0;
    if (!read_number(entry, ' ', version) || !read_number(entry, ' ', size) || size < 0 ||
        entry.size() < static_cast<size_t>(size) + 1 || entry[size] != '\n')
      return malformed();
    needs.push_back({std::string(entry.substr(0, size)), version});
    entry.remove_prefix(size + 1);
  }
  if (absl::Status registered = check_custom_ops_registered(needs); !registered.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        "it ", registered.message(), "; register the same ops and versions to reuse it"));
  return entry;
}

} // namespace mstep
