// A custom op's kernel for the cuda backend: CUDA C++ source that mstep
// compiles with NVRTC when a step that calls the op compiles for cuda
// (issue 22 §3). Registered like any kernel, under the backend name "cuda":
//
//   def.kernels.push_back({"cuda", cuda_source_kernel({
//       .source = kSource,                       // CUDA C++ text
//       .entry = "scale",                        // or "scale<float>": a name expression
//       .launch = [](const CudaKernelCall& c) -> absl::StatusOr<CudaLaunchShape> {
//         const unsigned n = c.input_types[0].shape.numel();
//         return CudaLaunchShape{.grid = {(n + 255) / 256, 1, 1}, .block = {256, 1, 1}};
//       },
//       .args = {CudaKernelArg::input(0), CudaKernelArg::output(0),
//                CudaKernelArg::attr("alpha", CudaScalarType::f32),
//                CudaKernelArg::scalar("n", CudaScalarType::i64, numel_of_input(0))}})});
//
// At compile time the cuda compile half (lib/backends/cuda/CudaCustomLowering.h)
// compiles the source with NVRTC to PTX for compute_80 (kept for the JIT on
// newer GPUs), assembles it with the toolkit's ptxas -v for sm_80 and sm_90
// (cubins and the register/shared-memory report, as for mstep's own
// kernels), and adds one launch to the step's plan: the grid and block the
// launch rule gives for the call's types and attributes, and the arguments
// in `args` order (a device pointer per input and output, then scalars as
// the kernel's parameters declare them: int32_t, int64_t, float, double).
// The plan is what the disk cache and exported graphs store, and what a
// CUDA graph captures. The kernel must write every element of its outputs
// (they are not zeroed) and must not write its inputs. A changed source
// needs a new op version for caches to notice, as for any kernel.
//
// This header is the runtime's (no CUDA header, no NVRTC): a program that
// registers a cuda kernel runs on machines without the toolkit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// What a cuda kernel's launch rule, entry rule and computed scalars are
/// given: the call's tensor types and attributes. Valid for the call only.
struct CudaKernelCall {
  absl::Span<const TensorType> input_types;
  absl::Span<const TensorType> output_types;
  const CustomAttrView& attrs;
};

/// Grid and block sizes (x, y, z) and the dynamic shared memory of a launch.
struct CudaLaunchShape {
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  unsigned shared_bytes = 0;
};

/// The C++ type of a scalar kernel parameter: int32_t, int64_t, float, double.
enum class CudaScalarType : uint8_t { i32, i64, f32, f64 };

/// A computed scalar's value (converted to its declared CudaScalarType).
using CudaScalarValue = std::variant<int64_t, double>;

/// One parameter of the kernel, in the order the kernel declares them.
struct CudaKernelArg {
  enum class Kind : uint8_t { input, output, attr, scalar };
  Kind kind = Kind::input;
  /// input / output: which one (a device pointer to its dense row-major data).
  int index = 0;
  /// attr: the attribute's name (an int, float or bool attribute; a bool
  /// passes 0 or 1). scalar: a name for messages.
  std::string name;
  CudaScalarType type = CudaScalarType::i64;
  /// scalar: its value for a call (an element count, a mode from a string
  /// attribute, ...). Must be a pure function.
  std::function<absl::StatusOr<CudaScalarValue>(const CudaKernelCall&)> value;

  static CudaKernelArg input(int i) { return {Kind::input, i, "", CudaScalarType::i64, nullptr}; }
  static CudaKernelArg output(int i) { return {Kind::output, i, "", CudaScalarType::i64, nullptr}; }
  static CudaKernelArg attr(std::string name, CudaScalarType type) {
    return {Kind::attr, 0, std::move(name), type, nullptr};
  }
  static CudaKernelArg
  scalar(std::string name, CudaScalarType type,
         std::function<absl::StatusOr<CudaScalarValue>(const CudaKernelCall&)> value) {
    return {Kind::scalar, 0, std::move(name), type, std::move(value)};
  }
};

/// Everything the cuda compile half needs to build and launch the kernel.
struct CudaSourceKernelDef {
  /// CUDA C++ source (NVRTC: no host code, no standard library headers;
  /// the toolkit's include folder is on the path for cuda_fp16.h and the like).
  std::string source;
  /// The __global__ function: a name expression, so a C++ function or a
  /// template instance ("giou_forward<float>") works as well as extern "C".
  std::string entry;
  /// Optional: the entry for one call (a template instance per dtype, say);
  /// unset, `entry` is used.
  std::function<absl::StatusOr<std::string>(const CudaKernelCall&)> entry_for;
  /// The launch's grid, block and dynamic shared memory for a call.
  std::function<absl::StatusOr<CudaLaunchShape>(const CudaKernelCall&)> launch;
  /// The kernel's parameters in declaration order.
  std::vector<CudaKernelArg> args;
  /// More NVRTC options ("-DTILE=128", "--use_fast_math").
  std::vector<std::string> options;
};

/// The kernel kind of the cuda backend: CUDA C++ source compiled with NVRTC.
class CudaSourceKernel final : public CustomKernel {
public:
  static constexpr absl::string_view kKind = "cuda_source";
  explicit CudaSourceKernel(CudaSourceKernelDef def) : def_(std::move(def)) {}
  absl::string_view kind() const override { return kKind; }
  const CudaSourceKernelDef& def() const { return def_; }

private:
  CudaSourceKernelDef def_;
};

/// A cuda kernel for CustomOpDef::kernels (under "cuda") or add_kernel.
inline std::shared_ptr<const CustomKernel> cuda_source_kernel(CudaSourceKernelDef def) {
  return std::make_shared<CudaSourceKernel>(std::move(def));
}

} // namespace mstep
