// MSTEP_XLA_MEMORY_LIMIT: the xla pipeline recomputes a cheap value (%e,
// exp of an argument, read by the first and the last product) instead of
// keeping it alive across the chain in between, which halves the arena:
// 32768 bytes (%e and two 8 KiB links) without a limit, 16896 under it (the
// two links, or %e's copy and the small products). A limit below what
// recomputing reaches is an error that gives the smallest one; so is a
// limit that is not a number.
// RUN: mstep-opt %s --mstep-pipeline=xla | FileCheck %s --check-prefix=FREE
// RUN: env MSTEP_XLA_MEMORY_LIMIT=20000 mstep-opt %s --mstep-pipeline=xla 2>%t.log | FileCheck %s --check-prefix=LIMIT
// RUN: FileCheck %s --check-prefix=REPORT < %t.log
// RUN: env MSTEP_XLA_MEMORY_LIMIT=16896 mstep-opt %s --mstep-pipeline=xla | FileCheck %s --check-prefix=LIMIT
// RUN: env MSTEP_XLA_MEMORY_LIMIT=9000 not mstep-opt %s --mstep-pipeline=xla 2>&1 | FileCheck %s --check-prefix=TOO-SMALL
// RUN: env MSTEP_XLA_MEMORY_LIMIT=lots not mstep-opt %s --mstep-pipeline=xla 2>&1 | FileCheck %s --check-prefix=BAD
// The flag sets the limit too, and overrides the variable:
// RUN: mstep-opt %s --mstep-pipeline=xla --xla-memory-limit=16896 | FileCheck %s --check-prefix=LIMIT
// RUN: env MSTEP_XLA_MEMORY_LIMIT=9000 mstep-opt %s --mstep-pipeline=xla --xla-memory-limit=20000 | FileCheck %s --check-prefix=LIMIT
// RUN: not mstep-opt %s --mstep-pipeline=xla --xla-memory-limit=lots 2>&1 | FileCheck %s --check-prefix=BAD-FLAG

// FREE-LABEL: func.func @step
// FREE-SAME: mstep.arena_size = 32768
// FREE-COUNT-1: mstep.exp
// FREE-NOT: mstep.exp

// LIMIT-LABEL: func.func @step
// LIMIT-SAME: mstep.arena_size = 16896
// LIMIT-SAME: mstep.arena_size_unlimited = 32768
// LIMIT-COUNT-2: mstep.exp

// REPORT: mstep xla: arena 32768 bytes, 16896 bytes under MSTEP_XLA_MEMORY_LIMIT=20000 (1 values recomputed)

// TOO-SMALL: MSTEP_XLA_MEMORY_LIMIT=9000 bytes cannot be met: the step's arena needs 32768 bytes, and no less than 16896 with cheap values recomputed; the smallest limit that can be met is 16896

// BAD: MSTEP_XLA_MEMORY_LIMIT='lots' is not a number of bytes above 0

// BAD-FLAG: mstep-opt: --xla-memory-limit: MSTEP_XLA_MEMORY_LIMIT='lots' is not a number of bytes above 0

func.func @step(%x: tensor<64x64xf32> {mstep.role = "input"},
                %w1: tensor<2x64xf32> {mstep.role = "parameter"},
                %u: tensor<32x2xf32> {mstep.role = "parameter"},
                %w2: tensor<32x32xf32> {mstep.role = "parameter"},
                %p: tensor<32x64xf32> {mstep.role = "parameter", mstep.aliased_result = 0 : i64},
                %v: tensor<64x1xf32> {mstep.role = "input"})
    -> (tensor<32x64xf32>, tensor<64x1xf32>) {
  %e = mstep.exp %x : tensor<64x64xf32>
  %h1 = mstep.matmul %w1, %e : tensor<2x64xf32>, tensor<64x64xf32> -> tensor<2x64xf32>
  %h2 = mstep.matmul %u, %h1 : tensor<32x2xf32>, tensor<2x64xf32> -> tensor<32x64xf32>
  %h3 = mstep.matmul %w2, %h2 : tensor<32x32xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %h4 = mstep.matmul %w2, %h3 : tensor<32x32xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %pn = mstep.sub %p, %h4 : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %r = mstep.matmul %e, %v : tensor<64x64xf32>, tensor<64x1xf32> -> tensor<64x1xf32>
  return %pn, %r : tensor<32x64xf32>, tensor<64x1xf32>
}
