// gemm_bf16 (XlaGemmBf16.h): one oneDNN matmul per call over
// [batch, m, k] x [batch, k, n] -> [batch, m, n], an operand with stride 0
// given one batch (oneDNN broadcasts it) and a transposed operand read in
// place through swapped strides.
#include "lib/backends/xla/XlaGemmBf16.h"

#include <algorithm>
#include <array>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::xla {

namespace {

using dnnl::memory;

/// batch, m, n, k, trans_a, a_stride, trans_b, b_stride.
using GemmKey = std::array<int64_t, 8>;

/// A matmul primitive and the memories it runs over (pointed at the
/// operands on each call).
struct BoundGemm {
  dnnl::matmul primitive;
  memory a, b, c, scratchpad;
};

/// The desc of an operand of logical dims [batch, rows, cols], stored
/// dense as [rows, cols] per batch, or as [cols, rows] when `transposed`.
memory::desc operand_desc(int64_t batch, int64_t rows, int64_t cols, int64_t stride,
                          bool transposed) {
  const int64_t batches = stride == 0 ? 1 : batch;
  const int64_t batch_stride = stride == 0 ? rows * cols : stride;
  return memory::desc({batches, rows, cols}, memory::data_type::bf16,
                      transposed ? memory::dims{batch_stride, 1, rows}
                                 : memory::dims{batch_stride, cols, 1});
}

/// c = a b one product at a time, each summed in f32 in order of k and
/// rounded once: for a host where oneDNN has no bf16 matmul.
void plain_gemm(const GemmKey& key, const uint16_t* a, const uint16_t* b, uint16_t* c) {
  const auto [batch, m, n, k, trans_a, a_stride, trans_b, b_stride] = key;
  auto value = [](uint16_t bits) {
    BFloat16 v;
    v.bits = bits;
    return static_cast<float>(v);
  };
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        float sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += value(a[i * a_stride + (trans_a ? j * m + r : r * k + j)]) *
                 value(b[i * b_stride + (trans_b ? col * k + j : j * n + col)]);
        c[(i * m + r) * n + col] = BFloat16(sum).bits;
      }
}

std::optional<BoundGemm> make_gemm(const GemmKey& key) {
  const auto [batch, m, n, k, trans_a, a_stride, trans_b, b_stride] = key;
  const dnnl::engine& engine = cpu::onednn::cpu_engine();
  const memory::desc a = operand_desc(batch, m, k, a_stride, trans_a != 0);
  const memory::desc b = operand_desc(batch, k, n, b_stride, trans_b != 0);
  const memory::desc c =
      cpu::onednn::dense_desc(memory::dims{batch, m, n}, memory::data_type::bf16);
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c),
                                          cpu::onednn::user_scratchpad_attr(), engine);
    return BoundGemm{dnnl::matmul(pd), memory(a, engine, DNNL_MEMORY_NONE),
                     memory(b, engine, DNNL_MEMORY_NONE), memory(c, engine, DNNL_MEMORY_NONE),
                     memory(pd.scratchpad_desc(), engine)};
  } catch (const dnnl::error&) {
    return std::nullopt; // the plain loop multiplies it
  }
}

} // namespace

void gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a, const uint16_t* a,
               int64_t a_stride, int64_t trans_b, const uint16_t* b, int64_t b_stride,
               uint16_t* c) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) { // an empty sum: zeros (oneDNN skips zero-volume primitives)
    std::fill(c, c + batch * m * n, uint16_t{0});
    return;
  }
  thread_local absl::flat_hash_map<GemmKey, std::optional<BoundGemm>> gemms;
  thread_local dnnl::stream stream(cpu::onednn::cpu_engine());
  const GemmKey key{batch, m, n, k, trans_a, a_stride, trans_b, b_stride};
  auto found = gemms.find(key);
  if (found == gemms.end()) found = gemms.emplace(key, make_gemm(key)).first;
  if (!found->second) return plain_gemm(key, a, b, c);
  BoundGemm& g = *found->second;
  g.a.set_data_handle(const_cast<uint16_t*>(a));
  g.b.set_data_handle(const_cast<uint16_t*>(b));
  g.c.set_data_handle(c);
  g.primitive.execute(stream, {{DNNL_ARG_SRC, g.a},
                               {DNNL_ARG_WEIGHTS, g.b},
                               {DNNL_ARG_DST, g.c},
                               {DNNL_ARG_SCRATCHPAD, g.scratchpad}});
  stream.wait();
}

} // namespace mstep::xla
