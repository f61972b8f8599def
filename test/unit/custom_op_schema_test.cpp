// Custom ops' versions and typed schemas (mstep/runtime/CustomOp.h): string,
// bool, int and float attributes with defaults reach the kernels on ref and
// cpu and enter the cache key; each way a call can break the schema fails
// at the call naming the op; registering again is idempotent only with the
// same schema; a new version recompiles; TypedCustomOp gives typed results.
#include <string>
#include <vector>

#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

/// y = s * (x * scale + shift) for mode "add", s * (x * scale - shift) for
/// "sub", with s = -1 when flip; f32 in, f32 out.
absl::Status affine_kernel(const HostKernelCall& call) {
  MSTEP_ASSIGN_OR_RETURN(double scale, call.attrs.get_double("scale"));
  MSTEP_ASSIGN_OR_RETURN(int64_t shift, call.attrs.get_int("shift"));
  MSTEP_ASSIGN_OR_RETURN(std::string mode, call.attrs.get_string("mode"));
  MSTEP_ASSIGN_OR_RETURN(bool flip, call.attrs.get_bool("flip"));
  if (mode != "add" && mode != "sub")
    return absl::InvalidArgumentError("mode is neither add nor sub");
  const auto* x = static_cast<const float*>(call.inputs[0]);
  auto* y = static_cast<float*>(call.outputs[0]);
  for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i) {
    double v = x[i] * scale + (mode == "add" ? shift : -shift);
    y[i] = static_cast<float>(flip ? -v : v);
  }
  return absl::OkStatus();
}

CustomOpSchema affine_schema() {
  return {.inputs = {{"x", {DType::f32}}},
          .attrs = {{"scale", CustomAttrType::float64, 1.0},
                    {"shift", CustomAttrType::int64, int64_t{0}},
                    {"mode", CustomAttrType::string, "add"},
                    {"flip", CustomAttrType::boolean, false}}};
}

CustomOpDef affine_def(std::string name, int64_t version = 1) {
  return {.name = std::move(name),
          .version = version,
          .schema = affine_schema(),
          .shape_rule = [](absl::Span<const TensorType> in, const CustomAttrView& attrs)
              -> absl::StatusOr<std::vector<TensorType>> {
            if (in[0].shape.rank() == 0) return absl::InvalidArgumentError("x must not be a scalar");
            MSTEP_ASSIGN_OR_RETURN(std::string mode, attrs.get_string("mode"));
            if (mode != "add" && mode != "sub")
              return absl::InvalidArgumentError("mode must be \"add\" or \"sub\", got \"" + mode +
                                                "\"");
            return std::vector<TensorType>{in[0]};
          },
          .kernels = {{"ref", host_kernel(affine_kernel)}, {"cpu", host_kernel(affine_kernel)}}};
}

/// Registered once per process (an equal definition again is a no-op).
void register_affine() { register_custom_op(affine_def("schema_test.affine")); }

Tensor ramp(Device d) { return from_vector(std::vector<float>{1, 2, 3, 4}, {4}, DType::f32, d); }

struct RecordSteps {
  RecordSteps() { Tracer::get().set_record_steps(true); }
  ~RecordSteps() { Tracer::get().set_record_steps(false); }
};

class CustomOpSchemaTest : public ::testing::TestWithParam<Device> {
protected:
  void SetUp() override { register_affine(); }
};

TEST_P(CustomOpSchemaTest, StringBoolIntAndFloatAttributesReachTheKernel) {
  Tensor x = ramp(GetParam());
  // -(2x - 3) for x = 1..4.
  Tensor y = custom("schema_test.affine", {x},
                    {{"scale", 2.0}, {"shift", int64_t{3}}, {"mode", "sub"}, {"flip", true}})[0];
  // Defaults: scale 1, shift 0, add, no flip: x itself. An int is taken for
  // the float.
  Tensor d = custom("schema_test.affine", {x})[0];
  Tensor z = custom("schema_test.affine", {x}, {{"scale", int64_t{3}}, {"shift", int64_t{1}}})[0];
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, -1, -3, -5));
  EXPECT_THAT(d.to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(4, 7, 10, 13));
}

TEST_P(CustomOpSchemaTest, StringsAndBoolsArePartOfTheCacheKey) {
  RecordSteps record;
  Tensor x = ramp(GetParam());
  mark_step();
  auto run = [&](const char* mode, bool flip) {
    Tensor y = custom("schema_test.affine", {x}, {{"mode", mode}, {"flip", flip}})[0];
    mark_step();
    return Tracer::get().last_step().key;
  };
  const GraphKey add = run("add", false);
  reset_metrics();
  EXPECT_EQ(run("add", false).full(), add.full());
  EXPECT_EQ(metrics().compiles, 0); // the same string: a hit
  EXPECT_NE(run("sub", false).structure, add.structure);
  EXPECT_NE(run("add", true).structure, add.structure);
  EXPECT_EQ(metrics().compiles, 2);
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, CustomOpSchemaTest, ::testing::Values(kRef, kCpu),
                         [](const auto& info) {
                           return info.param.type == DeviceType::ref ? "ref" : "cpu";
                         });

TEST(CustomOpSchemaCall, EachBreachOfTheSchemaIsAnErrorAtTheCall) {
  register_affine();
  if (!CustomOpRegistry::global().find("schema_test.needs_k").ok()) {
    CustomOpDef def = affine_def("schema_test.needs_k");
    def.schema.attrs.push_back({"k", CustomAttrType::int_list});
    register_custom_op(std::move(def));
  }
  Tensor x = ramp(kRef);
  const char* op = "custom_op 'schema_test.affine'";
  auto call = [&](std::vector<Tensor> in, CustomAttrs attrs) {
    return error_of([&] { custom("schema_test.affine", in, attrs); });
  };
  std::string msg = error_of([&] { custom("schema_test.nope", {x}); });
  EXPECT_THAT(msg, HasSubstr("no custom op named 'schema_test.nope' is registered"));

  msg = call({x, x}, {});
  EXPECT_THAT(msg, HasSubstr(op));
  EXPECT_THAT(msg, HasSubstr("takes 1 inputs, got 2"));
  EXPECT_THAT(msg, HasSubstr("Its schema: (x: f32) {scale: float = 1, shift: int = 0, "
                             "mode: string = \"add\", flip: bool = false} -> 1 output"));

  msg = call({x.to(DType::f64)}, {});
  EXPECT_THAT(msg, HasSubstr(op));
  EXPECT_THAT(msg, HasSubstr("input 0 ('x') must be f32, got f64"));

  msg = call({x}, {{"gain", 2.0}});
  EXPECT_THAT(msg, HasSubstr("has no attribute 'gain'"));

  msg = call({x}, {{"mode", int64_t{3}}});
  EXPECT_THAT(msg, HasSubstr(op));
  EXPECT_THAT(msg, HasSubstr("attribute 'mode' has type string; the value 3 has type int"));
  msg = call({x}, {{"flip", int64_t{1}}});
  EXPECT_THAT(msg, HasSubstr("attribute 'flip' has type bool; the value 1 has type int"));
  msg = call({x}, {{"shift", 1.5}});
  EXPECT_THAT(msg, HasSubstr("attribute 'shift' has type int; the value 1.5 has type float"));

  msg = error_of([&] { custom("schema_test.needs_k", {x}); });
  EXPECT_THAT(msg, HasSubstr("custom_op 'schema_test.needs_k'"));
  EXPECT_THAT(msg, HasSubstr("attribute 'k' is missing (it has no default)"));

  // The shape rule runs at the call, with its own message.
  msg = call({x}, {{"mode", "mul"}});
  EXPECT_THAT(msg, HasSubstr(op));
  EXPECT_THAT(msg, HasSubstr("its shape rule rejects the inputs: mode must be \"add\" or \"sub\", "
                             "got \"mul\""));
  msg = call({from_vector(std::vector<float>{1}, {})}, {});
  EXPECT_THAT(msg, HasSubstr("x must not be a scalar"));

  // Nothing was recorded: the next call runs.
  Tensor y = custom("schema_test.affine", {x}, {{"shift", int64_t{1}}})[0];
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 3, 4, 5));
}

TEST(CustomOpSchemaCall, TheShapeRuleMustAgreeWithTheOutputCountAndAliases) {
  if (!CustomOpRegistry::global().find("schema_test.two_out").ok()) {
    CustomOpDef def = affine_def("schema_test.two_out");
    def.schema.num_outputs = 2;
    register_custom_op(std::move(def));
  }
  if (!CustomOpRegistry::global().find("schema_test.in_place_sum").ok()) {
    CustomOpDef def = affine_def("schema_test.in_place_sum");
    def.schema.aliases = {{0, 0}};
    def.shape_rule = [](absl::Span<const TensorType> in, const CustomAttrView&)
        -> absl::StatusOr<std::vector<TensorType>> {
      return std::vector<TensorType>{TensorType{Shape({}), in[0].dtype}};
    };
    register_custom_op(std::move(def));
  }
  Tensor x = ramp(kRef);
  EXPECT_THAT(error_of([&] { custom("schema_test.two_out", {x}); }),
              HasSubstr("its shape rule gave 1 result types; the schema declares 2 outputs"));
  EXPECT_THAT(error_of([&] { custom("schema_test.in_place_sum", {x}); }),
              HasSubstr("output 0 may alias input 0, but the shape rule gives it f32[] and the "
                        "input is f32[4]"));
}

// ---- registration ----

TEST(CustomOpSchemaRegistry, SameSchemaAgainIsIdempotentAnotherIsAnError) {
  CustomOpRegistry registry;
  ASSERT_TRUE(registry.add(affine_def("a")).ok());
  // A plugin loaded twice: the same schema again is fine.
  EXPECT_TRUE(registry.add(affine_def("a")).ok());
  CustomOpDef changed = affine_def("a");
  changed.schema.attrs[2].default_value = "sub";
  absl::Status s = registry.add(std::move(changed));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("custom op 'a' version 1 is already registered with another "
                                     "schema"));
  EXPECT_THAT(s.message(), HasSubstr("mode: string = \"sub\""));
  EXPECT_THAT(s.message(), HasSubstr("Give the changed op a new version"));
  CustomOpDef nondeterministic = affine_def("a");
  nondeterministic.schema.deterministic = false;
  EXPECT_EQ(registry.add(std::move(nondeterministic)).code(), absl::StatusCode::kAlreadyExists);

  // A new version is another op, with its own id; the name finds the newest.
  CustomOpDef v2 = affine_def("a", 2);
  v2.schema.attrs.pop_back();
  ASSERT_TRUE(registry.add(std::move(v2)).ok());
  auto newest = registry.find("a");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ((*newest)->version, 2);
  EXPECT_EQ((*newest)->schema.attrs.size(), 3u);
  auto v1 = registry.find("a", 1);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)->schema.attrs.size(), 4u);
  EXPECT_NE((*v1)->id, (*newest)->id);
  EXPECT_EQ((*registry.find(custom_op_id("a", 2)))->version, 2);
  EXPECT_THAT(registry.find("a", 3).status().message(),
              HasSubstr("custom op 'a' version 3 is not registered (registered: a, a v2)"));
}

TEST(CustomOpSchemaRegistry, RejectsBadSchemas) {
  CustomOpRegistry registry;
  auto error = [&](CustomOpDef def) { return std::string(registry.add(std::move(def)).message()); };
  CustomOpDef v0 = affine_def("a", 0);
  EXPECT_THAT(error(std::move(v0)), HasSubstr("has version 0; versions start at 1"));
  CustomOpDef no_out = affine_def("a");
  no_out.schema.num_outputs = 0;
  EXPECT_THAT(error(std::move(no_out)), HasSubstr("declares 0 outputs"));
  CustomOpDef bad_default = affine_def("a");
  bad_default.schema.attrs[1].default_value = "zero";
  EXPECT_THAT(error(std::move(bad_default)),
              HasSubstr("has a bad default: attribute 'shift' has type int; the value \"zero\" "
                        "has type string"));
  CustomOpDef bad_alias = affine_def("a");
  bad_alias.schema.aliases = {{0, 1}};
  EXPECT_THAT(error(std::move(bad_alias)), HasSubstr("output 0 may alias input 1, but it has 1 "
                                                     "outputs and 1 inputs"));
  CustomOpDef twice = affine_def("a");
  twice.schema.inputs.push_back({"x"});
  EXPECT_THAT(error(std::move(twice)), HasSubstr("declares input 'x' twice"));
  EXPECT_EQ(registry.find("a").status().code(), absl::StatusCode::kNotFound);
}

// ---- versions and the cache ----

/// `name` version `version`: y = x + version (a kernel per version, so the
/// values say which one ran).
CustomOpDef add_version_def(const std::string& name, int64_t version) {
  auto kernel = host_kernel([version](const HostKernelCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i)
      y[i] = x[i] + static_cast<float>(version);
    return absl::OkStatus();
  });
  return {.name = name,
          .version = version,
          .schema = {.inputs = {{"x"}}},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", kernel}, {"cpu", kernel}}};
}

TEST(CustomOpVersions, ANewVersionRecompilesAndTheOldOneStaysCached) {
  const std::string name = "schema_test.versioned_memory";
  register_custom_op(add_version_def(name, 1));
  RecordSteps record;
  Tensor x = ramp(kCpu);
  mark_step();
  reset_metrics();
  Tensor y1 = custom(name, {x})[0];
  mark_step();
  EXPECT_THAT(y1.to_vector<float>(), ElementsAre(2, 3, 4, 5));
  const GraphKey k1 = Tracer::get().last_step().key;
  EXPECT_EQ(metrics().compiles, 1);

  register_custom_op(add_version_def(name, 2));
  Tensor y2 = custom(name, {x})[0]; // the name calls the newest version
  mark_step();
  EXPECT_THAT(y2.to_vector<float>(), ElementsAre(3, 4, 5, 6));
  EXPECT_NE(Tracer::get().last_step().key.structure, k1.structure);
  EXPECT_EQ(metrics().compiles, 2);

  Tensor again = custom({name, 1}, {x})[0]; // version 1 by name: still cached
  mark_step();
  EXPECT_THAT(again.to_vector<float>(), ElementsAre(2, 3, 4, 5));
  EXPECT_EQ(Tracer::get().last_step().key.full(), k1.full());
  EXPECT_EQ(metrics().compiles, 2);
  EXPECT_THAT(error_of([&] { custom({name, 7}, {x}); }),
              HasSubstr("version 7 is not registered"));
}

// ---- the typed wrapper ----

TEST(TypedCustomOp, RegistersOnceAndReturnsTypedResults) {
  static const TypedCustomOp<1> affine(affine_def("schema_test.typed"));
  const TypedCustomOp<1> again(affine_def("schema_test.typed")); // idempotent
  Tensor x = ramp(kCpu);
  Tensor y = affine({x}, {{"scale", 0.5}, {"flip", true}});
  Tensor z = again({x});
  CustomOpDef pair = add_version_def("schema_test.typed_pair", 1);
  pair.schema.num_outputs = 2;
  pair.shape_rule = [](absl::Span<const TensorType> in, const CustomAttrView&)
      -> absl::StatusOr<std::vector<TensorType>> { return std::vector<TensorType>{in[0], in[0]}; };
  pair.kernels = {{"cpu", host_kernel([](const HostKernelCall& call) {
                     const auto* x = static_cast<const float*>(call.inputs[0]);
                     for (int64_t i = 0; i < 4; ++i) {
                       static_cast<float*>(call.outputs[0])[i] = x[i] * x[i];
                       static_cast<float*>(call.outputs[1])[i] = -x[i];
                     }
                     return absl::OkStatus();
                   })}};
  const TypedCustomOp<2> square_neg(pair);
  std::array<Tensor, 2> sn = square_neg({x});
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(-0.5, -1, -1.5, -2));
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(sn[0].to_vector<float>(), ElementsAre(1, 4, 9, 16));
  EXPECT_THAT(sn[1].to_vector<float>(), ElementsAre(-1, -2, -3, -4));
  EXPECT_EQ(square_neg.name(), "schema_test.typed_pair");
  EXPECT_THAT(error_of([&] { TypedCustomOp<3> wrong(pair); }),
              HasSubstr("TypedCustomOp<3> for custom op 'schema_test.typed_pair', whose schema "
                        "declares 2 outputs"));
}

TEST(CustomShapeRules, SameTypeAsInputGivesThatInputsTypeAndNeedsTheInput) {
  const CustomAttrView no_attrs({}, {});
  const std::vector<TensorType> in = {TensorType{Shape{2, 3}, DType::f32},
                                      TensorType{Shape{4}, DType::i64}};
  auto first = same_type_as_input()(in, no_attrs);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::vector<TensorType>{in[0]});
  auto second = same_type_as_input(1)(in, no_attrs);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, std::vector<TensorType>{in[1]});
  auto missing = same_type_as_input(2)(in, no_attrs);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("input 2"));
  EXPECT_THAT(missing.status().message(), HasSubstr("2 inputs"));
}

} // namespace
} // namespace mstep
