// tile_order: the output tiles' order for the three residency cases.
#include "lib/backends/neuron/MatmulTileOrder.h"

namespace mstep::neuron {

TileOrder tile_order(int64_t nbatch, int64_t nt, int64_t mt, bool b_resident, bool a_resident) {
  TileOrder o;
  const int64_t blocks = nbatch * nt;
  for (int64_t t = 0; t < blocks * mt; ++t) {
    TileOrder::Tile x;
    if (b_resident) {
      x = {t % nt, t / nt, t / nt};
    } else if (a_resident) {
      const int64_t p = t / (nt * mt), r = t % (nt * mt);
      x = {p * nt + r / mt, r % mt, p * mt + r % mt};
    } else {
      x = {t / mt, t % mt, t};
    }
    if (x.use == static_cast<int64_t>(o.use_mtile.size())) {
      o.use_mtile.push_back(x.mtile);
      o.use_product.push_back(x.block / nt);
      o.first_tile.push_back(t);
      o.last_tile.push_back(t);
    }
    o.last_tile[x.use] = t;
    o.tiles.push_back(x);
  }
  return o;
}

} // namespace mstep::neuron
