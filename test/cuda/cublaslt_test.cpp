// cuBLASLt without a GPU: the loader reports a missing library as
// "cublasLt: unavailable" with the reason, and finds every function in the
// toolkit's real library when it is here; the row-major to column-major
// plan is checked by running it: a host column-major GEMM that reads the
// operands exactly as the plan's layouts describe them must give the
// row-major product, for every combination of transposes and odd sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "lib/backends/cuda/CublasLt.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CublasLtLoad, AMissingLibraryIsUnavailableWithTheReason) {
  auto api = load_cublaslt({.library = "libcublasLt_missing_for_test.so.13"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(api.status().message(),
              HasSubstr("cublasLt: unavailable: cannot load libcublasLt_missing_for_test.so.13: "));
  EXPECT_THAT(api.status().message(), HasSubstr("LD_LIBRARY_PATH"));
}

TEST(CublasLtLoad, ALibraryWithoutTheFunctionsIsUnavailableNamingOne) {
  // libc has none of them.
  auto api = load_cublaslt({.library = "libc.so.6"});
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("cublasLt: unavailable: libc.so.6 has no cublasLtCreate"));
}

TEST(CublasLtLoad, TheToolkitsLibraryHasEveryFunctionOfTheTable) {
  const std::string path = "/usr/local/cuda/lib64/libcublasLt.so.13";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  auto api = load_cublaslt({.library = path});
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->version / 10000, 13u);
  EXPECT_STREQ((*api)->cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
}

/// op(x)[i, j] of a column-major operand as the plan describes it.
float at(const std::vector<float>& x, const CublasLtOperand& o, uint64_t i, uint64_t j) {
  return o.transpose ? x[j + i * o.ld] : x[i + j * o.ld];
}

/// C = op(A) op(B) the way cuBLASLt computes it from the plan, with
/// mstep's B as its A and mstep's A as its B; returns C's storage.
std::vector<float> run_column_major(const CublasLtGemm& g, const std::vector<float>& mstep_a,
                                    const std::vector<float>& mstep_b) {
  std::vector<float> c(g.c.ld * g.c.cols, 0.0f);
  for (uint64_t i = 0; i < g.m; ++i)
    for (uint64_t j = 0; j < g.n; ++j) {
      float sum = 0;
      for (uint64_t l = 0; l < g.k; ++l) sum += at(mstep_b, g.a, i, l) * at(mstep_a, g.b, l, j);
      c[i + j * g.c.ld] = sum;
    }
  return c;
}

TEST(CublasLtPlan, TheColumnMajorCallComputesTheRowMajorProductForEveryTranspose) {
  const int64_t m = 3, n = 5, k = 7; // odd, different: a swapped size shows
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transpose_a " << ta << " transpose_b " << tb);
      std::vector<float> a(m * k), b(k * n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2.0f + 0.25f * i;
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) - 1.0f + 0.5f * i;
      // Row-major reference from the stored layouts: A [m,k] or [k,m], B [k,n] or [n,k].
      auto A = [&](int64_t i, int64_t l) { return ta ? a[l * m + i] : a[i * k + l]; };
      auto B = [&](int64_t l, int64_t j) { return tb ? b[j * k + l] : b[l * n + j]; };
      auto gemm = plan_cublaslt_gemm({.m = m, .n = n, .k = k, .transpose_a = ta, .transpose_b = tb});
      ASSERT_TRUE(gemm.ok()) << gemm.status();
      std::vector<float> c = run_column_major(*gemm, a, b);
      ASSERT_EQ(c.size(), static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float expected = 0;
          for (int64_t l = 0; l < k; ++l) expected += A(i, l) * B(l, j);
          EXPECT_FLOAT_EQ(c[i * n + j], expected) << "C[" << i << ", " << j << "]";
        }
    }
}

TEST(CublasLtPlan, LayoutsSwapTheOperandsAndSizes) {
  auto gemm = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7});
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->m, 5u); // cuBLASLt's m is mstep's n
  EXPECT_EQ(gemm->n, 3u);
  EXPECT_EQ(gemm->k, 7u);
  EXPECT_EQ(gemm->a, (CublasLtOperand{5, 7, 5, false})); // B [7, 5] row-major
  EXPECT_EQ(gemm->b, (CublasLtOperand{7, 3, 7, false})); // A [3, 7] row-major
  EXPECT_EQ(gemm->c, (CublasLtOperand{5, 3, 5, false})); // C [3, 5] row-major
  auto t = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7, .transpose_a = true, .transpose_b = true});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->a, (CublasLtOperand{7, 5, 7, true})); // B stored [5, 7]
  EXPECT_EQ(t->b, (CublasLtOperand{3, 7, 3, true})); // A stored [7, 3]
}

TEST(CublasLtPlan, EpiloguesMapToCublasLtsWithAndWithoutBias) {
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::none, false), CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::none, true), CUBLASLT_EPILOGUE_BIAS);
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::relu, false), CUBLASLT_EPILOGUE_RELU);
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::relu, true), CUBLASLT_EPILOGUE_RELU_BIAS);
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::gelu, false), CUBLASLT_EPILOGUE_GELU);
  EXPECT_EQ(cublaslt_epilogue(MatmulEpilogue::gelu, true), CUBLASLT_EPILOGUE_GELU_BIAS);
  auto gemm = plan_cublaslt_gemm({.m = 2, .n = 2, .k = 2, .epilogue = MatmulEpilogue::gelu, .bias = true});
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->epilogue, CUBLASLT_EPILOGUE_GELU_BIAS);
}

TEST(CublasLtPlan, BiasGradientsMapToBgradOfTheOperandCublasLtSeesItAs) {
  // mstep's A is cuBLASLt's B: its sum over k ([m], the columns of
  // cuBLASLt's D) is BGRADB; mstep's B's ([n], D's rows) is BGRADA.
  EXPECT_EQ(cublaslt_epilogue(MatmulShape{.bias_grad = MatmulBiasGrad::lhs}),
            CUBLASLT_EPILOGUE_BGRADB);
  EXPECT_EQ(cublaslt_epilogue(MatmulShape{.bias_grad = MatmulBiasGrad::rhs}),
            CUBLASLT_EPILOGUE_BGRADA);
  EXPECT_EQ(cublaslt_epilogue(MatmulShape{.epilogue = MatmulEpilogue::relu, .bias = true}),
            CUBLASLT_EPILOGUE_RELU_BIAS);
  auto gemm = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7, .bias_grad = MatmulBiasGrad::rhs});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_EQ(gemm->epilogue, CUBLASLT_EPILOGUE_BGRADA);
  EXPECT_EQ(gemm->m, 5u); // the gradient's length: D's rows, mstep's n
  EXPECT_EQ(MatmulShape({.m = 3, .n = 5, .k = 7, .bias_grad = MatmulBiasGrad::lhs}).to_string(),
            "[3, 7] x [7, 5] f32, bias grad of A");
}

TEST(CublasLtPlan, ABatchSetsEachLayoutsStrideOperandsSwapped) {
  auto gemm = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7},
                                 {.count = 4, .a_stride = 21, .b_stride = 0, .c_stride = 15});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_EQ(gemm->batch_count, 4);
  EXPECT_EQ(gemm->a.batch_stride, 0);  // cuBLASLt's A is mstep's B (broadcast)
  EXPECT_EQ(gemm->b.batch_stride, 21); // its B mstep's A
  EXPECT_EQ(gemm->c.batch_stride, 15);
  // A batch of 1 has no strides.
  auto one = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7}, {.count = 1, .a_stride = 21});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->batch_count, 1);
  EXPECT_EQ(one->b.batch_stride, 0);
}

TEST(CublasLtPlan, BadBatchesAndBiasGradientsAreErrorsNamingTheMatmul) {
  // Results that overlap, a negative stride, an empty batch.
  for (MatmulBatch batch :
       {MatmulBatch{.count = 2, .c_stride = 14},
        MatmulBatch{.count = 2, .a_stride = -1, .c_stride = 15}, MatmulBatch{.count = 0}}) {
    auto gemm = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7}, batch);
    EXPECT_EQ(gemm.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(gemm.status().message(),
                HasSubstr("cublasLt matmul [3, 7] x [7, 5] f32: a batch of "));
  }
  // cuBLASLt's bias pointer is either the bias or the gradient.
  auto both =
      plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7, .bias = true, .bias_grad = MatmulBiasGrad::rhs});
  EXPECT_THAT(both.status().message(),
              HasSubstr("f32, bias, bias grad of B: a bias gradient goes with no bias, activation "
                        "or batch"));
  auto batched = plan_cublaslt_gemm({.m = 3, .n = 5, .k = 7, .bias_grad = MatmulBiasGrad::lhs},
                                    {.count = 2, .c_stride = 15});
  EXPECT_THAT(batched.status().message(), HasSubstr("(batch of 2)"));
}

TEST(CublasLtPlan, BadShapesAndDtypesAreErrorsNamingTheMatmul) {
  auto empty = plan_cublaslt_gemm({.m = 0, .n = 4, .k = 4});
  EXPECT_THAT(empty.status().message(),
              HasSubstr("cublasLt matmul [0, 4] x [4, 4] f32: every size must be at least 1"));
  auto i32 = plan_cublaslt_gemm({.m = 2, .n = 2, .k = 2, .transpose_b = true, .dtype = DType::i32,
                                 .epilogue = MatmulEpilogue::relu, .bias = true});
  EXPECT_THAT(i32.status().message(),
              HasSubstr("[2, 2] x [2, 2] i32, B transposed, bias + relu: only f32, bf16 and f16"));
}

} // namespace
} // namespace mstep::cuda
