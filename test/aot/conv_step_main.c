/* Calls the stand-alone step that mstep-aot wrote from conv_step.mlir
 * (through the header it wrote) and checks its convolutions against plain
 * loops in double: the max-pooled relu of conv2d(x, w, b, padding 1), and,
 * for the gradient gp = avg_pool2d_grad(g) (each g element spread over its
 * 2x2 window, / 4), the bias gradient sum(gp), the weight gradient and the
 * input gradient. Exit 0 when all match. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "conv.h"

enum { N = 2, C = 3, H = 8, W = 8, O = 4, K = 3 };

_Static_assert(MSTEP_STEP_NUM_INPUTS == 6 && MSTEP_STEP_NUM_OUTPUTS == 7, "the step's arguments");
_Static_assert(MSTEP_STEP_IN_ARG0_BYTES == N * C * H * W * 4 &&
                   MSTEP_STEP_IN_ARG1_BYTES == O * C * K * K * 4,
               "the step's sizes");

static float* alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static int failures = 0;
static void expect_near(const char* what, int i, float got, double want) {
  if (!(fabs(got - want) <= 1e-5 * (1.0 + fabs(want)))) {
    if (failures++ < 10) fprintf(stderr, "%s[%d] = %.9g, want %.9g\n", what, i, got, want);
  }
}

/* x[n, c, h, w], 0 outside the input. */
static double at(const float* x, int n, int c, int h, int w) {
  return h < 0 || h >= H || w < 0 || w >= W ? 0.0 : x[((n * C + c) * H + h) * W + w];
}

int main(void) {
  float *x = alloc64(4 * N * C * H * W), *w = alloc64(4 * O * C * K * K), *b = alloc64(4 * O);
  float *g = alloc64(4 * N * O * 4 * 4), *zero = alloc64(4);
  int64_t* idx = aligned_alloc(64, 64 + 64);
  for (int i = 0; i < N * C * H * W; ++i) x[i] = sinf(0.37f * i);
  for (int i = 0; i < O * C * K * K; ++i) w[i] = cosf(0.11f * i) * 0.3f;
  for (int i = 0; i < O; ++i) b[i] = 0.05f * i - 0.1f;
  for (int i = 0; i < N * O * 16; ++i) g[i] = sinf(0.23f * i + 1.0f);
  for (int i = 0; i < N * 5; ++i) idx[i] = i % 4;
  *zero = 0;
  float *p = alloc64(4 * N * O * 16), *db = alloc64(4 * O), *dw = alloc64(4 * O * C * K * K);
  float *dx = alloc64(4 * N * C * H * W), *padded = alloc64(4 * N * C * 10 * 10);
  float *gathered = alloc64(4 * N * 5), *added = alloc64(4 * N * 7);
  void* temp = alloc64(MSTEP_STEP_TEMP_BYTES > 0 ? MSTEP_STEP_TEMP_BYTES : 64);
  const void* inputs[MSTEP_STEP_NUM_INPUTS];
  inputs[MSTEP_STEP_IN_ARG0] = x;
  inputs[MSTEP_STEP_IN_ARG1] = w;
  inputs[MSTEP_STEP_IN_ARG2] = b;
  inputs[MSTEP_STEP_IN_ARG3] = g;
  inputs[MSTEP_STEP_IN_ARG4] = idx;
  inputs[MSTEP_STEP_IN_ARG5] = zero;
  void* outputs[MSTEP_STEP_NUM_OUTPUTS];
  outputs[MSTEP_STEP_OUT_RESULT0] = p;
  outputs[MSTEP_STEP_OUT_RESULT1] = db;
  outputs[MSTEP_STEP_OUT_RESULT2] = dw;
  outputs[MSTEP_STEP_OUT_RESULT3] = dx;
  outputs[MSTEP_STEP_OUT_RESULT4] = padded;
  outputs[MSTEP_STEP_OUT_RESULT5] = gathered;
  outputs[MSTEP_STEP_OUT_RESULT6] = added;
  if (mstep_step(inputs, outputs, temp) != 0) return fprintf(stderr, "mstep_step failed\n"), 1;

  /* The forward: conv, relu, 2x2 max pool. */
  static double conv[N][O][H][W];
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < W; ++v) {
          double acc = b[o];
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < K; ++i)
              for (int j = 0; j < K; ++j)
                acc += at(x, n, c, h - 1 + i, v - 1 + j) * w[((o * C + c) * K + i) * K + j];
          conv[n][o][h][v] = acc > 0 ? acc : 0;
        }
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int h = 0; h < 4; ++h)
        for (int v = 0; v < 4; ++v) {
          double most = conv[n][o][2 * h][2 * v];
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j)
              if (conv[n][o][2 * h + i][2 * v + j] > most) most = conv[n][o][2 * h + i][2 * v + j];
          expect_near("pooled", ((n * O + o) * 4 + h) * 4 + v, p[((n * O + o) * 4 + h) * 4 + v],
                      most);
        }
  /* The gradients of the conv for gp. */
  static double gp[N][O][H][W];
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < W; ++v) gp[n][o][h][v] = 0.25 * g[((n * O + o) * 4 + h / 2) * 4 + v / 2];
  for (int o = 0; o < O; ++o) {
    double acc = 0;
    for (int n = 0; n < N; ++n)
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < W; ++v) acc += gp[n][o][h][v];
    expect_near("db", o, db[o], acc);
  }
  for (int o = 0; o < O; ++o)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) {
          double acc = 0;
          for (int n = 0; n < N; ++n)
            for (int h = 0; h < H; ++h)
              for (int v = 0; v < W; ++v) acc += at(x, n, c, h - 1 + i, v - 1 + j) * gp[n][o][h][v];
          const int k = ((o * C + c) * K + i) * K + j;
          expect_near("dw", k, dw[k], acc);
        }
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < W; ++v) {
          double acc = 0;
          for (int o = 0; o < O; ++o)
            for (int i = 0; i < K; ++i)
              for (int j = 0; j < K; ++j) {
                const int oh = h + 1 - i, ow = v + 1 - j;
                if (oh >= 0 && oh < H && ow >= 0 && ow < W)
                  acc += w[((o * C + c) * K + i) * K + j] * gp[n][o][oh][ow];
              }
          const int k = ((n * C + c) * H + h) * W + v;
          expect_near("dx", k, dx[k], acc);
        }
  if (failures) fprintf(stderr, "%d mismatches\n", failures);
  else printf("conv_step: the stand-alone step's convolutions equal the reference\n");
  return failures != 0;
}
