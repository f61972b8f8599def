// The GIoU ops' CUDA kernels (examples/custom_ops/giou_loss/giou_kernels.cu)
// run on the host through CudaHostShim.h, with the grid and block their
// registered launch rules give, against the ops' ref kernels: the same
// per-box arithmetic (f32 and f64; overlapping, disjoint, touching and
// identical boxes, so every branch and tie share is taken) and the
// reductions. Host compilers may contract a * b + c differently (the
// ref kernels are built with -march=native), so values agree within a few
// units in the last place, not bitwise. The GPU runs the same source
// (scripts/gpu_check.sh's giou step).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "examples/custom_ops/giou_loss/GiouOps.h"
#include "mstep/runtime/CudaCustomKernel.h"
// The kernels, compiled for the host: the shim's macros first.
// clang-format off
#include "test/cuda/CudaHostShim.h"
#include "examples/custom_ops/giou_loss/giou_kernels.cu"
// clang-format on

namespace mstep::cuda {
namespace {

/// `n` box pairs: random, then a few special cases at the front.
template <typename T> void make_boxes(int64_t n, std::vector<T>& pred, std::vector<T>& target) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> corner(0, 2), size(0.1, 1.5);
  for (std::vector<T>* boxes : {&pred, &target})
    for (int64_t i = 0; i < n; ++i) {
      const double x = corner(rng), y = corner(rng);
      boxes->insert(boxes->end(), {T(x), T(y), T(x + size(rng)), T(y + size(rng))});
    }
  const std::vector<std::vector<T>> special = {
      {0, 0, 1, 1, 0, 0, 1, 1},     // identical: every coordinate ties
      {0, 0, 1, 1, 2, 2, 3, 3},     // disjoint
      {0, 0, 1, 1, 1, 0, 2, 1},     // touching edges: no overlap
      {0, 0, 2, 2, 0.5, 0.5, 1, 1}, // nested
      {0, 0, 1, 1, 0, 0.5, 1, 1.5}, // x coordinates tie, y overlap
  };
  for (size_t s = 0; s < special.size() && static_cast<int64_t>(s) < n; ++s)
    for (int c = 0; c < 4; ++c) {
      pred[4 * s + c] = special[s][c];
      target[4 * s + c] = special[s][4 + c];
    }
}

struct Run {
  const CustomOp* op;
  AttrList attrs;
  std::vector<TensorType> input_types, output_types;
  CudaLaunchShape shape;
};

/// The op's types, attributes and its cuda kernel's launch for a call.
Run prepare(const std::string& name, std::vector<TensorType> inputs, const std::string& reduction) {
  auto op = CustomOpRegistry::global().find(name);
  EXPECT_TRUE(op.ok()) << op.status();
  Run run{op->get(), {}, std::move(inputs), {}, {}};
  auto value = encode_custom_attr(run.op->schema.attrs[0], CustomAttrValue(reduction));
  EXPECT_TRUE(value.ok());
  run.attrs.push_back({AttrName::custom_attr, *value});
  const CustomAttrView view(run.op->schema.attrs, run.attrs);
  run.output_types = *run.op->shape_rule(run.input_types, view);
  const auto* cuda = custom_kernel_as<CudaSourceKernel>(run.op->kernel("cuda"));
  EXPECT_NE(cuda, nullptr);
  run.shape = *cuda->def().launch(CudaKernelCall{run.input_types, run.output_types, view});
  return run;
}

/// The op's ref kernel on `inputs`, its outputs sized by the shape rule.
template <typename T>
std::vector<std::vector<T>> run_ref(const Run& run, std::vector<const void*> inputs) {
  std::vector<std::vector<T>> outputs;
  std::vector<void*> pointers;
  for (const TensorType& type : run.output_types) outputs.emplace_back(type.numel());
  for (auto& out : outputs) pointers.push_back(out.data());
  const CustomAttrView view(run.op->schema.attrs, run.attrs);
  const auto* ref = custom_kernel_as<HostCustomKernel>(run.op->kernel("ref"));
  EXPECT_TRUE(
      (*ref)(HostKernelCall{inputs, run.input_types, pointers, run.output_types, view}).ok());
  return outputs;
}

dim3 dims(const std::array<unsigned, 3>& d) { return {d[0], d[1], d[2]}; }

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<T>& want, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::abs(double(want[i]))))
        << what << " element " << i;
}

template <typename T> void check_kernels(double tolerance) {
  ASSERT_TRUE(examples::register_giou_ops().ok());
  constexpr int64_t n = 300; // two blocks, the second partial
  const DType dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
  const TensorType boxes{Shape({n, 4}), dtype};
  std::vector<T> pred, target;
  make_boxes(n, pred, target);
  for (const auto& [reduction, mode] :
       {std::pair{"none", 0}, std::pair{"mean", 1}, std::pair{"sum", 2}}) {
    SCOPED_TRACE(reduction);
    Run forward = prepare("giou_loss", {boxes, boxes}, reduction);
    std::vector<T> loss(forward.output_types[0].numel(), T(NAN));
    testing::emulate_launch(dims(forward.shape.grid), dims(forward.shape.block), [&] {
      giou_forward<T>(pred.data(), target.data(), loss.data(), n, mode);
    });
    const auto want = run_ref<T>(forward, {pred.data(), target.data()});
    expect_near(loss, want[0], tolerance, "loss");

    // The backward, with a gradient of the loss of its shape.
    const TensorType grad_type = forward.output_types[0];
    std::vector<T> grad(grad_type.numel());
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = T(0.5) + T(i % 7) / 8;
    Run backward = prepare("giou_loss_backward", {boxes, boxes, grad_type}, reduction);
    std::vector<T> grad_pred(4 * n, T(NAN)), grad_target(4 * n, T(NAN));
    testing::emulate_launch(dims(backward.shape.grid), dims(backward.shape.block), [&] {
      giou_backward<T>(pred.data(), target.data(), grad.data(), grad_pred.data(),
                       grad_target.data(), n, mode);
    });
    const auto grads = run_ref<T>(backward, {pred.data(), target.data(), grad.data()});
    expect_near(grad_pred, grads[0], tolerance, "grad pred");
    expect_near(grad_target, grads[1], tolerance, "grad target");
  }
}

TEST(GiouCudaHostTest, F32KernelsMatchTheRefKernels) { check_kernels<float>(4e-6); }
TEST(GiouCudaHostTest, F64KernelsMatchTheRefKernels) { check_kernels<double>(1e-13); }

} // namespace
} // namespace mstep::cuda
