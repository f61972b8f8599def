// Errors while the tracer builds the RNG state of a random op: the op fails
// with an mstep::Error naming the cause, nothing is reserved, and the next
// draw works. The test backend has no compile half: it only stores the RNG
// state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

// A device type no backend of this binary registers (neuron is built in,
// async_host only where its test object library is linked).
constexpr Device kTestDevice{DeviceType::async_host, 0};

/// The ref backend, except that copy_in fails while `fail_copy_in` is set.
class FailingCopyInBackend final : public Backend {
 public:
  static inline bool fail_copy_in = true;

  absl::string_view name() const override { return "failing_copy_in"; }
  DeviceType device_type() const override { return kTestDevice.type; }
  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override {
    return ref().allocate(type);
  }
  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override {
    if (fail_copy_in) return absl::DataLossError("injected copy_in failure");
    return ref().copy_in(dst, src, bytes);
  }
  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override {
    return ref().copy_out(src, dst, bytes);
  }
  absl::Status synchronize() override { return absl::OkStatus(); }
  bool supports(OpKind op, DType dtype) const override { return ref().supports(op, dtype); }

 private:
  static Backend& ref() { return **BackendRegistry::get(DeviceType::ref); }
};

// Registered for this test binary only (the slot is otherwise empty).
TEST(RngStateError, FailedCopyInIsAnErrorAndReservesNothing) {
  BackendRegistry::register_backend("failing_copy_in", kTestDevice.type, [] {
    return std::unique_ptr<Backend>(new FailingCopyInBackend);
  });
  Tracer& tracer = Tracer::get();
  manual_seed(7);
  absl::StatusOr<Tracer::RandomDraw> failed = tracer.draw_random(8, kTestDevice);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("cannot write the RNG state"));
  EXPECT_THAT(failed.status().message(), HasSubstr("injected copy_in failure"));
  EXPECT_EQ(tracer.rng_reserved(), 0);
  // The public op throws at the call that caused it.
  try {
    rand({8}, DType::f32, kTestDevice);
    ADD_FAILURE() << "rand on a device whose copy_in fails did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(e.what(), HasSubstr("injected copy_in failure"));
  }
  EXPECT_EQ(tracer.rng_reserved(), 0);

  FailingCopyInBackend::fail_copy_in = false;
  absl::StatusOr<Tracer::RandomDraw> draw = tracer.draw_random(8, kTestDevice);
  ASSERT_TRUE(draw.ok()) << draw.status();
  EXPECT_EQ(draw->offset, 0);
  EXPECT_EQ(draw->state->device(), kTestDevice);
  EXPECT_EQ(tracer.rng_reserved(), 8);
  manual_seed(7);
}

TEST(RngStateError, DeviceWithoutBackendIsAnError) {
  // cuda without a GPU: not built in without the toolkit, unavailable
  // without a driver; every other device type has a backend here.
  const absl::StatusOr<Backend*> cuda = BackendRegistry::get(DeviceType::cuda);
  if (cuda.ok()) GTEST_SKIP() << "cuda has a working backend here";
  manual_seed(7);
  try {
    randn({4}, DType::f32, Device{DeviceType::cuda, 0});
    ADD_FAILURE() << "randn on a device without a backend did not throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::string(cuda.status().message())));
  }
  EXPECT_EQ(Tracer::get().rng_reserved(), 0);
  // The RNG keeps working on a device that exists.
  Tensor r = rand({4}, DType::f32, Device{DeviceType::ref, 0});
  mark_step();
  for (float v : r.to_vector<float>()) EXPECT_TRUE(v >= 0 && v < 1) << v;
}

}  // namespace
}  // namespace mstep
