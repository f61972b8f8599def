// The order in which a tiled matmul (TiledMatmulProgram.cpp) visits its
// output tiles, and which A^T use (a 128-row block of A^T made or loaded
// once) each tile reads.
#pragma once

#include <cstdint>
#include <vector>

namespace mstep::neuron {

/// The order of the output tiles and the A^T use each reads. B resident:
/// M tile outer, every column block of B inner (each A^T made once). A
/// resident: per product, column block outer, M tile inner, all of the
/// product's A^T kept (each made once). Streamed: column block outer, M
/// tile inner, A^T made again for every tile.
struct TileOrder {
  struct Tile {
    int64_t block = 0, mtile = 0, use = 0;
  };
  std::vector<Tile> tiles;
  /// Per A^T use: its M tile, the product it belongs to, its first and
  /// last tile.
  std::vector<int64_t> use_mtile, use_product, first_tile, last_tile;
};

/// nbatch products of mt M tiles by nt column blocks each.
TileOrder tile_order(int64_t nbatch, int64_t nt, int64_t mt, bool b_resident, bool a_resident);

} // namespace mstep::neuron
