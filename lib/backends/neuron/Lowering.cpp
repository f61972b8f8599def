// Lowering: an elementwise op or fusion body becomes a small DAG of engine
// operations (EwDag), emitted chunk by chunk into a double-buffered tile
// program; a matmul becomes tiled_matmul_program (batched: one product per
// batch index). Every program is
// validated (estimate_cost validates) before lower_node returns it.
#include "lib/backends/neuron/Lowering.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionLowering.h"
#include "lib/backends/neuron/CopyLowering.h"
#include "lib/backends/neuron/CreationLowering.h"
#include "lib/backends/neuron/DropoutLowering.h"
#include "lib/backends/neuron/IndexedLowering.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/OptimizerLowering.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/TileBuilder.h"
#include "lib/backends/neuron/TiledMatmulProgram.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::neuron {

namespace {

/// Values 0..inputs-1 are the inputs; value inputs + i is ops[i]'s result.
struct EwDag {
  int32_t inputs = 0;
  std::vector<EwOp> ops;
  std::vector<int32_t> outputs;
};

/// The DAG of a fusion body whose every value has type `type`.
absl::StatusOr<EwDag> fusion_dag(const GraphNode& node, const TensorType& type) {
  const TraceGraph& body = *node.body;
  EwDag dag;
  dag.inputs = static_cast<int32_t>(body.input_types.size());
  std::vector<int32_t> value(body.nodes.size(), -1);
  std::vector<std::optional<float>> constant(body.nodes.size());
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    const GraphNode& n = body.nodes[i];
    if (n.op == OpKind::parameter) {
      if (body.input_types[attr_int(n.attrs, AttrName::index)] != type)
        return refuse(node.op, absl::StrCat("input ", n.results[0].to_string(), " is not ",
                                            type.to_string(), " (broadcast or mixed dtype)"));
      value[i] = static_cast<int32_t>(attr_int(n.attrs, AttrName::index));
      continue;
    }
    constant[i] = scalar_constant(n);
    if (constant[i]) continue;
    if (n.results.size() != 1 || n.results[0] != type || n.operands.empty() ||
        n.operands.size() > 2)
      return refuse(node.op, absl::StrCat("body op ", op_name(n.op),
                                          " is not an elementwise op on ", type.to_string()));
    int32_t a = -1, b = -1;
    std::optional<float> scalar;
    const ValueRef x = n.operands[0];
    if (value[x.node] < 0)
      return refuse(node.op, absl::StrCat("body op ", op_name(n.op), "'s first operand is not a ",
                                          type.to_string(), " tensor"));
    a = value[x.node];
    if (n.operands.size() == 2) {
      const ValueRef y = n.operands[1];
      if (value[y.node] >= 0)
        b = value[y.node];
      else if (constant[y.node])
        scalar = constant[y.node];
      else
        return refuse(node.op, absl::StrCat("body op ", op_name(n.op), "'s operand"));
    }
    std::optional<EwOp> e = ew_op_of(n, a, b, scalar);
    if (!e || (n.operands.size() == 2) != (e->opcode != Opcode::activation && n.op != OpKind::neg))
      return refuse(node.op, absl::StrCat("body op ", op_name(n.op), " has no engine lowering"));
    value[i] = dag.inputs + static_cast<int32_t>(dag.ops.size());
    dag.ops.push_back(*e);
  }
  for (ValueRef v : body.outputs) {
    if (value[v.node] < 0) return refuse(node.op, "a body output is not a tensor value");
    dag.outputs.push_back(value[v.node]);
  }
  return dag;
}

/// The tile program of `dag` over values of `type`: [128, F] chunked.
absl::StatusOr<TileProgram> elementwise_program(OpKind op, const EwDag& dag,
                                                const TensorType& type) {
  const int64_t n = type.numel();
  if (n == 0) return refuse(op, absl::StrCat(type.to_string(), " has no elements"));
  // [128, f] for the first 128 * f elements, then the tail of r < 128
  // elements as one partition (flat_pieces).
  const int64_t f = n / kPartitions, r = n - f * kPartitions;
  const int32_t values = dag.inputs + static_cast<int32_t>(dag.ops.size());
  const int64_t esize = static_cast<int64_t>(element_size(type.dtype));
  // Two slots of every value in SBUF, within 128 KiB per partition.
  const int64_t chunk =
      std::min<int64_t>({std::max(f, r), 4096, (128 * 1024) / (2 * values * esize)});
  if (chunk < 1) return refuse(op, absl::StrCat(values, " values do not fit SBUF"));
  const std::vector<FlatPiece> pieces = flat_pieces(n, chunk);
  const int64_t chunks = static_cast<int64_t>(pieces.size());
  const DType dt = type.dtype;

  TileBuilder b(absl::StrCat("neuron_", op_name(op)));
  std::vector<int32_t> hbm;
  for (int32_t i = 0; i < dag.inputs; ++i)
    hbm.push_back(b.hbm_tensor(absl::StrCat("in", i), dt, n));
  for (size_t o = 0; o < dag.outputs.size(); ++o)
    hbm.push_back(b.hbm_tensor(absl::StrCat("out", o), dt, n));
  std::vector<std::array<int32_t, 2>> tile(values), ready(values);
  std::array<int32_t, 2> done{}, stored{};
  for (int s = 0; s < 2; ++s) {
    for (int32_t v = 0; v < values; ++v) {
      tile[v][s] = b.allocate(BufferKind::sbuf, chunk * esize, absl::StrCat("v", v, "_", s));
      ready[v][s] = b.semaphore();
    }
    done[s] = b.semaphore();
    stored[s] = b.semaphore();
  }
  for (int64_t c = 0; c < chunks; ++c) {
    const int s = static_cast<int>(c % 2);
    const int32_t use = static_cast<int32_t>(c / 2); // earlier uses of slot s
    const FlatPiece& pc = pieces[c];
    auto on_chip = [&](int32_t v) {
      return tile_pattern(BufferKind::sbuf, tile[v][s], dt, 0, pc.parts, 0, {{pc.w, 1}});
    };
    auto in_hbm = [&](int32_t tensor) { return flat_hbm(tensor, dt, pc); };
    for (int32_t i = 0; i < dag.inputs; ++i) {
      const int64_t l = b.dma_copy(on_chip(i), in_hbm(hbm[i]));
      if (use > 0) { // slot s free: chunk c-2's ops and stores are done
        b.wait(l, done[s], use * static_cast<int32_t>(dag.ops.size()));
        b.wait(l, stored[s], use * static_cast<int32_t>(dag.outputs.size()));
      }
      b.signal(l, ready[i][s]);
    }
    for (size_t k = 0; k < dag.ops.size(); ++k) {
      const EwOp& e = dag.ops[k];
      const int32_t r = dag.inputs + static_cast<int32_t>(k);
      int64_t idx;
      if (e.opcode == Opcode::activation) {
        idx = b.activation(on_chip(r), on_chip(e.a), e.function);
      } else if (e.opcode == Opcode::tensor_scalar) {
        idx = b.tensor_scalar(Engine::vector, on_chip(r), on_chip(e.a), e.alu, e.scalar);
      } else {
        idx = b.tensor_tensor(Engine::vector, on_chip(r), on_chip(e.a), on_chip(e.b), e.alu);
      }
      b.wait(idx, ready[e.a][s], use + 1);
      if (e.opcode == Opcode::tensor_tensor && e.b != e.a) b.wait(idx, ready[e.b][s], use + 1);
      if (use > 0) { // chunk c-2's readers of this slot are done
        b.wait(idx, done[s], use * static_cast<int32_t>(dag.ops.size()));
        b.wait(idx, stored[s], use * static_cast<int32_t>(dag.outputs.size()));
      }
      b.signal(idx, ready[r][s]);
      b.signal(idx, done[s]);
    }
    for (size_t o = 0; o < dag.outputs.size(); ++o) {
      const int32_t v = dag.outputs[o];
      const int64_t st = b.dma_copy(in_hbm(hbm[dag.inputs + o]), on_chip(v));
      b.wait(st, ready[v][s], use + 1);
      b.signal(st, stored[s]);
    }
  }
  return b.take();
}

/// The first rank - 2 dims of `s` (a matmul operand's batch dims).
Shape batch_dims(const Shape& s) {
  return Shape(s.dims().subspan(0, static_cast<size_t>(std::max<int64_t>(s.rank() - 2, 0))));
}

/// [..., M, K] x [..., K, N], batch dims broadcast. When B has no batch
/// (a linear layer on [B, T, D]) the batch folds into M: one 2-d product.
/// Otherwise one product per batch index. A is loaded as the graph holds
/// it and transposed on chip (TiledMatmulProgram.h). With `a_t` / `b_t`
/// (2-d products only), types[0] / types[1] is the operand of a matrix
/// transpose that the graph feeds in as A / B: X [K, M] is A^T as the
/// program wants it, Y [N, K] is B^T (transposed on chip).
absl::StatusOr<LoweredOp> lower_matmul(const GraphNode& node, absl::Span<const TensorType> types,
                                       bool a_t = false, bool b_t = false) {
  auto swapped = [](const TensorType& t) {
    return TensorType{Shape({t.shape[1], t.shape[0]}), t.dtype};
  };
  if ((a_t && types[0].shape.rank() != 2) || (b_t && types[1].shape.rank() != 2))
    return refuse(node.op, "a transposed operand is read as it is by 2-d products only");
  const TensorType a = a_t ? swapped(types[0]) : types[0];
  const TensorType bt = b_t ? swapped(types[1]) : types[1];
  const TensorType& c = node.results[0];
  const int64_t ar = a.shape.rank(), br = bt.shape.rank();
  if (ar < 2 || br < 2)
    return refuse(node.op, absl::StrCat(a.to_string(), " x ", bt.to_string(),
                                        ": operands of rank 2 or more are tiled"));
  if (a.dtype != bt.dtype || a.dtype != c.dtype || !tileable_dtype(a.dtype))
    return refuse(node.op, absl::StrCat(a.to_string(), " x ", bt.to_string(),
                                        ": only f32 or bf16, one dtype"));
  const int64_t m = a.shape[ar - 2], k = a.shape[ar - 1], n = bt.shape[br - 1];
  const Shape batch = batch_dims(c.shape);
  if (c.numel() == 0 || k == 0 || bt.shape[br - 2] != k)
    return refuse(node.op,
                  absl::StrCat(a.to_string(), " x ", bt.to_string(), ": empty or K mismatch"));
  // B^T's rows are staged two blocks deep: 4 x 128 rows of K each.
  if (b_t && 2 * 4 * k * static_cast<int64_t>(element_size(a.dtype)) > 48 * 1024)
    return refuse(node.op, absl::StrCat("B^T with K = ", k, ": its staged rows do not fit SBUF"));
  LoweredOp out;
  out.hbm_binding = {0, 1, -1};
  TiledMatmulShape s{m, k, n, a.dtype, c.dtype};
  s.a_row_major = !a_t;
  s.b_transposed = b_t;
  if (batch_dims(bt.shape).numel() == 1 && batch_dims(a.shape).numel() == batch.numel()) {
    s.m = batch.numel() * m;
    out.program = tiled_matmul_program(s);
    return out;
  }
  if (a_t || b_t) return refuse(node.op, "a transposed operand of a batched product");
  s.a_elements = a.numel();
  s.b_elements = bt.numel();
  const Shape::Dims sa = ref::broadcast_strides(batch_dims(a.shape), batch);
  const Shape::Dims sb = ref::broadcast_strides(batch_dims(bt.shape), batch);
  std::array<Shape::Dims, 2> strides = {sa, sb};
  ref::for_each_strided(batch, strides, [&](int64_t, const std::array<int64_t, 2>& o) {
    s.batches.push_back({o[0] * m * k, o[1] * k * n});
  });
  out.program = tiled_matmul_program(s);
  return out;
}

} // namespace

bool is_matrix_transpose(const GraphNode& node, absl::Span<const TensorType> types) {
  if (node.op != OpKind::permute || types.size() != 1 || types[0].shape.rank() != 2) return false;
  const IntList& perm = attr_ints(node.attrs, AttrName::perm);
  return perm.size() == 2 && perm[0] == 1 && perm[1] == 0;
}

bool is_head_permute(const GraphNode& node, absl::Span<const TensorType> types) {
  if (node.op != OpKind::permute || types.size() != 1) return false;
  const int64_t r = types[0].shape.rank();
  const IntList& perm = attr_ints(node.attrs, AttrName::perm);
  if (r < 3 || static_cast<int64_t>(perm.size()) != r) return false;
  for (int64_t d = 0; d < r; ++d)
    if (perm[d] != (d == r - 3 ? r - 2 : d == r - 2 ? r - 3 : d)) return false;
  return true;
}

absl::StatusOr<LoweredOp> lower_matmul_of_transposes(const GraphNode& node,
                                                     absl::Span<const TensorType> types, bool a_t,
                                                     bool b_t) {
  MSTEP_ASSIGN_OR_RETURN(LoweredOp out, lower_matmul(node, types, a_t, b_t));
  MSTEP_ASSIGN_OR_RETURN(out.cost, estimate_cost(out.program));
  return out;
}

absl::StatusOr<LoweredOp> lower_node(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types) {
  LoweredOp out;
  if (node.op == OpKind::matmul) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_matmul(node, operand_types));
  } else if (node.op == OpKind::sdpa || node.op == OpKind::sdpa_grad) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_attention(node, operand_types));
  } else if (node.op == OpKind::index_select) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_index_select(node, operand_types));
  } else if (node.op == OpKind::index_add) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_index_add(node, operand_types));
  } else if (node.op == OpKind::arange) { // CreationLowering.h
    MSTEP_ASSIGN_OR_RETURN(out, lower_arange(node, operand_types));
  } else if (node.op == OpKind::rand || node.op == OpKind::randn) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_rand(node, operand_types));
  } else if (node.op == OpKind::dropout) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_dropout(node, operand_types));
  } else if (node.op == OpKind::multi_tensor_update) {
    MSTEP_ASSIGN_OR_RETURN(out, lower_multi_tensor_update(node, operand_types));
  } else if (is_copy_op(node.op)) { // CopyLowering.h
    MSTEP_ASSIGN_OR_RETURN(out, lower_copy(node, operand_types));
  } else if (is_row_family(node, operand_types)) { // RowLowering.h
    MSTEP_ASSIGN_OR_RETURN(out, lower_row_family(node, operand_types));
  } else {
    if (node.results.empty() || !tileable_dtype(node.results[0].dtype))
      return refuse(node.op, "only f32/bf16 results");
    const TensorType& type = node.results[0];
    EwDag dag;
    if (node.op == OpKind::fusion && node.body) {
      for (const TensorType& t : node.results)
        if (t != type) return refuse(node.op, "results of different types");
      MSTEP_ASSIGN_OR_RETURN(dag, fusion_dag(node, type));
    } else {
      for (const TensorType& t : operand_types)
        if (t != type)
          return refuse(node.op, absl::StrCat("operand ", t.to_string(), " is not ",
                                              type.to_string(), " (broadcast or mixed dtype)"));
      const int32_t arity = static_cast<int32_t>(operand_types.size());
      std::optional<EwOp> e = ew_op_of(node, 0, arity == 2 ? 1 : -1, std::nullopt);
      if (!e || arity < 1 || arity > 2 || (arity == 2) != (e->opcode == Opcode::tensor_tensor))
        return refuse(node.op, "no engine lowering for this op");
      dag.inputs = arity;
      dag.ops.push_back(*e);
      dag.outputs.push_back(arity);
    }
    MSTEP_ASSIGN_OR_RETURN(out.program, elementwise_program(node.op, dag, type));
    for (int32_t i = 0; i < dag.inputs; ++i) out.hbm_binding.push_back(i);
    for (size_t o = 0; o < dag.outputs.size(); ++o)
      out.hbm_binding.push_back(-1 - static_cast<int32_t>(o));
  }
  // estimate_cost validates the program first: nothing unvalidated runs.
  MSTEP_ASSIGN_OR_RETURN(out.cost, estimate_cost(out.program));
  return out;
}

absl::Status run_lowered(const LoweredOp& op, Simulator& sim,
                         absl::Span<const host::HostBuffer* const> inputs,
                         absl::Span<host::HostBuffer* const> outputs) {
  HbmContents hbm(op.program.hbm.size());
  for (size_t t = 0; t < hbm.size(); ++t) {
    const HbmTensor& h = op.program.hbm[t];
    hbm[t].resize(h.elements * element_size(h.dtype));
    const int32_t bind = op.hbm_binding[t];
    if (bind < 0) continue; // a result, or staged below
    const host::HostBuffer& in = *inputs[bind];
    std::memcpy(hbm[t].data(), in.bytes(), hbm[t].size());
  }
  if (op.stage) MSTEP_RETURN_IF_ERROR(op.stage(inputs, outputs, hbm));
  MSTEP_RETURN_IF_ERROR(sim.run(op.program, hbm).status());
  for (size_t t = 0; t < hbm.size(); ++t)
    if (op.hbm_binding[t] < 0 && op.hbm_binding[t] != kStagedOnHost)
      std::memcpy(outputs[-1 - op.hbm_binding[t]]->bytes(), hbm[t].data(), hbm[t].size());
  return absl::OkStatus();
}

} // namespace mstep::neuron
