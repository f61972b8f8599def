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

#include "lib/backends/neuron/MatmulCopyGroups.h"
#include "lib/backends/neuron/MatmulTileOrder.h"
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

/// Ring depths: as deep as 8 where SBUF holds it. PSUM: 2 of its 8 banks
/// for the transposes, up to 4 (a copy per tile) or the rest (groups of
/// tiles per copy, MatmulCopyGroups.h) for the products.
constexpr int kMaxDepth = 8, kTransposeBanks = 2, kSingleTileBanks = 4;
constexpr int64_t kPsumBanks = kPsumBytesPerPartition / kPsumBankBytes;

/// A pipeline's choices the cost model picks between: output tiles per
/// PSUM copy (in up to `copy_banks` banks) and how many A^T uses ahead of
/// the matmuls the transposes of a row-major A run. `late_start`: the
/// first tile's first matmul before the next use's transposes (it waits
/// for one use's rows, not two). `side_by_side` (A^T and B given): a copy
/// group's tiles run their K steps side by side (K outer), all following
/// B's K tiles as they arrive. `last_paired`: the last tile paired too (the
/// last block's tiles side by side; its copy a pair's, not half a tile's).
struct Pipeline {
  int64_t copy_banks = 1, copy_tiles = 1, a_ahead = 1;
  bool late_start = false, side_by_side = false, last_paired = false;
};
/// SBUF bytes per partition the program may take (of 192 KiB).
constexpr int64_t kSbufBudget = 160 * 1024;
/// A row-major A's row loads are split into DMAs of at least this many
/// bytes per partition (the issue: >= 2 KiB per partition), at most 4.
constexpr int64_t kRowsDmaBytes = 2048;
/// A's row loads of at least kSplitBytes go as one DMA per
/// kSplitPartitions partitions: their transfers on several DMA engines at
/// once (K >= 512 in bf16; below, the extra triggers cost more on Sync).
constexpr int64_t kSplitBytes = 128 * 1024;
constexpr int32_t kSplitPartitions = 32;
/// B^T's rows are staged in pieces of this many K columns (4 K tiles).
constexpr int64_t kBtPieceCols = 512;

TileProgram pipelined_matmul(const TiledMatmulShape& s, const Pipeline& pipe) {
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
  // Output tiles that leave PSUM by one copy: per group, a PSUM buffer of
  // up to kCopyBanks banks and an SBUF output buffer laid out alike.
  std::vector<int64_t> rows_of_tile, width_of_tile;
  for (const TileOrder::Tile& x : order.tiles) {
    rows_of_tile.push_back(std::min<int64_t>(128, s.m - x.mtile * 128));
    width_of_tile.push_back(std::min<int64_t>(512, s.n - x.block % nt * 512));
  }
  const CopyGroups cg = plan_copy_groups(rows_of_tile, width_of_tile, nb_max, pipe.copy_banks,
                                         pipe.copy_tiles, !pipe.last_paired);
  const int64_t ngroups = static_cast<int64_t>(cg.groups.size());
  int64_t group_cols = 0; // columns of the widest group's buffers
  for (const CopyGroup& g : cg.groups) group_cols = std::max(group_cols, g.count * cg.pitch);
  const int64_t out_bytes = group_cols * static_cast<int64_t>(element_size(s.output));
  const int64_t a_uses = static_cast<int64_t>(order.use_mtile.size());
  const int b_depth = b_resident ? static_cast<int>(nt) : 2;
  // Output groups as deep as 8, in at most a quarter of what B leaves.
  const int out_depth = depth_for(
      out_bytes, std::min<int64_t>(kMaxDepth * out_bytes, (kSbufBudget - b_depth * b_bytes) / 4),
      ngroups);
  const int64_t left =
      kSbufBudget - b_depth * b_bytes - out_depth * out_bytes - ident_bytes - 2 * staging_bytes;
  int a_depth;
  if (a_resident) // the next product's A^T made while this one's last block runs, if it fits
    a_depth = static_cast<int>(mt * (nbatch > 1 && 2 * mt * a_bytes <= left / 2 ? 2 : 1));
  else if (rows_in) // made one use ahead of the matmuls
    a_depth = depth_for(a_bytes, left / 2, 2 + pipe.a_ahead);
  else
    a_depth = depth_for(a_bytes, left, b_resident ? std::min<int64_t>(mt, 4) : tiles);
  Ring a = ring(b, BufferKind::sbuf, a_bytes, a_depth, "a");
  Ring bb = ring(b, BufferKind::sbuf, b_bytes, b_depth, "b");
  // The products' PSUM: the banks the transposes leave, per group.
  const int64_t group_banks = ceil_div(group_cols * 4, kPsumBankBytes);
  const int64_t product_banks =
      cg.capacity == 1 ? kSingleTileBanks : kPsumBanks - (rows_in || b_rows ? kTransposeBanks : 0);
  Ring ps =
      ring(b, BufferKind::psum, group_cols * 4,
           static_cast<int>(std::clamp<int64_t>(ngroups, 2, product_banks / group_banks)), "psum");
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
  std::vector<std::vector<int32_t>> bt_piece_filled;
  if (b_rows) {
    bst = ring(b, BufferKind::sbuf, staging_bytes, 2, "b_rows");
    bt_piece_filled.resize(2);
    for (auto& f : bt_piece_filled)
      for (int64_t k0 = 0; k0 < s.k; k0 += kBtPieceCols) f.push_back(b.semaphore());
  }
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

  // B's K tiles arrive in up to 8 groups (side by side, with A^T's: 16),
  // a "filled" semaphore per group and slot, so a block's first matmuls
  // start when their K tiles are in, not when the whole block is.
  const int64_t b_group = ceil_div(kt, std::min<int64_t>(kt, pipe.side_by_side ? 16 : 8));
  auto group_tiles = [&](int64_t g) { return std::min(b_group, kt - g * b_group); };
  const int64_t k_groups = ceil_div(kt, b_group);
  std::vector<std::vector<int32_t>> b_filled(b_depth), a_group_filled(a.depth);
  for (auto& f : b_filled)
    for (int64_t g = 0; g < k_groups; ++g) f.push_back(b.semaphore());
  if (pipe.side_by_side)
    for (auto& f : a_group_filled)
      for (int64_t g = 0; g < k_groups; ++g) f.push_back(b.semaphore());
  // The first transpose waits for the identity.
  bool ident_waited = false;
  auto wait_identity = [&](int64_t i) {
    if (!ident_waited) b.wait(i, ident_ready, 1);
    ident_waited = true;
  };
  int64_t bank_uses = 0; // transposes' PSUM banks used so far (A's and B's)
  // B^T given: DMAs column block blk's rows of B^T (128 rows per DMA) into
  // its staging slot, in K pieces of kBtPieceCols columns, piece by piece
  // (each its own semaphore): B's first K tiles are made before the rest
  // is in. Per slot, the DMAs of each piece so far (a block's count is its
  // width in chunks, not round x chunks: the last block may be narrower),
  // and per block the count its transposes wait for.
  std::vector<int32_t> bst_fills(b_rows ? bst.depth : 0, 0), bt_rows_ready;
  auto load_bt_rows = [&](int64_t blk) {
    const int slot = bst.slot(blk);
    const int64_t w = block_width(blk);
    for (int64_t k0 = 0; k0 < s.k; k0 += kBtPieceCols)
      for (int64_t c = 0; c * 128 < w; ++c) {
        const int32_t rc = static_cast<int32_t>(std::min<int64_t>(128, w - c * 128));
        const int64_t kw = std::min(kBtPieceCols, s.k - k0);
        AccessPattern src = hbm_rows(bt, s.input, s.k, blk % nt * 512 + c * 128, rc, k0, kw);
        src.offset += batches[blk / nt].b;
        const int64_t i = b.dma_copy(tile_pattern(BufferKind::sbuf, bst.alloc[slot], s.input, 0, rc,
                                                  c * s.k + k0, {{kw, 1}}),
                                     src);
        if (bst.uses[slot] > 0) b.wait(i, bst.freed[slot], bst.uses[slot]);
        b.signal(i, bt_piece_filled[slot][k0 / kBtPieceCols]);
      }
    bst_fills[slot] += static_cast<int32_t>(ceil_div(w, 128));
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
        if (ki * 128 % kBtPieceCols == 0 && c == 0)
          b.wait(i, bt_piece_filled[sslot][ki * 128 / kBtPieceCols], bt_rows_ready[blk]);
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
  auto load_b = [&](int64_t blk, int64_t k0 = 0, int64_t k1 = -1) {
    if (b_rows) return load_bt_rows(blk);
    if (k1 < 0) k1 = kt;
    const int slot = bb.slot(blk);
    const int64_t w = block_width(blk);
    for (int64_t ki = k0; ki < k1; ++ki) {
      AccessPattern src = hbm_rows(bt, s.input, s.n, ki * 128, k_rows(ki), blk % nt * 512, w);
      src.offset += batches[blk / nt].b;
      const int64_t i = b.dma_copy(tile_pattern(BufferKind::sbuf, bb.alloc[slot], s.input, 0,
                                                k_rows(ki), ki * nb_max, {{w, 1}}),
                                   src);
      if (bb.uses[slot] > 0) b.wait(i, bb.freed[slot], bb.uses[slot]);
      b.signal(i, b_filled[slot][ki / b_group]);
    }
    if (k1 == kt) ++bb.uses[slot];
  };
  // AT [K, M] given: loads use u's A^T row block (all K tiles, one DMA
  // where K is a multiple of 128) into its ring slot.
  // With side by side tiles, in B's K groups [g0, g1) (g1 < 0: all), each
  // group's loads signalling their own semaphore (a_group_filled), so the
  // first K steps start before the whole A^T is in.
  auto load_at = [&](int64_t u, int64_t g0 = 0, int64_t g1 = -1) {
    const int slot = a.slot(u);
    const int64_t mi = order.use_mtile[u], rows = tile_rows(mi);
    const int64_t a0 = batches[order.use_product[u]].a;
    const bool by_group = pipe.side_by_side;
    if (g1 < 0) g1 = by_group ? k_groups : 1;
    auto src_of = [&](int64_t ki) {
      AccessPattern ap = hbm_rows(at, s.input, s.m, ki * 128, k_rows(ki), mi * 128, rows);
      ap.offset += a0;
      return ap;
    };
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t k0 = by_group ? g * b_group : 0, kn = by_group ? group_tiles(g) : kt;
      std::vector<int64_t> loads;
      if (kn == 1 || s.k % 128 == 0) { // the K tiles in one transfer: [128, (kn, rows)]
        AccessPattern src = src_of(k0);
        AccessPattern dst = tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0, k_rows(k0),
                                         k0 * mb_max, {{rows, 1}});
        if (kn > 1) {
          src.dims = {{kn, 128 * s.m}, src.dims[0]};
          dst.dims = {{kn, mb_max}, {rows, 1}};
        }
        loads.push_back(b.dma_copy(dst, src));
      } else { // a ragged last K tile: one DMA per K tile
        for (int64_t ki = k0; ki < k0 + kn; ++ki)
          loads.push_back(b.dma_copy(tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0,
                                                  k_rows(ki), ki * mb_max, {{rows, 1}}),
                                     src_of(ki)));
      }
      for (int64_t i : loads) {
        if (a.uses[slot] > 0) b.wait(i, a.freed[slot], a.uses[slot]);
        b.signal(i, by_group ? a_group_filled[slot][g] : a.filled[slot]);
      }
    }
    if (g1 == (by_group ? k_groups : 1)) ++a.uses[slot];
  };
  // A [M, K] given: DMAs use u's 128 rows of A (contiguous K per
  // partition) into its rows slot, in pieces of >= 2 KiB per partition
  // (large ones split by partitions); rows_filled[u]: the slot's fills
  // its transposes wait for.
  const int64_t piece_cols = ceil_div(s.k, std::clamp<int64_t>(rows_bytes / kRowsDmaBytes, 1, 4));
  std::vector<int32_t> rows_fills(rw.depth, 0), rows_filled(a_uses, 0);
  auto load_rows = [&](int64_t u) {
    const int slot = rw.slot(u);
    const int64_t mi = order.use_mtile[u];
    const int32_t rows = static_cast<int32_t>(tile_rows(mi));
    for (int64_t c0 = 0; c0 < s.k; c0 += piece_cols) {
      const int64_t w = std::min(piece_cols, s.k - c0);
      const bool split = rows * w * in_size >= kSplitBytes;
      const int32_t step = split ? kSplitPartitions : rows;
      for (int32_t p0 = 0; p0 < rows; p0 += step) {
        const int32_t pn = std::min(step, rows - p0);
        AccessPattern src = hbm_rows(at, s.input, s.k, mi * 128 + p0, pn, c0, w);
        src.offset += batches[order.use_product[u]].a;
        const int64_t i = b.dma_copy(
            tile_pattern(BufferKind::sbuf, rw.alloc[slot], s.input, p0, pn, c0, {{w, 1}}), src);
        if (rw.uses[slot] > 0) b.wait(i, rw.freed[slot], rw.uses[slot]);
        b.signal(i, rw.filled[slot]);
        ++rows_fills[slot];
      }
    }
    rows_filled[u] = rows_fills[slot];
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
      if (ki == 0) b.wait(i, rw.filled[rslot], rows_filled[u]);
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
  // DMAs output tile t (from its group's out ring slot) to C.
  auto store_c = [&](int64_t t) {
    const int64_t g = cg.group_of[t];
    const int slot = out.slot(g);
    const int64_t blk = order.tiles[t].block, mi = order.tiles[t].mtile, rows = tile_rows(mi),
                  w = block_width(blk);
    AccessPattern dst =
        hbm_rows(ct, s.output, s.n, mi * 128, static_cast<int32_t>(rows), blk % nt * 512, w);
    dst.offset += blk / nt * s.m * s.n;
    const int64_t i = b.dma_copy(dst, tile_pattern(BufferKind::sbuf, out.alloc[slot], s.output, 0,
                                                   static_cast<int32_t>(rows),
                                                   cg.position[t] * cg.pitch, {{w, 1}}));
    b.wait(i, out.filled[slot], out.round(g) + 1);
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
  auto side_by_side = [&](const CopyGroup& group) {
    return pipe.side_by_side && !rows_in && !b_rows && group.count > 1;
  };
  // The first tile's A (A^T, or A's rows) first: A's rows of the first
  // two uses go through the transposes before the first matmul. With B^T
  // given, B^T's first block goes second: B is made on chip from it before
  // any matmul, so it is the longer way to the first one.
  if (rows_in) {
    for (; next_rows < std::min<int64_t>({b_rows ? 1 : 2, rw.depth, a_uses}); ++next_rows)
      load_rows(next_rows);
    load_b(0);
    for (; next_rows < std::min<int64_t>(rw.depth, a_uses); ++next_rows) load_rows(next_rows);
  } else { // side by side: the A^T of every tile of the first group first
    const int64_t first_uses =
        side_by_side(cg.groups[0]) ? order.tiles[cg.groups[0].count - 1].use + 1 : 1;
    if (pipe.side_by_side) { // K group by K group: those uses' A^T, then B's
      for (int64_t g = 0; g < k_groups; ++g) {
        for (int64_t v = 0; v < first_uses; ++v) load_at(v, g, g + 1);
        load_b(0, g * b_group, g * b_group + group_tiles(g));
      }
      next_fill = first_uses;
    } else {
      load_at(next_fill++);
      load_b(0);
    }
    for (; next_fill < std::min<int64_t>(a.depth - 1, a_uses); ++next_fill) load_at(next_fill);
  }
  if (b_rows) { // two blocks staged; block blk + 2 after blk's transposes
    if (blocks > 1) load_b(1);
  } else if (b_resident) {
    for (int64_t blk = 1; blk < nt; ++blk) load_b(blk);
  }
  // Per PSUM slot: its tiles so far (each signals `filled` once); per out
  // slot: its tiles so far (each store signals `freed` once); the tiles
  // copied out but not yet stored.
  std::vector<int32_t> ps_tiles(ps.depth, 0), out_tiles(out.depth, 0);
  std::vector<int64_t> pending;
  auto store_pending = [&] {
    for (int64_t i : pending) store_c(i);
    pending.clear();
  };
  // A^T given: loads A^T into the slots free from tile t_free on; then,
  // with tile t the first of a column block, prefetches the next block of
  // a streamed B (A first: a block of B can be MiBs, and the next tile's
  // A^T must not queue behind it on HBM).
  auto fill_given = [&](int64_t t, int64_t t_free) {
    if (!rows_in)
      for (; next_fill < a_uses && slot_free(next_fill, t_free); ++next_fill) load_at(next_fill);
    const int64_t nb = order.tiles[t].block;
    if (!b_rows && !b_resident && order.tiles[t].mtile == 0 && nb + 1 < blocks) load_b(nb + 1);
  };
  // K step ki of tile t: its matmul into its PSUM columns.
  auto k_step = [&](int64_t t, int64_t ki) {
    const TileOrder::Tile& x = order.tiles[t];
    const int64_t nb = x.block, mi = x.mtile, u = x.use, rows = tile_rows(mi), w = block_width(nb);
    const int64_t g = cg.group_of[t], col0 = cg.position[t] * cg.pitch;
    const int aslot = a.slot(u), bslot = bb.slot(nb), pslot = ps.slot(g);
    const bool a_first = order.first_tile[u] == t, a_last = order.last_tile[u] == t;
    // B's first use (its first M tile) and last (streamed: the last M tile).
    const bool b_first = mi == 0, b_last = !b_resident && mi == mt - 1;
    const int64_t i = b.matmul(tile_pattern(BufferKind::psum, ps.alloc[pslot], DType::f32, 0,
                                            static_cast<int32_t>(rows), col0, {{w, 1}}),
                               tile_pattern(BufferKind::sbuf, a.alloc[aslot], s.input, 0,
                                            k_rows(ki), ki * mb_max, {{rows, 1}}),
                               tile_pattern(BufferKind::sbuf, bb.alloc[bslot], s.input, 0,
                                            k_rows(ki), ki * nb_max, {{w, 1}}),
                               ki > 0);
    if (a_first && pipe.side_by_side && ki % b_group == 0) {
      const int32_t per_use = s.k % 128 == 0 ? 1 : static_cast<int32_t>(group_tiles(ki / b_group));
      b.wait(i, a_group_filled[aslot][ki / b_group], (a.round(u) + 1) * per_use);
    }
    if (ki == 0) {
      if (a_first && !pipe.side_by_side) b.wait(i, a.filled[aslot], (a.round(u) + 1) * a_fills);
      if (t == cg.groups[g].first && g >= ps.depth) b.wait(i, ps.freed[pslot], ps.round(g));
    }
    if (b_first && ki % b_group == 0)
      b.wait(i, b_filled[bslot][ki / b_group],
             (bb.round(nb) + 1) * static_cast<int32_t>(group_tiles(ki / b_group)));
    if (ki == kt - 1) {
      if (a_last) b.signal(i, a.freed[aslot]);
      b.signal(i, ps.filled[pslot]);
      if (b_last) b.signal(i, bb.freed[bslot]);
    }
  };
  for (int64_t t = 0; t < tiles; ++t) {
    const TileOrder::Tile& x = order.tiles[t];
    const int64_t nb = x.block, mi = x.mtile, u = x.use, rows = tile_rows(mi), w = block_width(nb);
    newest_use = std::max(newest_use, u);
    // The tile's copy group, its PSUM and out slots and its columns there.
    const int64_t g = cg.group_of[t];
    const CopyGroup& group = cg.groups[g];
    const int pslot = ps.slot(g), oslot = out.slot(g);
    // 1. Fill the A^T slots that are free: loads as deep as the ring,
    // transposes one use ahead (rows loads as deep as their ring); then
    // prefetch the next block's B (A first: a block of B can be MiBs, and
    // the next tile's A^T must not queue behind it on HBM).
    // A^T of this tile not made yet: all of it before the matmuls; the
    // next use's: its groups spread over this tile's K steps, so Scalar
    // copies a bank while Tensor goes on with the matmuls.
    std::vector<int64_t> ahead; // uses whose groups go between the K steps
    if (rows_in) {
      for (;
           next_fill < a_uses && next_fill <= newest_use + pipe.a_ahead && slot_free(next_fill, t);
           ++next_fill) {
        if (next_fill <= u) {
          for (int64_t g = 0; g < groups; ++g) transpose_group(next_fill, g);
          made = next_fill + 1;
        } else {
          ahead.push_back(next_fill);
        }
      }
      load_rows_ahead();
    }
    fill_given(t, t);
    // This block's B from its staged rows: two K tiles ahead of the
    // matmuls that read them (the rest between the K steps below).
    const bool b_make = b_rows && mi == 0;
    if (b_make) transpose_b(nb, 0, std::min<int64_t>(kt, 2));
    // 2. K accumulation into PSUM bank `pslot`, the next use's transpose
    // groups between the K steps, group j before step j kt / (groups + 1):
    // the last one's copy has the last K steps to finish in.
    const int64_t spread = static_cast<int64_t>(ahead.size()) * groups;
    int64_t emitted = 0;
    auto emit_ahead = [&](int64_t upto) {
      for (; emitted < upto; ++emitted) transpose_group(ahead[emitted / groups], emitted % groups);
    };
    if (side_by_side(group)) { // the group's tiles, K outer; t moves to its last tile
      for (int64_t j = t + 1; j < group.first + group.count; ++j) {
        newest_use = std::max(newest_use, order.tiles[j].use);
        fill_given(j, t);
      }
      for (int64_t ki = 0; ki < kt; ++ki)
        for (int64_t j = t; j < group.first + group.count; ++j) k_step(j, ki);
      t = group.first + group.count - 1;
    } else {
      for (int64_t ki = 0; ki < kt; ++ki) {
        if (b_make && ki + 2 < kt) transpose_b(nb, ki + 2, ki + 3);
        emit_ahead(std::min(spread, ki * (spread + 1) / kt + (t == 0 && pipe.late_start ? 0 : 1)));
        k_step(t, ki);
      }
    }
    emit_ahead(spread);
    if (!ahead.empty()) {
      made = ahead.back() + 1;
      load_rows_ahead();
    }
    // The block's B is made: its staging slot takes block nb + 2's rows.
    if (b_make && nb + 2 < blocks) load_b(nb + 2);
    // 3. PSUM -> SBUF on Scalar, converting to C's dtype, once the group's
    // last tile is in: one copy for the group. The last tile, alone, in two
    // halves, each stored as soon as it is copied: the program's tail is
    // one half's copy and store, not the whole tile's.
    if (t != group.first + group.count - 1) continue;
    ps_tiles[pslot] += static_cast<int32_t>(group.count);
    const int64_t pieces = t == tiles - 1 && group.count == 1 && w >= 256 ? 2 : 1;
    for (int64_t h = 0; h < pieces; ++h) {
      const int64_t c0 = h * w / pieces, cw = (h + 1) * w / pieces - c0;
      auto view = [&](BufferKind kind, int32_t alloc, DType dt) {
        AccessPattern ap = tile_pattern(kind, alloc, dt, 0, static_cast<int32_t>(rows), c0, {});
        if (pieces == 1)
          ap.dims.assign(group.dims.begin(), group.dims.end());
        else
          ap.dims = {{cw, 1}};
        return ap;
      };
      const int64_t c =
          b.tensor_copy(Engine::scalar, view(BufferKind::sbuf, out.alloc[oslot], s.output),
                        view(BufferKind::psum, ps.alloc[pslot], DType::f32));
      b.wait(c, ps.filled[pslot], ps_tiles[pslot]);
      if (h == 0 && out_tiles[oslot] > 0) b.wait(c, out.freed[oslot], out_tiles[oslot]);
      if (h == pieces - 1) b.signal(c, ps.freed[pslot]);
      if (pieces == 1) {
        b.signal(c, out.filled[oslot]);
        continue;
      }
      // The last tile's halves: each stored on its own.
      const int32_t ready = b.semaphore();
      b.signal(c, ready);
      if (h == 0) store_pending();
      AccessPattern dst =
          hbm_rows(ct, s.output, s.n, mi * 128, static_cast<int32_t>(rows), nb % nt * 512 + c0, cw);
      dst.offset += nb / nt * s.m * s.n;
      b.wait(b.dma_copy(dst, tile_pattern(BufferKind::sbuf, out.alloc[oslot], s.output, 0,
                                          static_cast<int32_t>(rows), c0, {{cw, 1}})),
             ready, 1);
    }
    out_tiles[oslot] += static_cast<int32_t>(group.count);
    if (pieces == 2) continue;
    // 4. The previous group's stores (Sync issues the next loads first).
    store_pending();
    for (int64_t i = group.first; i <= t; ++i) pending.push_back(i);
    if (t == tiles - 1) store_pending();
  }
  return b.take();
}

} // namespace

namespace {

/// The pipelines worth trying for `s` (options that change nothing for
/// its shape would give the same program again).
std::vector<Pipeline> variant_pipelines(const TiledMatmulShape& s) {
  std::vector<Pipeline> out;
  for (const Pipeline& pipe :
       {Pipeline{1, 1, 1}, Pipeline{2, 2, 1}, Pipeline{2, 2, 2}, Pipeline{1, 1, 1, true},
        Pipeline{2, 2, 1, true}, Pipeline{2, 2, 1, false, true},
        Pipeline{2, 2, 1, false, true, true}}) {
    if ((pipe.a_ahead > 1 || pipe.late_start) && !s.a_row_major) continue;
    if (pipe.side_by_side && (s.a_row_major || s.b_transposed)) continue;
    out.push_back(pipe);
  }
  return out;
}

} // namespace

int tiled_matmul_variant_count(const TiledMatmulShape& s) {
  return static_cast<int>(variant_pipelines(s).size());
}

TileProgram tiled_matmul_variant(const TiledMatmulShape& s, int i) {
  return pipelined_matmul(s, variant_pipelines(s).at(static_cast<size_t>(i)));
}

} // namespace mstep::neuron
