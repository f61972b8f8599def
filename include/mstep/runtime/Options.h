// RuntimeOptions: every environment variable mstep reads, read once.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/Device.h"

namespace mstep {

struct RuntimeOptions {
  /// MSTEP_DEVICE: default device for new tensors: the name of any
  /// registered backend ("ref", the default, or "cpu").
  DeviceType default_device = DeviceType::ref;
  /// MSTEP_DUMP_DIR: when set, every compiled graph is written there as
  /// text (graph_<key>.txt) and Graphviz (graph_<key>.dot), and its MLIR
  /// after import and after every pass (graph_<key>/NN_<pass>.mlir).
  std::string dump_dir;
  /// MSTEP_FUSE=0: compile without the fusion passes (one kernel per
  /// trace op). For debugging a fused graph against the unfused one.
  bool fuse = true;
  /// MSTEP_LOG_RECOMPILES=1: on each compile, log which key component
  /// changed against the nearest cached graph of the same structure.
  bool log_recompiles = false;
  /// Compiles of one graph structure, differing only in host constants,
  /// after which a warning names the changing constant.
  int constant_recompile_warn_threshold = 3;
  /// MSTEP_MAX_GRAPHS: entries the in-memory module cache keeps (LRU).
  int max_graphs = 256;
  /// MSTEP_CACHE=dir,clear_on_start,max_mb: the on-disk module cache
  /// (empty: off). Parsed by DiskCache::Config::parse.
  std::string disk_cache;
  /// MSTEP_LOG_CACHE=1: log each disk-cache removal and the size after it.
  bool log_cache = false;
  /// MSTEP_LOG_FALLBACK=1: one line per op that falls back to the host,
  /// and a frequency table at exit.
  bool log_fallback = false;
  /// MSTEP_TRACE=file.json: Chrome/Perfetto timeline of trace, compile,
  /// execute and replay, written at exit (and by flush_trace()).
  std::string trace_file;
  /// MSTEP_NAN_GUARD=dir: check gradients for non-finite values before
  /// each optimizer update; on a hit write a reproducer to dir and stop.
  std::string nan_guard_dir;
  /// MSTEP_CPU_DISABLE=onednn,flash,jit,host (or all): cpu kernel families
  /// turned off, so their ops run the ref kernel: for bisecting a wrong
  /// result to a family. Read when a cpu step is compiled or loaded.
  std::string cpu_disable;
  /// MSTEP_CPU_PROFILE=1: time every kernel call of each cpu executable
  /// compiled or loaded from then on; print the slowest calls at exit.
  bool cpu_profile = false;
  /// MSTEP_ASYNC_HOST_DELAY_US: how long the async_host test backend
  /// (lib/backends/async_host) holds each queued run before running it.
  /// Read when an async_host step is compiled.
  int64_t async_host_delay_us = 2000;
  /// MSTEP_RANK and MSTEP_WORLD_SIZE: this process's rank and the world's
  /// size as a launcher other than mpirun states them; distributed::init()
  /// checks them against MPI's communicator (empty: MPI's are taken).
  std::string dist_rank;
  std::string dist_world_size;
  /// MSTEP_DIST_TIMEOUT: seconds a collective waits for its peers before
  /// it fails naming the collective and the rank that did not arrive.
  double dist_timeout_s = 300;
  /// MSTEP_DIST_MAX_CALL_BYTES: the most bytes one MPI call of a collective
  /// moves (per rank); a larger collective is split into several calls,
  /// all outstanding at once (lib/runtime/distributed/CallSlices.h). 1 GiB
  /// by default, at most INT32_MAX. A testing knob: tests lower it to split
  /// small collectives. Read by distributed::init().
  int64_t dist_max_call_bytes = int64_t{1} << 30;
  /// MSTEP_CUDA_ROW_REDUCTION=fused|block|thread: how the cuda backend's
  /// row-wise kernels (softmax, log_softmax, layer_norm, rms_norm,
  /// nll_loss's sum, sums and means over the last dim) reduce a row: a
  /// block of threads per row through shared memory, the reductions over
  /// the same rows and the elementwise ops between them in one kernel
  /// (fused, the default: row groups; with it, independent elementwise ops
  /// and column sums are batched into one launch and slice_scatters join
  /// the fusion that reads them) or a kernel per op (block); or one
  /// thread per row (thread, the first form). Read when a cuda step is
  /// compiled; part of the compile key.
  std::string cuda_row_reduction = "fused";
  /// MSTEP_CUDA_COLUMN_REDUCTION=split|thread: how the cuda backend sums
  /// over leading dims (bias and layer_norm weight gradients) and
  /// clip_grad_norm_'s per-gradient norms: the rows split into chunks of
  /// a block each, then the chunks' partials summed in order (split, the
  /// default), or one thread per column (thread, the first form, kept to
  /// compare the two). Read when a cuda step is compiled; part of the
  /// compile key.
  std::string cuda_column_reduction = "split";
  /// MSTEP_CUDA_CONV=im2col|direct: the cuda backend's conv2d and its
  /// gradients as im2col/col2im kernels around cuBLASLt matmuls (im2col,
  /// the default; the direct loops where its scratch would be too large or
  /// the dtype is not f32/bf16), or always as the direct loop nests
  /// (direct, ref's sums bit for bit). Read when a cuda step is compiled;
  /// part of the compile key.
  std::string cuda_conv = "im2col";
  /// MSTEP_CUDA_OPTIMIZER=multi|per_tensor: the cuda backend's optimizer
  /// update as one launch for every parameter (multi, the default), or a
  /// launch per parameter (per_tensor, the first form). Read when a cuda
  /// step is compiled; part of the compile key.
  std::string cuda_optimizer = "multi";
  /// MSTEP_CUDA_NO_EPILOGUES=1: load every cuda plan as if cuBLASLt had no
  /// algorithm for any epilogue (bias, ReLU/GELU, bias gradient): each such
  /// call runs without it and the plan's fallback kernels do its work
  /// (Metrics::epilogue_fallbacks). For checking the fallback on a GPU.
  /// Read when the cuda backend is created.
  bool cuda_no_epilogues = false;
  /// MSTEP_CUDA_PROFILE=1: every cuda executable times each step of its
  /// plan (a timing event after each kernel, cuBLASLt, cuDNN or NCCL call;
  /// each run then waits for the device) and prints the slowest steps and
  /// the time per kind on stderr when it is destroyed
  /// (lib/backends/cuda/CudaStepProfile.h; `mstep-run --profile`). Read
  /// when the cuda backend is created.
  bool cuda_profile = false;
  /// MSTEP_XLA_MEMORY_LIMIT=bytes: the xla backend's temp arena limit;
  /// above it, cheap values are recomputed instead of kept
  /// (lib/backends/xla/XlaRemat.h). Empty: no limit. Also the C API's
  /// option "xla_memory_limit" and mstep-opt's and mstep-aot's
  /// --xla-memory-limit. Kept as written: a value that is not a positive
  /// integer fails each xla compile with an error that names the variable
  /// and the value (parse_xla_memory_limit). Read when an xla step is
  /// compiled; part of the compile key (and so of the disk cache's).
  std::string xla_memory_limit;

  /// Reads the environment. Unknown values are reported on stderr and the
  /// default is kept.
  static RuntimeOptions from_env();
};

/// The environment variable of RuntimeOptions::xla_memory_limit.
inline constexpr char kXlaMemoryLimitVariable[] = "MSTEP_XLA_MEMORY_LIMIT";

/// `text` (an xla memory limit as written) as bytes: a positive integer.
/// The error names MSTEP_XLA_MEMORY_LIMIT and the value.
absl::StatusOr<int64_t> parse_xla_memory_limit(absl::string_view text);

}  // namespace mstep
