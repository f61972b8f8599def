// CudaViews: see CudaViews.h.
#include "lib/backends/cuda/CudaViews.h"

#include "lib/backends/cuda/CudaPlan.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

llvm::ArrayRef<int64_t> shape_of(mlir::Value value) {
  return llvm::cast<mlir::ShapedType>(value.getType()).getShape();
}

int64_t element_bytes(mlir::Value value) {
  const unsigned bits = llvm::cast<mlir::ShapedType>(value.getType()).getElementTypeBitWidth();
  return (bits + 7) / 8;
}

/// Whether `perm` keeps the order of the dims of `shape` that are not 1
/// (the row-major bytes do not move).
bool moves_only_unit_dims(llvm::ArrayRef<int64_t> perm, llvm::ArrayRef<int64_t> shape) {
  int64_t previous = -1;
  for (int64_t d : perm) {
    if (shape[d] == 1) continue;
    if (d < previous) return false;
    previous = d;
  }
  return true;
}

/// Whether `perm` swaps the last two dims and keeps the others.
bool swaps_last_two(llvm::ArrayRef<int64_t> perm) {
  const size_t r = perm.size();
  if (r < 2 || perm[r - 1] != static_cast<int64_t>(r) - 2 ||
      perm[r - 2] != static_cast<int64_t>(r) - 1)
    return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

/// The byte offset of a slice whose elements are one contiguous run of its
/// input (every dim before `dim` of size 1, and unit steps or one element
/// along it), or nullopt.
std::optional<int64_t> contiguous_slice_offset(dialect::SliceOp slice) {
  llvm::ArrayRef<int64_t> in = shape_of(slice.getInput());
  const int64_t dim = static_cast<int64_t>(slice.getDim());
  for (int64_t d = 0; d < dim; ++d)
    if (in[d] != 1) return std::nullopt;
  if (slice.getStep() != 1 && shape_of(slice.getResult())[dim] > 1) return std::nullopt;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < in.size(); ++d) inner *= in[d];
  return static_cast<int64_t>(slice.getStart()) * inner * element_bytes(slice.getInput());
}

/// Whether a matmul with operands of ranks `lr`, `rr` can read its lhs /
/// rhs transposed: compile_cuda_step folds a >2-D lhs's batch dims into
/// the rows when rhs is 2-D, which a transposed lhs does not allow.
bool lhs_may_transpose(size_t lr, size_t rr) { return lr == 2 || rr > 2; }

/// Whether `add` adds a bias to `product`: its other operand is [n] (the
/// product's last dim) of the product's element type, and the sum has the
/// product's type. The bias, or null.
mlir::Value bias_of(mlir::Operation* add, mlir::Value product) {
  if (!llvm::isa<dialect::AddOp>(add) || add->getResult(0).getType() != product.getType())
    return nullptr;
  mlir::Value other = add->getOperand(0) == product ? add->getOperand(1) : add->getOperand(0);
  if (other == product) return nullptr;
  auto type = llvm::cast<mlir::ShapedType>(other.getType());
  auto product_type = llvm::cast<mlir::ShapedType>(product.getType());
  if (type.getRank() != 1 || type.getDimSize(0) != product_type.getShape().back() ||
      type.getElementType() != product_type.getElementType())
    return nullptr;
  return other;
}

/// The epilogue of a matmul whose product `product` has one use: a
/// fusion that is only `add(product, bias)` [then ReLU or GELU-tanh]; or an
/// `mstep.add` of the bias [then such an op that only the add's result
/// feeds]. `absorbed` gets the ops that then launch nothing; `inner` the
/// values in between (the add's result before the activation).
std::optional<CudaMatmulEpilogue> find_epilogue(mlir::Value product,
                                                const llvm::DenseSet<mlir::Value>& returned,
                                                llvm::SmallVectorImpl<mlir::Operation*>& absorbed,
                                                llvm::SmallVectorImpl<mlir::Value>& inner) {
  mlir::Operation* user = *product.getUsers().begin();
  if (auto fusion = llvm::dyn_cast<dialect::FusionOp>(user)) {
    if (fusion->getNumOperands() != 2 || fusion->getNumResults() != 1 ||
        fusion->getResult(0).getType() != product.getType())
      return std::nullopt;
    mlir::Block& body = fusion.getBody().front();
    const unsigned at = fusion->getOperand(0) == product ? 0 : 1;
    if (fusion->getOperand(1 - at) == product) return std::nullopt;
    // add(arg_product, arg_bias) [activation] yield: nothing else.
    auto ops = body.without_terminator();
    auto it = ops.begin();
    if (it == ops.end()) return std::nullopt;
    mlir::Operation* add = &*it++;
    mlir::Value bias_arg = bias_of(add, body.getArgument(at));
    if (!bias_arg || bias_arg != body.getArgument(1 - at)) return std::nullopt;
    CudaMatmulEpilogue epilogue{fusion->getOperand(1 - at), MatmulEpilogue::none,
                                fusion->getResult(0), {}};
    mlir::Value last = add->getResult(0);
    if (it != ops.end()) {
      std::optional<MatmulEpilogue> activation = cublaslt_activation_of(&*it);
      if (!activation || it->getOperand(0) != last) return std::nullopt;
      epilogue.activation = *activation;
      last = it->getResult(0);
      ++it;
    }
    if (it != ops.end() || body.getTerminator()->getNumOperands() != 1 ||
        body.getTerminator()->getOperand(0) != last)
      return std::nullopt;
    absorbed.push_back(fusion);
    return epilogue;
  }
  mlir::Value bias = bias_of(user, product);
  if (!bias) return std::nullopt;
  absorbed.push_back(user);
  CudaMatmulEpilogue epilogue{bias, MatmulEpilogue::none, user->getResult(0), {}};
  mlir::Value sum = user->getResult(0);
  if (sum.hasOneUse() && !returned.contains(sum))
    if (mlir::Operation* next = *sum.getUsers().begin())
      if (std::optional<MatmulEpilogue> activation = cublaslt_activation_of(next)) {
        absorbed.push_back(next);
        inner.push_back(sum);
        epilogue.activation = *activation;
        epilogue.result = next->getResult(0);
      }
  return epilogue;
}

/// The constant a mstep.full of a mstep.constant fills `value` with (DDP's
/// zero padding in a bucket), also as the result of a fusion that yields
/// it (the fusion pass outlines a lone full, with its constant cloned in),
/// or nullopt.
std::optional<double> constant_fill(mlir::Value value) {
  if (auto fusion = value.getDefiningOp<dialect::FusionOp>()) {
    mlir::Operation* yield = fusion.getBody().front().getTerminator();
    value = yield->getOperand(llvm::cast<mlir::OpResult>(value).getResultNumber());
  }
  auto full = value.getDefiningOp<dialect::FullOp>();
  if (!full) return std::nullopt;
  auto constant = full.getValue().getDefiningOp<dialect::ConstantOp>();
  if (!constant) return std::nullopt;
  return constant.getValue().convertToDouble();
}

}  // namespace

mlir::Value reshape_root(mlir::Value value) {
  while (auto reshape = value.getDefiningOp<dialect::ReshapeOp>()) value = reshape.getInput();
  return value;
}

bool sums_all_but_last(dialect::SumOp sum) {
  const int64_t rank = static_cast<int64_t>(shape_of(sum.getInput()).size());
  llvm::ArrayRef<int64_t> dims = sum.getDims();
  if (rank < 2 || static_cast<int64_t>(dims.size()) != rank - 1) return false;
  llvm::SmallVector<int64_t> sorted(dims.begin(), dims.end());
  llvm::sort(sorted);
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (sorted[d] != d) return false;
  return true;
}

std::optional<MatmulEpilogue> cublaslt_activation_of(mlir::Operation* op) {
  if (llvm::isa<dialect::ReluOp>(op)) return MatmulEpilogue::relu;
  if (auto gelu = llvm::dyn_cast<dialect::GeluOp>(op);
      gelu && gelu.getApproximate() == dialect::GeluApproximation::tanh)
    return MatmulEpilogue::gelu;
  return std::nullopt;
}

bool CudaViews::read_only_after(mlir::Value value, mlir::Operation* op) const {
  for (mlir::Operation* user : value.getUsers()) {
    if (op->isBeforeInBlock(user) || llvm::isa<mlir::func::ReturnOp>(user)) continue;
    if (!silent_.contains(user)) return false;
    for (mlir::Value result : user->getResults())
      if (!read_only_after(result, op)) return false;
  }
  return true;
}

void CudaViews::find_bias_grads(mlir::Block& body) {
  llvm::SmallVector<dialect::SumOp> sums;
  for (mlir::Operation& op : body)
    if (auto sum = llvm::dyn_cast<dialect::SumOp>(op);
        sum && !silent_.contains(&op) && sums_all_but_last(sum))
      sums.push_back(sum);
  for (mlir::Operation& op : body) {
    auto matmul = llvm::dyn_cast<dialect::MatmulOp>(op);
    if (!matmul || epilogues_.count(&op) || shape_of(matmul.getLhs()).size() != 2 ||
        shape_of(matmul.getRhs()).size() != 2)
      continue;
    // The [k, cols] matrix summed over k, per operand: rhs as it is, lhs
    // as the operand of the permute it reads transposed.
    for (unsigned operand : {1u, 0u}) {
      mlir::Value value = matmul->getOperand(operand);
      const bool transposed = transposed_reads_.contains(value);
      if (transposed != (operand == 0)) continue;
      if (transposed) value = value.getDefiningOp<dialect::PermuteOp>().getInput();
      const llvm::ArrayRef<int64_t> matrix = shape_of(value);
      auto it = llvm::find_if(sums, [&](dialect::SumOp sum) {
        if (!sum || reshape_root(sum.getInput()) != reshape_root(value)) return false;
        auto in = mlir::cast<mlir::ShapedType>(sum.getInput().getType());
        return in.getShape().back() == matrix.back() &&
               in.getNumElements() == matrix[0] * matrix[1] &&
               (op.isBeforeInBlock(sum) || read_only_after(sum.getResult(), &op));
      });
      if (it == sums.end()) continue;
      bias_grads_[&op] = {*it, operand, value};
      silent_.insert(*it);
      *it = nullptr; // one matmul writes it
      break;
    }
  }
}

std::optional<passes::ViewOf> CudaViews::view_of(mlir::Value value) const {
  auto it = views_.find(value);
  if (it == views_.end()) return std::nullopt;
  return it->second;
}

CudaViews::CudaViews(mlir::func::FuncOp step, const CudaRunsOnCudnn& on_cudnn) {
  mlir::Block& body = step.getBody().front();
  llvm::DenseSet<mlir::Value> returned;
  if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(body.getTerminator()))
    for (mlir::Value value : ret.getOperands()) returned.insert(value);

  // 1. Matmuls whose product only a transposing permute reads write the
  //    permute's result instead.
  for (mlir::Operation& op : body) {
    auto matmul = llvm::dyn_cast<dialect::MatmulOp>(op);
    if (!matmul || returned.contains(matmul.getResult()) || !matmul.getResult().hasOneUse())
      continue;
    auto permute = llvm::dyn_cast<dialect::PermuteOp>(*matmul.getResult().getUsers().begin());
    const size_t lr = shape_of(matmul.getLhs()).size(), rr = shape_of(matmul.getRhs()).size();
    if (!permute || !swaps_last_two(permute.getPerm()) || !lhs_may_transpose(lr, rr) ||
        (lr > 2 && rr > 2 && shape_of(matmul.getLhs()).drop_back(2) !=
                                 shape_of(matmul.getRhs()).drop_back(2)))
      continue;
    transposed_results_[&op] = permute;
    silent_.insert(permute);
    views_[matmul.getResult()] = {permute.getResult(), 0};
  }

  // 1b. Matmuls whose product only a bias add (and an activation) reads
  //     write the last op's result through a cuBLASLt epilogue.
  for (mlir::Operation& op : body) {
    auto matmul = llvm::dyn_cast<dialect::MatmulOp>(op);
    if (!matmul || transposed_results_.count(&op) || returned.contains(matmul.getResult()) ||
        !matmul.getResult().hasOneUse())
      continue;
    llvm::SmallVector<mlir::Operation*> absorbed;
    llvm::SmallVector<mlir::Value> inner;
    std::optional<CudaMatmulEpilogue> epilogue =
        find_epilogue(matmul.getResult(), returned, absorbed, inner);
    if (!epilogue) continue;
    for (mlir::Operation* absorbed_op : absorbed) silent_.insert(absorbed_op);
    epilogue->ops.assign(absorbed.begin(), absorbed.end());
    views_[matmul.getResult()] = {epilogue->result, 0};
    for (mlir::Value value : inner) views_[value] = {epilogue->result, 0};
    epilogues_[&op] = *epilogue;
  }

  // 2. Permutes read only by matmuls, each as a transpose flag.
  for (mlir::Operation& op : body) {
    auto permute = llvm::dyn_cast<dialect::PermuteOp>(op);
    if (!permute || silent_.contains(&op) || returned.contains(permute.getResult()) ||
        !swaps_last_two(permute.getPerm()) || permute.getResult().use_empty())
      continue;
    bool all_fold = true;
    for (mlir::OpOperand& use : permute.getResult().getUses()) {
      auto matmul = llvm::dyn_cast<dialect::MatmulOp>(use.getOwner());
      if (!matmul) {
        all_fold = false;
        break;
      }
      const size_t lr = shape_of(matmul.getLhs()).size(), rr = shape_of(matmul.getRhs()).size();
      if (use.getOperandNumber() == 0 && !lhs_may_transpose(lr, rr)) all_fold = false;
    }
    if (!all_fold) continue;
    transposed_reads_.insert(permute.getResult());
    silent_.insert(&op);
    views_[permute.getResult()] = {permute.getInput(), 0};
  }

  // 3. Reshapes, size-1 permutes and contiguous slices: views of their
  //    operand; or, returned, the operand written into them.
  llvm::DenseSet<mlir::Value> written_into_output;
  for (mlir::Operation& op : body) {
    if (silent_.contains(&op) || op.getNumResults() != 1 || op.getNumOperands() != 1) continue;
    mlir::Value result = op.getResult(0), input = op.getOperand(0);
    std::optional<int64_t> offset;
    if (llvm::isa<dialect::ReshapeOp>(op)) {
      offset = 0;
    } else if (auto permute = llvm::dyn_cast<dialect::PermuteOp>(op)) {
      if (moves_only_unit_dims(permute.getPerm(), shape_of(input))) offset = 0;
    } else if (auto slice = llvm::dyn_cast<dialect::SliceOp>(op)) {
      offset = contiguous_slice_offset(slice);
      if (offset && *offset % kCudaArenaAlignment != 0) offset.reset();
    }
    if (!offset) continue;
    if (!returned.contains(result)) {
      views_[result] = {input, *offset};
      silent_.insert(&op);
      continue;
    }
    // A returned value needs a buffer of its own: the operand's op writes
    // into it, when the operand has bytes of its own that nothing else
    // claims (not an input, an output, a view, or an op that writes its
    // results itself: attention, custom ops).
    // (Only a value of the output's size: a slice of part of its operand
    // does not hold the operand.)
    mlir::Operation* producer = input.getDefiningOp();
    if (*offset != 0 || producer == nullptr || returned.contains(input) ||
        llvm::cast<mlir::ShapedType>(input.getType()).getNumElements() !=
            llvm::cast<mlir::ShapedType>(result.getType()).getNumElements() ||
        views_.count(input) || written_into_output.contains(input) || silent_.contains(producer) ||
        llvm::isa<dialect::CustomOp, dialect::SdpaOp, dialect::SdpaBackwardOp>(producer))
      continue;
    written_into_output.insert(input);
    views_[input] = {result, 0};
    silent_.insert(&op);
  }

  // 3b. cuDNN attention's operands and results at strides of other bytes
  //     (after 3: the reshapes and slices of a chain are views already).
  find_attention_views(body, returned, on_cudnn);

  // 4. Sums that are bias gradients beside a matmul (after 3: a returned
  //    reshape of the sum stays the buffer the matmul writes into).
  find_bias_grads(body);

  // 5. Cats (DDP's bucket of flattened gradients), operand by operand:
  //    written in place by its op, filled by the cat, or copied.
  llvm::DenseMap<mlir::Operation*, bool> fills_only_for_cats;  // full -> every use a cat fill
  for (mlir::Operation& op : body) {
    auto cat = llvm::dyn_cast<dialect::CatOp>(op);
    if (!cat) continue;
    llvm::SmallVector<std::pair<mlir::Value, int64_t>> placed;
    llvm::SmallVector<CatOperandWay> ways = cat_operand_ways(cat, returned, written_into_output, placed);
    for (auto [root, offset] : placed) views_[root] = {cat.getResult(), offset};
    if (placed.size() == ways.size()) {
      silent_.insert(&op);
      continue;
    }
    for (auto [k, way] : llvm::enumerate(ways))
      if (way.kind == CatOperandWay::Kind::fill)
        fills_only_for_cats.try_emplace(cat.getInputs()[k].getDefiningOp(), true);
    cat_ways_[&op] = std::move(ways);
  }
  // A fill (or a fusion of fills) that only cats read, each writing the
  // constant itself, is never read: it launches nothing.
  for (auto& [fill, only_cats] : fills_only_for_cats) {
    for (mlir::Value result : fill->getResults()) {
      only_cats = only_cats && !returned.contains(result);
      for (mlir::OpOperand& use : result.getUses()) {
        auto ways = cat_ways_.find(use.getOwner());
        only_cats = only_cats && ways != cat_ways_.end() &&
                    ways->second[use.getOperandNumber()].kind == CatOperandWay::Kind::fill;
      }
    }
    if (only_cats) silent_.insert(fill);
  }
}

llvm::SmallVector<CatOperandWay> CudaViews::cat_operand_ways(
    dialect::CatOp cat, const llvm::DenseSet<mlir::Value>& returned,
    const llvm::DenseSet<mlir::Value>& written_into_output,
    llvm::SmallVectorImpl<std::pair<mlir::Value, int64_t>>& placed) const {
  llvm::SmallVector<CatOperandWay> ways(cat.getInputs().size());
  llvm::ArrayRef<int64_t> shape = shape_of(cat.getResult());
  const int64_t dim = static_cast<int64_t>(cat.getDim());
  bool one_run = true;  // each operand's elements one run of the result's
  for (int64_t d = 0; d < dim; ++d) one_run = one_run && shape[d] == 1;
  llvm::DenseSet<mlir::Value> roots;
  int64_t offset = 0;
  for (auto [k, operand] : llvm::enumerate(cat.getInputs())) {
    const int64_t bytes = element_bytes(operand) *
                          llvm::cast<mlir::ShapedType>(operand.getType()).getNumElements();
    const int64_t at = offset;
    offset += bytes;
    if (std::optional<double> value = constant_fill(operand)) {
      ways[k] = {CatOperandWay::Kind::fill, *value};
      continue;
    }
    if (!one_run || at % kCudaArenaAlignment != 0) continue;  // copied
    // The value whose bytes the operand is (reshapes are views at offset 0).
    mlir::Value root = operand;
    bool whole = true;
    for (auto it = views_.find(root); it != views_.end() && whole; it = views_.find(root)) {
      whole = it->second.offset == 0;
      root = it->second.value;
    }
    // (A root whose op is silent is written by another op: a matmul's
    // transposed product or epilogue, which then writes into the cat.)
    mlir::Operation* producer = root.getDefiningOp();
    if (!whole || producer == nullptr || returned.contains(root) ||
        written_into_output.contains(root) || roots.contains(root) ||
        llvm::isa<dialect::CustomOp, dialect::SdpaOp, dialect::SdpaBackwardOp>(producer) ||
        element_bytes(root) * llvm::cast<mlir::ShapedType>(root.getType()).getNumElements() !=
            bytes)
      continue;  // copied
    roots.insert(root);
    ways[k].kind = CatOperandWay::Kind::in_place;
    placed.push_back({root, at});
  }
  return ways;
}

}  // namespace mstep::cuda
