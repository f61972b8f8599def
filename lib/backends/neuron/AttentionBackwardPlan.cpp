// The attention backward's plan: what it tiles (attention_backward_tileable,
// AttentionProgram.h), resident bytes, operand pairing and the work items'
// order (AttentionBackwardPlan.h).
#include "lib/backends/neuron/AttentionBackwardPlan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionTiles.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

absl::Status attention_backward_tileable(const AttentionShape& s) {
  MSTEP_RETURN_IF_ERROR(attention_tileable(s));
  if (s.value_dim > kMatmulMaxK)
    return absl::UnimplementedError(absl::StrCat("attention backward: value dim Ev = ", s.value_dim,
                                                 " > ", kMatmulMaxK, " (the dP contraction)"));
  if (const int64_t bytes = attention_backward::backward_bytes(s);
      bytes > kSbufBytesPerPartition / 2)
    return absl::UnimplementedError(absl::StrCat("attention backward: one batch-head needs ", bytes,
                                                 " SBUF bytes per partition, over ",
                                                 kSbufBytesPerPartition / 2));
  return absl::OkStatus();
}

namespace attention_backward {

using namespace attention_tiles;

int64_t backward_bytes(const AttentionShape& s) {
  const int64_t es = static_cast<int64_t>(element_size(s.dtype));
  const int64_t tiles = ceil_div(s.q_len, kBlock), blocks = ceil_div(s.kv_len, kBlock);
  // q^T, k^T, dO^T, v^T; q, dO, k and v by rows; dQ (fp32 and the output);
  // m, 1/l, l, D, -D per tile.
  return es * (2 * s.q_len + 2 * s.kv_len + tiles * (2 * s.head_dim + s.value_dim) +
               blocks * (s.head_dim + s.value_dim) + (s.lengths > 0 ? s.kv_len : 0)) +
         4 * tiles * (s.head_dim + 7);
}

OperandPairing operand_pairing(const AttentionShape& s) {
  const int64_t E = s.head_dim, Ev = s.value_dim;
  const int64_t second = Ev > 64 ? -1 : Ev > 32 ? (E <= 64 ? 64 : -1) : ceil_div(E, 32) * 32;
  if (second < 0 || second + Ev > kBlock) return {};
  return {true, second, second + Ev};
}

int64_t tile_keys(const AttentionShape& s, int64_t q0, int64_t rows) {
  return s.causal ? std::min(s.kv_len, ceil_div(q0 + rows, kBlock) * kBlock) : s.kv_len;
}

int64_t set_bytes(const AttentionShape& s, const OperandPairing& pair, bool reuse) {
  const int64_t es = static_cast<int64_t>(element_size(s.dtype));
  const int64_t tiles = ceil_div(s.q_len, kBlock), blocks = ceil_div(s.kv_len, kBlock);
  int64_t bytes = backward_bytes(s);
  if (pair.on)
    bytes += es * (-(s.q_len + s.kv_len) + tiles * (pair.pitch - s.head_dim - s.value_dim) +
                   blocks * (pair.pitch - s.head_dim - s.value_dim));
  // With dropout also -P dropped (dV's operand) per Q tile.
  if (reuse) bytes += (4 + es + (s.dropout ? es : 0)) * tiles * tile_keys(s, s.q_len - 1, 1);
  return bytes;
}

BackwardItems backward_items(const AttentionShape& s, bool reuse, int nsets, int64_t chunk1,
                             int64_t stages) {
  const int64_t L = s.q_len, S = s.kv_len;
  const int64_t tiles = ceil_div(L, kBlock), blocks = ceil_div(S, kBlock);
  // Per batch-head: its pass 1 and pass 2 items.
  std::vector<std::vector<WorkItem>> pass1(s.batch), pass2(s.batch);
  for (int64_t h = 0; h < s.batch; ++h) {
    std::vector<WorkItem>& p1 = pass1[h];
    std::vector<WorkItem>& p2 = pass2[h];
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t q0 = t * kBlock, rows = std::min(kBlock, L - q0);
      for (int64_t k0 = 0; k0 < S && !(s.causal && k0 > q0 + rows - 1); k0 += chunk1) {
        // Causal: not the keys past the tile's last row (no row sees them);
        // with reuse, up to its key block's end (pass 2 reads whole blocks).
        const int64_t w = reuse ? tile_keys(s, q0, rows)
                                : std::min({chunk1, S - k0, s.causal ? q0 + rows - k0 : S});
        p1.push_back({ItemKind::pass1, h, t, q0, rows, k0, w, 0, k0 == 0, false,
                      s.causal && k0 + w - 1 > q0});
      }
      p1.back().last = true;
    }
    for (int64_t t = 0, seen = 0; reuse && t < tiles; ++t) { // seen: key blocks begun
      const int64_t q0 = t * kBlock, rows = std::min(kBlock, L - q0);
      const int64_t w = tile_keys(s, q0, rows), nb = ceil_div(w, kBlock);
      p2.push_back({ItemKind::pass2, h, t, q0, rows, 0, w});
      for (int64_t kb = seen; kb < nb; ++kb) p2.back().fresh |= uint64_t{1} << kb;
      seen = std::max(seen, nb);
      p2.back().last = t + 1 == tiles;
    }
    for (int64_t kb = 0; !reuse && kb < blocks; ++kb) {
      const int64_t k0 = kb * kBlock, keys = std::min(kBlock, S - k0);
      const size_t before = p2.size();
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t q0 = t * kBlock, rows = std::min(kBlock, L - q0);
        if (s.causal && k0 > q0 + rows - 1) continue;
        p2.push_back({ItemKind::pass2, h, t, q0, rows, k0, keys, kb, p2.size() == before, false,
                      s.causal && k0 + keys - 1 > q0});
      }
      if (p2.size() == before) p2.push_back({ItemKind::empty, h, 0, 0, 0, k0, keys, kb});
      p2.back().last = true;
    }
  }
  // The order: with more than one set, batch-head h + 1's pass 1
  // alternates with h's pass 2 (they share no buffer but the working
  // tiles), so the engines' queues hold independent work across the pass
  // boundary, where each batch-head's pass 2 waits for its statistics. A
  // set is reloaded (for batch-head h + nsets) once stage E of h's last
  // item is emitted, so an item of batch-head g must come at least stages
  // places after the last of g - nsets. Otherwise batch-head by batch-head,
  // the pipeline drained at each one's end (`drain`). Pass 2 reads the
  // statistics in stage B, which pass 1 finishes in its stage D: a
  // batch-head's first pass 2 item comes at least two places after its
  // last pass 1 item (D of item i is emitted before B of item i + 2), else
  // the pipeline is drained between them (`starts`).
  std::vector<WorkItem> items;
  bool drain = nsets == 1;
  if (!drain) {
    std::vector<int64_t> last_of(s.batch, -1);
    auto place = [&](const WorkItem& it) {
      if (it.h >= nsets && static_cast<int64_t>(items.size()) < last_of[it.h - nsets] + stages)
        drain = true;
      last_of[it.h] = static_cast<int64_t>(items.size());
      items.push_back(it);
    };
    for (const WorkItem& it : pass1[0]) place(it);
    for (int64_t h = 0; h < s.batch; ++h) {
      const std::vector<WorkItem>& a = pass2[h];
      static const std::vector<WorkItem> kNone;
      const std::vector<WorkItem>& c = h + 1 < s.batch ? pass1[h + 1] : kNone;
      // Two sets: stages - 1 of pass 2 first, so h + 1's first item is
      // stages places after the end of the block before (where h - 1 may
      // end). Then a pass 1 item whenever as many are left as pass 2 items,
      // so the block ends with pass 2 (h + 1's pass 2 follows it). With as
      // many pass 1 items as pass 2 or more (e.g. one each) that would end
      // it with pass 1: then, with three sets or more, the pass 1 items are
      // spread before the pass 2 items, all before the last.
      if (nsets >= 3 && a.size() <= c.size()) {
        for (size_t i = 0, j = 0; i < a.size() || j < c.size(); ++i) {
          const size_t upto = i + 1 >= a.size() ? c.size() : (i + 1) * c.size() / a.size();
          while (j < upto) place(c[j++]);
          if (i < a.size()) place(a[i]);
        }
        continue;
      }
      const size_t first_c = nsets >= 3 ? 0 : stages - 1;
      for (size_t i = 0, j = 0; i < a.size() || j < c.size();) {
        if (i < a.size()) place(a[i++]);
        while (j < c.size() && ((i >= first_c && c.size() - j >= a.size() - i) || i == a.size()))
          place(c[j++]);
      }
    }
  }
  if (drain) {
    items.clear();
    for (int64_t h = 0; h < s.batch; ++h) {
      items.insert(items.end(), pass1[h].begin(), pass1[h].end());
      items.insert(items.end(), pass2[h].begin(), pass2[h].end());
    }
  }
  {
    std::vector<bool> seen(s.batch, false);
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      it->head_last = !seen[it->h];
      seen[it->h] = true;
    }
  }

  // Where a pipelined group starts (the one before drained): after each
  // batch-head when `drain`, and at a first pass 2 item that comes right
  // after its batch-head's last pass 1 item.
  const int64_t n_items = static_cast<int64_t>(items.size());
  std::vector<bool> starts(n_items + 1, false);
  for (int64_t n = 1; n < n_items; ++n)
    starts[n] = (drain && items[n - 1].head_last) ||
                (items[n].kind != ItemKind::pass1 && items[n - 1].kind == ItemKind::pass1 &&
                 items[n - 1].h == items[n].h);
  starts[n_items] = true;
  return {std::move(items), std::move(starts)};
}

} // namespace attention_backward
} // namespace mstep::neuron
