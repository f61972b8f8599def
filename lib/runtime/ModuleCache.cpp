// The in-memory LRU of compiled graphs and the per-structure history that
// explains each miss.
#include "mstep/runtime/ModuleCache.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Hash.h"

namespace mstep {

uint64_t GraphKey::without_constants() const {
  return hash_combine(hash_combine(hash_combine(structure, types), backend), compile_options);
}

uint64_t GraphKey::full() const { return hash_combine(without_constants(), constants); }

std::string GraphKey::to_text() const {
  return absl::StrFormat("structure=%016x types=%016x constants=%016x backend=%016x options=%016x",
                         structure, types, constants, backend, compile_options);
}

namespace {

/// Every host constant in `g`, with a description naming its user.
std::vector<ConstantSite> constant_sites(const TraceGraph& g) {
  std::vector<ConstantSite> sites;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    for (const Attr& a : g.nodes[i].attrs) {
      const double* d = std::get_if<double>(&a.value);
      if (!d) continue;
      std::string where = absl::StrCat("attribute '", attr_name(a.name), "' of ",
                                       op_name(g.nodes[i].op), " %", i);
      if (g.nodes[i].op == OpKind::constant) {
        where = absl::StrCat("the scalar constant %", i);
        for (uint32_t u = i + 1; u < g.nodes.size(); ++u) {
          bool uses = false;
          for (ValueRef v : g.nodes[u].operands) uses |= v.node == i;
          if (uses) {
            absl::StrAppend(&where, " (an operand of ", op_name(g.nodes[u].op), " %", u, ")");
            break;
          }
        }
      }
      sites.push_back({i, std::move(where), *d});
    }
  }
  return sites;
}

}  // namespace

ModuleCache::Entry* ModuleCache::find(const GraphKey& key, uint32_t num_nodes,
                                      uint32_t num_inputs) {
  auto it = entries_.find(key.full());
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second->entry;
  if (e.num_nodes != num_nodes || e.num_inputs != num_inputs) return nullptr;
  if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
  return &e;
}

ModuleCache::Entry& ModuleCache::insert(const GraphKey& key, Entry entry, int* evicted) {
  const uint64_t k = key.full();
  if (auto it = entries_.find(k); it != entries_.end()) {
    lru_.erase(it->second);
    entries_.erase(it);
  }
  lru_.push_front({k, std::move(entry)});
  entries_[k] = lru_.begin();
  evicted_keys_.erase(k);
  evict_to(max_entries_, evicted);
  return lru_.front().entry;
}

void ModuleCache::evict_to(size_t n, int* evicted) {
  while (lru_.size() > n) {
    // Bounded memory for the "evicted" explanation too.
    if (evicted_keys_.size() > 16 * max_entries_ + 1024) evicted_keys_.clear();
    evicted_keys_.insert(lru_.back().key);
    entries_.erase(lru_.back().key);
    lru_.pop_back();
    if (evicted) ++*evicted;
  }
}

void ModuleCache::set_max_entries(size_t n) {
  max_entries_ = n == 0 ? 1 : n;
  evict_to(max_entries_, nullptr);
}

void ModuleCache::clear() {
  lru_.clear();
  entries_.clear();
  evicted_keys_.clear();
  histories_.clear();
}

ModuleCache::MissReason ModuleCache::explain_miss(const GraphKey& key,
                                                  const TraceGraph& graph) const {
  if (evicted_keys_.contains(key.full()))
    return {"evicted from the memory cache",
            absl::StrCat("this exact graph was compiled before and evicted from the in-memory "
                         "cache (", max_entries_, " entries); raise MSTEP_MAX_GRAPHS or set "
                         "MSTEP_CACHE to keep it on disk")};
  auto it = histories_.find(key.structure);
  if (it == histories_.end())
    return {"new structure", absl::StrCat("no cached graph has this structure (",
                                          graph.nodes.size(), " nodes, ",
                                          graph.input_types.size(), " inputs)")};
  // The nearest signature: fewest differing components, most significant first.
  const Signature* nearest = nullptr;
  int best = 1 << 30;
  for (const Signature& sig : it->second.recent) {
    const int score = 8 * (sig.key.backend != key.backend) +
                      4 * (sig.key.compile_options != key.compile_options) +
                      2 * (sig.key.types != key.types) + (sig.key.constants != key.constants);
    if (score < best) best = score, nearest = &sig;
  }
  const Signature& h = *nearest;
  if (h.key.backend != key.backend)
    return {"backend changed", "the same graph was compiled for another device"};
  if (h.key.compile_options != key.compile_options)
    return {"compile options changed", "the same graph was compiled with fusion switched "
                                       "the other way (MSTEP_FUSE), or other cuda kernel "
                                       "forms (MSTEP_CUDA_ROW_REDUCTION, MSTEP_CUDA_OPTIMIZER, "
                                       "MSTEP_CUDA_COLUMN_REDUCTION, MSTEP_CUDA_CONV)"};
  if (h.key.types != key.types) {
    const size_t n = std::min(h.input_types.size(), graph.input_types.size());
    for (size_t i = 0; i < n; ++i) {
      const TensorType& was = h.input_types[i];
      const TensorType& now = graph.input_types[i];
      if (was == now) continue;
      const bool dtype = was.dtype != now.dtype && was.shape == now.shape;
      return {dtype ? "input dtype changed" : "input shape changed",
              absl::StrCat("input ", i, " (", input_role_name(graph.input_roles[i]), ") was ",
                           was.to_string(), ", now ", now.to_string(),
                           dtype ? "" : "; for a varying last batch pad it or use "
                                        "mstep::ModuleCacher, which keeps one graph per shape")};
    }
    return {"intermediate shape changed",
            "the inputs are unchanged but an op's result shape differs (a size passed as a "
            "host value, e.g. zeros({n}) or reshape with a new n)"};
  }
  if (h.key.constants != key.constants) {
    std::vector<ConstantSite> now = constant_sites(graph);
    for (size_t i = 0; i < std::min(now.size(), h.constants.size()); ++i)
      if (now[i].value != h.constants[i].value)
        return {"host constant changed", absl::StrCat(now[i].where, " was ", h.constants[i].value,
                                                      ", now ", now[i].value)};
    return {"host constant changed", "a host constant differs"};
  }
  return {"collision guard", "the key matched a cached graph of a different size"};
}

ModuleCache::CompileNote ModuleCache::note_compile(const GraphKey& key, const TraceGraph& graph,
                                                   int threshold) {
  StructureHistory& h = histories_[key.structure];
  CompileNote note;
  std::vector<ConstantSite> constants = constant_sites(graph);
  // The last compile with the same shapes, backend and options, if any.
  const Signature* last = nullptr;
  for (const Signature& sig : h.recent) {
    if (sig.key.without_constants() == key.without_constants()) {
      last = &sig;
      break;
    }
  }
  const bool same_signature = last != nullptr;
  h.compiles = same_signature ? h.compiles + 1 : 1;
  if (same_signature && last->constants.size() == constants.size()) {
    note.constants_only = true;
    // Same structure and shapes, so a different constant caused this miss.
    for (size_t i = 0; i < constants.size(); ++i) {
      if (constants[i].value == last->constants[i].value) continue;
      if (h.changed_values.empty()) h.changed_values.push_back(last->constants[i].value);
      h.changed_values.push_back(constants[i].value);
      if (!h.warned && h.compiles >= threshold) {
        h.warned = true;
        note.warning = absl::StrCat(
            "one graph structure was compiled ", h.compiles,
            " times only because a host constant changed: ", constants[i].where,
            " took the values ", absl::StrJoin(h.changed_values, ", "),
            ". Each new value compiles a new graph. Make it a device scalar "
            "instead: create it once with mstep::Tensor::scalar(value) and "
            "update it each step with .fill_(new_value); the compiled graph "
            "is then reused.");
      }
      break;
    }
  }
  h.recent.insert(h.recent.begin(), Signature{key, graph.input_types, std::move(constants)});
  if (h.recent.size() > kRecentSignatures) h.recent.pop_back();
  return note;
}

}  // namespace mstep
