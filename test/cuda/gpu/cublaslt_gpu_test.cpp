// cuBLASLt on a real GPU (in cuda_driver_gpu_test's binary, label gpu):
// matmuls of several shapes (sizes not multiples of 16, transposes), f32
// bf16 and f16, with and without bias / ReLU / GELU epilogues, queued through
// CudaBackend::enqueue and read back with copy_out, against a host
// reference in double from the same (bf16-rounded) inputs. The tolerance
// follows the dtype, relative to S = sum_l |a_il b_lj| + |bias_j| (which
// bounds |C_ij| before the epilogue): f32 accumulates in f32, k * 2^-23 * S;
// bf16 (f32 accumulation, bf16 output) 2^-8 * S (the output's rounding is
// 2^-9 relative); f16 (f32 accumulation, f16 output) (2^-10 + k * 2^-23) * S;
// GELU adds 2^-10 * S for the device's tanh. The heuristic
// is asked once per shape. Bias gradients (BGRADA / BGRADB) and strided
// batches (a stride of 0 for a broadcast operand) likewise; a bias
// gradient the heuristic has no algorithm for is printed ("NO ALGORITHM")
// and recorded in the XML, not failed (plans fall back to a column sum). 4096^3 bf16
// TFLOP/s is printed, not asserted.
//
// libcublasLt.so.13 is found by the loader's path: run.sh puts the GPU
// machine's on LD_LIBRARY_PATH (the bundle does not carry it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CublasLt.h"
#include "mstep/core/HalfTypes.h"
#include "test/cuda/gpu/GpuBackendTest.h"

namespace mstep::cuda {
namespace {

/// `f` in the 16-bit `dtype`, rounded to nearest even.
uint16_t to_half(float f, DType dtype) {
  uint16_t bits;
  if (dtype == DType::f16) {
    const Float16 h(f);
    std::memcpy(&bits, &h, 2);
  } else {
    const BFloat16 h(f);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}
float from_half(uint16_t bits, DType dtype) {
  if (dtype == DType::f16) {
    Float16 h;
    std::memcpy(&h, &bits, 2);
    return float(h);
  }
  BFloat16 h;
  std::memcpy(&h, &bits, 2);
  return float(h);
}
/// The accumulation's tolerance relative to S for `dtype` (header comment).
double relative_tolerance(DType dtype, int64_t k) {
  if (dtype == DType::bf16) return std::ldexp(1.0, -8);
  if (dtype == DType::f16) return std::ldexp(1.0, -10) + k * std::ldexp(1.0, -23);
  return k * std::ldexp(1.0, -23);
}
/// One ulp of a 16-bit result relative to its magnitude (0 for f32):
/// with an epilogue cuBLASLt may round before the bias or activation too.
double result_ulp(DType dtype) {
  return dtype == DType::bf16 ? std::ldexp(1.0, -7) : dtype == DType::f16 ? std::ldexp(1.0, -10) : 0;
}
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

class CublasLtGpuTest : public testing::GpuBackendTest {
protected:
  void SetUp() override {
    GpuBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The GPU machine has cuBLASLt: not finding it is a failure, not a skip.
    auto api = load_cublaslt();
    ASSERT_TRUE(api.ok()) << api.status();
    auto matmul = CublasLtMatmul::create(backend_->context(), *api);
    ASSERT_TRUE(matmul.ok()) << matmul.status();
    matmul_ = std::move(*matmul);
    static bool printed = false;
    if (!printed) std::printf("cuBLASLt version %zu\n", (*api)->version);
    printed = true;
  }
  void TearDown() override {
    matmul_.reset();
    backend_.reset();
  }

  /// A device buffer holding `values` in `dtype` (f32, bf16 or f16).
  BufferPtr upload(const std::vector<float>& values, DType dtype) {
    TensorType type{Shape{static_cast<int64_t>(values.size())}, dtype};
    BufferPtr buffer = *backend_->allocate(type);
    if (dtype == DType::f32) {
      EXPECT_TRUE(backend_->copy_in(*buffer, values.data(), type.bytes()).ok());
    } else {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = to_half(values[i], dtype);
      EXPECT_TRUE(backend_->copy_in(*buffer, bits.data(), type.bytes()).ok());
    }
    return buffer;
  }
  std::vector<float> download(const BufferPtr& buffer) {
    size_t n = buffer->type().numel();
    std::vector<float> out(n);
    if (buffer->type().dtype == DType::f32) {
      absl::Status s = backend_->copy_out(*buffer, out.data(), n * 4);
      EXPECT_TRUE(s.ok()) << s;
    } else {
      std::vector<uint16_t> bits(n);
      absl::Status s = backend_->copy_out(*buffer, bits.data(), n * 2);
      EXPECT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < n; ++i) out[i] = from_half(bits[i], buffer->type().dtype);
    }
    return out;
  }
  /// Queues the matmul through the backend (the protocol tracks C).
  absl::Status run(const MatmulShape& shape, const BufferPtr& a, const BufferPtr& b,
                   const BufferPtr& bias, const BufferPtr& c) {
    std::vector<const Buffer*> reads = {a.get(), b.get()};
    if (bias) reads.push_back(bias.get());
    const Buffer* writes[] = {c.get()};
    return backend_->enqueue(
        "cublasLt matmul " + shape.to_string(),
        [&] {
          return matmul_->run(shape, CudaBackend::device_pointer(*a), CudaBackend::device_pointer(*b),
                              bias ? CudaBackend::device_pointer(*bias) : 0,
                              CudaBackend::device_pointer(*c));
        },
        reads, writes);
  }

  /// The 16-bit shapes: plain, bias, transposed B with bias + ReLU,
  /// transposed A with bias + GELU over k = 1000.
  void check_16_bit(DType dtype) {
    check({.m = 128, .n = 96, .k = 80, .dtype = dtype});
    check({.m = 33, .n = 17, .k = 71, .dtype = dtype, .bias = true});
    check({.m = 33, .n = 24, .k = 71, .transpose_b = true, .dtype = dtype,
           .epilogue = MatmulEpilogue::relu, .bias = true});
    check({.m = 200, .n = 72, .k = 1000, .transpose_a = true, .dtype = dtype,
           .epilogue = MatmulEpilogue::gelu, .bias = true});
  }

  /// Runs `shape` on inputs of multiples of 1/8 in [-1, 1] (exact in
  /// bf16) and checks every element against the host.
  void check(const MatmulShape& shape) {
    SCOPED_TRACE(shape.to_string());
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    auto value = [](int64_t i, int salt) {
      return static_cast<float>((i * 37 + salt * 11) % 17 - 8) / 8.0f;
    };
    std::vector<float> a(m * k), b(k * n), bias(n);
    for (int64_t i = 0; i < m * k; ++i) a[i] = value(i, 1);
    for (int64_t i = 0; i < k * n; ++i) b[i] = value(i, 2);
    for (int64_t j = 0; j < n; ++j) bias[j] = value(j, 3) * 0.5f;
    BufferPtr da = upload(a, shape.dtype), db = upload(b, shape.dtype);
    BufferPtr dbias = shape.bias ? upload(bias, shape.dtype) : nullptr;
    BufferPtr dc = *backend_->allocate(TensorType{Shape{m, n}, shape.dtype});
    absl::Status ran = run(shape, da, db, dbias, dc);
    ASSERT_TRUE(ran.ok()) << ran;
    std::vector<float> c = download(dc);
    auto A = [&](int64_t i, int64_t l) { return shape.transpose_a ? a[l * m + i] : a[i * k + l]; };
    auto B = [&](int64_t l, int64_t j) { return shape.transpose_b ? b[j * k + l] : b[l * n + j]; };
    double rel = relative_tolerance(shape.dtype, k);
    if (shape.epilogue == MatmulEpilogue::gelu) rel += std::ldexp(1.0, -10);
    int wrong = 0;
    double worst = 0; // the largest error / tolerance
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, scale = 0;
        for (int64_t l = 0; l < k; ++l) {
          sum += double(A(i, l)) * B(l, j);
          scale += std::fabs(double(A(i, l)) * B(l, j));
        }
        if (shape.bias) {
          sum += bias[j];
          scale += std::fabs(bias[j]);
        }
        double expected = shape.epilogue == MatmulEpilogue::relu   ? std::max(sum, 0.0)
                          : shape.epilogue == MatmulEpilogue::gelu ? gelu_tanh(sum)
                                                                   : sum;
        // A 16-bit result is rounded to its dtype, and with an epilogue
        // cuBLASLt may round before the bias or activation as well: up to
        // one ulp of the result (bf16 2^-7, f16 2^-10 of its magnitude) on
        // top of the accumulation.
        double tolerance = rel * scale + 1e-6 + result_ulp(shape.dtype) * std::fabs(expected);
        double error = std::fabs(c[i * n + j] - expected);
        worst = std::max(worst, error / tolerance);
        if (!(error <= tolerance) && ++wrong <= 5)
          ADD_FAILURE() << "C[" << i << ", " << j << "] = " << c[i * n + j] << ", expected "
                        << expected << " within " << tolerance;
      }
    EXPECT_EQ(wrong, 0);
    std::printf("  matmul %s: max error / tolerance %.3f\n", shape.to_string().c_str(), worst);
  }

  /// Runs `shape` with a bias gradient (shape.bias_grad) or a strided
  /// `batch` on inputs as check()'s, and checks the gradient (op(A) or
  /// op(B) summed over k) and every matrix of C against the host, with
  /// check()'s tolerances.
  void check_extra(const MatmulShape& shape, const MatmulBatch& batch = {}) {
    SCOPED_TRACE(shape.to_string() + " x " + std::to_string(batch.count));
    const int64_t m = shape.m, n = shape.n, k = shape.k, count = batch.count;
    auto value = [](int64_t i, int salt) {
      return static_cast<float>((i * 37 + salt * 11) % 17 - 8) / 8.0f;
    };
    std::vector<float> a(batch.a_stride * (count - 1) + m * k),
        b(batch.b_stride * (count - 1) + k * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = value(i, 1);
    for (size_t i = 0; i < b.size(); ++i) b[i] = value(i, 2);
    const bool lhs = shape.bias_grad == MatmulBiasGrad::lhs;
    const bool has_grad = shape.bias_grad != MatmulBiasGrad::none;
    if (has_grad) {
      // Without an algorithm for the epilogue, a plan runs the call without
      // it and its fallback's column sum (CudaExecutable): reported, not a
      // failure (the steps' MSTEP_CUDA_NO_EPILOGUES=1 runs check that form).
      absl::StatusOr<bool> found = matmul_->has_algorithm(shape, batch);
      ASSERT_TRUE(found.ok()) << found.status();
      if (!*found) {
        std::printf("  matmul %s: NO ALGORITHM on this device (plans fall back)\n",
                    shape.to_string().c_str());
        RecordProperty("no_algorithm_" + std::to_string(++no_algorithm_), shape.to_string());
        return;
      }
    }
    BufferPtr da = upload(a, shape.dtype), db = upload(b, shape.dtype);
    BufferPtr dc =
        *backend_->allocate(TensorType{Shape{batch.c_stride * (count - 1) + m * n}, shape.dtype});
    BufferPtr dg =
        has_grad ? *backend_->allocate(TensorType{Shape{lhs ? m : n}, shape.dtype}) : nullptr;
    std::vector<const Buffer*> reads = {da.get(), db.get()}, writes = {dc.get()};
    if (dg) writes.push_back(dg.get());
    absl::Status ran = backend_->enqueue(
        "cublasLt matmul " + shape.to_string(),
        [&] {
          return matmul_->run(
              shape, CudaBackend::device_pointer(*da), CudaBackend::device_pointer(*db),
              dg ? CudaBackend::device_pointer(*dg) : 0, CudaBackend::device_pointer(*dc), batch);
        },
        reads, writes);
    ASSERT_TRUE(ran.ok()) << ran;
    std::vector<float> c = download(dc);
    auto A = [&](int64_t t, int64_t i, int64_t l) {
      return a[t * batch.a_stride + (shape.transpose_a ? l * m + i : i * k + l)];
    };
    auto B = [&](int64_t t, int64_t l, int64_t j) {
      return b[t * batch.b_stride + (shape.transpose_b ? j * k + l : l * n + j)];
    };
    const double rel = relative_tolerance(shape.dtype, k);
    int wrong = 0;
    auto expect_near = [&](const char* what, int64_t at, double got, double expected,
                           double scale) {
      double tolerance = rel * scale + 1e-6 + result_ulp(shape.dtype) * std::fabs(expected);
      if (!(std::fabs(got - expected) <= tolerance) && ++wrong <= 5)
        ADD_FAILURE() << what << "[" << at << "] = " << got << ", expected " << expected
                      << " within " << tolerance;
    };
    for (int64_t t = 0; t < count; ++t)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0, scale = 0;
          for (int64_t l = 0; l < k; ++l) {
            sum += double(A(t, i, l)) * B(t, l, j);
            scale += std::fabs(double(A(t, i, l)) * B(t, l, j));
          }
          expect_near("C", t * batch.c_stride + i * n + j, c[t * batch.c_stride + i * n + j], sum,
                      scale);
        }
    if (dg) {
      std::vector<float> g = download(dg);
      for (int64_t x = 0; x < (lhs ? m : n); ++x) {
        double sum = 0, scale = 0;
        for (int64_t l = 0; l < k; ++l) {
          const double v = lhs ? A(0, x, l) : B(0, l, x);
          sum += v;
          scale += std::fabs(v);
        }
        expect_near("bias grad", x, g[x], sum, scale);
      }
    }
    EXPECT_EQ(wrong, 0);
  }

  std::unique_ptr<CublasLtMatmul> matmul_;
  int no_algorithm_ = 0;  // shapes the heuristic had no algorithm for
};

TEST_F(CublasLtGpuTest, BiasGradientsMatchTheHost) {
  // A linear's weight gradient x^T dz with db = sum(dz, 0) (dz the rhs),
  // and its transposed form dz^T x (dz the lhs, read transposed).
  check_extra({.m = 96, .n = 80, .k = 64, .transpose_a = true, .bias_grad = MatmulBiasGrad::rhs});
  check_extra({.m = 80, .n = 96, .k = 64, .transpose_a = true, .bias_grad = MatmulBiasGrad::lhs});
  check_extra({.m = 37,
               .n = 53,
               .k = 200,
               .transpose_a = true,
               .dtype = DType::bf16,
               .bias_grad = MatmulBiasGrad::lhs});
  check_extra({.m = 64,
               .n = 48,
               .k = 1024,
               .transpose_a = true,
               .dtype = DType::bf16,
               .bias_grad = MatmulBiasGrad::rhs});
}

TEST_F(CublasLtGpuTest, AStridedBatchIsOneCallAndABroadcastOperandAStrideOfZero) {
  check_extra({.m = 8, .n = 32, .k = 16},
              {.count = 4, .a_stride = 128, .b_stride = 512, .c_stride = 256});
  check_extra({.m = 8, .n = 32, .k = 16},
              {.count = 4, .a_stride = 128, .b_stride = 0, .c_stride = 256});
  check_extra({.m = 64, .n = 16, .k = 64, .transpose_b = true, .dtype = DType::bf16},
              {.count = 3, .a_stride = 0, .b_stride = 1024, .c_stride = 1024});
}

TEST_F(CublasLtGpuTest, F32MatmulsMatchTheHost) {
  check({.m = 64, .n = 48, .k = 32});
  check({.m = 37, .n = 53, .k = 29});
  check({.m = 37, .n = 53, .k = 29, .transpose_a = true});
  check({.m = 19, .n = 130, .k = 67, .transpose_b = true, .bias = true});
  check({.m = 128, .n = 40, .k = 256, .transpose_a = true, .transpose_b = true,
         .epilogue = MatmulEpilogue::relu, .bias = true});
  check({.m = 33, .n = 65, .k = 17, .epilogue = MatmulEpilogue::gelu});
}

TEST_F(CublasLtGpuTest, Bf16MatmulsMatchTheHost) {
  check_16_bit(DType::bf16);
  check({.m = 256, .n = 512, .k = 1024, .dtype = DType::bf16, .epilogue = MatmulEpilogue::gelu});
}

TEST_F(CublasLtGpuTest, F16MatmulsMatchTheHost) {
  // As bf16 (CUDA_R_16F, f32 compute); results stay under f16's 65504.
  check_16_bit(DType::f16);
}

TEST_F(CublasLtGpuTest, AnF16MatmulWithAnF32ResultKeepsSumsPastF16sRange) {
  // f16 A and B, f32 C (an f16 convolution's product before its bias or
  // col2im, CudaConvLowering.h): multiples of 32 in [-256, 256] (exact in
  // f16), so every sum is an integer multiple of 1024 under 2^24, exact in
  // f32 in any order, and many pass f16's 65504: C must be exact.
  for (bool transpose_a : {false, true}) {
    const MatmulShape shape{.m = 24, .n = 40, .k = 64, .transpose_a = transpose_a,
                            .dtype = DType::f16, .f32_result = true};
    SCOPED_TRACE(shape.to_string());
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    auto value = [](int64_t i, int salt) {
      return static_cast<float>(((i * 37 + salt * 11) % 17 - 8) * 32);
    };
    std::vector<float> a(m * k), b(k * n);
    for (int64_t i = 0; i < m * k; ++i) a[i] = value(i, 1);
    for (int64_t i = 0; i < k * n; ++i) b[i] = value(i, 2);
    BufferPtr da = upload(a, DType::f16), db = upload(b, DType::f16);
    BufferPtr dc = *backend_->allocate(TensorType{Shape{m, n}, DType::f32});
    absl::Status ran = run(shape, da, db, nullptr, dc);
    ASSERT_TRUE(ran.ok()) << ran;
    std::vector<float> c = download(dc);
    int wrong = 0, past_range = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += double(transpose_a ? a[l * m + i] : a[i * k + l]) * b[l * n + j];
        past_range += std::fabs(sum) > 65504;
        if (c[i * n + j] != sum && wrong++ < 5)
          ADD_FAILURE() << "[" << i << ", " << j << "]: " << c[i * n + j] << ", want " << sum;
      }
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(past_range, 0);
  }
}

TEST_F(CublasLtGpuTest, TheHeuristicIsAskedOncePerShape) {
  MatmulShape shape{.m = 64, .n = 64, .k = 64, .dtype = DType::bf16};
  check(shape);
  check(shape);
  EXPECT_EQ(matmul_->heuristic_queries(), 1u);
  check({.m = 64, .n = 64, .k = 64, .dtype = DType::bf16, .epilogue = MatmulEpilogue::relu});
  EXPECT_EQ(matmul_->heuristic_queries(), 2u);
  EXPECT_EQ(matmul_->cached_plans(), 2u);
}

TEST_F(CublasLtGpuTest, PrintsBf16Throughput4096Cubed) {
  const int64_t n = 4096;
  MatmulShape shape{.m = n, .n = n, .k = n, .dtype = DType::bf16};
  std::vector<float> ones(n * n, 0.125f);
  BufferPtr a = upload(ones, DType::bf16), b = upload(ones, DType::bf16);
  BufferPtr c = *backend_->allocate(TensorType{Shape{n, n}, DType::bf16});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(run(shape, a, b, nullptr, c).ok());
  ASSERT_TRUE(backend_->synchronize().ok());
  auto start = CudaEvent::create(backend_->context(), true);
  auto stop = CudaEvent::create(backend_->context(), true);
  ASSERT_TRUE(start.ok() && stop.ok());
  constexpr int kRuns = 20;
  ASSERT_TRUE(start->record().ok());
  for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(run(shape, a, b, nullptr, c).ok());
  ASSERT_TRUE(stop->record().ok());
  ASSERT_TRUE(backend_->synchronize().ok());
  double seconds = *CudaEvent::elapsed_ms(*start, *stop) / 1e3 / kRuns;
  std::vector<float> out = download(c);
  EXPECT_EQ(out[n * n - 1], 0.125f * 0.125f * n); // 64, exact in bf16
  std::printf("cuBLASLt bf16 4096^3 (f32 accumulate): %.3f ms, %.1f TFLOP/s on %s\n",
              seconds * 1e3, 2.0 * n * n * n / seconds / 1e12,
              backend_->context().device().name.c_str());
}

} // namespace
} // namespace mstep::cuda
