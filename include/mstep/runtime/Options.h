// RuntimeOptions: every environment variable mstep reads, read once.
#pragma once

#include <string>

#include "mstep/core/Device.h"

namespace mstep {

struct RuntimeOptions {
  /// MSTEP_DEVICE: default device for new tensors ("ref").
  DeviceType default_device = DeviceType::ref;
  /// MSTEP_DUMP_DIR: when set, every compiled graph is written there as
  /// text (graph_<key>.txt) and Graphviz (graph_<key>.dot), and its MLIR
  /// after import and after every pass (graph_<key>/NN_<pass>.mlir).
  std::string dump_dir;
  /// MSTEP_FUSE=0: compile without the fusion passes (one kernel per
  /// trace op). For debugging a fused graph against the unfused one.
  bool fuse = true;
  /// MSTEP_LOG_RECOMPILES=1: log each compile and why the key was new.
  bool log_recompiles = false;
  /// Compiles of one graph structure, differing only in host constants,
  /// after which a warning names the changing constant.
  int constant_recompile_warn_threshold = 3;

  /// Reads the environment. Unknown values are reported on stderr and the
  /// default is kept.
  static RuntimeOptions from_env();
};

}  // namespace mstep
