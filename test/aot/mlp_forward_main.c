/* Calls the stand-alone step that mstep-aot wrote from mlp_forward.mlir
 * (through the header it wrote) and checks it against the same MLP computed
 * here in plain loops: y = relu(x w1 + b1) w2 and w2' = w2 * w2, first into
 * separate output buffers (the inputs stay as they were), then with w2'
 * written in place of w2 as the header allows. Exit 0 when all match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_forward.h"

enum { B = 8, I = 16, H = 32, O = 4 };

_Static_assert(MSTEP_STEP_NUM_INPUTS == 4 && MSTEP_STEP_NUM_OUTPUTS == 2, "the step's arguments");
_Static_assert(MSTEP_STEP_IN_ARG0_BYTES == B * I * 4 && MSTEP_STEP_OUT_RESULT0_BYTES == B * O * 4,
               "the step's sizes");
_Static_assert(MSTEP_STEP_OUT_RESULT1_IN_PLACE_OF == MSTEP_STEP_IN_ARG3, "w2 is updated in place");
_Static_assert(MSTEP_STEP_TEMP_BYTES > 0, "the hidden layer lives in temp");

static float* alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static int failures = 0;
static void expect_near(const char* what, int i, float got, float want) {
  if (!(fabsf(got - want) <= 1e-5f * (1.0f + fabsf(want)))) {
    if (failures++ < 10) fprintf(stderr, "%s[%d] = %.9g, want %.9g\n", what, i, got, want);
  }
}

int main(void) {
  float *x = alloc64(sizeof(float) * B * I), *w1 = alloc64(sizeof(float) * I * H);
  float *b1 = alloc64(sizeof(float) * H), *w2 = alloc64(sizeof(float) * H * O);
  float *y = alloc64(sizeof(float) * B * O), *w2n = alloc64(sizeof(float) * H * O);
  void* temp = alloc64(MSTEP_STEP_TEMP_BYTES);
  for (int i = 0; i < B * I; ++i) x[i] = sinf(0.37f * i);
  for (int i = 0; i < I * H; ++i) w1[i] = cosf(0.11f * i) * 0.3f;
  for (int i = 0; i < H; ++i) b1[i] = 0.05f * (i % 7) - 0.1f;
  for (int i = 0; i < H * O; ++i) w2[i] = sinf(0.23f * i + 1.0f) * 0.5f;

  /* The reference. */
  float want_y[B * O], want_w2n[H * O], w2_before[H * O];
  memcpy(w2_before, w2, sizeof w2_before);
  for (int b = 0; b < B; ++b)
    for (int o = 0; o < O; ++o) {
      double acc = 0;
      for (int h = 0; h < H; ++h) {
        double pre = b1[h];
        for (int i = 0; i < I; ++i) pre += (double)x[b * I + i] * w1[i * H + h];
        acc += (pre > 0 ? pre : 0) * w2[h * O + o];
      }
      want_y[b * O + o] = (float)acc;
    }
  for (int i = 0; i < H * O; ++i) want_w2n[i] = w2[i] * w2[i];

  const void* inputs[MSTEP_STEP_NUM_INPUTS];
  inputs[MSTEP_STEP_IN_ARG0] = x;
  inputs[MSTEP_STEP_IN_ARG1] = w1;
  inputs[MSTEP_STEP_IN_ARG2] = b1;
  inputs[MSTEP_STEP_IN_ARG3] = w2;
  void* outputs[MSTEP_STEP_NUM_OUTPUTS];
  outputs[MSTEP_STEP_OUT_RESULT0] = y;
  outputs[MSTEP_STEP_OUT_RESULT1] = w2n;
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;
  for (int i = 0; i < B * O; ++i) expect_near("y", i, y[i], want_y[i]);
  for (int i = 0; i < H * O; ++i) expect_near("w2'", i, w2n[i], want_w2n[i]);
  if (memcmp(w2, w2_before, sizeof w2_before) != 0) ++failures, fprintf(stderr, "w2 changed\n");

  /* In place: w2' written over w2. */
  memset(y, 0, sizeof(float) * B * O);
  outputs[MSTEP_STEP_OUT_RESULT1] = w2;
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;
  for (int i = 0; i < B * O; ++i) expect_near("y (in place)", i, y[i], want_y[i]);
  for (int i = 0; i < H * O; ++i) expect_near("w2 (in place)", i, w2[i], want_w2n[i]);

  if (failures) fprintf(stderr, "%d mismatches\n", failures);
  else printf("mlp_forward: the stand-alone step equals the reference\n");
  return failures != 0;
}
