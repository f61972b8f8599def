// ScalarValue forms of custom ops (mstep/runtime/CustomScalarForm.h): a form that
// does not fit its schema is refused at registration naming the op; the
// form is part of the op's identity and id (cache key); on the cpu backend
// a call is fused and computes the form (the kernel is not called), on ref
// and without fusion the kernel runs, and the two agree.
#include <cmath>
#include <string>
#include <vector>

#include "mstep/runtime/Tracer.h"
#include "test/custom_ops/ScaledElu.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using test_ops::scaled_elu;
using test_ops::scaled_elu_kernel_calls;

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

// ---- registration ----

CustomOpDef one_input_def(std::string name, CustomScalarForm form,
                          std::vector<DType> dtypes = {DType::f32}) {
  return {.name = std::move(name),
          .schema = {.inputs = {{"x", std::move(dtypes)}},
                     .attrs = {{"k", CustomAttrType::float64, 2.0},
                               {"mode", CustomAttrType::string, "a"}},
                     .scalar_form = std::move(form)},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", host_kernel([](const HostKernelCall&) { return absl::OkStatus(); })}}};
}

CustomScalarForm form_of(std::function<std::vector<ScalarValue>(ScalarFormBuilder&)> fn) {
  return make_scalar_form(fn);
}

std::string registration_error(CustomOpDef def) {
  CustomOpRegistry registry;
  absl::Status s = registry.add(std::move(def));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(CustomScalarFormRegistration, AFormThatDoesNotFitTheSchemaIsRefusedNamingTheOp) {
  auto exp_of_x = [](ScalarFormBuilder& f) { return std::vector{f.exp(f.input(0))}; };
  // Arity: an input the op does not have.
  EXPECT_THAT(registration_error(one_input_def(
                  "sf.arity", form_of([](ScalarFormBuilder& f) {
                    return std::vector{f.input(0) + f.input(1)};
                  }))),
              HasSubstr("custom op 'sf.arity': its scalar form reads input 1; the schema "
                        "declares 1 inputs"));
  // Another number of outputs.
  EXPECT_THAT(registration_error(one_input_def("sf.outputs", form_of([](ScalarFormBuilder& f) {
                                                 return std::vector{f.input(0), f.input(0)};
                                               }))),
              HasSubstr("custom op 'sf.outputs': its scalar form gives 2 outputs; the schema "
                        "declares 1"));
  // A dtype the form cannot compute in.
  EXPECT_THAT(registration_error(one_input_def("sf.int", form_of(exp_of_x),
                                               {DType::f32, DType::i64})),
              HasSubstr("custom op 'sf.int': its scalar form computes in floating point, but "
                        "input 0 ('x') accepts i64"));
  EXPECT_THAT(registration_error(one_input_def("sf.any", form_of(exp_of_x), {})),
              HasSubstr("custom op 'sf.any': its scalar form computes in floating point, but "
                        "input 0 ('x') accepts any dtype"));
  // Attributes: undeclared, or of a type that is no number.
  EXPECT_THAT(registration_error(one_input_def("sf.attr", form_of([](ScalarFormBuilder& f) {
                                                 return std::vector{f.input(0) * f.attr("beta")};
                                               }))),
              HasSubstr("custom op 'sf.attr': its scalar form reads attribute 'beta', which the "
                        "schema does not declare"));
  EXPECT_THAT(registration_error(one_input_def("sf.string", form_of([](ScalarFormBuilder& f) {
                                                 return std::vector{f.input(0) * f.attr("mode")};
                                               }))),
              HasSubstr("custom op 'sf.string': its scalar form reads attribute 'mode' of type "
                        "string"));
  // Ill-typed forms: exp of a predicate, a predicate output, a value of
  // another builder.
  EXPECT_THAT(registration_error(one_input_def("sf.pred", form_of([](ScalarFormBuilder& f) {
                                                 return std::vector{f.exp(f.input(0) > 0.0)};
                                               }))),
              HasSubstr("custom op 'sf.pred': its scalar form is malformed: exp needs a number "
                        "and is given a predicate"));
  EXPECT_THAT(registration_error(one_input_def("sf.mask", form_of([](ScalarFormBuilder& f) {
                                                 return std::vector{f.input(0) > 0.0};
                                               }))),
              HasSubstr("custom op 'sf.mask': its scalar form is malformed: output 0 is a "
                        "predicate"));
  ScalarFormBuilder other;
  ScalarValue foreign = other.input(0);
  EXPECT_THAT(registration_error(one_input_def("sf.foreign", form_of([&](ScalarFormBuilder& f) {
                                                 return std::vector{f.input(0) + foreign};
                                               }))),
              HasSubstr("custom op 'sf.foreign': its scalar form is malformed: add is given a "
                        "value that this scalar form's builder did not make"));
}

TEST(CustomScalarFormRegistration, TheFormIsPartOfTheOpsIdentity) {
  auto times = [](double k) {
    return form_of([k](ScalarFormBuilder& f) { return std::vector{f.input(0) * k}; });
  };
  CustomOpRegistry registry;
  ASSERT_TRUE(registry.add(one_input_def("sf.id", times(2))).ok());
  EXPECT_TRUE(registry.add(one_input_def("sf.id", times(2))).ok()); // the same: a no-op
  absl::Status changed = registry.add(one_input_def("sf.id", times(3)));
  EXPECT_EQ(changed.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(changed.message(), HasSubstr("Give the changed op a new version"));
  CustomOpDef v2 = one_input_def("sf.id", times(3));
  v2.version = 2;
  ASSERT_TRUE(registry.add(std::move(v2)).ok());
  const uint64_t id1 = (*registry.find("sf.id", 1))->id;
  EXPECT_NE(id1, (*registry.find("sf.id", 2))->id);
  // Another process with another form under the same version: another id,
  // so no cached graph of this one is ever reused there.
  CustomOpRegistry elsewhere;
  ASSERT_TRUE(elsewhere.add(one_input_def("sf.id", times(3))).ok());
  EXPECT_NE((*elsewhere.find("sf.id", 1))->id, id1);
  // An op without a form keeps the id of its name and version.
  EXPECT_EQ(custom_op_id("sf.id", 1, CustomOpSchema{}), custom_op_id("sf.id", 1));
  EXPECT_NE(id1, custom_op_id("sf.id", 1));
}

TEST(CustomScalarFormRegistration, AnotherFormChangesTheCacheKey) {
  // The same call of "sf.key" v1 traced with form x * 2, then, in a
  // "process" that registered x * 3 under the same version.
  auto key_with = [](double k) {
    CustomOpRegistry::global().remove_for_testing("sf.key");
    CustomOpDef def = one_input_def(
        "sf.key", form_of([k](ScalarFormBuilder& f) { return std::vector{f.input(0) * k}; }));
    def.kernels.emplace_back("cpu", def.kernels[0].second);
    register_custom_op(std::move(def));
    Tracer::get().set_record_steps(true);
    Tensor x = from_vector(std::vector<float>{1, 2}, {2}, DType::f32, kCpu);
    Tensor y = custom("sf.key", {x})[0] + 1.0;
    mark_step();
    const GraphKey key = Tracer::get().last_step().key;
    Tracer::get().set_record_steps(false);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{static_cast<float>(k) + 1,
                                                        static_cast<float>(2 * k) + 1}));
    return key;
  };
  const GraphKey two = key_with(2), three = key_with(3);
  EXPECT_NE(two.structure, three.structure);
  CustomOpRegistry::global().remove_for_testing("sf.key");
}

TEST(CustomScalarFormRegistration, FormsCompareByValue) {
  auto form = [](double k) {
    return form_of([k](ScalarFormBuilder& f) { return std::vector{f.exp(f.input(0)) * k}; });
  };
  EXPECT_EQ(form(2), form(2));
  EXPECT_EQ(form(2).fingerprint(), form(2).fingerprint());
  EXPECT_NE(form(2), form(2.5));
  EXPECT_NE(form(2).fingerprint(), form(2.5).fingerprint());
  // A NaN constant equals itself (bitwise), so registering it twice is idempotent.
  EXPECT_EQ(form(NAN), form(NAN));
  EXPECT_EQ(form(2).to_string(), "[mul(exp(in0), 2)]");
}

// ---- execution ----

std::vector<float> ramp_values(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = -4.0f + 8.0f * static_cast<float>(i) / (n - 1);
  return v;
}

/// neg(scaled_elu(x * 0.5)) on `d`: the op between two elementwise ops.
std::vector<float> run_chain(Device d, const std::vector<float>& x) {
  Tensor t = from_vector(x, {static_cast<int64_t>(x.size())}, DType::f32, d);
  Tensor y = -scaled_elu(t * 0.5, 1.5, 2.0);
  mark_step();
  return y.to_vector<float>();
}

/// The expected value, computed here in double.
double expected(double x) {
  const double h = x * 0.5;
  return -2.0 * (h > 0 ? h : 1.5 * (std::exp(h) - 1.0));
}

TEST(CustomScalarFormRun, CpuFusesTheCallAndRefRunsTheKernel) {
  test_ops::register_scaled_elu();
  const std::vector<float> x = ramp_values(1001);
  const int before = scaled_elu_kernel_calls();
  const std::vector<float> fused = run_chain(kCpu, x);
  EXPECT_EQ(scaled_elu_kernel_calls(), before) << "the cpu backend ran the kernel";
  const std::vector<float> ref = run_chain(kRef, x);
  EXPECT_EQ(scaled_elu_kernel_calls(), before + 1) << "ref ran the scalar form";
  // Unfused, the cpu backend runs the kernel too.
  const bool fuse = Tracer::get().options().fuse;
  Tracer::get().mutable_options().fuse = false;
  const std::vector<float> unfused = run_chain(kCpu, x);
  Tracer::get().mutable_options().fuse = fuse;
  EXPECT_EQ(scaled_elu_kernel_calls(), before + 2);
  for (size_t i = 0; i < x.size(); ++i) {
    // f32 rounding of a few ops and exp: a few ulps of the larger terms.
    const double want = expected(x[i]);
    const double tol = 8 * 1.2e-7 * std::max(1.0, std::abs(want));
    EXPECT_NEAR(fused[i], want, tol) << "x = " << x[i];
    EXPECT_NEAR(fused[i], ref[i], tol) << "x = " << x[i];
    EXPECT_EQ(ref[i], unfused[i]) << "the same kernel";
  }
}

TEST(CustomScalarFormRun, TheFormsAttributesAreCompiledConstants) {
  // Two calls with other attributes: each compiles its own constants.
  test_ops::register_scaled_elu();
  Tensor x = from_vector(std::vector<float>{-1, 1}, {2}, DType::f32, kCpu);
  Tensor a = scaled_elu(x, 1.0, 1.0);
  Tensor b = scaled_elu(x, 0.5, 3.0);
  mark_step();
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  EXPECT_NEAR(va[0], std::exp(-1.0) - 1.0, 1e-6);
  EXPECT_FLOAT_EQ(va[1], 1.0f);
  EXPECT_NEAR(vb[0], 3.0 * 0.5 * (std::exp(-1.0) - 1.0), 1e-6);
  EXPECT_FLOAT_EQ(vb[1], 3.0f);
}

TEST(CustomScalarFormRun, F64IsFusedToo) {
  test_ops::register_scaled_elu();
  Tensor x = from_vector(std::vector<double>{-2, -0.25, 0, 3}, {4}, DType::f64, kCpu);
  const int before = scaled_elu_kernel_calls();
  Tensor y = scaled_elu(x, 1.5, 2.0);
  mark_step();
  EXPECT_EQ(scaled_elu_kernel_calls(), before);
  const std::vector<double> v = y.to_vector<double>();
  const double want[] = {3.0 * (std::exp(-2.0) - 1.0), 3.0 * (std::exp(-0.25) - 1.0), 0.0, 6.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[i], want[i], 1e-14) << i;
}

TEST(CustomScalarFormRun, CapturedAndReplayedEqualsLazyBitwise) {
  test_ops::register_scaled_elu();
  const std::vector<float> x0 = ramp_values(257);
  Tensor x = from_vector(x0, {257}, DType::f32, kCpu);
  mark_step();
  Tensor lazy = -scaled_elu(x * 0.5, 1.5, 2.0);
  mark_step();
  const std::vector<float> want = lazy.to_vector<float>();
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = -scaled_elu(x * 0.5, 1.5, 2.0);
  }
  EXPECT_EQ(y.to_vector<float>(), want);
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), want);
}

} // namespace
} // namespace mstep
