/* mstep C API: the stable embedding interface of the mstep execution engine.
 *
 * A host framework (written in C, or in Rust, Julia, Python... through FFI)
 * uses it to wrap its buffers as tensors, record ops lazily or build a graph
 * function op by op (or hand over an MLIR module of the `mstep` dialect),
 * compile through the module cache, run, capture and replay.
 *
 * Conventions (modelled on IREE's runtime API and XLA's PJRT C API):
 *  - Every function returns an `mstep_status*`. NULL means success. A
 *    non-NULL status owns a code and a message; read them with
 *    mstep_status_code() / mstep_status_message() and free it with
 *    mstep_status_free(). No function aborts on bad input: null handles,
 *    wrong shapes or dtypes, released handles that can be detected and
 *    replays with a different signature all come back as statuses, and the
 *    process keeps its state (nothing ran, nothing changed).
 *  - Results come back through `out_` parameters, written only on success.
 *  - Handles are opaque. Each `*_create`, `*_compile`, op call or other
 *    function that returns a handle gives the caller one reference, which
 *    the caller gives back with the matching `*_release`. Tensors are
 *    reference counted (mstep_tensor_retain adds a reference).
 *  - Thread-safety: mstep has one lazy tracer per process. Calls that record
 *    ops, run graphs, capture or replay (everything that takes a tensor,
 *    builder, compiled or captured graph) must be serialized by the host:
 *    one thread at a time, any thread. mstep_status_* functions,
 *    mstep_version_* and mstep_metrics_* are safe from any thread.
 *
 * Versioning:
 *  - MSTEP_C_API_VERSION_MAJOR changes when a function, type or enum value
 *    is removed or changes meaning; a host built against another major
 *    version must not load this library (check mstep_c_api_version()).
 *  - A minor version may add functions, enum values at the end of an enum,
 *    op names, attribute names, option keys and metric names. It never
 *    changes the layout of a struct declared here, the meaning of an
 *    existing enum value, or the ownership rules of an existing function.
 *  - A patch version changes no declaration.
 */
#ifndef MSTEP_C_MSTEP_H_
#define MSTEP_C_MSTEP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSTEP_C_API_VERSION_MAJOR 0
#define MSTEP_C_API_VERSION_MINOR 1
#define MSTEP_C_API_VERSION_PATCH 0
/* The version this header describes, as MAJOR * 10000 + MINOR * 100 + PATCH. */
#define MSTEP_C_API_VERSION                                             \
  (MSTEP_C_API_VERSION_MAJOR * 10000 + MSTEP_C_API_VERSION_MINOR * 100 + \
   MSTEP_C_API_VERSION_PATCH)

#if defined(__GNUC__)
#define MSTEP_C_EXPORT __attribute__((visibility("default")))
#define MSTEP_C_MUST_USE __attribute__((warn_unused_result))
#else
#define MSTEP_C_EXPORT
#define MSTEP_C_MUST_USE
#endif
#define MSTEP_C_API MSTEP_C_EXPORT MSTEP_C_MUST_USE

/* The version of the library loaded at run time (MSTEP_C_API_VERSION form).
 * Thread-safe; no status. */
MSTEP_C_EXPORT int32_t mstep_c_api_version(void);

/* ===== Status ============================================================ */

typedef enum mstep_status_code {
  MSTEP_OK = 0,
  MSTEP_INVALID_ARGUMENT = 1, /* null handle, wrong shape/dtype, bad attribute */
  MSTEP_NOT_FOUND = 2,        /* unknown op, option, device or metric name */
  MSTEP_FAILED_PRECONDITION = 3, /* wrong state: replay before capture, released handle */
  MSTEP_OUT_OF_RANGE = 4,     /* index out of range, buffer too small */
  MSTEP_UNIMPLEMENTED = 5,    /* valid request the engine cannot do yet */
  MSTEP_DATA_LOSS = 6,        /* corrupt cache entry or malformed input file */
  MSTEP_RESOURCE_EXHAUSTED = 7,
  MSTEP_INTERNAL = 8,         /* a bug in mstep: please report it */
  MSTEP_STATUS_CODE_MAX_ENUM = 0x7fffffff, /* keeps the enum 32-bit; not a code */
} mstep_status_code;

typedef struct mstep_status mstep_status;

/* The code of `status` (MSTEP_OK for NULL). Does not free it. Thread-safe. */
MSTEP_C_EXPORT mstep_status_code mstep_status_code_of(const mstep_status* status);
/* The message of `status` ("" for NULL). Valid until mstep_status_free.
 * Thread-safe. */
MSTEP_C_EXPORT const char* mstep_status_message(const mstep_status* status);
/* Frees a status. NULL is a no-op. Thread-safe. */
MSTEP_C_EXPORT void mstep_status_free(mstep_status* status);
/* A new status with `code` (not MSTEP_OK) and a copy of `message` (NULL:
 * ""), for the host's own callbacks (custom-op shape rules and kernels)
 * to return. Free it with mstep_status_free unless it is returned to
 * mstep, which frees it. Thread-safe. */
MSTEP_C_EXPORT mstep_status* mstep_status_create(mstep_status_code code, const char* message);

/* ===== Element types and devices ========================================= */

typedef enum mstep_dtype {
  MSTEP_F32 = 0,
  MSTEP_F64 = 1,
  MSTEP_BF16 = 2,
  MSTEP_F16 = 3,
  MSTEP_I32 = 4,
  MSTEP_I64 = 5,
  MSTEP_BOOL = 6, /* one byte per element, 0 or 1 */
  /* Keeps the enum 32-bit, so any int a host passes is a value of the type
   * (and gets a clean error), as in Vulkan's *_MAX_ENUM. Not a dtype. */
  MSTEP_DTYPE_MAX_ENUM = 0x7fffffff,
} mstep_dtype;

/* Bytes per element of `dtype`, 0 for a value outside the enum. */
MSTEP_C_EXPORT size_t mstep_dtype_size(mstep_dtype dtype);

/* Largest rank the C API accepts. */
#define MSTEP_MAX_RANK 8

/* ===== Context =========================================================== */

/* The process runtime as seen by one host: options, devices, the RNG seed,
 * mark_step. mstep has one runtime per process; several contexts share it
 * (options set through one are seen by all). A context must outlive every
 * handle made through it. */
typedef struct mstep_context mstep_context;
/* A device a tensor lives on ("cpu", "ref"). Owned by its context: there is
 * nothing to release, and it stays valid while the context lives. */
typedef struct mstep_device mstep_device;

/* Creates a context. The options the environment sets (MSTEP_CACHE,
 * MSTEP_DEVICE, MSTEP_LOG_*, ...) are its starting values. */
MSTEP_C_API mstep_status* mstep_context_create(mstep_context** out_context);
/* Releases the context. Tensors and graphs made through it must be
 * released first (a context with live handles is an error: it stays
 * alive). NULL is a no-op. */
MSTEP_C_API mstep_status* mstep_context_release(mstep_context* context);

/* Sets one runtime option by name; the value is text, as in the
 * environment variable of the same meaning:
 *   "device"          a registered backend ("cpu", "ref"): default device of new tensors
 *                     (MSTEP_DEVICE)
 *   "cache"           "dir,clear_on_start,max_mb" or "": disk cache (MSTEP_CACHE)
 *   "max_graphs"      entries of the in-memory module cache (MSTEP_MAX_GRAPHS)
 *   "log_recompiles"  "0"/"1" (MSTEP_LOG_RECOMPILES)
 *   "log_cache"       "0"/"1" (MSTEP_LOG_CACHE)
 *   "log_fallback"    "0"/"1" (MSTEP_LOG_FALLBACK)
 *   "fuse"            "0"/"1" (MSTEP_FUSE)
 *   "dump_dir"        directory for graph/IR dumps, "" off (MSTEP_DUMP_DIR)
 *   "trace"           Chrome trace file, "" off (MSTEP_TRACE)
 *   "nan_guard"       reproducer directory, "" off (MSTEP_NAN_GUARD)
 *   "cpu_disable"     cpu kernel families to turn off: "onednn,flash,jit,host",
 *                     "all" or "" (MSTEP_CPU_DISABLE); for steps compiled or
 *                     loaded from then on
 *   "cpu_profile"     "0"/"1": time each cpu kernel call of steps compiled or
 *                     loaded from then on, report at exit (MSTEP_CPU_PROFILE)
 *   "xla_memory_limit" bytes, or "" for none: the xla backend's temp arena
 *                     limit, cheap values recomputed to meet it, for steps
 *                     compiled from then on (MSTEP_XLA_MEMORY_LIMIT; part
 *                     of the compile key, so a new limit recompiles)
 * An unknown key is MSTEP_NOT_FOUND, a bad value MSTEP_INVALID_ARGUMENT;
 * either way nothing changes. */
MSTEP_C_API mstep_status* mstep_context_set_option(mstep_context* context, const char* key,
                                                   const char* value);
/* Seeds the Philox stream of rand, randn, dropout (torch.manual_seed). */
MSTEP_C_API mstep_status* mstep_context_manual_seed(mstep_context* context, uint64_t seed);
/* Looks a device up by name: any registered backend's name ("cpu", "ref"),
 * optionally with index 0 ("cpu:0"). Unknown or unavailable devices are
 * MSTEP_NOT_FOUND, naming the available ones. */
MSTEP_C_API mstep_status* mstep_context_device(mstep_context* context, const char* name,
                                               mstep_device** out_device);
/* The device new tensors go to when none is given. */
MSTEP_C_API mstep_status* mstep_context_default_device(mstep_context* context,
                                                       mstep_device** out_device);
/* "cpu:0". Valid while the context lives. */
MSTEP_C_EXPORT const char* mstep_device_name(const mstep_device* device);

/* Cuts the graph of every pending tensor, compiles it on a cache miss and
 * runs it (mstep::mark_step). On failure the pending work stays pending. */
MSTEP_C_API mstep_status* mstep_context_mark_step(mstep_context* context);
/* Turns gradient recording on or off for ops recorded afterwards on this
 * thread (torch.set_grad_enabled). */
MSTEP_C_API mstep_status* mstep_context_set_grad_enabled(mstep_context* context, int enabled);

/* ===== Tensors =========================================================== */

typedef struct mstep_tensor mstep_tensor;

/* Called once when mstep no longer uses a wrapped host buffer. */
typedef void (*mstep_release_fn)(void* user_data, void* data);

/* Wraps host memory as a tensor on `device` (NULL: the default device).
 * Zero-copy when the device keeps its data in host memory (cpu, ref) and
 * `data` is 64-byte aligned: the tensor then reads and writes `data`
 * itself (an optimizer step updates a wrapped parameter in place), and
 * `release(user_data, data)` runs when the last reference to that memory is
 * gone. Otherwise the bytes are copied and `release` runs before this
 * returns. `*out_zero_copy` (may be NULL) says which happened. The host
 * must not free `data` before `release` runs. `byte_size` must equal the
 * element count times mstep_dtype_size(dtype). `release` may be NULL. */
MSTEP_C_API mstep_status* mstep_tensor_wrap_host(mstep_context* context, mstep_device* device,
                                                 mstep_dtype dtype, const int64_t* shape,
                                                 size_t rank, void* data, size_t byte_size,
                                                 mstep_release_fn release, void* user_data,
                                                 mstep_tensor** out_tensor, int* out_zero_copy);
/* Copies `byte_size` bytes of host data into a new tensor. */
MSTEP_C_API mstep_status* mstep_tensor_from_host(mstep_context* context, mstep_device* device,
                                                 mstep_dtype dtype, const int64_t* shape,
                                                 size_t rank, const void* data, size_t byte_size,
                                                 mstep_tensor** out_tensor);
/* A materialized tensor filled with `value`. */
MSTEP_C_API mstep_status* mstep_tensor_full(mstep_context* context, mstep_device* device,
                                            mstep_dtype dtype, const int64_t* shape, size_t rank,
                                            double value, mstep_tensor** out_tensor);
/* Adds a reference. */
MSTEP_C_API mstep_status* mstep_tensor_retain(mstep_tensor* tensor);
/* Drops a reference; the last one frees the handle. NULL is a no-op. A
 * second release of a freed handle is detected while the handle's memory
 * has not been reused and returns MSTEP_FAILED_PRECONDITION. */
MSTEP_C_API mstep_status* mstep_tensor_release(mstep_tensor* tensor);

/* Type queries: no sync, they never run anything. `dims` receives
 * min(rank, capacity) sizes; `*out_rank` the full rank. */
MSTEP_C_API mstep_status* mstep_tensor_dtype(const mstep_tensor* tensor, mstep_dtype* out_dtype);
MSTEP_C_API mstep_status* mstep_tensor_shape(const mstep_tensor* tensor, int64_t* dims,
                                             size_t capacity, size_t* out_rank);
MSTEP_C_API mstep_status* mstep_tensor_numel(const mstep_tensor* tensor, int64_t* out_numel);
MSTEP_C_API mstep_status* mstep_tensor_device(const mstep_tensor* tensor,
                                              mstep_device** out_device);
/* Whether the tensor still has ops that have not run. */
MSTEP_C_API mstep_status* mstep_tensor_is_pending(const mstep_tensor* tensor, int* out_pending);

/* Sync points: they run what the tensor needs, then copy it out.
 * `byte_size` must equal the tensor's size in bytes. */
MSTEP_C_API mstep_status* mstep_tensor_copy_to_host(mstep_tensor* tensor, void* dst,
                                                    size_t byte_size);
/* The single element as a double; MSTEP_INVALID_ARGUMENT unless numel == 1. */
MSTEP_C_API mstep_status* mstep_tensor_item(mstep_tensor* tensor, double* out_value);

/* Makes `dst` hold the value of `src` from now on (same shape and dtype).
 * Lazy. This is how new data goes into the static inputs of a capture. */
MSTEP_C_API mstep_status* mstep_tensor_copy_(mstep_tensor* dst, mstep_tensor* src);
/* Overwrites every element of a materialized tensor with `value` without
 * recording an op: device scalars (learning rate, step) that change every
 * step without a recompile. */
MSTEP_C_API mstep_status* mstep_tensor_fill_(mstep_tensor* tensor, double value);

/* Autograd. A tensor that requires grad is a leaf parameter: backward()
 * accumulates into its gradient. */
MSTEP_C_API mstep_status* mstep_tensor_set_requires_grad(mstep_tensor* tensor, int requires_grad);
/* Reverse-mode autodiff from a scalar tensor (recorded lazily). */
MSTEP_C_API mstep_status* mstep_tensor_backward(mstep_tensor* tensor);
/* The accumulated gradient, or *out_grad = NULL when there is none yet. */
MSTEP_C_API mstep_status* mstep_tensor_grad(mstep_tensor* tensor, mstep_tensor** out_grad);

/* ===== Ops =============================================================== */

typedef enum mstep_attr_kind {
  MSTEP_ATTR_INT = 1,    /* uses .i */
  MSTEP_ATTR_FLOAT = 2,  /* uses .f */
  MSTEP_ATTR_BOOL = 3,   /* uses .i (0 or 1) */
  MSTEP_ATTR_INTS = 4,   /* uses .ints and .num_ints */
  MSTEP_ATTR_DTYPE = 5,  /* uses .i (an mstep_dtype) */
  MSTEP_ATTR_STRING = 6, /* uses .s */
  MSTEP_ATTR_KIND_MAX_ENUM = 0x7fffffff, /* keeps the enum 32-bit; not a kind */
} mstep_attr_kind;

/* A named non-tensor argument of an op. Ints and floats convert to each
 * other where the op wants the other kind. */
typedef struct mstep_attr {
  const char* name;
  mstep_attr_kind kind;
  int64_t i;
  double f;
  const int64_t* ints;
  size_t num_ints;
  const char* s;
} mstep_attr;

/* Attribute literals for C99 hosts. */
#define MSTEP_ATTR_I(n, v) ((mstep_attr){.name = (n), .kind = MSTEP_ATTR_INT, .i = (v)})
#define MSTEP_ATTR_F(n, v) ((mstep_attr){.name = (n), .kind = MSTEP_ATTR_FLOAT, .f = (v)})
#define MSTEP_ATTR_B(n, v) ((mstep_attr){.name = (n), .kind = MSTEP_ATTR_BOOL, .i = (v)})
#define MSTEP_ATTR_DT(n, v) ((mstep_attr){.name = (n), .kind = MSTEP_ATTR_DTYPE, .i = (v)})
#define MSTEP_ATTR_INTS(n, p, k) \
  ((mstep_attr){.name = (n), .kind = MSTEP_ATTR_INTS, .ints = (p), .num_ints = (k)})

/* Records one op of the C++ API lazily, with autograd, on tensors that may
 * live anywhere (their device runs it). `op` is a name that
 * mstep_op_signatures() lists, e.g. "matmul", "relu", "sum", "nll_loss";
 * `attrs` its non-tensor arguments by name. An unknown op is
 * MSTEP_NOT_FOUND; a wrong operand count, an unknown or mistyped attribute,
 * and the C++ API's own shape and dtype checks are MSTEP_INVALID_ARGUMENT
 * with a message naming the op, the shapes and what to do. The results
 * (most ops have one) go to outputs[0..*out_num_outputs); `capacity` too
 * small is MSTEP_OUT_OF_RANGE. */
MSTEP_C_API mstep_status* mstep_op(mstep_context* context, const char* op,
                                   mstep_tensor* const* inputs, size_t num_inputs,
                                   const mstep_attr* attrs, size_t num_attrs,
                                   mstep_tensor** outputs, size_t capacity,
                                   size_t* out_num_outputs);
/* The op names mstep_op accepts, with their signatures, one per line:
 * "matmul(a, b)", "sum(x; dims: ints = [], keepdim: bool = false)", ...
 * Static storage; thread-safe. */
MSTEP_C_EXPORT const char* mstep_op_signatures(void);

/* ===== Graph builder and compiled graphs ================================= */

/* A graph function under construction: placeholders in, ops recorded on
 * them, outputs chosen at compile time. Each builder op is shape-checked
 * when it is added, so an error points at the op that caused it. */
typedef struct mstep_graph_builder mstep_graph_builder;
/* A compiled graph function with a fixed signature (input dtypes and
 * shapes). Its executables live in the module cache (memory, then the disk
 * cache when one is set), keyed by structure, shapes and dtypes. */
typedef struct mstep_compiled_graph mstep_compiled_graph;
/* A captured step: fixed buffers, replayed with no tracing, hashing or
 * cache lookup (HPU Graphs / CUDA Graphs style). */
typedef struct mstep_captured_graph mstep_captured_graph;

/* A new builder whose graph runs on `device` (NULL: the default device). */
MSTEP_C_API mstep_status* mstep_graph_builder_create(mstep_context* context,
                                                     mstep_device* device,
                                                     mstep_graph_builder** out_builder);
MSTEP_C_API mstep_status* mstep_graph_builder_release(mstep_graph_builder* builder);
/* Adds input number `index` = the number of inputs added before. The
 * placeholder is a tensor handle (owned by the caller) usable only as an
 * operand of this builder's ops. */
MSTEP_C_API mstep_status* mstep_graph_builder_add_input(mstep_graph_builder* builder,
                                                        mstep_dtype dtype, const int64_t* shape,
                                                        size_t rank,
                                                        mstep_tensor** out_placeholder);
/* mstep_op inside the builder. Operands are placeholders and results of this
 * builder; any other tensor is a captured constant, read at each run. */
MSTEP_C_API mstep_status* mstep_graph_builder_op(mstep_graph_builder* builder, const char* op,
                                                 mstep_tensor* const* inputs, size_t num_inputs,
                                                 const mstep_attr* attrs, size_t num_attrs,
                                                 mstep_tensor** outputs, size_t capacity,
                                                 size_t* out_num_outputs);
/* Compiles the function from the inputs to `outputs` (results of this
 * builder's ops) through the module cache. The builder may be released or
 * extended afterwards. */
MSTEP_C_API mstep_status* mstep_graph_builder_compile(mstep_graph_builder* builder,
                                                      mstep_tensor* const* outputs,
                                                      size_t num_outputs,
                                                      mstep_compiled_graph** out_graph);

/* Parses a module of the `mstep` dialect (one public func.func; its
 * arguments are the inputs, its results the outputs) and compiles it for
 * `device` (NULL: the default). A malformed module is
 * MSTEP_INVALID_ARGUMENT with the parser's line and column. */
MSTEP_C_API mstep_status* mstep_compiled_graph_from_mlir(mstep_context* context,
                                                         mstep_device* device,
                                                         const char* mlir_text, size_t length,
                                                         mstep_compiled_graph** out_graph);
MSTEP_C_API mstep_status* mstep_compiled_graph_release(mstep_compiled_graph* graph);
/* The signature. `dims` as for mstep_tensor_shape. */
MSTEP_C_API mstep_status* mstep_compiled_graph_num_inputs(const mstep_compiled_graph* graph,
                                                          size_t* out_count);
MSTEP_C_API mstep_status* mstep_compiled_graph_num_outputs(const mstep_compiled_graph* graph,
                                                           size_t* out_count);
MSTEP_C_API mstep_status* mstep_compiled_graph_input_type(const mstep_compiled_graph* graph,
                                                          size_t index, mstep_dtype* out_dtype,
                                                          int64_t* dims, size_t capacity,
                                                          size_t* out_rank);
MSTEP_C_API mstep_status* mstep_compiled_graph_output_type(const mstep_compiled_graph* graph,
                                                           size_t index, mstep_dtype* out_dtype,
                                                           int64_t* dims, size_t capacity,
                                                           size_t* out_rank);
/* Runs the graph on `inputs` (matching the signature: a count, dtype,
 * shape or device that differs is MSTEP_INVALID_ARGUMENT naming the input,
 * and nothing runs). Writes `num_outputs` new tensor handles, materialized.
 * The executable comes from the module cache: a hit after the first run. */
MSTEP_C_API mstep_status* mstep_compiled_graph_run(mstep_compiled_graph* graph,
                                                   mstep_tensor* const* inputs, size_t num_inputs,
                                                   mstep_tensor** outputs, size_t num_outputs);
/* Captures the graph on fixed buffers for mstep_captured_graph_run. */
MSTEP_C_API mstep_status* mstep_compiled_graph_capture(mstep_compiled_graph* graph,
                                                       mstep_captured_graph** out_captured);

/* ===== Capture and replay ================================================ */

/* Starts capturing everything the host records and runs (mark_step
 * segments, sync points) until mstep_captured_graph_end: the training-loop
 * form, as mstep::Graph::capture_begin. Work recorded before runs first. */
MSTEP_C_API mstep_status* mstep_capture_begin(mstep_context* context,
                                              mstep_captured_graph** out_captured);
/* Ends the capture begun by mstep_capture_begin (runs the captured work). */
MSTEP_C_API mstep_status* mstep_captured_graph_end(mstep_captured_graph* captured);
/* Abandons a capture begun by mstep_capture_begin. */
MSTEP_C_API mstep_status* mstep_captured_graph_abort(mstep_captured_graph* captured);
/* Replays a capture made by mstep_capture_begin: inputs are re-read from
 * the tensors they came from (fill them with mstep_tensor_copy_),
 * parameters and optimizer state update in place. An input tensor that was
 * released, or changed shape, dtype or device, is MSTEP_FAILED_PRECONDITION
 * (or MSTEP_INVALID_ARGUMENT) naming it; nothing runs. */
MSTEP_C_API mstep_status* mstep_captured_graph_replay(mstep_captured_graph* captured);
/* Replays a capture made by mstep_compiled_graph_capture on new inputs:
 * copies them into the fixed buffers, replays, and writes `num_outputs` new
 * handles holding this replay's results (later replays do not change
 * them). A different input count, dtype, shape or device is
 * MSTEP_INVALID_ARGUMENT naming the input, and nothing runs. */
MSTEP_C_API mstep_status* mstep_captured_graph_run(mstep_captured_graph* captured,
                                                   mstep_tensor* const* inputs, size_t num_inputs,
                                                   mstep_tensor** outputs, size_t num_outputs);
/* Executable runs and kernel launches per replay. */
MSTEP_C_API mstep_status* mstep_captured_graph_stats(const mstep_captured_graph* captured,
                                                     size_t* out_segments, size_t* out_kernels);
MSTEP_C_API mstep_status* mstep_captured_graph_release(mstep_captured_graph* captured);

/* ===== Optimizers ======================================================== */

typedef struct mstep_optimizer mstep_optimizer;

/* An optimizer over `params` (tensors that require grad): kind "sgd"
 * (lr, momentum, dampening, weight_decay, nesterov), "adam" / "adamw" (lr,
 * beta1, beta2, eps, weight_decay, amsgrad) or "adadelta" (lr, rho, eps,
 * weight_decay), with the PyTorch defaults for attributes not given. */
MSTEP_C_API mstep_status* mstep_optimizer_create(mstep_context* context, const char* kind,
                                                 mstep_tensor* const* params, size_t num_params,
                                                 const mstep_attr* attrs, size_t num_attrs,
                                                 mstep_optimizer** out_optimizer);
/* Records one update of every parameter (lazy, in place). */
MSTEP_C_API mstep_status* mstep_optimizer_step(mstep_optimizer* optimizer);
/* Clears the gradients (set_to_none). */
MSTEP_C_API mstep_status* mstep_optimizer_zero_grad(mstep_optimizer* optimizer);
/* Changes the learning rate (a device scalar: no recompile). */
MSTEP_C_API mstep_status* mstep_optimizer_set_lr(mstep_optimizer* optimizer, double lr);
MSTEP_C_API mstep_status* mstep_optimizer_release(mstep_optimizer* optimizer);

/* ===== Metrics =========================================================== */

/* mstep::metrics_report() as text. Writes at most `capacity` bytes
 * including the terminating NUL (truncating) and sets *out_length to the
 * full length without the NUL; dst may be NULL with capacity 0 to ask for
 * the length. Thread-safe. */
MSTEP_C_API mstep_status* mstep_metrics_report(mstep_context* context, char* dst,
                                               size_t capacity, size_t* out_length);
/* One counter by name: "mark_steps", "sync_points", "graphs_executed",
 * "cache_hits", "cache_misses", "disk_hits", "disk_misses", "disk_corrupt",
 * "compiles", "thread_rebuilds" (compiled cpu/xla steps whose kernels were
 * rebuilt for a new OpenMP thread count), "fallbacks", "replays",
 * "warnings", "arena_bytes",
 * "compile_seconds", "execute_seconds", and a simulated device's (neuron)
 * "simulated_seconds" (its cost model's time, summed over runs) and
 * "simulated_tensor_utilization" (0 to 1). Unknown names are
 * MSTEP_NOT_FOUND. Thread-safe. */
MSTEP_C_API mstep_status* mstep_metrics_get(mstep_context* context, const char* name,
                                            double* out_value);
/* Resets every counter. Thread-safe. */
MSTEP_C_API mstep_status* mstep_metrics_reset(mstep_context* context);

/* ===== Custom ops ======================================================== */

/* A host registers its own ops by name and version, with a schema, a shape
 * rule and one kernel per backend, then calls them like any op: they are
 * traced, cached (the key includes name, version and attributes),
 * compiled as a fusion boundary and captured/replayed like built-in ops.
 * The ref and cpu backends run host kernels (C functions over host
 * memory); the cpu backend falls back to the "ref" kernel when an op has
 * no "cpu" kernel (counted as a host fallback). */

/* A tensor's type as a shape rule or a kernel sees it. */
typedef struct mstep_tensor_type {
  mstep_dtype dtype;
  size_t rank;
  int64_t dims[MSTEP_MAX_RANK];
} mstep_tensor_type;

/* One tensor input: an optional name (for messages) and the dtypes it
 * accepts (num_dtypes 0: any). */
typedef struct mstep_custom_input {
  const char* name;
  const mstep_dtype* dtypes;
  size_t num_dtypes;
} mstep_custom_input;

/* One attribute: its name, its kind (MSTEP_ATTR_INT, _FLOAT, _BOOL, _INTS,
 * _DTYPE or _STRING) and the value a call that leaves it out gets
 * (default_value NULL: the call must give it; its name is ignored). */
typedef struct mstep_custom_attr_decl {
  const char* name;
  mstep_attr_kind kind;
  const mstep_attr* default_value;
} mstep_custom_attr_decl;

/* The shape and dtype rule: writes the type of each of the num_outputs
 * results for inputs of `inputs` types and the call's attributes (every
 * declared one, defaults filled in, in declaration order). Returns NULL, or
 * a status from mstep_status_create whose message says what is wrong (the
 * call then fails with it, naming the op). Runs on the tracing thread. */
typedef mstep_status* (*mstep_custom_shape_fn)(void* user_data, const mstep_tensor_type* inputs,
                                               size_t num_inputs, const mstep_attr* attrs,
                                               size_t num_attrs, mstep_tensor_type* outputs,
                                               size_t num_outputs);
/* A host kernel: reads the inputs (dense, row-major host memory) and
 * writes every element of each output (allocated with the rule's types).
 * Returns NULL or a status (the step then fails with its message). Must be
 * a pure function of inputs and attributes and safe to call from several
 * threads. The pointers are valid during the call only. */
typedef mstep_status* (*mstep_custom_kernel_fn)(
    void* user_data, const void* const* inputs, const mstep_tensor_type* input_types,
    size_t num_inputs, void* const* outputs, const mstep_tensor_type* output_types,
    size_t num_outputs, const mstep_attr* attrs, size_t num_attrs);
/* The kernel of one backend ("ref", "cpu"). */
typedef struct mstep_custom_kernel {
  const char* backend;
  mstep_custom_kernel_fn fn;
  void* user_data;
} mstep_custom_kernel;

typedef struct mstep_custom_op_def {
  const char* name;
  int64_t version; /* 1 or more; a new version is a new op to the caches */
  const mstep_custom_input* inputs;
  size_t num_inputs;
  const mstep_custom_attr_decl* attrs;
  size_t num_attrs;
  size_t num_outputs; /* 1 or more */
  /* num_aliases pairs (output, input): that output may share the input's
   * buffer (an in-place op). */
  const int64_t* aliases;
  size_t num_aliases;
  int nondeterministic; /* 0: the kernels give identical results for identical inputs */
  mstep_custom_shape_fn shape_rule;
  void* shape_user_data;
  const mstep_custom_kernel* kernels;
  size_t num_kernels;
} mstep_custom_op_def;

/* Registers `def` (everything is copied but the user data pointers, which
 * must stay valid for the rest of the process: ops are never removed).
 * Registering an equal schema under the same name and version again does
 * nothing (a plugin loaded twice); another schema there is
 * MSTEP_FAILED_PRECONDITION. A bad definition (no name or rule, a kernel
 * without backend or function, a repeated name, a default of the wrong
 * kind, an alias out of range) is MSTEP_INVALID_ARGUMENT. Thread-safe. */
MSTEP_C_API mstep_status* mstep_custom_op_register(const mstep_custom_op_def* def);

/* Records a call of the custom op `name` (version 0: the newest registered)
 * on `inputs`, lazily, like mstep_op. Checked at the call: an unregistered
 * op or version is MSTEP_INVALID_ARGUMENT naming it, as are a wrong input
 * count, a dtype the schema does not accept, an unknown, mistyped or
 * missing attribute and the shape rule's refusal. The results go to
 * outputs[0..*out_num_outputs); `capacity` too small is MSTEP_OUT_OF_RANGE. */
MSTEP_C_API mstep_status* mstep_custom_op_call(mstep_context* context, const char* name,
                                               int64_t version, mstep_tensor* const* inputs,
                                               size_t num_inputs, const mstep_attr* attrs,
                                               size_t num_attrs, mstep_tensor** outputs,
                                               size_t capacity, size_t* out_num_outputs);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* MSTEP_C_MSTEP_H_ */
