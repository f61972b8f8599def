// mstep_xla_gemm_bf16, mstep_xla_gemm_f32 and mstep_xla_gemm_bf16_f32
// (XlaGemm.h): one oneDNN matmul per call over
// [batch, m, k] x [batch, k, n] -> [batch, m, n], an operand with stride 0
// given one batch (oneDNN broadcasts it), a transposed operand read in
// place through swapped strides, the bias and the gelu / residual add as
// the primitive's epilogue on its f32 accumulator (the cpu backend's
// build_matmul). Written against oneDNN's C API so that a stand-alone
// mstep-aot object can carry it with no C++ runtime.
#include "XlaGemm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "oneapi/dnnl/dnnl.h"

/// batch, m, n, k, trans_a, a_stride, trans_b, b_stride, has bias,
/// activation, has residual, the operands' data type (dnnl_bf16 or
/// dnnl_f32), threads (a primitive keeps the thread count it was made
/// under), the result's data type, and the calling thread's slot (each
/// thread of a parallel region runs a primitive of its own, so the
/// convolutions' per-sample calls do not wait on each other's lock).
enum { kKeyLength = 15 };

/// One distinct call: its primitive and the memories it runs over
/// (pointed at the operands on each call), or none (primitive NULL) where
/// oneDNN declined it and the plain loop multiplies.
struct Gemm {
  int64_t key[kKeyLength];
  dnnl_primitive_t primitive;
  dnnl_stream_t stream;
  dnnl_memory_t a, b, c, bias, residual, scratchpad;
  pthread_mutex_t running;
  struct Gemm* next;
};

static pthread_mutex_t gemms_lock = PTHREAD_MUTEX_INITIALIZER;
// Hash buckets of entries, so a call's lookup scans only its bucket (a
// GPT-mini step has dozens of distinct gemms, each looked up per call).
enum { kGemmBuckets = 64 };
static struct Gemm* gemms[kGemmBuckets]; // under gemms_lock; never freed (process lifetime)
static dnnl_engine_t engine;              // made under gemms_lock on first use
static int (*_Atomic thread_count)(void); // mstep_xla_gemm_set_thread_count; NULL: 0
static int (*_Atomic thread_slot_query)(void); // mstep_xla_gemm_set_thread_slot; NULL: 0
static void (*_Atomic on_one_thread)(void (*)(void*), void*); // NULL: f(arg) as it is

void mstep_xla_gemm_set_thread_count(int (*query)(void)) { thread_count = query; }
void mstep_xla_gemm_set_thread_slot(int (*slot)(void), void (*one_thread)(void (*)(void*), void*)) {
  thread_slot_query = slot;
  on_one_thread = one_thread;
}

static float bf16_value(uint16_t bits) {
  const uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/// Round to nearest even; a NaN stays a quiet NaN (mstep's BFloat16).
static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/// The desc of an operand of logical dims [batch, rows, cols], stored
/// dense as [rows, cols] per batch, or as [cols, rows] when `transposed`.
static dnnl_memory_desc_t operand_desc(int64_t batch, int64_t rows, int64_t cols, int64_t stride,
                                       int64_t transposed, dnnl_data_type_t type) {
  const dnnl_dims_t dims = {stride == 0 ? 1 : batch, rows, cols};
  const int64_t batch_stride = stride == 0 ? rows * cols : stride;
  dnnl_dims_t strides = {batch_stride, cols, 1};
  if (transposed) strides[1] = 1, strides[2] = rows;
  dnnl_memory_desc_t md;
  dnnl_memory_desc_init_by_strides(&md, 3, dims, type, strides);
  return md;
}

/// The primitive for `key`, or 0 (g->primitive stays NULL) when oneDNN
/// declines it. Called under gemms_lock.
static void make_primitive(struct Gemm* g) {
  const int64_t* key = g->key;
  const int64_t batch = key[0], m = key[1], n = key[2], k = key[3];
  const int64_t activation = key[9];
  const dnnl_data_type_t type = (dnnl_data_type_t)key[11];
  const dnnl_data_type_t result_type = (dnnl_data_type_t)key[13];
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) return;
  const dnnl_memory_desc_t a = operand_desc(batch, m, k, key[5], key[4], type);
  const dnnl_memory_desc_t b = operand_desc(batch, k, n, key[7], key[6], type);
  const dnnl_memory_desc_t c = operand_desc(batch, m, n, m * n, 0, result_type);
  const dnnl_dims_t bias_dims = {1, 1, n}, bias_strides = {n, n, 1};
  dnnl_memory_desc_t bias;
  dnnl_memory_desc_init_by_strides(&bias, 3, bias_dims, type, bias_strides);
  dnnl_matmul_desc_t desc;
  if (dnnl_matmul_desc_init(&desc, &a, &b, key[8] ? &bias : NULL, &c) != dnnl_success) return;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_create(&attr);
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_post_ops_create(&ops);
  if (activation == MSTEP_GEMM_GELU_ERF || activation == MSTEP_GEMM_GELU_TANH)
    dnnl_post_ops_append_eltwise(
        ops, 1.f, activation == MSTEP_GEMM_GELU_ERF ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh,
        0.f, 0.f);
  if (key[10]) dnnl_post_ops_append_binary(ops, dnnl_binary_add, &c);
  if (dnnl_post_ops_len(ops) > 0) dnnl_primitive_attr_set_post_ops(attr, ops);
  if (dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success &&
      dnnl_primitive_create(&g->primitive, pd) == dnnl_success) {
    dnnl_stream_create(&g->stream, engine, dnnl_stream_default_flags);
    dnnl_memory_create(&g->a, &a, engine, DNNL_MEMORY_NONE);
    dnnl_memory_create(&g->b, &b, engine, DNNL_MEMORY_NONE);
    dnnl_memory_create(&g->c, &c, engine, DNNL_MEMORY_NONE);
    if (key[8]) dnnl_memory_create(&g->bias, &bias, engine, DNNL_MEMORY_NONE);
    if (key[10]) dnnl_memory_create(&g->residual, &c, engine, DNNL_MEMORY_NONE);
    dnnl_memory_create(&g->scratchpad, dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0),
                       engine, DNNL_MEMORY_ALLOCATE);
  } else {
    g->primitive = NULL; // the plain loop multiplies it
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  dnnl_post_ops_destroy(ops);
  dnnl_primitive_attr_destroy(attr);
}

static void make_primitive_of(void* g) { make_primitive(g); }

/// The entry of `key`, made on first use (a thread slot's on one thread).
static struct Gemm* find_gemm(const int64_t* key) {
  uint64_t hash = 1469598103934665603ull; // FNV-1a over the key's words
  for (int i = 0; i < kKeyLength; ++i) hash = (hash ^ (uint64_t)key[i]) * 1099511628211ull;
  struct Gemm** bucket = &gemms[hash % kGemmBuckets];
  pthread_mutex_lock(&gemms_lock);
  struct Gemm* g = *bucket;
  while (g && memcmp(g->key, key, sizeof g->key) != 0) g = g->next;
  if (!g && (g = calloc(1, sizeof *g))) {
    memcpy(g->key, key, sizeof g->key);
    pthread_mutex_init(&g->running, NULL);
    void (*one_thread)(void (*)(void*), void*) = on_one_thread;
    if (key[14] > 0 && one_thread)
      one_thread(make_primitive_of, g);
    else
      make_primitive(g);
    g->next = *bucket;
    *bucket = g;
  }
  pthread_mutex_unlock(&gemms_lock);
  return g;
}

static float gelu(float x, int64_t activation) {
  if (activation == MSTEP_GEMM_GELU_ERF) return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x); // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(inner));
}

/// Element i of bf16 (`f32` zero) or f32 memory.
static float element(const void* p, int64_t i, int f32) {
  return f32 ? ((const float*)p)[i] : bf16_value(((const uint16_t*)p)[i]);
}

/// The plain loop: each product summed in f32 in order of k, the epilogue
/// in f32, rounded once (to a bf16 result; an f32 one stores the sum).
static void plain_gemm(const int64_t* key, const void* a, const void* b, void* c, const void* bias,
                       const void* residual) {
  const int64_t batch = key[0], m = key[1], n = key[2], k = key[3], trans_a = key[4],
                a_stride = key[5], trans_b = key[6], b_stride = key[7], activation = key[9];
  const int f32 = key[11] == dnnl_f32, f32_result = key[13] == dnnl_f32;
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        float sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += element(a, i * a_stride + (trans_a ? j * m + r : r * k + j), f32) *
                 element(b, i * b_stride + (trans_b ? col * k + j : j * n + col), f32);
        const int64_t at = (i * m + r) * n + col;
        if (bias) sum += element(bias, col, f32);
        if (activation == MSTEP_GEMM_GELU_ERF || activation == MSTEP_GEMM_GELU_TANH)
          sum = gelu(sum, activation);
        if (residual) sum += element(residual, at, f32);
        if (f32_result)
          ((float*)c)[at] = sum;
        else
          ((uint16_t*)c)[at] = bf16_bits(sum);
      }
}

/// relu on the rounded bits, as the cpu backend's ReluAfterKernel: a
/// negative value that is not NaN becomes +0 (oneDNN's relu would turn NaN
/// into 0).
static void relu_bits(uint16_t* c, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (c[i] > 0x8000 && (c[i] & 0x7FFF) <= 0x7F80) c[i] = 0;
}

/// relu on f32 values, as ReluAfterKernel: x < 0 ? 0 : x (NaN and -0 kept).
static void relu_f32(float* c, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (c[i] < 0.f) c[i] = 0.f;
}

/// The thread count a call's primitive is made for.
static int64_t threads(void) {
  int (*query)(void) = thread_count;
  return query ? query() : 0;
}

/// The calling thread's slot (mstep_xla_gemm_set_thread_slot).
static int64_t thread_slot(void) {
  int (*query)(void) = thread_slot_query;
  return query ? query() : 0;
}

/// mstep_xla_gemm_bf16_f32 without a primitive (oneDNN has no bf16 matmul
/// below avx512_core; a batch of tiny products, small_mixed_gemm): the
/// operands widened to f32 (exact) and multiplied by dnnl_sgemm, as the
/// convolutions' f32 gemms, so a CPU without bf16 instructions keeps
/// sgemm's speed. The plain loop when the staging cannot be allocated.
static void widened_gemm(const int64_t* key, const uint16_t* a, const uint16_t* b, float* c) {
  const int64_t batch = key[0], m = key[1], n = key[2], k = key[3], trans_a = key[4],
                a_stride = key[5], trans_b = key[6], b_stride = key[7];
  float* a32 = malloc((size_t)(m * k + k * n) * sizeof(float));
  if (!a32) {
    plain_gemm(key, a, b, c, NULL, NULL);
    return;
  }
  float* b32 = a32 + m * k;
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t j = 0; j < m * k; ++j) a32[j] = bf16_value(a[i * a_stride + j]);
    for (int64_t j = 0; j < k * n; ++j) b32[j] = bf16_value(b[i * b_stride + j]);
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.f, a32, trans_a ? m : k, b32,
               trans_b ? k : n, 0.f, c + i * m * n, n);
  }
  free(a32);
}

/// A bf16 x bf16 -> f32 call whose gemms take fewer multiply-adds each
/// than this runs as widened_gemm: oneDNN's matmul is slower than sgemm
/// on a batch of tiny products, as a depthwise conv's (32 x [1, 9] x
/// [9, 784]: 21 us as a primitive; xla_conv_bench --groups 32: 4.7 ms a
/// step that way, 4.25 widened), and faster from a 1x1 conv's
/// [64, 64] x [64, 196] up (0.86 ms a step vs 1.3 widened).
enum { kSmallMixedGemm = 1 << 16 };

static int small_mixed_gemm(const int64_t* key) {
  return key[11] == dnnl_bf16 && key[13] == dnnl_f32 &&
         key[1] * key[2] * key[3] < kSmallMixedGemm;
}

/// The fallback of a call oneDNN's matmul does not run.
static void fallback_gemm(const int64_t* key, const void* a, const void* b, void* c,
                          const void* bias, const void* residual) {
  if (key[11] == dnnl_bf16 && key[13] == dnnl_f32 && key[3] > 0)
    widened_gemm(key, a, b, c); // no epilogue: mstep_xla_gemm_bf16_f32's calls
  else
    plain_gemm(key, a, b, c, bias, residual);
}

/// Both entries: the gemm of `key` over memory of its data type.
static void run_gemm(const int64_t* key, const void* a, const void* b, void* c, const void* bias,
                     const void* residual) {
  const int64_t k = key[3], activation = key[9];
  struct Gemm* g = k == 0 || small_mixed_gemm(key) ? NULL : find_gemm(key);
  // An empty sum (oneDNN skips zero-volume primitives), a small mixed
  // call or no primitive.
  if (!g || !g->primitive) {
    fallback_gemm(key, a, b, c, bias, residual);
  } else {
    pthread_mutex_lock(&g->running);
    dnnl_memory_set_data_handle(g->a, (void*)a);
    dnnl_memory_set_data_handle(g->b, (void*)b);
    dnnl_memory_set_data_handle(g->c, c);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, g->a},
                               {DNNL_ARG_WEIGHTS, g->b},
                               {DNNL_ARG_DST, g->c},
                               {DNNL_ARG_SCRATCHPAD, g->scratchpad}};
    int nargs = 4;
    if (bias) {
      dnnl_memory_set_data_handle(g->bias, (void*)bias);
      args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, g->bias};
    }
    if (residual) {
      // The binary add is the last post-op.
      const int post_op = activation == MSTEP_GEMM_GELU_ERF || activation == MSTEP_GEMM_GELU_TANH;
      dnnl_memory_set_data_handle(g->residual, (void*)residual);
      args[nargs++] =
          (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op) | DNNL_ARG_SRC_1, g->residual};
    }
    const int ran = dnnl_primitive_execute(g->primitive, g->stream, nargs, args) == dnnl_success &&
                    dnnl_stream_wait(g->stream) == dnnl_success;
    pthread_mutex_unlock(&g->running);
    // A failed run (out of memory inside oneDNN) leaves c undefined: the
    // plain loop computes it instead of returning garbage.
    if (!ran) fallback_gemm(key, a, b, c, bias, residual);
  }
  const int64_t count = key[0] * key[1] * key[2];
  if (activation == MSTEP_GEMM_RELU && key[13] == dnnl_f32) relu_f32(c, count);
  if (activation == MSTEP_GEMM_RELU && key[13] == dnnl_bf16) relu_bits(c, count);
}

void mstep_xla_gemm_prepare(const int64_t* call) {
  // A call with an empty product or sum makes no primitive (run_gemm).
  if (call[1] == 0 || call[2] == 0 || call[3] == 0 || call[4] == 0) return;
  int64_t key[kKeyLength];
  memcpy(key, call + 1, (MSTEP_GEMM_CALL_LENGTH - 1) * sizeof *key);
  key[11] = call[0] == MSTEP_GEMM_F32 ? dnnl_f32 : dnnl_bf16;
  key[12] = threads();
  key[13] = key[11];
  key[14] = thread_slot();
  find_gemm(key);
}

/// The entries: a call over operands of data type `type` and a result of
/// `result_type`.
static void gemm_call(dnnl_data_type_t type, dnnl_data_type_t result_type, int64_t batch, int64_t m,
                      int64_t n, int64_t k, int64_t trans_a, const void* a, int64_t a_stride,
                      int64_t trans_b, const void* b, int64_t b_stride, void* c, const void* bias,
                      int64_t activation, const void* residual) {
  if (batch == 0 || m == 0 || n == 0) return;
  const int64_t key[kKeyLength] = {batch,      m,       n,         k,           trans_a,
                                   a_stride,   trans_b, b_stride,  !!bias,      activation,
                                   !!residual, type,    threads(), result_type, thread_slot()};
  run_gemm(key, a, b, c, bias, residual);
}

void mstep_xla_gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                         const uint16_t* a, int64_t a_stride, int64_t trans_b, const uint16_t* b,
                         int64_t b_stride, uint16_t* c, const uint16_t* bias, int64_t activation,
                         const uint16_t* residual) {
  gemm_call(dnnl_bf16, dnnl_bf16, batch, m, n, k, trans_a, a, a_stride, trans_b, b, b_stride, c,
            bias, activation, residual);
}

void mstep_xla_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                        const float* a, int64_t a_stride, int64_t trans_b, const float* b,
                        int64_t b_stride, float* c, const float* bias, int64_t activation,
                        const float* residual) {
  gemm_call(dnnl_f32, dnnl_f32, batch, m, n, k, trans_a, a, a_stride, trans_b, b, b_stride, c, bias,
            activation, residual);
}

void mstep_xla_gemm_bf16_f32(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                             const uint16_t* a, int64_t a_stride, int64_t trans_b,
                             const uint16_t* b, int64_t b_stride, float* c) {
  gemm_call(dnnl_bf16, dnnl_f32, batch, m, n, k, trans_a, a, a_stride, trans_b, b, b_stride, c,
            NULL, MSTEP_GEMM_NO_ACTIVATION, NULL);
}
