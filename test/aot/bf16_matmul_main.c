/* Calls the stand-alone step that mstep-aot wrote from bf16_matmul.mlir:
 * y = x w + b and z = x v over bf16 bits. Every product and every sum is
 * exact in f32, so each result is the exact value rounded once to bf16
 * (nearest, ties to even), whatever the order of the sums. Row 0 tells one
 * rounding from two: x w is 1 + 2^-8 there (a tie, which alone rounds to
 * 1) and b adds 2^-10, so the one rounding of the sum gives 1 + 2^-7 where
 * rounding the product first would give 1. Exit 0 when all match. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_matmul.h"

enum { M = 4, K = 8, N = 3, P = 5 };

_Static_assert(MSTEP_STEP_NUM_INPUTS == 4 && MSTEP_STEP_NUM_OUTPUTS == 2, "x, w, b, v -> y, z");

static uint16_t bf16(float f) { /* exact values only: truncation is exact */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}
static float value(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* The exact double `d` (within f32's range and precision) rounded once. */
static uint16_t round_bf16(double d) {
  const float f = (float)d; /* exact here */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

int main(void) {
  uint16_t x[M * K], w[K * N], b[N], v[K * P], y[M * N], z[M * P];
  /* Small multiples of 1/8 (exact products and sums), then the tie row. */
  for (int i = 0; i < M * K; ++i) x[i] = bf16((float)((i * 5) % 9 - 4) / 8);
  for (int i = 0; i < K * N; ++i) w[i] = bf16((float)((i * 7) % 11 - 5) / 4);
  for (int i = 0; i < K * P; ++i) v[i] = bf16((float)((i * 3) % 7 - 3) / 2);
  for (int i = 0; i < N; ++i) b[i] = bf16((float)(i - 1) / 16);
  for (int k = 0; k < K; ++k) x[k] = bf16(k == 0 ? 1.0f : k == 1 ? 0x1p-8f : 0.0f);
  for (int n = 0; n < N; ++n) w[0 * N + n] = w[1 * N + n] = bf16(1.0f);
  b[0] = bf16(0x1p-10f);

  void* temp = aligned_alloc(64, (MSTEP_STEP_TEMP_BYTES + 63) / 64 * 64 + 64);
  const void* inputs[MSTEP_STEP_NUM_INPUTS];
  inputs[MSTEP_STEP_IN_ARG0] = x;
  inputs[MSTEP_STEP_IN_ARG1] = w;
  inputs[MSTEP_STEP_IN_ARG2] = b;
  inputs[MSTEP_STEP_IN_ARG3] = v;
  void* outputs[MSTEP_STEP_NUM_OUTPUTS];
  outputs[MSTEP_STEP_OUT_RESULT0] = y;
  outputs[MSTEP_STEP_OUT_RESULT1] = z;
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;

  int failures = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double sum = value(b[n]);
      for (int k = 0; k < K; ++k) sum += (double)value(x[m * K + k]) * value(w[k * N + n]);
      const uint16_t want = round_bf16(sum);
      if (y[m * N + n] != want && failures++ < 10)
        fprintf(stderr, "y[%d][%d] = %.9g, want %.9g\n", m, n, value(y[m * N + n]), value(want));
    }
    for (int p = 0; p < P; ++p) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += (double)value(x[m * K + k]) * value(v[k * P + p]);
      const uint16_t want = round_bf16(sum);
      if (z[m * P + p] != want && failures++ < 10)
        fprintf(stderr, "z[%d][%d] = %.9g, want %.9g\n", m, p, value(z[m * P + p]), value(want));
    }
  }
  if (value(y[0]) != 1.0f + 0x1p-7f && failures++ < 10)
    fprintf(stderr, "y[0][0] = %.9g: the bias was not added before the one rounding\n",
            value(y[0]));
  if (failures) fprintf(stderr, "%d mismatches\n", failures);
  else printf("bf16_matmul: the stand-alone step rounds each result once\n");
  free(temp);
  return failures != 0;
}
