// Every pipeline variant of the tiled matmul (tiled_matmul_variants: a PSUM
// copy per output tile or per pair, two M tiles in one PSUM bank, copies
// over two banks, a pair's K steps side by side with A^T loaded in K
// groups, row-major A's transposes one or two uses ahead; B^T staged in K
// pieces) on the simulator: each validates, each matches a double-precision
// product computed on the host, and all write the same C bytes (the PSUM
// copies are exact and the K order is the same, so the variant the cost
// model picks cannot change results).
#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/TiledMatmulProgram.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::decode;
using testing::encode;
using testing::random_rounded;

struct Case {
  int64_t m, k, n;
  DType input, output;
  int64_t products = 1;
};

/// A [P, M, K] and B [P, K, N] as the HBM tensors want them (A or A^T, B
/// or B^T), the program's C checked against the host's double product:
/// fp32 accumulation (K ulps of the absolute sum) plus a bf16 C's rounding.
void check_variants(const Case& c, bool a_row_major, bool b_transposed) {
  SCOPED_TRACE(::testing::Message()
               << c.products << " x [" << c.m << ", " << c.k << "] x [" << c.k << ", " << c.n
               << "] A row-major " << a_row_major << " B^T " << b_transposed);
  const int64_t p = c.products, m = c.m, k = c.k, n = c.n;
  const std::vector<float> a = random_rounded(p * m * k, c.input, 11),
                           bm = random_rounded(p * k * n, c.input, 12);
  std::vector<float> a_hbm(a.size()), b_hbm(bm.size());
  for (int64_t q = 0; q < p; ++q) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j)
        a_hbm[q * m * k + (a_row_major ? i * k + j : j * m + i)] = a[q * m * k + i * k + j];
    for (int64_t j = 0; j < k; ++j)
      for (int64_t l = 0; l < n; ++l)
        b_hbm[q * k * n + (b_transposed ? l * k + j : j * n + l)] = bm[q * k * n + j * n + l];
  }
  TiledMatmulShape s{m, k, n, c.input, c.output};
  s.a_row_major = a_row_major;
  s.b_transposed = b_transposed;
  if (p > 1) {
    for (int64_t q = 0; q < p; ++q) s.batches.push_back({q * m * k, q * k * n});
    s.a_elements = p * m * k;
    s.b_elements = p * k * n;
  }
  const std::vector<TileProgram> variants = tiled_matmul_variants(s);
  ASSERT_GE(variants.size(), 2u);
  std::vector<std::byte> first;
  for (size_t v = 0; v < variants.size(); ++v) {
    SCOPED_TRACE(::testing::Message() << "variant " << v);
    ASSERT_TRUE(validate(variants[v]).ok()) << validate(variants[v]);
    HbmContents hbm = {encode(a_hbm, c.input), encode(b_hbm, c.input),
                       std::vector<std::byte>(p * m * n * element_size(c.output))};
    Simulator sim;
    absl::StatusOr<SimulationStats> stats = sim.run(variants[v], hbm);
    ASSERT_TRUE(stats.ok()) << stats.status();
    if (v == 0) {
      first = hbm[2];
      const std::vector<float> got = decode(hbm[2], c.output);
      int64_t bad = 0;
      for (int64_t q = 0; q < p; ++q)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t l = 0; l < n; ++l) {
            double ref = 0, abs_sum = 0;
            for (int64_t j = 0; j < k; ++j) {
              const double prod =
                  double(a[q * m * k + i * k + j]) * double(bm[q * k * n + j * n + l]);
              ref += prod;
              abs_sum += std::fabs(prod);
            }
            double tol = k * std::ldexp(1.0, -24) * abs_sum;
            if (c.output == DType::bf16) tol += std::ldexp(1.0, -8) * std::fabs(ref);
            const float y = got[(q * m + i) * n + l];
            if (!(std::fabs(y - ref) <= tol) && bad++ < 5)
              ADD_FAILURE() << "C[" << q << ", " << i << ", " << l << "] = " << y << ", want "
                            << ref << " +- " << tol;
          }
      EXPECT_EQ(bad, 0);
    } else {
      EXPECT_TRUE(hbm[2] == first) << "C differs from variant 0's";
    }
  }
}

/// Whether some variant copies `columns` PSUM columns in one instruction.
bool some_copy_of(const TiledMatmulShape& s, int64_t columns) {
  for (const TileProgram& p : tiled_matmul_variants(s))
    for (const Instruction& inst : p.instructions)
      if (inst.opcode == Opcode::tensor_copy && inst.srcs[0].kind == BufferKind::psum &&
          inst.srcs[0].free_elements() == columns)
        return true;
  return false;
}

TEST(TiledMatmulVariants, PairedCopiesAndSideBySideTilesWriteTheSameC) {
  for (const Case& c : {
           // B resident (512 + 128 columns per M tile: one copy over two banks)
           Case{768, 384, 640, DType::bf16, DType::f32},
           // N = 256: two M tiles in one PSUM bank per copy
           Case{512, 256, 256, DType::bf16, DType::bf16},
           // A^T resident, B streamed: a pair side by side, A^T in K groups
           Case{256, 384, 1024, DType::bf16, DType::bf16},
           // ragged M, K and N (100 of a 128-column pitch: a strided copy)
           Case{300, 200, 100, DType::f32, DType::f32},
           // batched, ragged
           Case{100, 130, 200, DType::bf16, DType::f32, 3},
           // B^T staged in two K pieces (512 + 88 columns), ragged K
           Case{200, 600, 300, DType::bf16, DType::bf16},
       })
    for (int mode = 0; mode < 4; ++mode) check_variants(c, mode & 1, mode & 2);
}

TEST(TiledMatmulVariants, CopiesSpanTwoTilesWhereTheyFit) {
  // 512 + 128 contiguous columns over two banks; two 256-column tiles in
  // one bank; two 512-column tiles; two 100-column tiles 128 apart.
  EXPECT_TRUE(some_copy_of({768, 384, 640, DType::bf16, DType::f32}, 640));
  EXPECT_TRUE(some_copy_of({512, 256, 256, DType::bf16, DType::bf16}, 512));
  EXPECT_TRUE(some_copy_of({256, 384, 1024, DType::bf16, DType::bf16}, 1024));
  EXPECT_TRUE(some_copy_of({300, 200, 100, DType::f32, DType::f32}, 200));
}

// tiled_matmul_program keeps the variant the cost model times fastest,
// and the choice it remembers per shape gives the same program again.
TEST(TiledMatmulVariants, TheProgramIsTheFastestVariantFirstAndRemembered) {
  for (bool a_row_major : {false, true}) {
    TiledMatmulShape s{512, 256, 256, DType::bf16, DType::bf16};
    s.a_row_major = a_row_major;
    double fastest = std::numeric_limits<double>::infinity();
    for (const TileProgram& p : tiled_matmul_variants(s)) {
      absl::StatusOr<CostReport> cost = estimate_cost(p);
      ASSERT_TRUE(cost.ok()) << cost.status();
      fastest = std::min(fastest, cost->total_ns);
    }
    const TileProgram first = tiled_matmul_program(s), again = tiled_matmul_program(s);
    absl::StatusOr<CostReport> cost = estimate_cost(first);
    ASSERT_TRUE(cost.ok()) << cost.status();
    EXPECT_EQ(cost->total_ns, fastest);
    ASSERT_EQ(first.instructions.size(), again.instructions.size());
    for (size_t i = 0; i < first.instructions.size(); ++i)
      EXPECT_EQ(describe_instruction(static_cast<int64_t>(i), first.instructions[i]),
                describe_instruction(static_cast<int64_t>(i), again.instructions[i]));
  }
}

} // namespace
} // namespace mstep::neuron
