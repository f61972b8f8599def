// plan_copy_groups: consecutive output tiles that share a PSUM -> SBUF copy.
#include "lib/backends/neuron/MatmulCopyGroups.h"

#include <algorithm>

namespace mstep::neuron {

CopyGroups plan_copy_groups(const std::vector<int64_t>& rows, const std::vector<int64_t>& widths,
                            int64_t max_width, int64_t banks, int64_t max_tiles, bool last_alone) {
  constexpr int64_t kBankColumns = kPsumBankBytes / 4; // fp32 products
  CopyGroups g;
  g.pitch = 1;
  while (g.pitch < max_width) g.pitch *= 2;
  g.capacity = std::max<int64_t>(1, banks * kBankColumns / g.pitch);
  g.capacity = std::min(g.capacity, max_tiles);
  const int64_t tiles = static_cast<int64_t>(rows.size());
  // Whether tile t may join the open group: room, same rows, and a copy
  // pattern for its width (all tiles one width, or all a full pitch but a
  // narrower last one, which closes the group).
  auto joins = [&](const CopyGroup& open, int64_t t) {
    if (open.count == g.capacity || rows[t] != open.rows || (last_alone && t == tiles - 1))
      return false;
    bool all_pitch = true, all_same = true;
    for (int64_t i = open.first; i < t; ++i) {
      all_pitch = all_pitch && widths[i] == g.pitch;
      all_same = all_same && widths[i] == widths[t];
    }
    return all_pitch || all_same;
  };
  for (int64_t t = 0; t < tiles; ++t) {
    if (g.groups.empty() || !joins(g.groups.back(), t))
      g.groups.push_back(CopyGroup{t, 0, rows[t], {}});
    g.group_of.push_back(static_cast<int64_t>(g.groups.size()) - 1);
    g.position.push_back(g.groups.back().count++);
  }
  for (CopyGroup& c : g.groups) {
    int64_t columns = 0;
    bool contiguous = true;
    for (int64_t i = c.first; i < c.first + c.count; ++i) {
      contiguous = contiguous && (i == c.first + c.count - 1 || widths[i] == g.pitch);
      columns += widths[i];
    }
    if (contiguous)
      c.dims = {{columns, 1}};
    else
      c.dims = {{c.count, g.pitch}, {widths[c.first], 1}};
  }
  return g;
}

} // namespace mstep::neuron
