// The cuda compile half's kernels on a real GPU (ctest label `gpu`; run by
// scripts/gpu_check.sh's bundle). The kernels were generated at build time
// (cuda_codegen_cases.cpp: steps compiled through MLIR to PTX and cubins,
// with inputs and expected outputs from double-precision loops); this
// binary has the runtime half only, no MLIR. Each case runs twice: from
// the cubin for the device's architecture (when there is one), then from
// the PTX through the driver's JIT. Launches follow the case's launch list
// on one CudaContext stream; every element of every output must be within
// the case's error bound of the expected value (the bounds and why are in
// cuda_codegen_cases.cpp; computed buffers start as NaN so an element no
// thread wrote fails). Prints "PASS <case> (<source>)" or "FAIL ..." per
// run, and for the case marked `bandwidth` the kernel's achieved bandwidth
// against cuMemcpyDtoD of the same bytes (reported, not asserted).
//   cuda_codegen_gpu_test [--case_dir=DIR]
// Exit code: 0 every case passed, 77 no usable GPU, 1 a failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaEvent.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaMemory.h"
#include "lib/backends/cuda/CudaStaging.h"
#include "test/cuda/CodegenCase.h"

namespace mstep::cuda::testing {
namespace {

/// What one case needs on the device: its modules (one per kernel) and
/// a buffer per value.
struct LoadedCase {
  CodegenCase spec;
  std::vector<std::unique_ptr<CudaKernelModule>> modules;
  std::vector<const CudaKernel*> kernels;
  std::vector<CudaDeviceBuffer> buffers;
  CublasLtMatmul* matmul = nullptr; ///< runs the cuBLASLt steps (the runtime's wrapper)
};

/// The cuBLASLt helper on `context` (created on first use): the runtime's
/// CublasLtMatmul over load_cublaslt(); an error when the library is not here.
/// Released by main() before the context: its workspace is device memory
/// (a static destroyed at exit would free it after the context is gone).
std::unique_ptr<CublasLtMatmul>& cublaslt_helper() {
  static std::unique_ptr<CublasLtMatmul> helper;
  return helper;
}

absl::StatusOr<CublasLtMatmul*> cublaslt(const CudaContext& context) {
  std::unique_ptr<CublasLtMatmul>& helper = cublaslt_helper();
  if (helper == nullptr) {
    auto api = load_cublaslt();
    if (!api.ok()) return api.status();
    auto created = CublasLtMatmul::create(context, *api);
    if (!created.ok()) return created.status();
    helper = std::move(*created);
  }
  return helper.get();
}

std::vector<float> read_floats(const std::string& path, int64_t count, std::string& error) {
  std::string bytes;
  if (!read_file_bytes(path, bytes) || bytes.size() != static_cast<size_t>(count) * sizeof(float)) {
    error = "cannot read " + std::to_string(count) + " floats from " + path;
    return {};
  }
  std::vector<float> v(count);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

/// Loads the case in `dir`: from each kernel's cubin for this device's
/// architecture, or (`use_ptx`, or no such cubin) from its PTX.
absl::Status load_case(const CudaContext& context, const std::string& dir, bool use_ptx,
                       LoadedCase& loaded) {
  std::string text, error;
  if (!read_file_bytes(dir + "/case.txt", text))
    return absl::NotFoundError("cannot read " + dir + "/case.txt");
  if (!parse_codegen_case(text, loaded.spec, error))
    return absl::InvalidArgumentError(dir + "/case.txt: " + error);
  std::string arch = context.device().arch();
  for (size_t i = 0; i < loaded.spec.kernels.size(); ++i) {
    const CodegenCaseKernel& k = loaded.spec.kernels[i];
    std::string stem = dir + "/k" + std::to_string(i);
    std::string ptx, cubin;
    if (!read_file_bytes(stem + ".ptx", ptx))
      return absl::NotFoundError("cannot read " + stem + ".ptx");
    bool has_cubin = std::find(k.archs.begin(), k.archs.end(), arch) != k.archs.end();
    if (!use_ptx && has_cubin && !read_file_bytes(stem + "." + arch + ".cubin", cubin))
      return absl::NotFoundError("cannot read " + stem + "." + arch + ".cubin");
    std::vector<std::string> names = {k.name};
    auto module = CudaKernelModule::load(context, cubin, ptx, names);
    if (!module.ok()) return module.status();
    if (!use_ptx && has_cubin && (*module)->source() != CudaKernelModule::Source::kCubin)
      return absl::InternalError(k.name + ": the " + arch +
                                 " cubin did not load: " + (*module)->cubin_failure());
    auto kernel = (*module)->kernel(k.name);
    if (!kernel.ok()) return kernel.status();
    loaded.kernels.push_back(*kernel);
    loaded.modules.push_back(std::move(*module));
  }
  for (const CodegenCaseLaunch& launch : loaded.spec.launches) {
    if (!launch.matmul || loaded.matmul != nullptr) continue;
    auto helper = cublaslt(context);
    if (!helper.ok()) return helper.status();
    loaded.matmul = *helper;
  }
  for (size_t id = 0; id < loaded.spec.elements.size(); ++id) {
    auto buffer = CudaDeviceBuffer::allocate(
        context, loaded.spec.elements[id] * loaded.spec.element_bytes[id]);
    if (!buffer.ok()) return buffer.status();
    loaded.buffers.push_back(std::move(*buffer));
  }
  return absl::OkStatus();
}

/// Queues every launch of the case, in order.
absl::Status launch_all(const CudaContext& context, const LoadedCase& c) {
  for (const CodegenCaseLaunch& launch : c.spec.launches) {
    if (launch.matmul) {
      // `batch` calls of the runtime's wrapper, each operand at its stride.
      const MatmulShape shape{.m = launch.m,
                              .n = launch.n,
                              .k = launch.k,
                              .transpose_a = launch.transpose_a,
                              .transpose_b = launch.transpose_b,
                              .epilogue = static_cast<MatmulEpilogue>(launch.activation),
                              .bias = launch.bias >= 0};
      const CUdeviceptr bias = launch.bias >= 0 ? c.buffers[launch.bias].pointer() : 0;
      for (int64_t i = 0; i < launch.batch; ++i) {
        const CUdeviceptr a = c.buffers[launch.args[0]].pointer() + i * launch.a_stride * 4;
        const CUdeviceptr b = c.buffers[launch.args[1]].pointer() + i * launch.b_stride * 4;
        const CUdeviceptr out = c.buffers[launch.args[2]].pointer() + i * launch.c_stride * 4;
        if (absl::Status s = c.matmul->run(shape, a, b, bias, out); !s.ok()) return s;
      }
      continue;
    }
    const CodegenCaseKernel& k = c.spec.kernels[launch.kernel];
    CudaKernelArgs args;
    for (int value : launch.args) args.add(c.buffers[value].pointer());
    absl::Status launched =
        launch_kernel(context, *c.kernels[launch.kernel], {.grid = k.grid, .block = k.block}, args);
    if (!launched.ok()) return launched;
  }
  return absl::OkStatus();
}

/// Mean milliseconds of `work` over `reps` runs after a warm-up, timed
/// by events on the stream.
absl::StatusOr<double> time_ms(const CudaContext& context, int reps,
                               const std::function<absl::Status()>& work) {
  for (int i = 0; i < 5; ++i)
    if (absl::Status s = work(); !s.ok()) return s;
  auto start = CudaEvent::create(context, /*timing=*/true);
  auto end = CudaEvent::create(context, /*timing=*/true);
  if (!start.ok()) return start.status();
  if (!end.ok()) return end.status();
  if (absl::Status s = start->record(); !s.ok()) return s;
  for (int i = 0; i < reps; ++i)
    if (absl::Status s = work(); !s.ok()) return s;
  if (absl::Status s = end->record(); !s.ok()) return s;
  if (absl::Status s = context.synchronize(); !s.ok()) return s;
  auto ms = CudaEvent::elapsed_ms(*start, *end);
  if (!ms.ok()) return ms.status();
  return *ms / reps;
}

/// The case's launches against cuMemcpyDtoD moving as many bytes (each
/// launch argument read or written once: the kernel's minimum traffic; a
/// copy of n bytes reads n and writes n).
absl::Status report_bandwidth(const CudaContext& context, const LoadedCase& c,
                              const std::string& name) {
  size_t traffic = 0;
  for (const CodegenCaseLaunch& launch : c.spec.launches)
    for (int value : launch.args) traffic += c.buffers[value].size();
  constexpr int kReps = 200;
  auto kernel_ms = time_ms(context, kReps, [&] { return launch_all(context, c); });
  if (!kernel_ms.ok()) return kernel_ms.status();
  size_t half = traffic / 2;
  auto from = CudaDeviceBuffer::allocate(context, half);
  auto to = CudaDeviceBuffer::allocate(context, half);
  if (!from.ok()) return from.status();
  if (!to.ok()) return to.status();
  auto copy_ms = time_ms(context, kReps, [&] {
    return MSTEP_CUDA_CALL(context.api(), cuMemcpyDtoDAsync, to->pointer(), from->pointer(), half,
                           context.stream());
  });
  if (!copy_ms.ok()) return copy_ms.status();
  double kernel_gbs = traffic / (*kernel_ms * 1e-3) / 1e9;
  double copy_gbs = 2.0 * half / (*copy_ms * 1e-3) / 1e9;
  // H100/H200 have 50 MB of L2: a smaller case's figures may be L2's.
  const bool past_l2 = traffic > (size_t{200} << 20);
  std::printf("BANDWIDTH %s: %zu bytes moved; kernel %.2f us = %.1f GB/s; cuMemcpyDtoD of %zu "
              "bytes %.2f us = %.1f GB/s; kernel/D2D = %.0f%% (target 80%%). %s\n",
              name.c_str(), traffic, *kernel_ms * 1e3, kernel_gbs, half, *copy_ms * 1e3, copy_gbs,
              100.0 * kernel_gbs / copy_gbs,
              past_l2 ? "Past L2 (50 MB): HBM." : "Both fit in L2 (50 MB): may be L2-inflated.");
  return absl::OkStatus();
}

/// Runs one case from `source` ("cubin" or "ptx"); prints PASS or FAIL
/// and returns whether it passed.
bool run_case(const CudaContext& context, CudaStaging& staging, const std::string& dir,
              const std::string& name, bool use_ptx) {
  std::string source = use_ptx ? "ptx-jit" : context.device().arch() + " cubin";
  auto failed = [&](const std::string& why) {
    std::printf("FAIL %s (%s): %s\n", name.c_str(), source.c_str(), why.c_str());
    return false;
  };
  LoadedCase c;
  if (absl::Status s = load_case(context, dir, use_ptx, c); !s.ok()) return failed(s.ToString());
  bool has_cubin = false;
  for (const CodegenCaseKernel& k : c.spec.kernels)
    has_cubin |=
        std::find(k.archs.begin(), k.archs.end(), context.device().arch()) != k.archs.end();
  if (!use_ptx && !has_cubin) source = "ptx-jit, no " + context.device().arch() + " cubin";
  // Inputs in (raw bytes of the value's element size); every other buffer
  // all ones bits (a NaN in f32), so an element no thread writes fails.
  for (size_t id = 0; id < c.spec.elements.size(); ++id) {
    bool is_input =
        std::find(c.spec.inputs.begin(), c.spec.inputs.end(), id) != c.spec.inputs.end();
    const size_t size = c.spec.elements[id] * c.spec.element_bytes[id];
    std::string data(size, '\xff');
    const std::string path = dir + "/v" + std::to_string(id) + ".in.f32";
    if (const float* fill = codegen_case_constant(c.spec.fills, static_cast<int>(id))) {
      for (size_t at = 0; at + sizeof(float) <= size; at += sizeof(float))
        std::memcpy(data.data() + at, fill, sizeof(float));
    } else if (is_input && (!read_file_bytes(path, data) || data.size() != size)) {
      return failed("cannot read " + std::to_string(size) + " bytes from " + path);
    }
    if (absl::Status s = staging.copy_in(c.buffers[id].pointer(), std::as_bytes(std::span(data)));
        !s.ok())
      return failed(s.ToString());
  }
  if (absl::Status s = launch_all(context, c); !s.ok()) return failed(s.ToString());
  if (absl::Status s = context.synchronize(); !s.ok()) return failed(s.ToString());
  std::ostringstream problems;
  for (int id : c.spec.outputs) {
    std::string stem = dir + "/v" + std::to_string(id), error;
    int64_t n = c.spec.elements[id];
    std::vector<float> expected, bound;
    if (const float* exact = codegen_case_constant(c.spec.expects, id)) {
      expected.assign(n, *exact);
      bound.assign(n, 0.f);
    } else {
      expected = read_floats(stem + ".expected.f32", n, error);
      bound = read_floats(stem + ".bound.f32", n, error);
    }
    if (!error.empty()) return failed(error);
    std::vector<float> got(n);
    if (absl::Status s =
            staging.copy_out(std::as_writable_bytes(std::span(got)), c.buffers[id].pointer());
        !s.ok())
      return failed(s.ToString());
    int64_t wrong = 0;
    double worst = 0; // the largest error as a fraction of its bound
    for (int64_t i = 0; i < n; ++i) {
      double err = std::fabs(double(got[i]) - expected[i]);
      if (!(err <= bound[i])) { // NaN fails too
        if (wrong++ < 5)
          problems << " v" << id << "[" << i << "] = " << got[i] << ", expected " << expected[i]
                   << " +- " << bound[i] << ";";
      } else {
        worst = std::max(worst, bound[i] > 0 ? err / bound[i] : 0.0);
      }
    }
    if (wrong > 0)
      problems << " v" << id << ": " << wrong << " of " << n << " elements wrong;";
    else
      std::printf("  %s v%d: %lld elements within bound (worst %.3f of it)\n", name.c_str(), id,
                  static_cast<long long>(n), worst);
  }
  if (!problems.str().empty()) return failed(problems.str());
  std::printf("PASS %s (%s): %zu launch(es)\n", name.c_str(), source.c_str(),
              c.spec.launches.size());
  if (c.spec.bandwidth && !use_ptx)
    if (absl::Status s = report_bandwidth(context, c, name); !s.ok())
      std::printf("BANDWIDTH %s: not measured: %s\n", name.c_str(), s.ToString().c_str());
  return true;
}

} // namespace

void release_cublaslt() { cublaslt_helper().reset(); }

} // namespace mstep::cuda::testing

int main(int argc, char** argv) {
  using namespace mstep::cuda;
  std::string case_dir = MSTEP_CODEGEN_CASE_DIR;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--case_dir=", 0) == 0) {
      case_dir = arg.substr(11);
    } else {
      std::fprintf(stderr, "cuda_codegen_gpu_test: unknown argument %s (use --case_dir=DIR)\n",
                   argv[i]);
      return 2;
    }
  }
  std::string list;
  if (!testing::read_file_bytes(case_dir + "/cases.txt", list)) {
    std::fprintf(stderr, "cuda_codegen_gpu_test: no %s/cases.txt (build cuda_codegen_case_files)\n",
                 case_dir.c_str());
    return 1;
  }
  auto driver = load_cuda_driver();
  if (!driver.ok()) {
    std::printf("SKIP: %s\n", driver.status().ToString().c_str());
    return 77;
  }
  auto context = CudaContext::create(*driver);
  if (!context.ok()) {
    std::printf("FAIL: %s\n", context.status().ToString().c_str());
    return 1;
  }
  const CudaDeviceInfo& device = (*context)->device();
  std::printf("device: %s (%s)\n", device.name.c_str(), device.arch().c_str());
  auto staging = CudaStaging::create(**context, 1 << 22);
  if (!staging.ok()) {
    std::printf("FAIL: %s\n", staging.status().ToString().c_str());
    return 1;
  }
  int failures = 0, runs = 0;
  std::istringstream names(list);
  for (std::string name; std::getline(names, name);) {
    if (name.empty()) continue;
    for (bool use_ptx : {false, true}) {
      ++runs;
      if (!testing::run_case(**context, **staging, case_dir + "/" + name, name, use_ptx))
        ++failures;
    }
  }
  std::printf("cuda_codegen_gpu_test: %d of %d runs passed\n", runs - failures, runs);
  testing::release_cublaslt();
  return failures == 0 && runs > 0 ? 0 : 1;
}
