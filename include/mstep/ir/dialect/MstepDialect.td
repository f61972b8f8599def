// The `mstep` dialect: the MLIR form of the trace graph.
//
// Every trace-graph op (include/mstep/ir/Ops.def) has one op here with the
// same operands and the same information in its attributes and types. The
// leaves `parameter` and `data` are function arguments, not ops. The
// fused ops (fusion, sdpa, multi_tensor_update) are what the fusion passes
// build.
#ifndef MSTEP_IR_DIALECT_MSTEPDIALECT_TD
#define MSTEP_IR_DIALECT_MSTEPDIALECT_TD

include "mlir/IR/OpBase.td"

def Mstep_Dialect : Dialect {
  let name = "mstep";
  let cppNamespace = "::mstep::dialect";
  let summary = "Lazy-tensor trace graphs with value semantics on static tensors";
  let description = [{
    One op per trace-graph op, on statically shaped ranked tensors of f32,
    f64, bf16, f16, i32, i64 or i1. Ops have value semantics: in-place
    updates (parameters, optimizer state) appear as new results, and the
    memory planner decides what aliases. Host constants (a double in the
    trace graph) are f64 attributes; 0-d tensors are device scalars.

    Mapping from the trace graph (include/mstep/ir/Ops.def):
    - the op name is the mnemonic (`add` -> `mstep.add`), except
      `sdpa_grad`, which is `mstep.sdpa_backward`;
    - `parameter` and `data` are function arguments, not ops;
    - operands keep their order; optional operands flagged by has_* attrs
      (bias, weight, mask, valid_len, rng state) are optional operands;
    - attributes that give a shape or dtype (shape of full/rand/reshape/
      expand/grads, dtype of cast) are the result type;
    - int codes become enum attributes (MstepEnums.td, same values), int
      flags BoolAttr, int lists DenseI64ArrayAttr, doubles F64Attr;
    - a `custom` node (a user-registered op) is `mstep.custom` with the
      op's name as `op_name` and its attributes by name in `user_attrs`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
   private:
    // Registration of each op family, defined next to the family's op
    // definitions (lib/ir/dialect/*Ops.cpp) so the cost of instantiating
    // 80 op models is spread over several translation units.
    void registerCreationOps();
    void registerElementwiseOps();
    void registerFusionOps();
    void registerReductionOps();
    void registerShapeOps();
    void registerLinalgOps();
    void registerNNOps();
    void registerAttentionOps();
    void registerOptimizerOps();
    void registerCustomOps();
    void registerCollectiveOps();
  }];
}

#endif  // MSTEP_IR_DIALECT_MSTEPDIALECT_TD
