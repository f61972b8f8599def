/* mnist_c: the MNIST MLP of examples/mnist_mlp.cpp trained from a pure C11
 * host through the mstep C API (include/mstep-c/mstep.h) only.
 *
 * Same model, initialization, optimizer, data and step order as the C++
 * example, so for the same seed it prints the same losses
 * (test/examples/c_host_matches_cpp.sh checks it):
 *   Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax,
 *   nll_loss; Adadelta lr 0.1; batch 200; each step: zero_grad, forward,
 *   loss, backward, mark_step, optimizer step, mark_step.
 *
 *   mnist_c [--data DIR | --synthetic] [--epochs N] [--max-steps N] [--log-every N]
 *           [--device cpu|ref] [--mode lazy|replay] [--print-losses]
 *
 * Modes:
 *   lazy    every step is recorded, hashed, looked up and run.
 *   replay  3 lazy warmup steps on static input tensors, then one whole
 *           step captured (mstep_capture_begin ... mstep_captured_graph_end);
 *           each later batch is copied into the static inputs
 *           (mstep_tensor_copy_) and the capture replayed.
 *
 * Every mstep_status is checked: an error prints its message and exits with
 * status 2. At the end every handle is released, and the context release
 * succeeding shows that none leaked. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/common/mnist_data.h"
#include "mstep-c/mstep.h"

enum { kBatch = 200, kHidden = 128, kReplayWarmupSteps = 3 };

/* ---- Errors -------------------------------------------------------------- */

/* Exits with status 2 when `status` is an error, printing what failed. */
static void check_status(mstep_status* status, const char* call, int line) {
  if (status == NULL) return;
  fprintf(stderr, "mnist_c: %s failed (line %d): %s\n", call, line, mstep_status_message(status));
  mstep_status_free(status);
  exit(2);
}
#define CHECK(call) check_status((call), #call, __LINE__)

/* Prints "mnist_c: <message>" to stderr and exits with status 2. */
_Noreturn static void fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("mnist_c: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(2);
}

/* ---- Ops ----------------------------------------------------------------- */

/* Records `op` on `inputs` with `attrs`; returns its single result. */
static mstep_tensor* op(mstep_context* ctx, const char* name, mstep_tensor* const* inputs,
                        size_t num_inputs, const mstep_attr* attrs, size_t num_attrs) {
  mstep_tensor* result = NULL;
  size_t count = 0;
  char what[96];
  snprintf(what, sizeof what, "mstep_op(ctx, \"%s\", ...)", name);
  check_status(mstep_op(ctx, name, inputs, num_inputs, attrs, num_attrs, &result, 1, &count), what,
               __LINE__);
  if (count != 1) fail("mstep_op(\"%s\") returned %zu results, expected 1", name, count);
  return result;
}

/* `op` on one tensor, then releases that tensor (a chain of temporaries). */
static mstep_tensor* op_consume(mstep_context* ctx, const char* name, mstep_tensor* x,
                                const mstep_attr* attrs, size_t num_attrs) {
  mstep_tensor* result = op(ctx, name, &x, 1, attrs, num_attrs);
  CHECK(mstep_tensor_release(x));
  return result;
}

/* ---- Model --------------------------------------------------------------- */

/* The parameters in nn::Module order: fc1.weight, fc1.bias, fc2.weight,
 * fc2.bias. */
typedef struct Mlp {
  mstep_tensor* params[4];
} Mlp;

/* nn::init::uniform: ((rand(shape) * 2 - 1) * bound).detach() with
 * gradients off, the op sequence of the C++ Linear, so the Philox stream
 * and the float rounding are the same. */
static mstep_tensor* init_uniform(mstep_context* ctx, const int64_t* shape, size_t rank,
                                  double bound) {
  CHECK(mstep_context_set_grad_enabled(ctx, 0));
  const mstep_attr shape_attr = MSTEP_ATTR_INTS("shape", shape, rank);
  mstep_tensor* t = op(ctx, "rand", NULL, 0, &shape_attr, 1);
  const mstep_attr two = MSTEP_ATTR_F("other", 2.0);
  const mstep_attr one = MSTEP_ATTR_F("other", 1.0);
  const mstep_attr scale = MSTEP_ATTR_F("other", bound);
  t = op_consume(ctx, "mul", t, &two, 1);
  t = op_consume(ctx, "sub", t, &one, 1);
  t = op_consume(ctx, "mul", t, &scale, 1);
  t = op_consume(ctx, "detach", t, NULL, 0);
  CHECK(mstep_context_set_grad_enabled(ctx, 1));
  CHECK(mstep_tensor_set_requires_grad(t, 1));
  return t;
}

/* nn::Linear(in, out): weight [out, in] then bias [out], both
 * U(-1/sqrt(in), 1/sqrt(in)). */
static void init_linear(mstep_context* ctx, int64_t in, int64_t out, mstep_tensor** weight,
                        mstep_tensor** bias) {
  const double bound = 1.0 / sqrt((double)in); /* init::kaiming_bound */
  const int64_t weight_shape[2] = {out, in};
  const int64_t bias_shape[1] = {out};
  *weight = init_uniform(ctx, weight_shape, 2, bound);
  *bias = init_uniform(ctx, bias_shape, 1, bound);
}

static void mlp_init(mstep_context* ctx, Mlp* m) {
  init_linear(ctx, MNIST_PIXELS, kHidden, &m->params[0], &m->params[1]);
  init_linear(ctx, kHidden, MNIST_CLASSES, &m->params[2], &m->params[3]);
}

/* x [N, 784] -> log-probabilities [N, 10]; dropout only when training. */
static mstep_tensor* mlp_forward(mstep_context* ctx, const Mlp* m, mstep_tensor* x, int train) {
  mstep_tensor* fc1[3] = {x, m->params[0], m->params[1]};
  mstep_tensor* h = op(ctx, "linear", fc1, 3, NULL, 0);
  h = op_consume(ctx, "relu", h, NULL, 0);
  if (train) {
    const mstep_attr drop[2] = {MSTEP_ATTR_F("p", 0.5), MSTEP_ATTR_B("train", 1)};
    h = op_consume(ctx, "dropout", h, drop, 2);
  }
  mstep_tensor* fc2[3] = {h, m->params[2], m->params[3]};
  mstep_tensor* logits = op(ctx, "linear", fc2, 3, NULL, 0);
  CHECK(mstep_tensor_release(h));
  const mstep_attr dim = MSTEP_ATTR_I("dim", 1);
  return op_consume(ctx, "log_softmax", logits, &dim, 1);
}

/* ---- Data ---------------------------------------------------------------- */

/* Host staging arrays for one batch. */
typedef struct Batch {
  float images[kBatch * MNIST_PIXELS];
  int64_t labels[kBatch];
} Batch;

/* Rows order[first, first + kBatch) as tensors x [200, 784] f32 and y [200]
 * i64 (copied: the staging arrays are reused). */
static void batch_tensors(mstep_context* ctx, mstep_device* device, const mnist_dataset* d,
                          const int64_t* order, int64_t first, Batch* staging, mstep_tensor** x,
                          mstep_tensor** y) {
  mnist_batch(d, order, first, kBatch, staging->images, staging->labels);
  const int64_t x_shape[2] = {kBatch, MNIST_PIXELS};
  const int64_t y_shape[1] = {kBatch};
  CHECK(mstep_tensor_from_host(ctx, device, MSTEP_F32, x_shape, 2, staging->images,
                               sizeof staging->images, x));
  CHECK(mstep_tensor_from_host(ctx, device, MSTEP_I64, y_shape, 1, staging->labels,
                               sizeof staging->labels, y));
}

/* Test accuracy in eval mode (no dropout, no gradients), full batches in
 * data set order: the same computation as the C++ example's accuracy(). */
static double accuracy(mstep_context* ctx, mstep_device* device, const Mlp* m,
                       const mnist_dataset* test, Batch* staging) {
  int64_t* order = malloc((size_t)(test->size > 0 ? test->size : 1) * sizeof(int64_t));
  if (order == NULL) fail("out of memory");
  mnist_identity_order(order, test->size);
  CHECK(mstep_context_set_grad_enabled(ctx, 0));
  int64_t correct = 0, seen = 0;
  for (int64_t first = 0; first + kBatch <= test->size; first += kBatch) {
    mstep_tensor *x, *y;
    batch_tensors(ctx, device, test, order, first, staging, &x, &y);
    const mstep_attr dim = MSTEP_ATTR_I("dim", 1);
    mstep_tensor* pred = op_consume(ctx, "argmax", mlp_forward(ctx, m, x, 0), &dim, 1);
    int64_t predicted[kBatch];
    CHECK(mstep_tensor_copy_to_host(pred, predicted, sizeof predicted));
    for (int i = 0; i < kBatch; ++i) correct += predicted[i] == staging->labels[i];
    seen += kBatch;
    CHECK(mstep_tensor_release(pred));
    CHECK(mstep_tensor_release(x));
    CHECK(mstep_tensor_release(y));
  }
  CHECK(mstep_context_set_grad_enabled(ctx, 1));
  free(order);
  return seen ? (double)correct / (double)seen : 0;
}

/* ---- Flags --------------------------------------------------------------- */

typedef struct Flags {
  const char* data_dir;
  long long epochs, max_steps, log_every;
  int replay;
  const char* device;
  int synthetic; /* --synthetic: the synthetic set even when real data is installed */
  int print_losses;
} Flags;

static const char kUsage[] =
    " (use --data DIR, --synthetic, --epochs N, --max-steps N, --log-every N, "
    "--device cpu|ref, --mode lazy|replay, --print-losses)";

static long long parse_int(const char* flag, const char* value) {
  char* end = NULL;
  const long long n = strtoll(value, &end, 10);
  if (value[0] == '\0' || *end != '\0') fail("%s wants an integer, got '%s'", flag, value);
  return n;
}

/* Accepts `--flag value` and `--flag=value`. */
static Flags parse_flags(int argc, char** argv) {
  Flags f = {.data_dir = "", .epochs = 1, .max_steps = -1, .log_every = 10, .device = "cpu"};
  for (int i = 1; i < argc; ++i) {
    char flag[64];
    const char* value = NULL;
    const char* eq = strchr(argv[i], '=');
    if (strncmp(argv[i], "--", 2) == 0 && eq != NULL && (size_t)(eq - argv[i]) < sizeof flag) {
      memcpy(flag, argv[i], (size_t)(eq - argv[i]));
      flag[eq - argv[i]] = '\0';
      value = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", argv[i]);
    }
    if (strcmp(flag, "--print-losses") == 0) {
      f.print_losses = 1;
      continue;
    }
    if (strcmp(flag, "--synthetic") == 0) {
      f.synthetic = 1;
      continue;
    }
    if (value == NULL) {
      if (i + 1 >= argc) fail("%s needs a value%s", flag, kUsage);
      value = argv[++i];
    }
    if (strcmp(flag, "--data") == 0) {
      f.data_dir = value;
    } else if (strcmp(flag, "--epochs") == 0) {
      f.epochs = parse_int(flag, value);
    } else if (strcmp(flag, "--max-steps") == 0) {
      f.max_steps = parse_int(flag, value);
    } else if (strcmp(flag, "--log-every") == 0) {
      f.log_every = parse_int(flag, value);
      if (f.log_every < 1) f.log_every = 1;
    } else if (strcmp(flag, "--device") == 0) {
      f.device = value; /* any registered backend; main() checks it through the C API */
    } else if (strcmp(flag, "--mode") == 0) {
      if (strcmp(value, "lazy") == 0)
        f.replay = 0;
      else if (strcmp(value, "replay") == 0)
        f.replay = 1;
      else
        fail("unknown --mode '%s'; use lazy or replay", value);
    } else {
      fail("unknown flag %s%s", flag, kUsage);
    }
  }
  return f;
}

static double seconds_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- Training ------------------------------------------------------------ */

/* One lazy training step on (x, y), as the Gaudi example: zero_grad,
 * forward, loss, backward, mark_step, optimizer step, mark_step. Returns the
 * loss (materialized). */
static mstep_tensor* lazy_step(mstep_context* ctx, const Mlp* m, mstep_optimizer* opt,
                               mstep_tensor* x, mstep_tensor* y) {
  CHECK(mstep_optimizer_zero_grad(opt));
  mstep_tensor* loss_inputs[2] = {mlp_forward(ctx, m, x, 1), y};
  mstep_tensor* loss = op(ctx, "nll_loss", loss_inputs, 2, NULL, 0);
  CHECK(mstep_tensor_release(loss_inputs[0]));
  CHECK(mstep_tensor_backward(loss));
  CHECK(mstep_context_mark_step(ctx)); /* after backward ... */
  CHECK(mstep_optimizer_step(opt));
  CHECK(mstep_context_mark_step(ctx)); /* ... and after the optimizer step */
  return loss;
}

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  if (mstep_c_api_version() / 10000 != MSTEP_C_API_VERSION_MAJOR)
    fail("libmstep_c is C API version %d, this program was built against major version %d",
         mstep_c_api_version(), MSTEP_C_API_VERSION_MAJOR);

  mstep_context* ctx = NULL;
  CHECK(mstep_context_create(&ctx));
  CHECK(mstep_context_set_option(ctx, "device", flags.device));
  mstep_device* device = NULL;
  CHECK(mstep_context_device(ctx, flags.device, &device));

  mnist_dataset train = {0}, test = {0};
  char what[512] = "", error[512] = "";
  if (mnist_load(flags.data_dir, flags.synthetic, &train, &test, what, sizeof what, error,
                 sizeof error) != 0)
    fail("%s", error);
  printf("mnist_c: data: %s\n", what);

  CHECK(mstep_context_manual_seed(ctx, 0));
  Mlp model;
  mlp_init(ctx, &model);
  mstep_optimizer* opt = NULL;
  const mstep_attr lr = MSTEP_ATTR_F("lr", 0.1);
  CHECK(mstep_optimizer_create(ctx, "adadelta", model.params, 4, &lr, 1, &opt));
  printf("model: Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax; Adadelta lr "
         "0.1, batch %d; mode %s; device %s; C API %d\n",
         kBatch, flags.replay ? "replay" : "lazy", mstep_device_name(device),
         mstep_c_api_version());

  Batch* staging = malloc(sizeof(Batch));
  int64_t* order = malloc((size_t)(train.size > 0 ? train.size : 1) * sizeof(int64_t));
  if (staging == NULL || order == NULL) fail("out of memory");
  printf("test accuracy before training: %.1f%%\n",
         100 * accuracy(ctx, device, &model, &test, staging));

  /* replay: the static inputs every step reads, and the capture. */
  mstep_tensor *static_x = NULL, *static_y = NULL, *static_loss = NULL;
  mstep_captured_graph* captured = NULL;
  if (flags.replay) {
    const int64_t x_shape[2] = {kBatch, MNIST_PIXELS};
    const int64_t y_shape[1] = {kBatch};
    CHECK(mstep_tensor_full(ctx, device, MSTEP_F32, x_shape, 2, 0.0, &static_x));
    CHECK(mstep_tensor_full(ctx, device, MSTEP_I64, y_shape, 1, 0.0, &static_y));
  }

  CHECK(mstep_metrics_reset(ctx));
  mnist_rng shuffle_rng;
  mnist_rng_seed(&shuffle_rng, 0);
  mnist_identity_order(order, train.size);
  const int64_t epoch_size = train.size - train.size % kBatch;
  long long step = 0;
  const double t0 = seconds_now();
  for (long long epoch = 0; epoch < flags.epochs; ++epoch) {
    mnist_shuffle(order, train.size, &shuffle_rng);
    for (int64_t first = 0; first < epoch_size; first += kBatch) {
      if (flags.max_steps >= 0 && step >= flags.max_steps) break;
      mstep_tensor *x, *y, *loss;
      batch_tensors(ctx, device, &train, order, first, staging, &x, &y);
      if (!flags.replay) {
        loss = lazy_step(ctx, &model, opt, x, y);
      } else {
        /* Materialized batches: the copy rebinds, nothing is traced. */
        CHECK(mstep_tensor_copy_(static_x, x));
        CHECK(mstep_tensor_copy_(static_y, y));
        if (step < kReplayWarmupSteps) {
          loss = lazy_step(ctx, &model, opt, static_x, static_y);
        } else {
          if (captured == NULL) {
            CHECK(mstep_capture_begin(ctx, &captured));
            static_loss = lazy_step(ctx, &model, opt, static_x, static_y);
            CHECK(mstep_captured_graph_end(captured));
          } else {
            CHECK(mstep_captured_graph_replay(captured));
          }
          CHECK(mstep_tensor_retain(static_loss)); /* the loop releases `loss` */
          loss = static_loss;
        }
      }
      CHECK(mstep_tensor_release(x));
      CHECK(mstep_tensor_release(y));
      ++step;
      if (flags.print_losses || step == 1 || step % flags.log_every == 0) {
        double value = 0;
        CHECK(mstep_tensor_item(loss, &value));
        printf("step %lld loss %.6f\n", step, value);
      }
      CHECK(mstep_tensor_release(loss));
    }
  }
  const double secs = seconds_now() - t0;
  double compiles = 0, hits = 0, replays = 0;
  CHECK(mstep_metrics_get(ctx, "cache_misses", &compiles));
  CHECK(mstep_metrics_get(ctx, "cache_hits", &hits));
  CHECK(mstep_metrics_get(ctx, "replays", &replays));
  printf("mode %s: %lld steps in %.3f s, %.1f steps/s; compiles %.0f, cache hits %.0f, "
         "replays %.0f\n",
         flags.replay ? "replay" : "lazy", step, secs, secs > 0 ? step / secs : 0.0, compiles, hits,
         replays);
  if (captured != NULL) {
    size_t segments = 0, kernels = 0;
    CHECK(mstep_captured_graph_stats(captured, &segments, &kernels));
    printf("replay graph: %zu segments, %zu kernels\n", segments, kernels);
  }
  const double acc = accuracy(ctx, device, &model, &test, staging);
  printf("test accuracy after %lld steps: %.1f%%\n", step, 100 * acc);

  /* Every handle back, then the context: its release fails if any leaked. */
  CHECK(mstep_captured_graph_release(captured));
  CHECK(mstep_tensor_release(static_loss));
  CHECK(mstep_tensor_release(static_x));
  CHECK(mstep_tensor_release(static_y));
  CHECK(mstep_optimizer_release(opt));
  for (int i = 0; i < 4; ++i) CHECK(mstep_tensor_release(model.params[i]));
  CHECK(mstep_context_release(ctx));
  printf("all handles released\n");
  free(order);
  free(staging);
  mnist_dataset_free(&train);
  mnist_dataset_free(&test);
  return acc > 0.5 ? 0 : 1;
}
