/* The stand-alone step mstep-aot made of two_segment_worker's two-segment
 * step, driven from C: its values come from the --data file (x and w at
 * export), and one call computes g = x w and w' = 0.5 w + 0.1 g, checked
 * against plain loops; a second call writes w' over w in place, as the
 * header allows. Exit 0 when all match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "two.h"

_Static_assert(MSTEP_STEP_NUM_INPUTS == 2 && MSTEP_STEP_NUM_OUTPUTS == 2, "x, w -> g, w'");
_Static_assert(MSTEP_STEP_OUT_W_IN_PLACE_OF == MSTEP_STEP_IN_W, "w is updated in place");

static int failures = 0;
static void expect_near(const char* what, int i, float got, float want) {
  if (!(fabsf(got - want) <= 1e-6f * (1.0f + fabsf(want))) && failures++ < 10)
    fprintf(stderr, "%s[%d] = %.9g, want %.9g\n", what, i, got, want);
}

int main(int argc, char** argv) {
  if (argc != 2) return fprintf(stderr, "usage: two_segment_main two.bin\n"), 2;
  char* data = aligned_alloc(64, MSTEP_STEP_DATA_BYTES);
  FILE* f = fopen(argv[1], "rb");
  if (f == NULL || fread(data, 1, MSTEP_STEP_DATA_BYTES, f) != MSTEP_STEP_DATA_BYTES)
    return fprintf(stderr, "cannot read %s\n", argv[1]), 1;
  fclose(f);
  float* x = (float*)(data + MSTEP_STEP_IN_X_DATA_OFFSET);
  float* w = (float*)(data + MSTEP_STEP_IN_W_DATA_OFFSET);
  float want_g[16], want_w[16];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += (double)x[i * 4 + k] * w[k * 4 + j];
      want_g[i * 4 + j] = (float)acc;
    }
  for (int i = 0; i < 16; ++i) want_w[i] = 0.5f * w[i] + 0.1f * want_g[i];

  float* g = aligned_alloc(64, 64);
  float* w_new = aligned_alloc(64, 64);
  void* temp = aligned_alloc(64, MSTEP_STEP_TEMP_BYTES > 0 ? (MSTEP_STEP_TEMP_BYTES + 63) / 64 * 64 : 64);
  const void* inputs[MSTEP_STEP_NUM_INPUTS];
  inputs[MSTEP_STEP_IN_X] = x;
  inputs[MSTEP_STEP_IN_W] = w;
  void* outputs[MSTEP_STEP_NUM_OUTPUTS];
  outputs[MSTEP_STEP_OUT_G] = g;
  outputs[MSTEP_STEP_OUT_W] = w_new;
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;
  for (int i = 0; i < 16; ++i) expect_near("g", i, g[i], want_g[i]);
  for (int i = 0; i < 16; ++i) expect_near("w'", i, w_new[i], want_w[i]);
  outputs[MSTEP_STEP_OUT_W] = w; /* in place */
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;
  for (int i = 0; i < 16; ++i) expect_near("w (in place)", i, w[i], want_w[i]);
  if (failures) fprintf(stderr, "%d mismatches\n", failures);
  else printf("two segments: the merged stand-alone step equals the reference\n");
  return failures != 0;
}
