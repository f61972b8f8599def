// MSTEP_DUMP_DIR makes mstep-opt write the module before the first pass and
// after every pass, one folder per --split-input-file chunk.
// RUN: rm -rf %t && env MSTEP_DUMP_DIR=%t mstep-opt %s --split-input-file --mstep-pipeline-unfused -o /dev/null
// RUN: ls %t/mstep-opt | FileCheck %s --check-prefix=CHUNKS
// RUN: ls %t/mstep-opt/chunk_0 | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --check-prefix=INPUT < %t/mstep-opt/chunk_0/00_input.mlir
// RUN: FileCheck %s --check-prefix=CANON < %t/mstep-opt/chunk_0/01_canonicalize.mlir

// CHUNKS: chunk_0
// CHUNKS-NEXT: chunk_1

// FILES: 00_input.mlir
// FILES-NEXT: 01_canonicalize.mlir
// FILES-NEXT: 02_cse.mlir
// FILES-NEXT: 03_mstep-sink-collective-readers.mlir
// FILES-NEXT: 04_mstep-plan-memory.mlir

// INPUT: mstep.reshape
// CANON-NOT: mstep.reshape

func.func @step(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = mstep.exp %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
