// mstep-pipeline=<backend>: the shared passes (canonicalize, cse, the
// fusion passes), then the backend's own passes, then the contract check.
// ref adds nothing (it interprets the fused module); cpu plans its arena,
// and xla the same one temp arena.
// RUN: mstep-opt %s --mstep-pipeline=ref | FileCheck %s --check-prefix=REF
// RUN: mstep-opt %s --mstep-pipeline=cpu | FileCheck %s --check-prefix=CPU
// RUN: mstep-opt %s --mstep-pipeline | FileCheck %s --check-prefix=CPU
// RUN: mstep-opt %s --mstep-pipeline=xla | FileCheck %s --check-prefix=CPU
// RUN: mstep-opt %s --pass-pipeline='builtin.module(mstep-pipeline{ref})' | FileCheck %s --check-prefix=REF
// RUN: mstep-opt %s --mstep-pipeline-unfused=ref | FileCheck %s --check-prefix=UNFUSED
// RUN: not mstep-opt %s --mstep-pipeline=tpu 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// REF-LABEL: func.func @step
// REF-NOT: mstep.arena
// REF: mstep.fusion
// REF-NOT: mstep.arena

// CPU-LABEL: func.func @step
// CPU-SAME: mstep.arena_size = 64
// CPU: mstep.fusion
// CPU-SAME: mstep.arena_offsets = array<i64: 0>

// UNFUSED-NOT: mstep.fusion
// UNFUSED: mstep.exp
// UNFUSED-NEXT: mstep.neg

// UNKNOWN: no compiler for backend 'tpu' is built into this library; compilers: cpu, {{(cuda, )?}}neuron, ref, xla

func.func @step(%x: tensor<2x3xf32> {mstep.role = "input"}) -> tensor<2x3xf32> {
  %0 = mstep.exp %x : tensor<2x3xf32>
  %1 = mstep.neg %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
