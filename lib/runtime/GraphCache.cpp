// In-memory graph cache and the changing-constant detector.
#include "mstep/runtime/GraphCache.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Hash.h"

namespace mstep {

uint64_t GraphKey::without_constants() const {
  return hash_combine(hash_combine(hash_combine(structure, types), backend), compile_options);
}

uint64_t GraphKey::full() const {
  return hash_combine(without_constants(), constants);
}

GraphCache::Entry* GraphCache::find(const GraphKey& key, uint32_t num_nodes,
                                    uint32_t num_inputs) {
  auto it = entries_.find(key.full());
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  if (e.num_nodes != num_nodes || e.num_inputs != num_inputs) return nullptr;
  return &e;
}

GraphCache::Entry& GraphCache::insert(const GraphKey& key, Entry entry) {
  return entries_.insert_or_assign(key.full(), std::move(entry)).first->second;
}

void GraphCache::clear() {
  entries_.clear();
  histories_.clear();
}

GraphCache::CompileNote GraphCache::note_compile(const GraphKey& key,
                                     std::vector<ConstantSite> constants,
                                     int threshold) {
  ConstantHistory& h = histories_[key.without_constants()];
  ++h.compiles;
  CompileNote note;
  std::string& warning = note.warning;
  if (h.compiles > 1 && h.last.size() == constants.size()) {
    note.constants_only = true;
    // Same structure and shapes, so a different constant caused this miss.
    for (size_t i = 0; i < constants.size(); ++i) {
      if (constants[i].value == h.last[i].value) continue;
      if (h.changed_values.empty()) h.changed_values.push_back(h.last[i].value);
      h.changed_values.push_back(constants[i].value);
      if (!h.warned && h.compiles >= threshold) {
        h.warned = true;
        warning = absl::StrCat(
            "one graph structure was compiled ", h.compiles,
            " times only because a host constant changed: ",
            constants[i].where, " took the values ",
            absl::StrJoin(h.changed_values, ", "),
            ". Each new value compiles a new graph. Make it a device scalar "
            "instead: create it once with mstep::Tensor::scalar(value) and "
            "update it each step with .fill_(new_value); the compiled graph "
            "is then reused.");
      }
      break;
    }
  }
  h.last = std::move(constants);
  return note;
}

}  // namespace mstep
