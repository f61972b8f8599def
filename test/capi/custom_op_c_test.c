/* A C program that registers a custom op through the C API
 * (mstep_custom_op_register), runs it on the ref and cpu backends, checks
 * the values against ones worked out by hand, and checks the error paths:
 * a missing attribute, a wrong dtype, the shape rule's refusal, an
 * unregistered op, a failing kernel and a second registration with another
 * schema. Exit 0 when every check holds, 1 otherwise (each failure is
 * printed). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mstep-c/mstep.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* Runs a call that must succeed; prints its status otherwise. */
static void ok(mstep_status* s, const char* what) {
  if (s != NULL) {
    fprintf(stderr, "%s failed: %s\n", what, mstep_status_message(s));
    ++failures;
    mstep_status_free(s);
  }
}

/* A call that must fail with `code` and a message containing `part`. */
static void expect_error(mstep_status* s, mstep_status_code code, const char* part) {
  if (s == NULL) {
    fprintf(stderr, "expected an error containing \"%s\", got success\n", part);
    ++failures;
    return;
  }
  if (mstep_status_code_of(s) != code || strstr(mstep_status_message(s), part) == NULL) {
    fprintf(stderr, "expected code %d with \"%s\", got code %d: %s\n", (int)code, part,
            (int)mstep_status_code_of(s), mstep_status_message(s));
    ++failures;
  }
  mstep_status_free(s);
}

/* The attribute named `name` of a call (every declared one is there). */
static const mstep_attr* attr(const mstep_attr* attrs, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i)
    if (strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return NULL;
}

/* "c_test.axpb": y = a * x + b, squared when mode is "square", negated
 * when negate; x is a f32 vector. */
static mstep_status* axpb_rule(void* user_data, const mstep_tensor_type* inputs,
                               size_t num_inputs, const mstep_attr* attrs, size_t num_attrs,
                               mstep_tensor_type* outputs, size_t num_outputs) {
  (void)user_data;
  (void)num_inputs;
  (void)num_outputs;
  const mstep_attr* mode = attr(attrs, num_attrs, "mode");
  if (inputs[0].rank != 1) return mstep_status_create(MSTEP_INVALID_ARGUMENT, "x must be a vector");
  if (strcmp(mode->s, "plain") != 0 && strcmp(mode->s, "square") != 0 &&
      strcmp(mode->s, "fail") != 0)
    return mstep_status_create(MSTEP_INVALID_ARGUMENT, "mode is plain, square or fail");
  outputs[0] = inputs[0];
  return NULL;
}

static mstep_status* axpb_kernel(void* user_data, const void* const* inputs,
                                 const mstep_tensor_type* input_types, size_t num_inputs,
                                 void* const* outputs, const mstep_tensor_type* output_types,
                                 size_t num_outputs, const mstep_attr* attrs, size_t num_attrs) {
  (void)num_inputs;
  (void)output_types;
  (void)num_outputs;
  ++*(int*)user_data; /* counts this backend's runs */
  const double a = attr(attrs, num_attrs, "a")->f;
  const int64_t b = attr(attrs, num_attrs, "b")->i;
  const char* mode = attr(attrs, num_attrs, "mode")->s;
  const int negate = (int)attr(attrs, num_attrs, "negate")->i;
  if (strcmp(mode, "fail") == 0) return mstep_status_create(MSTEP_INVALID_ARGUMENT, "told to fail");
  const float* x = (const float*)inputs[0];
  float* y = (float*)outputs[0];
  for (int64_t i = 0; i < input_types[0].dims[0]; ++i) {
    double v = a * x[i] + (double)b;
    if (strcmp(mode, "square") == 0) v = v * v;
    y[i] = (float)(negate ? -v : v);
  }
  return NULL;
}

static int ref_runs = 0, cpu_runs = 0;

static mstep_status* register_axpb(const char* default_mode) {
  static const mstep_dtype f32_only[] = {MSTEP_F32};
  const mstep_custom_input inputs[] = {{"x", f32_only, 1}};
  const mstep_attr a_default = MSTEP_ATTR_F(NULL, 1.0);
  const mstep_attr mode_default = {.kind = MSTEP_ATTR_STRING, .s = default_mode};
  const mstep_attr negate_default = MSTEP_ATTR_B(NULL, 0);
  const mstep_custom_attr_decl attrs[] = {
      {"a", MSTEP_ATTR_FLOAT, &a_default},
      {"b", MSTEP_ATTR_INT, NULL}, /* required */
      {"mode", MSTEP_ATTR_STRING, &mode_default},
      {"negate", MSTEP_ATTR_BOOL, &negate_default},
  };
  const mstep_custom_kernel kernels[] = {{"ref", axpb_kernel, &ref_runs},
                                         {"cpu", axpb_kernel, &cpu_runs}};
  const mstep_custom_op_def def = {.name = "c_test.axpb",
                                   .version = 1,
                                   .inputs = inputs,
                                   .num_inputs = 1,
                                   .attrs = attrs,
                                   .num_attrs = 4,
                                   .num_outputs = 1,
                                   .shape_rule = axpb_rule,
                                   .kernels = kernels,
                                   .num_kernels = 2};
  return mstep_custom_op_register(&def);
}

/* Calls the op on x = [1, 2, 3] on `device` and copies y out. */
static mstep_status* run_axpb(mstep_context* ctx, mstep_device* device, const mstep_attr* attrs,
                              size_t num_attrs, float y[3]) {
  const float x[3] = {1, 2, 3};
  const int64_t shape[1] = {3};
  mstep_tensor *tx = NULL, *ty = NULL;
  size_t n = 0;
  mstep_status* s = mstep_tensor_from_host(ctx, device, MSTEP_F32, shape, 1, x, sizeof x, &tx);
  if (s == NULL) s = mstep_custom_op_call(ctx, "c_test.axpb", 0, &tx, 1, attrs, num_attrs, &ty, 1, &n);
  if (s == NULL) s = mstep_context_mark_step(ctx);
  if (s == NULL) s = mstep_tensor_copy_to_host(ty, y, 3 * sizeof(float));
  ok(mstep_tensor_release(ty), "release y");
  ok(mstep_tensor_release(tx), "release x");
  return s;
}

static int near(float got, double want) { return fabs(got - want) < 1e-5; }

int main(void) {
  mstep_context* ctx = NULL;
  ok(mstep_context_create(&ctx), "mstep_context_create");
  if (ctx == NULL) return 1;
  ok(register_axpb("plain"), "mstep_custom_op_register");
  /* A plugin loaded twice: the same schema again is fine. */
  ok(register_axpb("plain"), "registering the same schema again");
  /* Another default is another schema under the same version: refused. */
  expect_error(register_axpb("square"), MSTEP_FAILED_PRECONDITION,
               "is already registered with another schema");

  const char* devices[2] = {"ref", "cpu"};
  int* runs[2] = {&ref_runs, &cpu_runs};
  for (int d = 0; d < 2; ++d) {
    mstep_device* device = NULL;
    ok(mstep_context_device(ctx, devices[d], &device), "mstep_context_device");
    float y[3] = {0, 0, 0};
    const int before = *runs[d];

    /* a = 2, b = 1: 2x + 1 = [3, 5, 7]; an int is taken for the float. */
    const mstep_attr plain[] = {MSTEP_ATTR_I("a", 2), MSTEP_ATTR_I("b", 1)};
    ok(run_axpb(ctx, device, plain, 2, y), "plain call");
    CHECK(near(y[0], 3) && near(y[1], 5) && near(y[2], 7));

    /* -(0.5x - 2)^2 = [-2.25, -1, -0.25]. */
    const mstep_attr square[] = {MSTEP_ATTR_F("a", 0.5), MSTEP_ATTR_I("b", -2),
                                 {.name = "mode", .kind = MSTEP_ATTR_STRING, .s = "square"},
                                 MSTEP_ATTR_B("negate", 1)};
    ok(run_axpb(ctx, device, square, 4, y), "square call");
    CHECK(near(y[0], -2.25) && near(y[1], -1) && near(y[2], -0.25));
    CHECK(*runs[d] == before + 2); /* this backend's own kernel ran */

    /* A kernel that fails fails the step with its message. */
    const mstep_attr failing[] = {MSTEP_ATTR_I("b", 0),
                                  {.name = "mode", .kind = MSTEP_ATTR_STRING, .s = "fail"}};
    expect_error(run_axpb(ctx, device, failing, 2, y), MSTEP_INVALID_ARGUMENT,
                 "custom op 'c_test.axpb' kernel failed: told to fail");
  }

  /* Errors at the call: each names the op and the problem. */
  const int64_t shape[2] = {2, 2};
  const float x4[4] = {1, 2, 3, 4};
  const double d4[4] = {1, 2, 3, 4};
  mstep_tensor *matrix = NULL, *doubles = NULL, *out = NULL;
  size_t n = 0;
  ok(mstep_tensor_from_host(ctx, NULL, MSTEP_F32, shape, 2, x4, sizeof x4, &matrix), "matrix");
  ok(mstep_tensor_from_host(ctx, NULL, MSTEP_F64, shape + 1, 1, d4, 2 * sizeof(double), &doubles),
     "doubles");
  const mstep_attr b1[] = {MSTEP_ATTR_I("b", 1)};
  expect_error(mstep_custom_op_call(ctx, "c_test.axpb", 0, &matrix, 1, NULL, 0, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "attribute 'b' is missing");
  expect_error(mstep_custom_op_call(ctx, "c_test.axpb", 0, &doubles, 1, b1, 1, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "input 0 ('x') must be f32, got f64");
  expect_error(mstep_custom_op_call(ctx, "c_test.axpb", 0, &matrix, 1, b1, 1, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "its shape rule rejects the inputs: x must be a vector");
  const mstep_attr b_string[] = {{.name = "b", .kind = MSTEP_ATTR_STRING, .s = "one"}};
  expect_error(mstep_custom_op_call(ctx, "c_test.axpb", 0, &matrix, 1, b_string, 1, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "attribute 'b' has type int");
  expect_error(mstep_custom_op_call(ctx, "c_test.nope", 0, &matrix, 1, NULL, 0, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "no custom op named 'c_test.nope' is registered");
  expect_error(mstep_custom_op_call(ctx, "c_test.axpb", 2, &matrix, 1, b1, 1, &out, 1, &n),
               MSTEP_INVALID_ARGUMENT, "'c_test.axpb' version 2 is not registered");
  ok(mstep_tensor_release(matrix), "release matrix");
  ok(mstep_tensor_release(doubles), "release doubles");

  ok(mstep_context_release(ctx), "mstep_context_release");
  if (failures == 0) printf("custom_op_c_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
