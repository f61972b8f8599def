// tiled_matmul_program: the loop nest, software-pipelined. Per output tile
// t (column blocks of every product outer, M tiles inner):
//   1. Sync prefetches tile t + depth - 1's A^T row block (and, at a
//      block's first tile, the next block's B columns) into a ring of
//      `depth` buffers, so the ~1.3 us DMA latency of each load overlaps
//      the matmuls of the tiles before it;
//   2. Tensor runs the K tiles' nc_matmul into PSUM bank t % banks;
//   3. Scalar copies the bank to an SBUF output tile (converting to C's
//      dtype): Scalar's 1.4 GHz clock empties a 512-wide bank in 366 ns,
//      Vector's 1.12 GHz in 457 ns, more than two K tiles of matmuls take;
//   4. Sync DMAs the previous output tile out (a ring of output tiles, so
//      the stores' latency overlaps too).
// Semaphores count loads (filled) and last uses (free) per buffer.
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

/// Ring depths: as deep as 8 where SBUF holds it (PSUM: 4 of its 8 banks).
constexpr int kMaxDepth = 8, kPsumDepth = 4;
/// SBUF bytes per partition the program may take (of 192 KiB).
constexpr int64_t kSbufBudget = 160 * 1024;

} // namespace

TileProgram tiled_matmul_program(const TiledMatmulShape& s) {
  const std::vector<MatmulOffsets> batches =
      s.batches.empty() ? std::vector<MatmulOffsets>{MatmulOffsets{}} : s.batches;
  const int64_t nbatch = static_cast<int64_t>(batches.size());
  TileBuilder b(nbatch > 1 || s.a_row_major ? "batched_matmul" : "tiled_matmul");
  const int32_t at = b.hbm_tensor(s.a_row_major ? "A" : "AT", s.input,
                                  s.batches.empty() ? s.k * s.m : s.a_elements);
  const int32_t bt = b.hbm_tensor("B", s.input, s.batches.empty() ? s.k * s.n : s.b_elements);
  const int32_t ct = b.hbm_tensor("C", s.output, nbatch * s.m * s.n);
  const int64_t kt = ceil_div(s.k, 128), mt = ceil_div(s.m, 128), nt = ceil_div(s.n, 512);
  const int64_t in_size = static_cast<int64_t>(element_size(s.input));
  const int64_t nb_max = std::min<int64_t>(512, s.n), mb_max = std::min<int64_t>(128, s.m);
  // Column block blk (over all products): product blk / nt's columns from
  // (blk % nt) * 512; C holds the products one after another.
  const int64_t blocks = nbatch * nt, tiles = blocks * mt;
  const int64_t a_bytes = kt * mb_max * in_size, b_bytes = kt * nb_max * in_size,
                out_bytes = nb_max * static_cast<int64_t>(element_size(s.output));
  auto depth_for = [&](int64_t bytes, int64_t budget, int64_t uses) {
    return static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(budget / bytes, uses), 2,
                                                 kMaxDepth));
  };
  // B resident: one product wider than a column block, whose B fits in a
  // third of the budget and is no larger than A (M >= N: reloading A per
  // column block would cost more than B's one pass), is loaded once, and
  // the tiles go M tile by M tile (every column block of an M tile before
  // the next), so each A^T row block is loaded once, not once per column
  // block. Four A^T loads in flight: deeper, the prefetches crowd out the
  // stores (C is the larger transfer) on HBM.
  const bool b_resident =
      nbatch == 1 && nt > 1 && s.m >= s.n && nt * b_bytes <= kSbufBudget / 3;
  const int out_depth = depth_for(out_bytes, kMaxDepth * out_bytes, tiles);
  const int b_depth = b_resident ? static_cast<int>(nt) : 2;
  const int a_depth = depth_for(a_bytes, kSbufBudget - b_depth * b_bytes - out_depth * out_bytes,
                                b_resident ? std::min<int64_t>(mt, 4) : tiles);
  Ring a = ring(b, BufferKind::sbuf, a_bytes, a_depth, "a");
  Ring bb = ring(b, BufferKind::sbuf, b_bytes, b_depth, "b");
  Ring ps = ring(b, BufferKind::psum, nb_max * 4,
                 static_cast<int>(std::clamp<int64_t>(tiles, 2, kPsumDepth)), "psum");
  Ring out = ring(b, BufferKind::sbuf, out_bytes, out_depth, "out");
  auto block_width = [&](int64_t blk) { return std::min<int64_t>(512, s.n - blk % nt * 512); };
  auto of = [&](int64_t blk) -> const MatmulOffsets& { return batches[blk / nt]; };
  auto tile_rows = [&](int64_t mi) { return std::min<int64_t>(128, s.m - mi * 128); };
  auto k_rows = [&](int64_t ki) {
    return static_cast<int32_t>(std::min<int64_t>(128, s.k - ki * 128));
  };

  // Loads B's column block `blk` into buffer blk % 2 (one DMA per K tile).
  auto load_b = [&](int64_t blk) {
    const int slot = bb.slot(blk);
    const int64_t w = block_width(blk);
    for (int64_t ki = 0; ki < kt; ++ki) {
      AccessPattern src = hbm_rows(bt, s.input, s.n, ki * 128, k_rows(ki), blk % nt * 512, w);
      src.offset += of(blk).b;
      const int64_t i = b.dma_copy(tile_pattern(BufferKind::sbuf, bb.alloc[slot], s.input, 0,
                                                k_rows(ki), ki * nb_max, {{w, 1}}),
                                   src);
      if (bb.uses[slot] > 0) b.wait(i, bb.freed[slot], bb.uses[slot]);
      b.signal(i, bb.filled[slot]);
    }
    ++bb.uses[slot];
  };
  // A^T's rows [k0, k0 + parts) and columns [m0, m0 + rows) of product
  // `p`: AT [K, M] row-major, or A [M, K] read transposed (partition
  // stride 1, M walked K apart).
  auto a_block = [&](const MatmulOffsets& p, int64_t k0, int32_t parts, int64_t m0, int64_t rows) {
    if (!s.a_row_major) {
      AccessPattern ap = hbm_rows(at, s.input, s.m, k0, parts, m0, rows);
      ap.offset += p.a;
      return ap;
    }
    AccessPattern ap = hbm_rows(at, s.input, 1, 0, parts, 0, rows);
    ap.offset = p.a + m0 * s.k + k0;
    ap.dims = {{rows, s.k}};
    return ap;
  };
  // Tile t's column block and M tile, and its A^T load (the index of the
  // A^T row block it reads, in load order).
  auto block_of = [&](int64_t t) { return b_resident ? t % nt : t / mt; };
  auto mtile_of = [&](int64_t t) { return b_resident ? t / nt : t % mt; };
  auto a_use = [&](int64_t t) { return b_resident ? t / nt : t; };
  const int64_t a_uses = b_resident ? mt : tiles;
  // Loads A^T's columns of A load u's M tile (all K tiles, one DMA) into
  // its ring slot.
  auto load_a = [&](int64_t u) {
    const int slot = a.slot(u);
    const int64_t mi = b_resident ? u : u % mt, rows = tile_rows(mi);
    const MatmulOffsets& p = of(b_resident ? 0 : u / mt);
    AccessPattern src = a_block(p, 0, k_rows(0), mi * 128, rows);
    AccessPattern dst =
        tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0, k_rows(0), 0, {{rows, 1}});
    if (kt > 1 && s.k % 128 == 0) { // all K tiles in one transfer: [128, (kt, rows)]
      src.dims = {{kt, s.a_row_major ? 128 : 128 * s.m}, src.dims[0]};
      dst.dims = {{kt, mb_max}, {rows, 1}};
    }
    std::vector<int64_t> loads;
    if (src.dims.size() == 2 || kt == 1) {
      loads.push_back(b.dma_copy(dst, src));
    } else { // a ragged last K tile: one DMA per K tile
      for (int64_t ki = 0; ki < kt; ++ki)
        loads.push_back(b.dma_copy(tile_pattern(BufferKind::sbuf, a.alloc[slot], s.input, 0,
                                                k_rows(ki), ki * mb_max, {{rows, 1}}),
                                   a_block(p, ki * 128, k_rows(ki), mi * 128, rows)));
    }
    for (int64_t i : loads) {
      if (a.uses[slot] > 0) b.wait(i, a.freed[slot], a.uses[slot]);
      b.signal(i, a.filled[slot]);
    }
    ++a.uses[slot];
  };
  const int64_t a_loads_per_tile = (kt > 1 && s.k % 128 != 0) ? kt : 1;
  // DMAs output tile t (from its out ring slot) to C.
  auto store_c = [&](int64_t t) {
    const int slot = out.slot(t);
    const int64_t blk = block_of(t), mi = mtile_of(t), rows = tile_rows(mi),
                  w = block_width(blk);
    AccessPattern dst =
        hbm_rows(ct, s.output, s.n, mi * 128, static_cast<int32_t>(rows), blk % nt * 512, w);
    dst.offset += blk / nt * s.m * s.n;
    const int64_t i = b.dma_copy(dst, tile_pattern(BufferKind::sbuf, out.alloc[slot], s.output, 0,
                                                   static_cast<int32_t>(rows), 0, {{w, 1}}));
    b.wait(i, out.filled[slot], out.round(t) + 1);
    b.signal(i, out.freed[slot]);
  };

  load_b(0);
  for (int64_t u = 0; u < std::min<int64_t>(a.depth - 1, a_uses); ++u) load_a(u);
  if (b_resident)
    for (int64_t blk = 1; blk < nt; ++blk) load_b(blk);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t nb = block_of(t), mi = mtile_of(t), u = a_use(t), rows = tile_rows(mi),
                  w = block_width(nb);
    const int aslot = a.slot(u), bslot = bb.slot(nb), pslot = ps.slot(t), oslot = out.slot(t);
    // The tile's A^T is new (loaded for it) / used for the last time.
    const bool a_first = !b_resident || nb == 0, a_last = !b_resident || nb == nt - 1;
    // B's first use (resident: the first M tile) and last (streamed: the last M tile).
    const bool b_first = mi == 0, b_last = !b_resident && mi == mt - 1;
    // 1. Prefetch: the next block's B, and A for the load depth - 1 ahead.
    if (!b_resident && mi == 0 && nb + 1 < blocks) load_b(nb + 1);
    if (a_first && u + a.depth - 1 < a_uses) load_a(u + a.depth - 1);
    // 2. K accumulation into PSUM bank `pslot`.
    for (int64_t ki = 0; ki < kt; ++ki) {
      const int64_t i = b.matmul(tile_pattern(BufferKind::psum, ps.alloc[pslot], DType::f32, 0,
                                              static_cast<int32_t>(rows), 0, {{w, 1}}),
                                 tile_pattern(BufferKind::sbuf, a.alloc[aslot], s.input, 0,
                                              k_rows(ki), ki * mb_max, {{rows, 1}}),
                                 tile_pattern(BufferKind::sbuf, bb.alloc[bslot], s.input, 0,
                                              k_rows(ki), ki * nb_max, {{w, 1}}),
                                 ki > 0);
      if (ki == 0) {
        if (a_first)
          b.wait(i, a.filled[aslot], (a.round(u) + 1) * static_cast<int32_t>(a_loads_per_tile));
        if (b_first) b.wait(i, bb.filled[bslot], (bb.round(nb) + 1) * static_cast<int32_t>(kt));
        if (t >= ps.depth) b.wait(i, ps.freed[pslot], ps.round(t));
      }
      if (ki == kt - 1) {
        if (a_last) b.signal(i, a.freed[aslot]);
        b.signal(i, ps.filled[pslot]);
        if (b_last) b.signal(i, bb.freed[bslot]);
      }
    }
    // 3. PSUM -> SBUF output tile on Scalar, converting to C's dtype.
    const int64_t c = b.tensor_copy(Engine::scalar,
                                    tile_pattern(BufferKind::sbuf, out.alloc[oslot], s.output, 0,
                                                 static_cast<int32_t>(rows), 0, {{w, 1}}),
                                    tile_pattern(BufferKind::psum, ps.alloc[pslot], DType::f32, 0,
                                                 static_cast<int32_t>(rows), 0, {{w, 1}}));
    b.wait(c, ps.filled[pslot], ps.round(t) + 1);
    if (t >= out.depth) b.wait(c, out.freed[oslot], out.round(t));
    b.signal(c, ps.freed[pslot]);
    b.signal(c, out.filled[oslot]);
    // 4. The previous tile's store (Sync issues the next loads first).
    if (t >= 1) store_c(t - 1);
  }
  store_c(tiles - 1);
  return b.take();
}

} // namespace mstep::neuron
