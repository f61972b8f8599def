/* train_mlp: mnist_mlp's MLP trained in plain C11 through a step compiled
 * ahead of time: no mstep library, only the shared object mstep-aot wrote
 * (libstep.so, which needs oneDNN, libc and libm) and its header (step.h).
 * The step is mnist_mlp's whole training step (forward, NLL loss, backward,
 * Adadelta), captured and saved by mnist_mlp after its first 4 steps; this
 * program continues the training from there on the same batches (the
 * shared C data code, the same shuffle), so its losses are mnist_mlp's.
 *
 *   train_mlp step.bin --first-step N --steps M [--synthetic | --data DIR]
 *
 * step.bin: mstep-aot's --data (the weights, the optimizer state and the
 * RNG state at the export). --first-step: the steps mnist_mlp ran before it
 * saved (4 in replay mode); --steps: the last step to run. Prints
 * "step K loss X" for K = N+1..M. build_and_run.sh shows the whole recipe.
 * Exit status: 0 ok, 1 a file or the data does not load, 2 bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/common/mnist_data.h"
#include "step.h"

enum { kBatch = 200 };

_Static_assert(MSTEP_STEP_IN_X_BYTES == (int64_t)kBatch * MNIST_PIXELS * 4, "x is the batch");
_Static_assert(MSTEP_STEP_IN_Y_BYTES == (int64_t)kBatch * 8, "y is the labels");
_Static_assert(MSTEP_STEP_OUT_LOSS_BYTES == 4, "the loss is one f32");

static void* alloc64(int64_t bytes) {
  return aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64 + 64));
}

static int usage(const char* why) {
  fprintf(stderr, "train_mlp: %s\nusage: train_mlp step.bin --first-step N --steps M "
                  "[--synthetic | --data DIR]\n", why);
  return 2;
}

int main(int argc, char** argv) {
  const char* data_path = NULL;
  const char* dir = "";
  int synthetic = 0;
  long long first_step = -1, last_step = -1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--synthetic") == 0) synthetic = 1;
    else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) dir = argv[++i];
    else if (strcmp(argv[i], "--first-step") == 0 && i + 1 < argc) first_step = atoll(argv[++i]);
    else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) last_step = atoll(argv[++i]);
    else if (argv[i][0] == '-') return usage("unknown option");
    else data_path = argv[i];
  }
  if (data_path == NULL || first_step < 0 || last_step < first_step)
    return usage("needs step.bin, --first-step and --steps");

  /* The values at export, each input at its offset. */
  char* values = alloc64(MSTEP_STEP_DATA_BYTES);
  FILE* f = fopen(data_path, "rb");
  if (f == NULL || fread(values, 1, MSTEP_STEP_DATA_BYTES, f) != MSTEP_STEP_DATA_BYTES) {
    fprintf(stderr, "train_mlp: cannot read %lld bytes from %s\n",
            (long long)MSTEP_STEP_DATA_BYTES, data_path);
    return 1;
  }
  fclose(f);
  static const int64_t offsets[] = MSTEP_STEP_INPUT_DATA_OFFSETS;
  static const int64_t output_bytes[] = MSTEP_STEP_OUTPUT_BYTES;
  static const int64_t updates[] = MSTEP_STEP_OUTPUT_UPDATES;
  static const int64_t in_place[] = MSTEP_STEP_OUTPUT_IN_PLACE;
  void* inputs[MSTEP_STEP_NUM_INPUTS];
  void* outputs[MSTEP_STEP_NUM_OUTPUTS];
  for (int i = 0; i < MSTEP_STEP_NUM_INPUTS; ++i) inputs[i] = values + offsets[i];
  /* A weight's or a state's new value is written over the old one where
   * the step allows it, else into a buffer of its own and copied back. */
  for (int j = 0; j < MSTEP_STEP_NUM_OUTPUTS; ++j)
    outputs[j] = in_place[j] ? inputs[updates[j]] : alloc64(output_bytes[j]);
  void* temp = alloc64(MSTEP_STEP_TEMP_BYTES);

  mnist_dataset train = {0}, test = {0};
  char what[512] = "", error[512] = "";
  if (mnist_load(dir, synthetic, &train, &test, what, sizeof what, error, sizeof error) != 0) {
    fprintf(stderr, "train_mlp: %s\n", error);
    return 1;
  }
  printf("train_mlp: data: %s\n", what);
  int64_t* order = malloc(sizeof(int64_t) * (size_t)train.size);
  mnist_rng shuffle_rng;
  mnist_rng_seed(&shuffle_rng, 0);
  mnist_identity_order(order, train.size);
  const int64_t epoch_size = train.size - train.size % kBatch;
  long long step = 0;
  while (step < last_step) {
    mnist_shuffle(order, train.size, &shuffle_rng);
    for (int64_t first = 0; first < epoch_size && step < last_step; first += kBatch) {
      if (++step <= first_step) continue; /* mnist_mlp ran it before the export */
      mnist_batch(&train, order, first, kBatch, inputs[MSTEP_STEP_IN_X], inputs[MSTEP_STEP_IN_Y]);
#ifdef MSTEP_STEP_RNG_SEED
      int64_t* rng = inputs[MSTEP_STEP_IN_RNG_STATE];
      rng[0] = (int64_t)MSTEP_STEP_RNG_SEED;
      rng[1] = (int64_t)(MSTEP_STEP_RNG_FIRST_OFFSET +
                         MSTEP_STEP_RNG_OFFSET_PER_STEP * (uint64_t)(step - first_step - 1));
#endif
      if (mstep_step((const void* const*)inputs, outputs, temp) != 0) {
        fprintf(stderr, "train_mlp: the step failed\n");
        return 1;
      }
      for (int j = 0; j < MSTEP_STEP_NUM_OUTPUTS; ++j)
        if (updates[j] >= 0 && !in_place[j])
          memcpy(inputs[updates[j]], outputs[j], (size_t)output_bytes[j]);
      float loss;
      memcpy(&loss, outputs[MSTEP_STEP_OUT_LOSS], sizeof loss);
      printf("step %lld loss %.9g\n", step, loss);
    }
  }
  mnist_dataset_free(&train);
  mnist_dataset_free(&test);
  return 0;
}
