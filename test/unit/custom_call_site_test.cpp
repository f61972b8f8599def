// TypedCustomOp<1>'s call site (detail::CustomCallSite): it keeps what the
// schema checks and the shape rule gave for the last input types and
// attributes, so a repeated call runs the rule once; every check still
// fails at the call after such a call (dtype, count, undefined input, shape,
// attribute, devices, requires-grad without a backward), and a registry
// change is seen.
#include <atomic>
#include <string>
#include <vector>

#include "mstep/runtime/TensorImpl.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

/// How often the shape rule of the op below ran.
std::atomic<int> rule_runs{0};

absl::Status scale_kernel(const HostKernelCall& call) {
  MSTEP_ASSIGN_OR_RETURN(double scale, call.attrs.get_double("scale"));
  const auto* x = static_cast<const float*>(call.inputs[0]);
  auto* y = static_cast<float*>(call.outputs[0]);
  for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i)
    y[i] = static_cast<float>(x[i] * scale);
  return absl::OkStatus();
}

/// y = x * scale, f32 only, rank >= 1; no backward.
CustomOpDef scale_def(std::string name) {
  return {.name = std::move(name),
          .version = 1,
          .schema = {.inputs = {{"x", {DType::f32}}},
                     .attrs = {{"scale", CustomAttrType::float64, 1.0}}},
          .shape_rule = [](absl::Span<const TensorType> in, const CustomAttrView& attrs)
              -> absl::StatusOr<std::vector<TensorType>> {
            ++rule_runs;
            if (in[0].shape.rank() == 0) return absl::InvalidArgumentError("x must not be a scalar");
            MSTEP_ASSIGN_OR_RETURN(double scale, attrs.get_double("scale"));
            if (scale == 0) return absl::InvalidArgumentError("scale must not be 0");
            return std::vector<TensorType>{in[0]};
          },
          .kernels = {{"ref", host_kernel(scale_kernel)}, {"cpu", host_kernel(scale_kernel)}}};
}

Tensor ramp(Device d = kRef) {
  return from_vector(std::vector<float>{1, 2, 3}, {3}, DType::f32, d);
}

TEST(CustomCallSite, RepeatedCallsRunTheShapeRuleOncePerTypesAndAttributes) {
  static const TypedCustomOp<1> scale(scale_def("call_site_test.scale_once"));
  const int before = rule_runs;
  Tensor y = ramp();
  for (int i = 0; i < 3; ++i) y = scale({y}, {{"scale", 2.0}});
  EXPECT_EQ(rule_runs - before, 1);
  Tensor z = scale({y}, {{"scale", 0.5}}); // other attributes: the rule again
  EXPECT_EQ(rule_runs - before, 2);
  Tensor w = scale({from_vector(std::vector<float>{1, 2}, {2}, DType::f32, kRef)}); // other shape
  EXPECT_EQ(rule_runs - before, 3);
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(8, 16, 24));
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(4, 8, 12));
  EXPECT_THAT(w.to_vector<float>(), ElementsAre(1, 2));
}

// A kept call's node holds the attributes the site keeps (shared, not
// copied): it must be the node the full path records, with equal hashes, or
// the graph would compile again (another cache key).
TEST(CustomCallSite, AKeptCallRecordsTheNodeTheFullPathRecords) {
  static const TypedCustomOp<1> scale(scale_def("call_site_test.scale_node"));
  Tensor x = ramp();
  scale({x}, {{"scale", 2.0}});
  const int before = rule_runs;
  Tensor kept = scale({x}, {{"scale", 2.0}});
  ASSERT_EQ(rule_runs - before, 0) << "the second call is a kept one";
  Tensor full = custom("call_site_test.scale_node", {x}, {{"scale", 2.0}})[0];
  const Node& a = *kept.impl()->pending().node;
  const Node& b = *full.impl()->pending().node;
  EXPECT_EQ(a.op(), OpKind::custom);
  EXPECT_EQ(attrs_to_string(a.attrs()), attrs_to_string(b.attrs()));
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
  EXPECT_EQ(a.constant_hash(), b.constant_hash());
  EXPECT_NE(a.constant_hash(), 0u) << "the scale is a host constant";
  EXPECT_EQ(a.type_hash(), b.type_hash());
  mark_step();
  EXPECT_THAT(kept.to_vector<float>(), ElementsAre(2, 4, 6));
  EXPECT_THAT(full.to_vector<float>(), ElementsAre(2, 4, 6));
}

TEST(CustomCallSite, EveryCheckStillFailsAfterAKeptCall) {
  static const TypedCustomOp<1> scale(scale_def("call_site_test.scale_checks"));
  Tensor x = ramp();
  scale({x});
  scale({x}); // kept
  EXPECT_THAT(error_of([&] { scale({x.to(DType::i64)}); }), HasSubstr("must be f32, got i64"));
  EXPECT_THAT(error_of([&] { scale({x, x}); }), HasSubstr("takes 1 inputs, got 2"));
  EXPECT_THAT(error_of([&] { scale({Tensor()}); }), HasSubstr("input 0 is undefined"));
  EXPECT_THAT(error_of([&] { scale({full({}, 1.0)}); }), HasSubstr("x must not be a scalar"));
  EXPECT_THAT(error_of([&] { scale({x}, {{"scale", 0.0}}); }), HasSubstr("scale must not be 0"));
  EXPECT_THAT(error_of([&] { scale({x}, {{"shift", 1}}); }), HasSubstr("has no attribute 'shift'"));
  Tensor g = ramp();
  g.requires_grad_();
  EXPECT_THAT(error_of([&] { scale({g}); }), HasSubstr("has no backward"));
  // The process keeps working, and the kept call still gives the result.
  Tensor y = scale({x}, {{"scale", 3.0}});
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(3, 6, 9));
}

TEST(CustomCallSite, AKeptCallOnAnotherDeviceRecordsThere) {
  static const TypedCustomOp<1> scale(scale_def("call_site_test.scale_device"));
  scale({ramp(kRef)});
  scale({ramp(kRef)}); // kept; the types are equal, the device is not
  Tensor y = scale({ramp(kCpu)}, {{"scale", -1.0}});
  EXPECT_EQ(y.device(), kCpu);
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(-1, -2, -3));
}

TEST(CustomCallSite, ARegistryChangeIsSeen) {
  static const TypedCustomOp<1> scale(scale_def("call_site_test.scale_registry"));
  Tensor x = ramp();
  scale({x});
  const int before = rule_runs;
  register_custom_op(scale_def("call_site_test.scale_registry_other"));
  scale({x}); // the registry changed: looked up and checked again
  EXPECT_EQ(rule_runs - before, 1);
}

} // namespace
} // namespace mstep
