// Collectives across the ranks of a data-parallel job (mstep/api/Distributed.h).
// They talk to other processes, so they are not Pure: CSE never merges two
// of them, DCE never drops one, and no pass moves work across one; a
// fusion region never holds one. Every rank must run the same collectives
// in the same order. `world_size` is the world the op was recorded in; a
// backend refuses to run it in another.
#ifndef MSTEP_IR_DIALECT_COLLECTIVEOPS_TD
#define MSTEP_IR_DIALECT_COLLECTIVEOPS_TD

include "mstep/ir/dialect/MstepBase.td"
include "mstep/ir/dialect/MstepEnums.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Mstep_CollectiveOp<string mnemonic>
    : Mstep_Op<mnemonic, [MemoryEffects<[MemRead, MemWrite]>,
                          AllElementTypesMatch<["input", "result"]>]> {
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mstep_AllReduceOp : Mstep_CollectiveOp<"all_reduce"> {
  let summary = "the reduction of every rank's tensor, on every rank";
  let description = [{
    ```mlir
    %y = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_ReduceOpAttr:$reduce_op,
                       Mstep_PositiveI64:$world_size);
}

def Mstep_AllGatherOp : Mstep_CollectiveOp<"all_gather"> {
  let summary = "every rank's tensor, concatenated along dim in rank order";
  let description = [{
    ```mlir
    %y = mstep.all_gather %x {dim = 0 : i64, world_size = 2 : i64} : tensor<4x3xf32> -> tensor<8x3xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_NonNegativeI64:$dim,
                       Mstep_PositiveI64:$world_size);
}

def Mstep_BroadcastOp : Mstep_CollectiveOp<"broadcast"> {
  let summary = "rank root's tensor, on every rank";
  let description = [{
    ```mlir
    %y = mstep.broadcast %x {root = 0 : i64, world_size = 2 : i64} : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_NonNegativeI64:$root,
                       Mstep_PositiveI64:$world_size);
}

def Mstep_ReduceScatterOp : Mstep_CollectiveOp<"reduce_scatter"> {
  let summary = "this rank's slice along dim of the reduction of every rank's tensor";
  let description = [{
    ```mlir
    %y = mstep.reduce_scatter %x {dim = 0 : i64, reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x3xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_ReduceOpAttr:$reduce_op,
                       Mstep_NonNegativeI64:$dim, Mstep_PositiveI64:$world_size);
}

#endif  // MSTEP_IR_DIALECT_COLLECTIVEOPS_TD
