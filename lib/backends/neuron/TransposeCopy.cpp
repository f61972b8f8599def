// lower_minor_transpose: the byte-plane on-chip transpose (TransposeCopy.h).
#include "lib/backends/neuron/TransposeCopy.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionTiles.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

namespace {

/// Bytes are moved in uint8 tiles (DType::boolean is the tile IR's uint8).
constexpr DType kByte = DType::boolean;
/// PSUM banks the transposes rotate through (the Tensor engine fills one
/// while the Scalar engine empties another).
constexpr int kBanks = 4;
/// SBUF bytes per partition one panel's tiles may take (two panels live).
constexpr int64_t kPanelBudget = 72 * 1024;

int64_t round_down(int64_t v, int64_t m) { return std::max(m, v / m * m); }

/// How the [x, y] plane is cut: panels of px result rows by py result
/// columns (py input rows), input rows in tiles of `tile` partitions,
/// `group` result columns per PSUM bank (512 fp32 of e byte planes).
struct Panels {
  int64_t e = 0, tile = 0, group = 0, px = 0, py = 0;

  int64_t y_tiles() const { return (py + tile - 1) / tile; }
  int64_t x_blocks() const { return (px + kPartitions - 1) / kPartitions; }
  /// SBUF bytes per partition of one panel: uint8 and bf16 input rows, uint8 result rows.
  int64_t bytes() const { return y_tiles() * px * e * 3 + x_blocks() * py * e; }
};

Panels panels_for(const MinorTranspose& t) {
  Panels p;
  p.e = t.element_bytes;
  p.group = kPsumBankBytes / 4 / p.e;
  p.tile = std::min<int64_t>(kPartitions, p.group);
  // Runs of 1 KiB per partition (smaller panels pipeline better here; 2 KiB
  // and 512 B were slower on the GPT-mini step), halved until a panel fits.
  for (int64_t run = 1024;; run /= 2) {
    p.px = std::min(t.x, round_down(run / p.e, kPartitions));
    p.py = std::min(t.y, round_down(run / p.e, p.group));
    if (p.bytes() <= kPanelBudget || run <= 256) break;
  }
  return p;
}

} // namespace

absl::StatusOr<LoweredOp> lower_minor_transpose(const MinorTranspose& t, OpKind op) {
  if (t.element_bytes < 1 || t.element_bytes > 8 || t.x < 1 || t.y < 1)
    return refuse(op, "not a transpose of the two minor dims");
  const Panels p = panels_for(t);
  if (p.bytes() > kPanelBudget)
    return refuse(op, absl::StrCat("a transpose panel of ", p.bytes(), " B per partition"));
  const int64_t e = p.e;
  RowKit k(absl::StrCat("neuron_", op_name(op), "_transpose"));
  const int32_t in = k.b.hbm_tensor("in0", kByte, t.in_elements * e);
  const int32_t out = k.b.hbm_tensor("out", kByte, t.out_elements * e);
  const int32_t ident = attention_tiles::make_identity(k.b, k.deps, DType::bf16);
  std::vector<RowKit::Tile> rows_u8, rows_bf16, result;
  for (int64_t j = 0; j < p.y_tiles(); ++j) {
    rows_u8.push_back(k.tile(kByte, p.px * e, absl::StrCat("rows_u8_", j)));
    rows_bf16.push_back(k.tile(DType::bf16, p.px * e, absl::StrCat("rows_bf16_", j)));
  }
  for (int64_t b = 0; b < p.x_blocks(); ++b)
    result.push_back(k.tile(kByte, p.py * e, absl::StrCat("result", b)));
  std::array<int32_t, kBanks> banks{};
  for (int i = 0; i < kBanks; ++i)
    banks[i] = k.b.allocate(BufferKind::psum, kPsumBankBytes, absl::StrCat("transpose_psum", i));

  // The stores of the panel before: emitted after this panel's loads (the
  // Sync queue is in order: a store waiting for compute would hold them up).
  std::vector<std::pair<AccessPattern, AccessPattern>> stores;
  auto flush_stores = [&] {
    for (const auto& [to, from] : stores) k.deps.track(k.b.dma_copy(to, from));
    stores.clear();
  };
  int64_t panel = 0, bank = 0;
  std::vector<int64_t> index(t.batch_sizes.size(), 0);
  for (;;) {
    int64_t src0 = t.src_offset, dst0 = t.dst_offset;
    for (size_t d = 0; d < index.size(); ++d) {
      src0 += index[d] * t.batch_src[d];
      dst0 += index[d] * t.batch_dst[d];
    }
    for (int64_t y0 = 0; y0 < t.y; y0 += p.py)
      for (int64_t x0 = 0; x0 < t.x; x0 += p.px) {
        const int s = static_cast<int>(panel++ % 2);
        const int64_t yw = std::min(p.py, t.y - y0), xw = std::min(p.px, t.x - x0);
        // Input rows y (contiguous runs of xw elements) as bytes.
        for (int64_t j = 0; j * p.tile < yw; ++j) {
          const int32_t ty = static_cast<int32_t>(std::min(p.tile, yw - j * p.tile));
          AccessPattern src = tile_pattern(BufferKind::hbm, in, kByte, 0, ty,
                                           (src0 + (y0 + j * p.tile) * t.in_row + x0) * e,
                                           {{xw * e, 1}});
          src.partition_stride = t.in_row * e;
          k.load(RowKit::at(rows_u8[j], s, ty, xw * e), src);
        }
        flush_stores();
        for (int64_t j = 0; j * p.tile < yw; ++j) {
          const int32_t ty = static_cast<int32_t>(std::min(p.tile, yw - j * p.tile));
          k.copy(RowKit::at(rows_bf16[j], s, ty, xw * e), RowKit::at(rows_u8[j], s, ty, xw * e));
        }
        for (int64_t xb = 0; xb * kPartitions < xw; ++xb) {
          const int32_t xr = static_cast<int32_t>(std::min<int64_t>(kPartitions, xw - xb * kPartitions));
          const AccessPattern block = RowKit::at(result[xb], s, xr, yw * e);
          for (int64_t g0 = 0; g0 < yw; g0 += p.group) {
            const int64_t gw = std::min(p.group, yw - g0);
            const int32_t ps = banks[bank++ % kBanks];
            for (int64_t y = g0; y < g0 + gw; y += p.tile) {
              const int32_t ty = static_cast<int32_t>(std::min(p.tile, g0 + gw - y));
              const RowKit::Tile& rows = rows_bf16[y / p.tile];
              // Byte plane b of the block: element (x, y) lands at PSUM
              // column (y - g0) e + b of partition x.
              for (int64_t b = 0; b < e; ++b) {
                const AccessPattern dst = tile_pattern(BufferKind::psum, ps, DType::f32, 0, xr,
                                                       (y - g0) * e + b, {{ty, e}});
                const AccessPattern stationary =
                    tile_pattern(BufferKind::sbuf, rows.slot[s], DType::bf16, 0, ty,
                                 xb * kPartitions * e + b, {{xr, e}});
                const AccessPattern identity =
                    tile_pattern(BufferKind::sbuf, ident, DType::bf16, 0, ty, 0, {{ty, 1}});
                k.deps.track(k.b.matmul(dst, stationary, identity, /*accumulate=*/false),
                             /*partial_write=*/true);
              }
            }
            AccessPattern evacuated = block;
            evacuated.offset += g0 * e;
            evacuated.dims = {{gw * e, 1}};
            k.deps.track(
                k.b.tensor_copy(Engine::scalar, evacuated,
                                tile_pattern(BufferKind::psum, ps, DType::f32, 0, xr, 0,
                                             {{gw * e, 1}})),
                /*partial_write=*/true);
          }
          // Result rows x (contiguous runs of yw elements).
          AccessPattern dst = tile_pattern(BufferKind::hbm, out, kByte, 0, xr,
                                           (dst0 + (x0 + xb * kPartitions) * t.out_row + y0) * e,
                                           {{yw * e, 1}});
          dst.partition_stride = t.out_row * e;
          stores.emplace_back(dst, block);
        }
      }
    size_t d = index.size();
    while (d > 0 && ++index[d - 1] == t.batch_sizes[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  flush_stores();
  return k.finish({0, -1});
}

} // namespace mstep::neuron
