// mstep-fuse-optimizer and the ref kernel of mstep.multi_tensor_update:
// - every optimizer configuration lib/api/optim has (SGD plain, momentum,
//   dampening, nesterov, weight decay; Adam, AdamW, amsgrad; Adadelta;
//   with and without clip_grad_norm_ of each norm type; f32, f64, bf16)
//   trains a tiny model three steps to the same bits fused and unfused,
//   and its step graph becomes one mstep.multi_tensor_update;
// - the MLP (Adadelta) and GPT-mini (AdamW + clip_grad_norm_) training
//   graphs have exactly one mstep.multi_tensor_update after the full
//   pipeline, and with only this pass (plus canonicalize and cse) they
//   compute the unfused graph's outputs bit for bit on the ref backend.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

#include "examples/models/Mlp.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/core/HalfTypes.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/mstep.h"
#include "mstep/passes/Passes.h"
#include "mstep/passes/Pipeline.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/GptTrainingGraph.h"

namespace mstep {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class FuseOptimizerTest : public ::testing::Test {
protected:
  FuseOptimizerTest() { register_mstep_dialects(ctx_); }
  void SetUp() override { saved_fuse_ = Tracer::get().options().fuse; }
  void TearDown() override {
    mark_step();
    Tracer::get().mutable_options().fuse = saved_fuse_;
  }

  /// `graph` imported and run through `build` (a module pass manager).
  mlir::OwningOpRef<mlir::ModuleOp> compile(const TraceGraph& graph,
                                            const std::function<void(mlir::PassManager&)>& build) {
    auto module = import_trace_graph(graph, ctx_);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return {};
    mlir::PassManager pm(&ctx_);
    build(pm);
    EXPECT_TRUE(mlir::succeeded(pm.run(module->get())));
    return std::move(*module);
  }

  /// The mstep.multi_tensor_update ops of a compiled module's @step.
  static std::vector<dialect::MultiTensorUpdateOp> updates(mlir::ModuleOp module) {
    std::vector<dialect::MultiTensorUpdateOp> ops;
    module.walk([&](dialect::MultiTensorUpdateOp op) { ops.push_back(op); });
    return ops;
  }

  mlir::MLIRContext ctx_;
  bool saved_fuse_ = true;
};

/// canonicalize, cse and mstep-fuse-optimizer (nothing else that fuses).
void only_this_pass(mlir::PassManager& pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.nest<mlir::func::FuncOp>().addPass(passes::createFuseOptimizer());
}
void unfused(mlir::PassManager& pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}
void full_pipeline(mlir::PassManager& pm) { passes::build_planned_pipeline(pm); }

/// Every value of a tensor as f64 (exact for every floating dtype) or i64.
std::vector<double> values_of(const Tensor& t) {
  if (!is_floating(t.dtype())) {
    std::vector<double> v;
    for (int64_t x : t.to_vector<int64_t>()) v.push_back(static_cast<double>(x));
    return v;
  }
  return t.to_vector<double>();
}

/// Whether two value lists are equal bit for bit (NaN equal to NaN).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// ---- One optimizer configuration on a tiny model ----------------------------

struct OptimizerCase {
  std::string name;
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
  double max_norm = 0; // 0: no clip_grad_norm_
  double norm_type = 2;
  DType dtype = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const OptimizerCase& c) { return os << c.name; }

/// What a training run ends with: every parameter, optimizer state tensor,
/// gradient (clipped), and per step the loss and the total norm.
struct Snapshot {
  std::map<std::string, std::vector<double>> values;
  TraceGraph last_step; // the graph of the last step, before it ran
};

Tensor leaf(const std::vector<float>& v, Shape shape, DType dtype) {
  Tensor t = to(from_vector(v, shape), dtype).detach();
  t.requires_grad_();
  return t;
}

Snapshot train(const OptimizerCase& c, bool fuse) {
  Tracer::get().mutable_options().fuse = fuse;
  // Two layers, 2-D and 1-D parameters, from fixed weights.
  std::vector<Tensor> params = {
      leaf({0.3f, -0.2f, 0.5f, 0.1f, -0.4f, 0.25f, 0.7f, -0.6f, 0.05f, -0.15f, 0.45f, 0.2f}, {4, 3},
           c.dtype),
      leaf({0.01f, -0.02f, 0.03f, 0.0f}, {4}, c.dtype),
      leaf({0.2f, -0.3f, 0.4f, 0.6f, -0.1f, 0.35f, -0.5f, 0.15f}, {2, 4}, c.dtype),
      leaf({0.05f, -0.05f}, {2}, c.dtype)};
  mark_step();
  std::unique_ptr<optim::Optimizer> opt = c.make(params);
  Snapshot snap;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> xs(5 * 3);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(((i * 7 + k * 3) % 11) / 5.0 - 1.0);
    Tensor x = to(from_vector(xs, {5, 3}), c.dtype);
    opt->zero_grad();
    Tensor h = tanh(matmul(x, params[0].transpose(0, 1)) + params[1]);
    Tensor y = matmul(h, params[2].transpose(0, 1)) + params[3];
    Tensor loss = sum(y * y);
    loss.backward();
    Tensor total;
    if (c.max_norm > 0) total = optim::clip_grad_norm_(params, c.max_norm, c.norm_type);
    opt->step();
    opt->set_lr(opt->lr() * 0.9); // a device scalar: the same graph every step
    if (k == 2) snap.last_step = pending_graph();
    mark_step();
    snap.values["loss." + std::to_string(k)] = values_of(loss);
    if (total.defined()) snap.values["total_norm." + std::to_string(k)] = values_of(total);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    snap.values["param." + std::to_string(i)] = values_of(params[i]);
    snap.values["grad." + std::to_string(i)] = values_of(params[i].grad());
  }
  for (const auto& [name, t] : opt->state_dict())
    if (name.rfind("state.", 0) == 0) snap.values[name] = values_of(t);
  return snap;
}

class FuseOptimizerCaseTest : public FuseOptimizerTest,
                              public ::testing::WithParamInterface<OptimizerCase> {};

TEST_P(FuseOptimizerCaseTest, FusedAndUnfusedStepsGiveTheSameBits) {
  const OptimizerCase& c = GetParam();
  Snapshot fused = train(c, /*fuse=*/true);
  Snapshot reference = train(c, /*fuse=*/false);
  ASSERT_EQ(fused.values.size(), reference.values.size());
  for (const auto& [name, want] : reference.values) {
    ASSERT_TRUE(fused.values.count(name)) << name;
    EXPECT_TRUE(same_bits(fused.values.at(name), want))
        << name << ": fused " << ::testing::PrintToString(fused.values.at(name)) << ", unfused "
        << ::testing::PrintToString(want);
  }
  // The clip did clip (so its coefficient is not a trivial 1).
  if (c.max_norm > 0) EXPECT_GT(reference.values.at("total_norm.0")[0], c.max_norm);
  // The step graph became one update (the clip folded into it).
  auto module = compile(fused.last_step, full_pipeline);
  ASSERT_TRUE(module);
  std::vector<dialect::MultiTensorUpdateOp> ops = updates(*module);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].getParams().size(), 4u);
  EXPECT_EQ(static_cast<bool>(ops[0].getTotalGradNorm()), c.max_norm > 0);
}

template <typename Opt, typename Options>
std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make(Options o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<Opt>(std::move(p), o); };
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, FuseOptimizerCaseTest,
    ::testing::Values(
        OptimizerCase{"sgd", make<optim::SGD>(optim::SGDOptions{.lr = 0.1})},
        OptimizerCase{"sgd_weight_decay",
                      make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .weight_decay = 0.05})},
        OptimizerCase{"sgd_momentum",
                      make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9})},
        OptimizerCase{"sgd_dampening", make<optim::SGD>(optim::SGDOptions{
                                           .lr = 0.1, .momentum = 0.9, .dampening = 0.3})},
        OptimizerCase{"sgd_nesterov_weight_decay",
                      make<optim::SGD>(optim::SGDOptions{
                          .lr = 0.1, .momentum = 0.8, .weight_decay = 0.01, .nesterov = true})},
        OptimizerCase{"adam", make<optim::Adam>(optim::AdamOptions{.lr = 0.01})},
        OptimizerCase{"adam_weight_decay_amsgrad",
                      make<optim::Adam>(optim::AdamOptions{
                          .lr = 0.01, .weight_decay = 0.1, .amsgrad = true})},
        OptimizerCase{"adamw", make<optim::AdamW>(optim::AdamWOptions{.lr = 0.01})},
        OptimizerCase{"adamw_amsgrad",
                      make<optim::AdamW>(optim::AdamWOptions{.lr = 0.01, .amsgrad = true})},
        OptimizerCase{"adadelta", make<optim::Adadelta>(optim::AdadeltaOptions{.lr = 0.5})},
        OptimizerCase{"adadelta_weight_decay", make<optim::Adadelta>(optim::AdadeltaOptions{
                                                   .lr = 0.5, .weight_decay = 0.1})},
        // clip_grad_norm_ with every norm form (max_norm small enough to clip).
        OptimizerCase{"sgd_clip_l2", make<optim::SGD>(optim::SGDOptions{.lr = 0.1}), 0.5},
        OptimizerCase{"sgd_momentum_clip_l1",
                      make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9}), 0.5, 1},
        OptimizerCase{"adam_clip_inf", make<optim::Adam>(optim::AdamOptions{.lr = 0.01}), 0.25,
                      kInf},
        OptimizerCase{"adamw_clip_l2", make<optim::AdamW>(optim::AdamWOptions{.lr = 0.01}), 1.0},
        OptimizerCase{"adadelta_clip_l3", make<optim::Adadelta>(optim::AdadeltaOptions{.lr = 0.5}),
                      0.5, 3},
        // Other dtypes: the kernel rounds to the dtype after every op.
        OptimizerCase{"adam_f64_clip",
                      make<optim::Adam>(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}), 0.5,
                      2, DType::f64},
        OptimizerCase{"adamw_bf16_clip", make<optim::AdamW>(optim::AdamWOptions{.lr = 0.01}), 0.5,
                      2, DType::bf16},
        OptimizerCase{
            "sgd_dampening_bf16",
            make<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3}), 0, 2,
            DType::bf16},
        OptimizerCase{"adadelta_f16", make<optim::Adadelta>(optim::AdadeltaOptions{.lr = 0.5}), 0,
                      2, DType::f16}),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) { return info.param.name; });

// ---- The MLP and GPT-mini training graphs -----------------------------------

/// Runs `module` on the ref backend with deterministic inputs that every
/// op accepts (floats in (0, 1), integers 1: valid token ids, lengths,
/// steps and RNG states).
std::vector<std::vector<double>> run_on_ref(mlir::ModuleOp module, const TraceGraph& graph) {
  Backend* ref = *BackendRegistry::get(DeviceType::ref);
  auto exe = (*CompilerRegistry::get("ref"))->compile(module, *ref, RuntimeOptions{});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  std::vector<BufferPtr> inputs;
  for (size_t i = 0; i < graph.input_types.size(); ++i) {
    const TensorType& type = graph.input_types[i];
    std::vector<std::byte> bytes(type.bytes());
    auto fill = [&]<typename T>(auto value_at) {
      for (int64_t k = 0; k < type.numel(); ++k) {
        const T v = value_at(k);
        std::memcpy(bytes.data() + k * sizeof(T), &v, sizeof(T));
      }
    };
    auto unit = [&](int64_t k) { return float(((k * 13 + i * 7) % 89 + 5) / 100.0); };
    switch (type.dtype) {
    case DType::f32:
      fill.operator()<float>(unit);
      break;
    case DType::f64:
      fill.operator()<double>(unit);
      break;
    case DType::bf16:
      fill.operator()<BFloat16>([&](int64_t k) { return BFloat16(unit(k)); });
      break;
    case DType::f16:
      fill.operator()<Float16>([&](int64_t k) { return Float16(unit(k)); });
      break;
    case DType::i64:
      fill.operator()<int64_t>([](int64_t) { return int64_t{1}; });
      break;
    case DType::i32:
      fill.operator()<int32_t>([](int64_t) { return int32_t{1}; });
      break;
    case DType::boolean:
      fill.operator()<bool>([](int64_t) { return true; });
      break;
    }
    auto buffer = ref->allocate(type);
    EXPECT_TRUE(buffer.ok());
    EXPECT_TRUE(ref->copy_in(**buffer, bytes.data(), bytes.size()).ok());
    inputs.push_back(*buffer);
  }
  auto outputs = (*exe)->run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  std::vector<std::vector<double>> result;
  for (const BufferPtr& out : outputs.ok() ? *outputs : std::vector<BufferPtr>{}) {
    std::vector<uint8_t> bytes(out->type().bytes());
    EXPECT_TRUE(ref->copy_out(*out, bytes.data(), bytes.size()).ok());
    Tensor t = from_buffer(bytes.data(), out->type(), Device{DeviceType::ref, 0});
    result.push_back(values_of(t));
  }
  return result;
}

TraceGraph mlp_optimizer_graph() {
  manual_seed(3);
  examples::Mlp model(/*in=*/64, /*hidden=*/32, /*classes=*/10);
  optim::Adadelta opt(model.parameters(), {.lr = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) { // step 2: Adadelta's state exists
    std::vector<float> xs(16 * 64);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(((i * 31 + k) % 97) / 97.0 - 0.5);
    std::vector<int64_t> ys(16);
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>((i * 3 + k) % 10);
    opt.zero_grad();
    nll_loss(model.forward(from_vector(xs, {16, 64})), from_vector(ys, {16})).backward();
    mark_step(); // as mnist_mlp: forward + backward, then the optimizer step alone
    opt.step();
    graph = pending_graph();
    mark_step();
  }
  return graph;
}

TraceGraph gpt_training_graph() { return testing::gpt_training_step_graph(11); }

TEST_F(FuseOptimizerTest, MlpTrainingGraphHasOneUpdateAfterThePipeline) {
  const TraceGraph graph = mlp_optimizer_graph();
  auto module = compile(graph, full_pipeline);
  ASSERT_TRUE(module);
  std::vector<dialect::MultiTensorUpdateOp> ops = updates(*module);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].getKind(), dialect::OptimizerKind::adadelta);
  EXPECT_EQ(ops[0].getParams().size(), 4u);
}

TEST_F(FuseOptimizerTest, GptTrainingGraphHasOneUpdateWithTheClipAfterThePipeline) {
  const TraceGraph graph = gpt_training_graph();
  auto module = compile(graph, full_pipeline);
  ASSERT_TRUE(module);
  std::vector<dialect::MultiTensorUpdateOp> ops = updates(*module);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].getKind(), dialect::OptimizerKind::adamw);
  EXPECT_TRUE(ops[0].getTotalGradNorm());
  EXPECT_EQ(ops[0].getMaxGradNorm()->convertToDouble(), 1.0);
  // The .grad tensors outlive the step: the op returns them clipped.
  EXPECT_EQ(ops[0].getClippedGrads().size(), ops[0].getParams().size());
}

TEST_F(FuseOptimizerTest, MlpAndGptGraphsComputeTheUnfusedBitsOnRef) {
  for (const TraceGraph& graph : {mlp_optimizer_graph(), gpt_training_graph()}) {
    auto fused = compile(graph, only_this_pass);
    auto reference = compile(graph, unfused);
    ASSERT_TRUE(fused && reference);
    ASSERT_EQ(updates(*fused).size(), 1u);
    std::vector<std::vector<double>> got = run_on_ref(*fused, graph);
    std::vector<std::vector<double>> want = run_on_ref(*reference, graph);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
  }
}

} // namespace
} // namespace mstep
