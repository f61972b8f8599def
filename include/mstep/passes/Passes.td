// The mstep compiler passes: one `def` per pass, one pass per file
// (lib/passes/<Name>.cpp), one lit test per pass (test/passes/<flag>.mlir).
// The pipeline that runs them in order is in lib/passes/Pipeline.cpp.
#ifndef MSTEP_PASSES_PASSES_TD
#define MSTEP_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseAttention : Pass<"mstep-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Rewrite hand-written attention (and its autograd backward) into mstep.sdpa";
  let description = [{
    From each `mstep.softmax`, matches attention written out op by op,
    `out = matmul(dropout(softmax(mask(scale * matmul(q, kT)))), v)`, and
    rewrites it into one `mstep.sdpa` (recompute_mode = true):

    - kT: a `mstep.permute` of k (any perm: canonicalize composes the head
      split with the transpose), or a value that arrives transposed (sdpa
      then reads it through a new permute);
    - scale: `mstep.mul` by a uniform constant (either side) or `mstep.div`
      by one, on the scores, on q or on k (before or after its permute);
      the factors multiply into `scale`. A non-constant scale does not match;
    - mask: `where(m, scores, -inf)` with a bool `m` is `is_causal = true`
      when `m` is a constant causal triangle (tril of all-true, diagonal 0,
      through reshapes/expands), else the `mask` operand; a float tensor
      added to the scores is the `mask` operand. A finite fill does not match;
    - dropout: `mstep.dropout` of the probabilities becomes dropout_p, the
      rng operand and rng_offset = its offset. Both kernels keep element i of
      [..., L, S] iff Philox(seed, state offset + offset, i) >= p, so the
      fused op drops exactly the same elements;
    - softmax over the last dim; q, kT and v of one rank with identical
      leading dims (no broadcasting).

    The backward autograd records for that attention (found from the softmax
    backward reading the probabilities: dO @ v^T, the replayed dropout,
    p * (dP - sum(dP * p)), where(m, dX, 0), the scale, dS @ kT^T and
    q^T @ dS, then q's and kT's chains in reverse) becomes one
    `mstep.sdpa_backward` with the same options, at the place of the chain's
    first op; its dq, dk, dv replace the gradients of q, k (or of kT,
    transposed back) and v. Each layer's forward pairs with its own backward.

    Every value that disappears must be read only by ops that disappear too
    (the transposes autograd takes of p, q and kT go with them); otherwise
    the attention is left alone. The final probabilities may have other
    readers: sdpa then returns them (`return_attn_probs`). That is also how a
    forward whose backward does not match is fused (the unfused backward
    reads them); with dropout, readers of the pre-dropout probabilities block
    fusion.

    Before (bool mask, dropout; dO = %g):
    ```mlir
    %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
    %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
    %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
    %x = mstep.where %m, %y, %ninf : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
    %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
    %pd = mstep.dropout %p, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
    %o = mstep.matmul %pd, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
    %pdt = mstep.permute %pd {perm = array<i64: 0, 2, 1>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
    %dv = mstep.matmul %pdt, %g : tensor<2x6x4xf32>, tensor<2x4x5xf32> -> tensor<2x6x5xf32>
    %vt = mstep.permute %v {perm = array<i64: 0, 2, 1>} : tensor<2x6x5xf32> -> tensor<2x5x6xf32>
    %dpd = mstep.matmul %g, %vt : tensor<2x4x5xf32>, tensor<2x5x6xf32> -> tensor<2x4x6xf32>
    %dp = mstep.dropout %dpd, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
    %t1 = mstep.mul %dp, %p : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
    %t2 = mstep.sum %t1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
    %t3 = mstep.sub %dp, %t2 : tensor<2x4x6xf32>, tensor<2x4x1xf32> -> tensor<2x4x6xf32>
    %dx = mstep.mul %p, %t3 : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
    %dy = mstep.where %m, %dx, %zeros : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
    %ds = mstep.mul %dy, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
    %ktt = mstep.permute %kt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
    %dq = mstep.matmul %ds, %ktt : tensor<2x4x6xf32>, tensor<2x6x8xf32> -> tensor<2x4x8xf32>
    %qt = mstep.permute %q {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
    %dkt = mstep.matmul %qt, %ds : tensor<2x8x4xf32>, tensor<2x4x6xf32> -> tensor<2x8x6xf32>
    %dk = mstep.permute %dkt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
    ```

    After (%c = 0.125):
    ```mlir
    %o = mstep.sdpa %q, %k, %v mask(%m : tensor<2x1x6xi1>) rng(%rng)
        {dropout_p = 1.000000e-01 : f64, rng_offset = 16 : i64, scale = 1.250000e-01 : f64}
        : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
    %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v mask(%m : tensor<2x1x6xi1>) rng(%rng)
        {dropout_p = 1.000000e-01 : f64, rng_offset = 16 : i64, scale = 1.250000e-01 : f64}
        : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>
    ```
  }];
  let statistics = [
    Statistic<"numForwards", "fused-forwards", "Attention forwards rewritten into mstep.sdpa">,
    Statistic<"numBackwards", "fused-backwards",
              "Attention backwards rewritten into mstep.sdpa_backward">,
    Statistic<"numReturnedProbs", "returned-probs",
              "Fused forwards whose probabilities are still read (return_attn_probs)">
  ];
  let dependentDialects = ["::mstep::dialect::MstepDialect"];
}

def FuseElementwise : Pass<"mstep-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Form maximal mstep.fusion regions from elementwise DAGs";
  let description = [{
    Puts every fusible op (elementwise, `expand`, `cast`, `full`) of the
    function into an `mstep.fusion`, so a backend only ever sees elementwise
    work inside fusion regions. Ops are grouped along producer-consumer
    edges, greedily in program order, into regions that are as large as
    the rules allow:

    - fusion never creates a cycle: two ops share a region only if no path
      between them leaves it (through a matmul, a reduction, another
      region...). The planner keeps an order of regions and non-fused ops,
      with the non-fused ops in program order, in which each region sits
      right after its last input and before everything that reads it; a
      merge that leaves a region no such place is given up. (So a merge
      that would need two non-fused ops swapped is given up too, even
      where the swap would be legal.);
    - a region reads at most `max-inputs` distinct tensors from outside;
    - no op is duplicated: each op lands in exactly one region, and a region
      yields every value it computes that is used outside it (multi-output);
    - `mstep.constant` is cloned into each region that reads it instead of
      becoming an input; an original left without users is erased. A
      constant read only by non-fusible ops stays where it is;
    - dead fusible ops (all are pure) are erased.

    Softmax, layer_norm, reductions, matmul and the other non-fusible ops
    are never put in a region; no epilogue fusion is done. An
    `mstep.custom` is a boundary too, unless its registered op declares a
    scalar form (mstep/runtime/CustomScalarForm.h) and every input and
    result of the call has one floating tensor type: then (with
    `custom-scalar-forms`) the call is first replaced by the form's mstep
    ops, which fuse like any others, and its kernel is not called. Existing
    `mstep.fusion` ops are left alone, so running the pass twice gives the
    same IR as running it once. Each region takes the place of its last op;
    users of its results that came earlier move after it (a stable
    topological sort), the rest of the order is kept. Inputs are ordered by
    first use, results in program order.

    Before:
    ```mlir
    func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>)
        -> tensor<4x8xf32> {
      %c = mstep.constant 5.000000e-01 : tensor<f32>
      %e = mstep.expand %b : tensor<8xf32> -> tensor<4x8xf32>
      %s = mstep.add %x, %e : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
      %m = mstep.matmul %s, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
      %h = mstep.mul %s, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
      %r = mstep.relu %m : tensor<4x8xf32>
      %o = mstep.add %h, %r : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
      return %o : tensor<4x8xf32>
    }
    ```

    After (`%o` cannot join the first region: the matmul lies between):
    ```mlir
    func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>)
        -> tensor<4x8xf32> {
      %0:2 = mstep.fusion ins(%b, %x : tensor<8xf32>, tensor<4x8xf32>)
          -> tensor<4x8xf32>, tensor<4x8xf32> {
      ^bb0(%b1: tensor<8xf32>, %x1: tensor<4x8xf32>):
        %c = mstep.constant 5.000000e-01 : tensor<f32>
        %e = mstep.expand %b1 : tensor<8xf32> -> tensor<4x8xf32>
        %s = mstep.add %x1, %e : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
        %h = mstep.mul %s, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
        mstep.yield %s, %h : tensor<4x8xf32>, tensor<4x8xf32>
      }
      %m = mstep.matmul %0#0, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
      %1 = mstep.fusion ins(%m, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
      ^bb0(%m1: tensor<4x8xf32>, %h1: tensor<4x8xf32>):
        %r = mstep.relu %m1 : tensor<4x8xf32>
        %o = mstep.add %h1, %r : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
        mstep.yield %o : tensor<4x8xf32>
      }
      return %1 : tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"maxInputs", "max-inputs", "unsigned", /*default=*/"16",
           "Most distinct tensors a region may read from outside (constants "
           "cloned into it do not count); must be at least the operand count "
           "of every fusible op (3, for mstep.where)">,
    Option<"customScalarForms", "custom-scalar-forms", "bool", /*default=*/"true",
           "Expand calls of custom ops that declare a scalar form into mstep "
           "ops before fusing (off: every mstep.custom stays a boundary and runs "
           "its kernel, as on the ref backend)">
  ];
  let statistics = [
    Statistic<"numFusions", "fusions", "mstep.fusion regions created">,
    Statistic<"numFusedOps", "fused-ops", "Ops moved into mstep.fusion regions">,
    Statistic<"numCustomExpanded", "custom-expanded",
              "mstep.custom calls replaced by their scalar form">
  ];
  let dependentDialects = ["::mstep::dialect::MstepDialect"];
}

def FuseOptimizer : Pass<"mstep-fuse-optimizer", "mlir::func::FuncOp"> {
  let summary = "Fuse per-parameter optimizer chains into one mstep.multi_tensor_update";
  let description = [{
    Finds the update chain lib/api/optim records for each parameter (SGD
    with or without momentum, dampening, nesterov and weight decay; Adam,
    AdamW, with or without amsgrad and weight decay; Adadelta) and replaces
    all chains of one rule and one set of hyperparameters with one
    `mstep.multi_tensor_update`; a clip_grad_norm_ over exactly those
    gradients folds into it (`max_grad_norm`, `grad_norm_type`).

    A chain is a parameter argument updated in place (`mstep.role =
    "parameter"`, `mstep.aliased_result`), the optimizer-state arguments and
    step counter updated with it, its gradient and its f64 hyperparameters
    (device scalars). It matches only op for op, as the optimizer records
    it; nothing outside the chain may read a value it computes from the
    tensors, except the new param and state. A parameter whose chain does
    not match keeps its ops (and the other parameters still fuse);
    different optimizers in one graph give one op each. The clip folds
    when its norms cover exactly the group's gradients, all of one dtype,
    and nothing else reads its intermediates; the total norm and the
    clipped gradients (when something else reads them: the `.grad`
    tensors a training step returns) become results of the op.

    Before (Adadelta, one parameter; cse has shared the casts):
    ```mlir
    func.func @step(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                    %sq: tensor<4xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                    %acc: tensor<4xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                    %w: tensor<4xf32> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                    %g: tensor<4xf32> {mstep.role = "input"},
                    %rho: tensor<f64> {mstep.role = "device_scalar"}, %eps: ..., %lr: ...) -> (...) {
      %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
      %rho32 = mstep.cast %rho : tensor<f64> -> tensor<f32>
      %omr = mstep.sub %c1, %rho : tensor<f64>, tensor<f64> -> tensor<f64>
      %omr32 = mstep.cast %omr : tensor<f64> -> tensor<f32>
      %0 = mstep.mul %sq, %rho32 ...      %1 = mstep.mul %omr32, %g ...
      %2 = mstep.mul %1, %g ...           %sq1 = mstep.add %0, %2 ...
      ... delta = sqrt(acc + eps) / sqrt(sq1 + eps) * g,
          acc1 = acc * rho + (1 - rho) * delta * delta, w1 = w - lr * delta ...
      return %t, %sq1, %acc1, %w1 : ...
    }
    ```
    After:
    ```mlir
      %w1, %sq1, %acc1, %t = mstep.multi_tensor_update <adadelta>
          params(%w : tensor<4xf32>) grads(%g : tensor<4xf32>)
          states(%sq, %acc : tensor<4xf32>, tensor<4xf32>) steps(%step)
          lr(%lr) rho(%rho) eps(%eps)
      return %t, %sq1, %acc1, %w1 : ...
    ```
    With clip_grad_norm_(params, 1.0) before an AdamW step whose `.grad`
    tensors stay alive, the op also takes the raw gradients and returns
    the clipped ones and the total norm:
    ```mlir
      %p:2, %s:4, %t:2, %clipped:2, %total = mstep.multi_tensor_update <adamw>
          params(%w, %b : ...) grads(%gw, %gb : ...) states(...) steps(%tw, %tb)
          lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd)
          {max_grad_norm = 1.000000e+00 : f64}
          -> total_grad_norm tensor<f32> clipped_grads(tensor<4x3xf32>, tensor<4xf32>)
    ```
    The kernel recomputes the derived scalars (1 - beta, the bias
    corrections, ...) in f64 and every tensor op in the parameter's dtype,
    in the chain's order: the fused step equals the unfused one bit for bit
    on the ref backend.
  }];
  let dependentDialects = ["::mstep::dialect::MstepDialect"];
  let statistics = [
    Statistic<"numFusedOps", "fused-ops", "mstep.multi_tensor_update ops created">,
    Statistic<"numFusedParams", "fused-params", "Parameters whose update chains were fused">,
    Statistic<"numFoldedClips", "folded-clips", "clip_grad_norm_ chains folded into a fused update">,
  ];
}

def SinkCollectiveReaders : Pass<"mstep-sink-collective-readers", "mlir::func::FuncOp"> {
  let summary = "Move the pure readers of a collective's result down to their first user";
  let description = [{
    A backend that runs a collective asynchronously (the cpu executable:
    start at the op, wait right before the first op that reads the result)
    overlaps the transfer only with the ops between the collective and
    that first reader. The step graph comes in the tracer's depth-first
    order, which puts a collective's readers right after it (DDP's
    gradient views of a bucket: `slice`, `reshape`), so nothing would
    overlap. This pass moves every memory-effect-free op that reads a
    collective's result, directly or through other such ops, down to just
    before its first user (the `func.return` when only returned), last op
    first, so the transfer overlaps every op that does not need it. Ops
    with memory effects (the collectives themselves) never move; the
    relative order of the moved ops is kept. Run it before
    mstep-plan-memory (the moved readers keep the collective's result live
    longer). Without collectives it changes nothing.

    Before:
    ```mlir
    %r = mstep.all_reduce %g {reduce_op = #mstep.reduce_op<mean>, world_size = 2 : i64} : tensor<8xf32> -> tensor<8xf32>
    %v = mstep.reshape %r : tensor<8xf32> -> tensor<2x4xf32>
    %h = mstep.matmul %a, %b : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
    return %v, %h : tensor<2x4xf32>, tensor<64x64xf32>
    ```
    After (the matmul runs while the all_reduce is in flight):
    ```mlir
    %r = mstep.all_reduce %g ...
    %h = mstep.matmul %a, %b ...
    %v = mstep.reshape %r : tensor<8xf32> -> tensor<2x4xf32>
    return %v, %h : tensor<2x4xf32>, tensor<64x64xf32>
    ```
  }];
  let statistics = [
    Statistic<"numSunk", "sunk-ops", "Readers of a collective's result moved down">,
  ];
}

def PlanMemory : Pass<"mstep-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign every intermediate tensor an offset in one arena";
  let description = [{
    Liveness-based buffer assignment (plan_memory in
    include/mstep/passes/MemoryPlan.h). Every result of every top-level op
    gets bytes of one arena; values inside `mstep.fusion` regions are the
    kernel's own. Arguments keep their own buffers.
    - A value lives from its op to its last user, in program order;
      returned values live to `func.return` (the runtime copies them out).
    - In place: a result takes over the slot of an operand that dies at its
      op when sizes match and the op reads that operand at the result's
      positions (elementwise ops and fusions on same-shape operands, the
      param/state/step pairs of `mstep.multi_tensor_update`).
    - Donation: the result named by an argument's `mstep.aliased_result` is
      written into the argument's buffer (no arena bytes) when nothing reads
      the argument after that result's op.
    - Offsets: greedy best-fit packing, slots largest first or most crowded
      program point first, whichever gives the smaller arena; every offset
      is a multiple of `alignment`. The plan is checked (no two live values
      overlap) before it is written.

    Attributes: on each op, `mstep.arena_offsets` (one entry per result, -1
    for a result written into a donated argument) and, when used,
    `mstep.in_place` (operand number per result, or -1) and
    `mstep.aliases_arg` (argument number per result, or -1); on the
    function, `mstep.arena_size`, `mstep.liveness_bound` (the largest sum of
    aligned slots live at one point: no packing can do better) and
    `mstep.arena_alignment`, in bytes.

    Before:
    ```mlir
    func.func @step(%x: tensor<256xf32> {mstep.role = "input"},
                    %w: tensor<256xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"})
        -> (tensor<f32>, tensor<256xf32>) {
      %a = mstep.exp %x : tensor<256xf32>
      %b = mstep.neg %a : tensor<256xf32>
      %l = mstep.sum %b {dims = array<i64: 0>, keepdim = false} : tensor<256xf32> -> tensor<f32>
      %w2 = mstep.sub %w, %b : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
      return %l, %w2 : tensor<f32>, tensor<256xf32>
    }
    ```
    After (`%b` reuses `%a`'s slot, `%w2` is written into `%w`):
    ```mlir
    func.func @step(...) -> (tensor<f32>, tensor<256xf32>) attributes {
        mstep.arena_alignment = 64 : i64, mstep.arena_size = 1088 : i64,
        mstep.liveness_bound = 1088 : i64} {
      %a = mstep.exp %x {mstep.arena_offsets = array<i64: 0>} : tensor<256xf32>
      %b = mstep.neg %a {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>} : tensor<256xf32>
      %l = mstep.sum %b {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: 1024>} : tensor<256xf32> -> tensor<f32>
      %w2 = mstep.sub %w, %b {mstep.aliases_arg = array<i64: 1>, mstep.arena_offsets = array<i64: -1>} : tensor<256xf32>, tensor<256xf32> -> tensor<256xf32>
      return %l, %w2 : tensor<f32>, tensor<256xf32>
    }
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every arena offset and slot (a power of two)">,
  ];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "Arena bytes (summed over functions)">,
    Statistic<"livenessBoundBytes", "liveness-bound-bytes",
              "Liveness lower bound in bytes (summed over functions)">,
    Statistic<"inPlaceResults", "in-place-results", "Results that reuse a dying operand's slot">,
    Statistic<"donatedResults", "donated-results",
              "Results written into a donated argument's buffer">,
  ];
}

def VerifyBackendContract : Pass<"mstep-verify-backend-contract", "mlir::ModuleOp"> {
  let summary = "Check the normalized form that every backend may assume";
  let description = [{
    Checks rules C1-C8 of docs/backend-contract.md and leaves the module
    unchanged: only func.func ops, each one block of mstep ops and
    func.return (C1, C2); static ranked tensors of f32/f64/bf16/f16/i32/
    i64/i1 everywhere, no memrefs (C3); every fusible op except
    `mstep.constant` inside an `mstep.fusion` (C4) whose region holds only
    fusible ops (C5); an `mstep.role` on every argument (C6); valid
    `mstep.aliased_result` donations (C7); with `mstep.arena_size`, a place
    for every result (C8). Each violation is one located error of the form
    `backend contract: <what>; <what to do> (C<n>)`; then the pass fails.

    Passes:
    ```mlir
    func.func @step(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
      %y = mstep.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> {
      ^bb0(%a: tensor<4xf32>):
        %e = mstep.exp %a : tensor<4xf32>
        mstep.yield %e : tensor<4xf32>
      }
      return %y : tensor<4xf32>
    }
    ```
    Fails (C4): `%e = mstep.exp %x : tensor<4xf32>` at the top level:
    `backend contract: 'mstep.exp' at the top level of @step is fusible but
    not inside an mstep.fusion; run -mstep-fuse-elementwise first (C4)`.
  }];
}

def LowerToLinalg : Pass<"mstep-lower-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Lower mstep ops to linalg on tensors for the codegen backends";
  let description = [{
    A partial conversion to linalg, tensor, arith and math on tensors (value
    semantics, `tensor.empty` inits). The patterns live in lib/passes/linalg/,
    one file per op family:

    - Elementwise ops (unary, binary and `where` with numpy broadcasting,
      `cast`, `expand`, `full`): one `linalg.generic` with parallel
      iterators; an operand's indexing map drops the missing leading dims
      and reads index 0 in a size-1 dim the result grows. The body is the
      op's scalar form in arith/math. `mstep.constant` becomes a dense splat
      `arith.constant`.
    - `mstep.fusion`: ONE multi-output `linalg.generic` when all results
      have the same shape (and every input broadcasts to it); the region's
      ops become scalar ops of the body and `expand` only shows in the input
      maps. A region whose results differ in shape is lowered op by op.
    - `sum`, `mean`, `max`, `min`: `linalg.fill` of the identity (0, -inf,
      +inf, the int limits) and a `linalg.generic` with reduction iterators;
      `mean` divides afterwards; keepdim adds the 1s with
      `tensor.expand_shape`.
    - `matmul`: `linalg.matmul` (2-D) or `linalg.batch_matmul`; other ranks
      and broadcast batch dims broadcast the operands (`linalg.generic`) and
      fold the batch dims with `tensor.collapse_shape`/`expand_shape`.

    Scalar semantics are PyTorch's: float comparisons are ordered (false on
    NaN) except `ne` (unordered); `relu`, `maximum`/`minimum` and the
    `max`/`min` reductions propagate NaN; bool `add` is or, `mul` is and;
    float to int truncates toward zero, nonzero (NaN too) casts to true.
    bf16/f16 arithmetic is computed in f32 inside the body and rounded once
    per op; `sum`, `mean` and `matmul` accumulate bf16/f16 in f32.
    Every other mstep op (`logsumexp`, `var`, `argmax`, `softmax`,
    `layer_norm`, `sdpa`, `conv2d`, `gather`, ...) is left in place.

    Before:
    ```mlir
    %r = mstep.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%x1: tensor<4x8xf32>, %b1: tensor<8xf32>):
      %s = mstep.add %x1, %b1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
      %t = mstep.relu %s : tensor<4x8xf32>
      mstep.yield %t : tensor<4x8xf32>
    }
    %m = mstep.sum %r {dims = array<i64: 1>, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>
    ```

    After:
    ```mlir
    %0 = tensor.empty() : tensor<4x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> (d1)>,
                                          affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%0 : tensor<4x8xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %s = arith.addf %in, %in_0 : f32
      %zero = arith.constant 0.000000e+00 : f32
      %t = arith.maximumf %s, %zero : f32
      linalg.yield %t : f32
    } -> tensor<4x8xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %1 = tensor.empty() : tensor<4xf32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<4xf32>) -> tensor<4xf32>
    %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                          affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
        ins(%r : tensor<4x8xf32>) outs(%2 : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %3 = arith.addf %in, %out : f32
      linalg.yield %3 : f32
    } -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

#endif  // MSTEP_PASSES_PASSES_TD
