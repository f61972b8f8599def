// tiled_matmul_program: the loop nest, software-pipelined. Per output tile
// t (in the order of TileOrder below):
//   1. Sync prefetches: the next column block of B, and the A^T row blocks
//      (or, with A row-major, A's rows) of the uses ahead, into rings of
//      buffers, so the ~1.3 us DMA latency of each load overlaps the
//      matmuls of the tiles before it;
//   2. with A row-major, Tensor turns the next use's A rows into A^T (a
//      matmul against the identity per 128 x 128 block, four blocks to a
//      PSUM bank) and Scalar copies the banks to the A^T ring slot, one
//      use ahead of the matmuls that read it; with B^T given, a block's
//      first tile makes its B from the staged B^T rows the same way, two
//      K tiles ahead of the matmuls;
//   3. Tensor runs the K tiles' nc_matmul into PSUM bank t % banks;
//   4. Scalar copies the bank to an SBUF output tile (converting to C's
//      dtype). The Vector and Scalar engines share the PSUM port (v2), so
//      splitting these copies between them would not overlap them, and
//      Scalar's 1.4 GHz clock empties a 512-wide bank in 409 ns, Vector's
//      1.12 GHz in 511 ns;
//   5. Sync DMAs the previous output tile out (a ring of output tiles, so
//      the stores' latency overlaps too).
// Semaphores count fills and last uses (free) per buffer.
#include "lib/backends/neuron/TiledMatmulProgram.h"

#include <algorithm>
#include <string>
#include <vector>

#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// A ring of `depth` buffers, a "filled" and a "free" semaphore each, and
/// how often each has been filled. Use k goes to slot k % depth.
struct Ring {
  int depth = 0;
  std::vector<int32_t> alloc, filled, freed, uses;

  int slot(int64_t k) const { return static_cast<int>(k % depth); }
  /// How often slot(k) was filled before use k.
  int32_t round(int64_t k) const { return static_cast<int32_t>(k / depth); }
};

Ring ring(TileBuilder& b, BufferKind kind, int64_t bytes, int depth, const char* name) {
  Ring r;
  r.depth = depth;
  for (int i = 0; i < depth; ++i) {
    r.alloc.push_back(b.allocate(kind, bytes, std::string(name) + std::to_string(i)));
    r.filled.push_back(b.semaphore());
    r.freed.push_back(b.semaphore());
    r.uses.push_back(0);
  }
  return r;
}

/// Ring depths: as deep as 8 where SBUF holds it (PSUM: 4 of its 8 banks
/// for the products, 2 for the transposes).
constexpr int kMaxDepth = 8, kPsumDepth = 4, kTransposeBanks = 2;
/// SBUF bytes per partition the program may take (of 192 KiB).
constexpr int64_t kSbufBudget = 160 * 1024;
/// A row-major A's row loads are split into DMAs of at least this many
/// bytes per partition (the issue: >= 2 KiB per partition), at most 4.
constexpr int64_t kRowsDmaBytes = 2048;

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

} // namespace

TileProgram tiled_matmul_program(const TiledMatmulShape& s) {
  const std::vector<MatmulOffsets> batches =
      s.batches.empty() ? std::vector<MatmulOffsets>{MatmulOffsets{}} : s.batches;
  const int64_t nbatch = static_cast<int64_t>(batches.size());
  const bool rows_in = s.a_row_major; // A [M, K] in HBM, A^T made on chip
  TileBuilder b(nbatch > 1 || rows_in ? "batched_matmul" : "tiled_matmul");
  const int32_t at =
      b.hbm_tensor(rows_in ? "A" : "AT", s.input, s.batches.empty() ? s.k * s.m : s.a_elements);
  const bool b_rows = s.b_transposed; // B^T [N, K] in HBM, B made on chip
  const int32_t bt =
      b.hbm_tensor(b_rows ? "BT" : "B", s.input, s.batches.empty() ? s.k * s.n : s.b_elements);
  const int32_t ct = b.hbm_tensor("C", s.output, nbatch * s.m * s.n);
  const int64_t kt = ceil_div(s.k, 128), mt = ceil_div(s.m, 128), nt = ceil_div(s.n, 512);
  const int64_t in_size = static_cast<int64_t>(element_size(s.input));
  const int64_t nb_max = std::min<int64_t>(512, s.n), mb_max = std::min<int64_t>(128, s.m);
  // Column block blk (over all products): product blk / nt's columns from
  // (blk % nt) * 512; C holds the products one after another.
  const int64_t blocks = nbatch * nt, tiles = blocks * mt;
  const int64_t a_bytes = kt * mb_max * in_size, b_bytes = kt * nb_max * in_size,
                out_bytes = nb_max * static_cast<int64_t>(element_size(s.output)),
                rows_bytes = s.k * in_size, ident_bytes = rows_in || b_rows ? 2 * 128 * in_size : 0,
                staging_bytes = b_rows ? ceil_div(nb_max, 128) * s.k * in_size : 0;
  auto depth_for = [&](int64_t bytes, int64_t budget, int64_t uses) {
    return static_cast<int>(
        std::clamp<int64_t>(std::min<int64_t>(budget / bytes, uses), 2, kMaxDepth));
  };
  // B resident: one product wider than a column block, whose B fits in a
  // third of the budget and is no larger than A (M >= N: reloading A per
  // column block would cost more than B's one pass), is loaded once, and
  // the tiles go M tile by M tile, so each A^T row block is made once, not
  // once per column block. Four A^T loads in flight: deeper, the
  // prefetches crowd out the stores (C is the larger transfer) on HBM.
  // Else A resident: a product's whole A^T (a third of the budget at
  // most) is made once and kept while B streams by column blocks.
  const bool b_resident = nbatch == 1 && nt > 1 && s.m >= s.n && nt * b_bytes <= kSbufBudget / 3;
  const bool a_resident = !b_resident && nt > 1 && mt > 1 && mt * a_bytes <= kSbufBudget / 3;
  const TileOrder order = tile_order(nbatch, nt, mt, b_resident, a_resident);
  const int64_t a_uses = static_cast<int64_t>(order.use_mtile.size());
  const int b_depth = b_resident ? static_cast<int>(nt) : 2;
  // Output tiles as deep as 8, in at most a quarter of what B leaves.
  const int out_depth = depth_for(
      out_bytes, std::min<int64_t>(kMaxDepth * out_bytes, (kSbufBudget - b_depth * b_bytes) / 4),
      tiles);
  const int64_t left =
      kSbufBudget - b_depth * b_bytes - out_depth * out_bytes - ident_bytes - 2 * staging_bytes;
  int a_depth;
  if (a_resident) // the next product's A^T made while this one's last block runs, if it fits
    a_depth = static_cast<int>(mt * (nbatch > 1 && 2 * mt * a_bytes <= left / 2 ? 2 : 1));
  else if (rows_in) // made one use ahead of the matmuls
    a_depth = depth_for(a_bytes, left / 2, 3);
  else
    a_depth = depth_for(a_bytes, left, b_resident ? std::min<int64_t>(mt, 4) : tiles);
  Ring a = ring(b, BufferKind::sbuf, a_bytes, a_depth, "a");
  Ring bb = ring(b, BufferKind::sbuf, b_bytes, b_depth, "b");
  Ring ps = ring(b, BufferKind::psum, nb_max * 4,
                 static_cast<int>(std::clamp<int64_t>(tiles, 2, kPsumDepth)), "psum");
  Ring out = ring(b, BufferKind::sbuf, out_bytes, out_depth, "out");
  // A row-major: A's rows (the loads in flight); B^T: its rows (two
  // blocks' staging); either: the transposes' PSUM banks and the identity.
  Ring rw, bst, tp;
  int32_t ident = -1, ident_ready = -1;
  if (rows_in)
    rw = ring(b, BufferKind::sbuf, rows_bytes, // one slot where a long K leaves no room for two
              static_cast<int>(
                  std::clamp<int64_t>(std::min<int64_t>((left - a_depth * a_bytes) / rows_bytes,
                                                        std::min<int64_t>(a_uses, 4)),
                                      1, kMaxDepth)),
              "a_rows");
  if (b_rows) bst = ring(b, BufferKind::sbuf, staging_bytes, 2, "b_rows");
  if (rows_in || b_rows) {
    tp = ring(b, BufferKind::psum, 512 * 4, kTransposeBanks, "transpose_psum");
    // The [128, 128] identity: ones by iota, the diagonal kept by affine_select.
    const int32_t ones = b.allocate(BufferKind::sbuf, 128 * in_size, "ones");
    ident = b.allocate(BufferKind::sbuf, 128 * in_size, "identity");
    const int32_t ones_ready = b.semaphore();
    ident_ready = b.semaphore();
    const int64_t i1 = b.iota(tile_pattern(BufferKind::sbuf, ones, s.input, 0, 128, 0, {{128, 1}}),
                              AffineExpr{1, 0, {0}});
    b.signal(i1, ones_ready);
    const int64_t i2 =
        b.affine_select(tile_pattern(BufferKind::sbuf, ident, s.input, 0, 128, 0, {{128, 1}}),
                        tile_pattern(BufferKind::sbuf, ones, s.input, 0, 128, 0, {{128, 1}}),
                        AffineExpr{0, 1, {-1}}, CmpOp::equal, 0.0f);
    b.wait(i2, ones_ready, 1);
    b.signal(i2, ident_ready);
  }
  auto block_width = [&](int64_t blk) { return std::min<int64_t>(512, s.n - blk % nt * 512); };
  auto tile_rows = [&](int64_t mi) { return std::min<int64_t>(128, s.m - mi * 128); };
  auto k_rows = [&](int64_t ki) {
    return static_cast<int32_t>(std::min<int64_t>(128, s.k - ki * 128));
  };

  // B's K tiles arrive in up to 8 groups, a "filled" semaphore per group
  // and slot, so a block's first matmuls start when their K tiles are in,
  // not when the whole block is.
  const int64_t b_group = ceil_div(kt, std::min<int64_t>(kt, 8));
  auto group_tiles = [&](int64_t g) { return std::min(b_group, kt - g * b_group); };
  std::vector<std::vector<int32_t>> b_filled(b_depth);
  for (auto& f : b_filled)
    for (int64_t g = 0; g * b_group < kt; ++g) f.push_back(b.semaphore());
  // The first transpose waits for the identity.
  bool ident_waited = false;
  auto wait_identity = [&](int64_t i) {
    if (!ident_waited) b.wait(i, ident_ready, 1);
    ident_waited = true;
  };
  int64_t bank_uses = 0; // transposes' PSUM banks used so far (A's and B's)
  // B^T given: per staging slot, the DMAs that filled it so far, and per
  // column block the count its transposes wait for. A block's DMA count
  // is its width in 128-row chunks, so the last (narrower) block's count
  // is not its round times its own chunks: waiting for that was met by
  // the earlier blocks' DMAs and read the slot before its rows arrived.
  std::vector<int32_t> bst_fills(b_rows ? bst.depth : 0, 0), bt_rows_ready;
  // B^T given: DMAs column block blk's rows of B^T (128 rows of K per
  // DMA) into its staging slot.
  auto load_bt_rows = [&](int64_t blk) {
    const int slot = bst.slot(blk);
    const int64_t w = block_width(blk);
    for (int64_t c = 0; c * 128 < w; ++c) {
      const int32_t rc = static_cast<int32_t>(std::min<int64_t>(128, w - c * 128));
      AccessPattern src = hbm_rows(bt, s.input, s.k, blk % nt * 512 + c * 128, rc, 0, s.k);
      src.offset += batches[blk / nt].b;
      const int64_t i = b.dma_copy(
          tile_pattern(BufferKind::sbuf, bst.alloc[slot], s.input, 0, rc, c * s.k, {{s.k, 1}}),
          src);
      if (bst.uses[slot] > 0) b.wait(i, bst.freed[slot], bst.uses[slot]);
      b.signal(i, bst.filled[slot]);
      ++bst_fills[slot];
    }
    ++bst.uses[slot];
    if (static_cast<int64_t>(bt_rows_ready.size()) <= blk) bt_rows_ready.resize(blk + 1, 0);
    bt_rows_ready[blk] = bst_fills[slot];
  };
  // B^T given: makes K tiles [k0, k1) of column block blk of B from its
  // staged rows, per K tile: its (up to 4) 128-row chunks transposed into
  // one PSUM bank, copied by Scalar into the B slot (exact).
  auto transpose_b = [&](int64_t blk, int64_t k0, int64_t k1) {
    const int slot = bb.slot(blk), sslot = bst.slot(blk);
    const int64_t w = block_width(blk), chunks = ceil_div(w, 128);
    for (int64_t ki = k0; ki < k1; ++ki) {
      const int bank = tp.slot(bank_uses);
      const int32_t bank_round = tp.round(bank_uses++);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t rc = std::min<int64_t>(128, w - c * 128);
        const int32_t r = static_cast<int32_t>(rc);
        const int64_t i =
            b.matmul(tile_pattern(BufferKind::psum, tp.alloc[bank], DType::f32, 0, k_rows(ki),
                                  c * 128, {{rc, 1}}),
                     tile_pattern(BufferKind::sbuf, bst.alloc[sslot], s.input, 0, r,
                                  c * s.k + ki * 128, {{k_rows(ki), 1}}),
                     tile_pattern(BufferKind::sbuf, ident, s.input, 0, r, 0, {{rc, 1}}), false);
        wait_identity(i);
        if (ki == 0 && c == 0) b.wait(i, bst.filled[sslot], bt_rows_ready[blk]);
        if (c == 0 && bank_round > 0) b.wait(i, tp.freed[bank], bank_round);
        if (ki == kt - 1 && c == chunks - 1) b.signal(i, bst.freed[sslot]);
        if (c == chunks - 1) b.signal(i, tp.filled[bank]);
      }
      const int64_t cp = b.tensor_copy(
          Engine::scalar,
          tile_pattern(BufferKind::sbuf, bb.alloc[slot], s.input, 0, k_rows(ki), ki * nb_max,
                       {{w, 1}}),
          tile_pattern(BufferKind::psum, tp.alloc[bank], DType::f32, 0, k_rows(ki), 0, {{w, 1}}));
      b.wait(cp, tp.filled[bank], bank_round + 1);
      if (ki == 0 && bb.uses[slot] > 0) b.wait(cp, bb.freed[slot], bb.uses[slot]);
      b.signal(cp, b_filled[slot][ki / b_group]);
      b.signal(cp, tp.freed[bank]);
    }
    if (k1 == kt) ++bb.uses[slot];
  };
  // Loads B's column block `blk` into its ring slot (one DMA per K tile);
  // B^T given: its rows into the staging slot (transpose_b makes B).
  auto load_b = [&](int64_t blk) {
    if (b_rows) return load_bt_rows(blk);
    const int slot = bb.slot(blk);
    const int64_t w = block_width(blk);
    for (int64_t ki = 0; ki < kt; ++ki) {
      AccessPattern src = hbm_rows(bt, s.input, s.n, ki * 128, k_rows(ki), blk % nt * 512, w);
      src.offset += batches[blk / nt].b;
      const int64_t i = b.dma_copy(tile_pattern(BufferKind::sbuf, bb.alloc[slot], s.input, 0,
                                                k_rows(ki), ki * nb_max, {{w, 1}}),
                                   src);
      if (bb.uses[slot] > 0) b.wait(i, bb.freed[slot], bb.uses[slot]);
      b.signal(i, b_filled[slot][ki / b_group]);
    }
    ++bb.uses[slot];
  };
  // AT [K, M] given: loads use u's A^T row block (all K tiles, one DMA
  // where K is a multiple of 128) into its ring slot.
  auto load_at = [&](int64_t u) {
    const int slot = a.slot(u);
    const int64_t mi = order.use_mtile[u], rows = tile_rows(mi);
    const int64_t a0 = batches[order.use_product[u]].a;
    auto src_of = [&](int64_t ki) {
      AccessPattern ap = hbm_rows(at, s.input, s.m, ki * 128, k_rows(ki), mi * 128, rows);
      ap.offset += a0;
      return ap;
    };
    std::vector<int64_t> loads;
    if (kt == 1 || s.k % 128 == 0) { // all K tiles in one transfer: [128, (kt, rows)]
      AccessPattern src = src_of(0);
      AccessPattern dst =
          tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0, k_rows(0), 0, {{rows, 1}});
      if (kt > 1) {
        src.dims = {{kt, 128 * s.m}, src.dims[0]};
        dst.dims = {{kt, mb_max}, {rows, 1}};
      }
      loads.push_back(b.dma_copy(dst, src));
    } else { // a ragged last K tile: one DMA per K tile
      for (int64_t ki = 0; ki < kt; ++ki)
        loads.push_back(b.dma_copy(tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0,
                                                k_rows(ki), ki * mb_max, {{rows, 1}}),
                                   src_of(ki)));
    }
    for (int64_t i : loads) {
      if (a.uses[slot] > 0) b.wait(i, a.freed[slot], a.uses[slot]);
      b.signal(i, a.filled[slot]);
    }
    ++a.uses[slot];
  };
  // A [M, K] given: DMAs use u's 128 rows of A (contiguous K per
  // partition) into its rows slot, in pieces of >= 2 KiB per partition.
  const int64_t piece_cols = ceil_div(s.k, std::clamp<int64_t>(rows_bytes / kRowsDmaBytes, 1, 4)),
                row_pieces = ceil_div(s.k, piece_cols);
  auto load_rows = [&](int64_t u) {
    const int slot = rw.slot(u);
    const int64_t mi = order.use_mtile[u];
    const int32_t rows = static_cast<int32_t>(tile_rows(mi));
    for (int64_t c0 = 0; c0 < s.k; c0 += piece_cols) {
      const int64_t w = std::min(piece_cols, s.k - c0);
      AccessPattern src = hbm_rows(at, s.input, s.k, mi * 128, rows, c0, w);
      src.offset += batches[order.use_product[u]].a;
      const int64_t i = b.dma_copy(
          tile_pattern(BufferKind::sbuf, rw.alloc[slot], s.input, 0, rows, c0, {{w, 1}}), src);
      if (rw.uses[slot] > 0) b.wait(i, rw.freed[slot], rw.uses[slot]);
      b.signal(i, rw.filled[slot]);
    }
    ++rw.uses[slot];
  };
  // Makes use u's A^T from its rows, group `g` of four K tiles at a time:
  // four transposes (stationary: the rows' 128 K columns, moving: the
  // identity) into a PSUM bank, then Scalar copies the bank into the A^T
  // slot (exact: the bank holds the bf16 or f32 values). A ragged last K
  // tile is copied on its own (fewer partitions).
  const int64_t groups = ceil_div(kt, 4);
  const bool ragged_k = s.k % 128 != 0;
  auto group_blocks = [&](int64_t g) { return std::min<int64_t>(4, kt - 4 * g); };
  // Blocks of group g copied as full 128-partition blocks.
  auto full_blocks = [&](int64_t g) {
    return group_blocks(g) - (g == groups - 1 && ragged_k ? 1 : 0);
  };
  int32_t a_fills = 1; // fills (loads or copies) of an A^T slot per use
  if (rows_in) {
    a_fills = 0;
    for (int64_t g = 0; g < groups; ++g)
      a_fills += (full_blocks(g) > 0 ? 1 : 0) + (full_blocks(g) < group_blocks(g) ? 1 : 0);
  } else if (kt > 1 && ragged_k) {
    a_fills = static_cast<int32_t>(kt);
  }
  auto transpose_group = [&](int64_t u, int64_t g) {
    const int slot = a.slot(u), rslot = rw.slot(u);
    const int64_t rows = tile_rows(order.use_mtile[u]), g0 = 4 * g, gn = group_blocks(g);
    const int32_t r = static_cast<int32_t>(rows);
    const int bank = tp.slot(bank_uses);
    const int32_t bank_round = tp.round(bank_uses++);
    for (int64_t j = 0; j < gn; ++j) {
      const int64_t ki = g0 + j;
      const int64_t i =
          b.matmul(tile_pattern(BufferKind::psum, tp.alloc[bank], DType::f32, 0, k_rows(ki),
                                j * mb_max, {{rows, 1}}),
                   tile_pattern(BufferKind::sbuf, rw.alloc[rslot], s.input, 0, r, ki * 128,
                                {{k_rows(ki), 1}}),
                   tile_pattern(BufferKind::sbuf, ident, s.input, 0, r, 0, {{rows, 1}}), false);
      wait_identity(i);
      if (ki == 0)
        b.wait(i, rw.filled[rslot], (rw.round(u) + 1) * static_cast<int32_t>(row_pieces));
      if (j == 0 && bank_round > 0) b.wait(i, tp.freed[bank], bank_round);
      if (ki == kt - 1) b.signal(i, rw.freed[rslot]);
      if (j == gn - 1) b.signal(i, tp.filled[bank]);
    }
    const int64_t full = full_blocks(g);
    auto copy = [&](int64_t j0, int64_t nblk, int32_t parts, bool last) {
      auto view = [&](BufferKind kind, int32_t alloc, DType dt, int64_t offset) {
        return rows == mb_max
                   ? tile_pattern(kind, alloc, dt, 0, parts, offset, {{nblk * rows, 1}})
                   : tile_pattern(kind, alloc, dt, 0, parts, offset, {{nblk, mb_max}, {rows, 1}});
      };
      const int64_t c = b.tensor_copy(
          Engine::scalar, view(BufferKind::sbuf, a.alloc[slot], s.input, (g0 + j0) * mb_max),
          view(BufferKind::psum, tp.alloc[bank], DType::f32, j0 * mb_max));
      b.wait(c, tp.filled[bank], bank_round + 1);
      if (g == 0 && j0 == 0 && a.uses[slot] > 0) b.wait(c, a.freed[slot], a.uses[slot]);
      b.signal(c, a.filled[slot]);
      if (last) b.signal(c, tp.freed[bank]);
    };
    if (full > 0) copy(0, full, 128, full == gn);
    if (full < gn) copy(full, 1, k_rows(kt - 1), true);
    if (g == groups - 1) ++a.uses[slot];
  };
  // DMAs output tile t (from its out ring slot) to C.
  auto store_c = [&](int64_t t) {
    const int slot = out.slot(t);
    const int64_t blk = order.tiles[t].block, mi = order.tiles[t].mtile, rows = tile_rows(mi),
                  w = block_width(blk);
    AccessPattern dst =
        hbm_rows(ct, s.output, s.n, mi * 128, static_cast<int32_t>(rows), blk % nt * 512, w);
    dst.offset += blk / nt * s.m * s.n;
    const int64_t i = b.dma_copy(dst, tile_pattern(BufferKind::sbuf, out.alloc[slot], s.output, 0,
                                                   static_cast<int32_t>(rows), 0, {{w, 1}}));
    b.wait(i, out.filled[slot], out.round(t) + 1);
    b.signal(i, out.freed[slot]);
  };

  // Whether A^T use v's slot is free for tiles from t on (its previous
  // use's last tile is before t).
  auto slot_free = [&](int64_t v, int64_t t) {
    return v < a.depth || order.last_tile[v - a.depth] < t;
  };
  int64_t next_fill = 0, next_rows = 0, newest_use = -1;
  // Rows loads for the uses whose slot's previous use has all its
  // transposes emitted (`made` uses): a load never waits on Sync for a
  // transpose the Tensor queue has not reached yet behind later matmuls.
  int64_t made = 0;
  auto load_rows_ahead = [&] {
    for (; next_rows < a_uses && next_rows < made + rw.depth; ++next_rows) load_rows(next_rows);
  };
  // The first tile's A (A^T, or A's rows) first: A's rows of the first
  // two uses go through the transposes before the first matmul.
  if (rows_in) {
    for (; next_rows < std::min<int64_t>({2, rw.depth, a_uses}); ++next_rows) load_rows(next_rows);
    load_b(0);
    for (; next_rows < std::min<int64_t>(rw.depth, a_uses); ++next_rows) load_rows(next_rows);
  } else {
    load_at(next_fill++);
    load_b(0);
    for (; next_fill < std::min<int64_t>(a.depth - 1, a_uses); ++next_fill) load_at(next_fill);
  }
  if (b_rows) { // two blocks staged; block blk + 2 after blk's transposes
    if (blocks > 1) load_b(1);
  } else if (b_resident) {
    for (int64_t blk = 1; blk < nt; ++blk) load_b(blk);
  }
  for (int64_t t = 0; t < tiles; ++t) {
    const TileOrder::Tile& x = order.tiles[t];
    const int64_t nb = x.block, mi = x.mtile, u = x.use, rows = tile_rows(mi), w = block_width(nb);
    newest_use = std::max(newest_use, u);
    const int aslot = a.slot(u), bslot = bb.slot(nb), pslot = ps.slot(t), oslot = out.slot(t);
    const bool a_first = order.first_tile[u] == t, a_last = order.last_tile[u] == t;
    // B's first use (its first M tile) and last (streamed: the last M tile).
    const bool b_first = mi == 0, b_last = !b_resident && mi == mt - 1;
    // 1. Fill the A^T slots that are free: loads as deep as the ring,
    // transposes one use ahead (rows loads as deep as their ring); then
    // prefetch the next block's B (A first: a block of B can be MiBs, and
    // the next tile's A^T must not queue behind it on HBM).
    // A^T of this tile not made yet: all of it before the matmuls; the
    // next use's: its groups spread over this tile's K steps, so Scalar
    // copies a bank while Tensor goes on with the matmuls.
    std::vector<int64_t> ahead; // uses whose groups go between the K steps
    if (rows_in) {
      for (; next_fill < a_uses && next_fill <= newest_use + 1 && slot_free(next_fill, t);
           ++next_fill) {
        if (next_fill <= u) {
          for (int64_t g = 0; g < groups; ++g) transpose_group(next_fill, g);
          made = next_fill + 1;
        } else {
          ahead.push_back(next_fill);
        }
      }
      load_rows_ahead();
    } else {
      for (; next_fill < a_uses && slot_free(next_fill, t); ++next_fill) load_at(next_fill);
    }
    // This block's B from its staged rows: two K tiles ahead of the
    // matmuls that read them (the rest between the K steps below).
    const bool b_make = b_rows && mi == 0;
    if (b_make) transpose_b(nb, 0, std::min<int64_t>(kt, 2));
    if (!b_rows && !b_resident && mi == 0 && nb + 1 < blocks) load_b(nb + 1);
    // 2. K accumulation into PSUM bank `pslot`, the next use's transpose
    // groups between the K steps, group j before step j kt / (groups + 1):
    // the last one's copy has the last K steps to finish in.
    const int64_t spread = static_cast<int64_t>(ahead.size()) * groups;
    int64_t emitted = 0;
    auto emit_ahead = [&](int64_t upto) {
      for (; emitted < upto; ++emitted) transpose_group(ahead[emitted / groups], emitted % groups);
    };
    for (int64_t ki = 0; ki < kt; ++ki) {
      if (b_make && ki + 2 < kt) transpose_b(nb, ki + 2, ki + 3);
      emit_ahead(std::min(spread, ki * (spread + 1) / kt + 1));
      const int64_t i = b.matmul(tile_pattern(BufferKind::psum, ps.alloc[pslot], DType::f32, 0,
                                              static_cast<int32_t>(rows), 0, {{w, 1}}),
                                 tile_pattern(BufferKind::sbuf, a.alloc[aslot], s.input, 0,
                                              k_rows(ki), ki * mb_max, {{rows, 1}}),
                                 tile_pattern(BufferKind::sbuf, bb.alloc[bslot], s.input, 0,
                                              k_rows(ki), ki * nb_max, {{w, 1}}),
                                 ki > 0);
      if (ki == 0) {
        if (a_first) b.wait(i, a.filled[aslot], (a.round(u) + 1) * a_fills);
        if (t >= ps.depth) b.wait(i, ps.freed[pslot], ps.round(t));
      }
      if (b_first && ki % b_group == 0)
        b.wait(i, b_filled[bslot][ki / b_group],
               (bb.round(nb) + 1) * static_cast<int32_t>(group_tiles(ki / b_group)));
      if (ki == kt - 1) {
        if (a_last) b.signal(i, a.freed[aslot]);
        b.signal(i, ps.filled[pslot]);
        if (b_last) b.signal(i, bb.freed[bslot]);
      }
    }
    emit_ahead(spread);
    if (!ahead.empty()) {
      made = ahead.back() + 1;
      load_rows_ahead();
    }
    // The block's B is made: its staging slot takes block nb + 2's rows.
    if (b_make && nb + 2 < blocks) load_b(nb + 2);
    // 3. PSUM -> SBUF output tile on Scalar, converting to C's dtype. The
    // last tile in two halves, each stored as soon as it is copied: the
    // program's tail is one half's copy and store, not the whole tile's.
    const int64_t pieces = t == tiles - 1 && w >= 256 ? 2 : 1;
    for (int64_t h = 0; h < pieces; ++h) {
      const int64_t c0 = h * w / pieces, cw = (h + 1) * w / pieces - c0;
      const int64_t c = b.tensor_copy(Engine::scalar,
                                      tile_pattern(BufferKind::sbuf, out.alloc[oslot], s.output, 0,
                                                   static_cast<int32_t>(rows), c0, {{cw, 1}}),
                                      tile_pattern(BufferKind::psum, ps.alloc[pslot], DType::f32, 0,
                                                   static_cast<int32_t>(rows), c0, {{cw, 1}}));
      b.wait(c, ps.filled[pslot], ps.round(t) + 1);
      if (h == 0 && t >= out.depth) b.wait(c, out.freed[oslot], out.round(t));
      if (h == pieces - 1) b.signal(c, ps.freed[pslot]);
      if (pieces == 1) {
        b.signal(c, out.filled[oslot]);
        continue;
      }
      // The last tile's halves: each stored on its own.
      const int32_t ready = b.semaphore();
      b.signal(c, ready);
      if (h == 0 && t >= 1) store_c(t - 1);
      AccessPattern dst =
          hbm_rows(ct, s.output, s.n, mi * 128, static_cast<int32_t>(rows), nb % nt * 512 + c0, cw);
      dst.offset += nb / nt * s.m * s.n;
      b.wait(b.dma_copy(dst, tile_pattern(BufferKind::sbuf, out.alloc[oslot], s.output, 0,
                                          static_cast<int32_t>(rows), c0, {{cw, 1}})),
             ready, 1);
    }
    // 4. The previous tile's store (Sync issues the next loads first).
    if (pieces == 1 && t >= 1) store_c(t - 1);
    if (pieces == 1 && t == tiles - 1) store_c(t);
  }
  return b.take();
}

} // namespace mstep::neuron
