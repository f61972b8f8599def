// The cpu backend's fused optimizer kernel (multi_tensor_update) against
// the ref kernel: every optimizer kind and flag, odd sizes up to a million
// elements, gradient clipping, results written in place over operands.
#include "test/unit/CpuHostKernelHarness.h"

namespace mstep::cpu {
namespace {

using namespace host_test;

// ---- multi_tensor_update -------------------------------------------------------

enum class Rule { sgd = 0, adam = 1, adamw = 2, adadelta = 3 };

struct OptimizerCase {
  Rule rule;
  bool momentum = false, dampening = false, nesterov = false; // sgd
  bool amsgrad = false, maximize = false, weight_decay = false;
  std::optional<double> max_grad_norm; // clipping
  double norm_type = 2;
  bool return_clipped = false;
  int64_t first_step = 0; // the counters' value before the update

  std::string describe() const {
    return absl::StrCat("rule ", static_cast<int>(rule), " momentum ", momentum, " dampening ",
                        dampening, " nesterov ", nesterov, " amsgrad ", amsgrad, " maximize ",
                        maximize, " weight_decay ", weight_decay, " clip ",
                        max_grad_norm ? *max_grad_norm : -1.0, " norm ", norm_type,
                        " return_clipped ", return_clipped, " step ", first_step);
  }
};

/// A multi_tensor_update node over parameters of `sizes` and its inputs.
struct OptimizerProblem {
  TraceGraph graph;
  BufferList inputs;
  int num_params = 0, slots = 0;
  bool has_steps = false;
};

OptimizerProblem make_optimizer_problem(const OptimizerCase& c, const std::vector<int64_t>& sizes,
                                        uint32_t seed) {
  OptimizerProblem p;
  const int n = static_cast<int>(sizes.size());
  p.num_params = n;
  switch (c.rule) {
  case Rule::sgd:
    p.slots = c.momentum ? 1 : 0;
    break;
  case Rule::adam:
  case Rule::adamw:
    p.slots = c.amsgrad ? 3 : 2;
    break;
  case Rule::adadelta:
    p.slots = 2;
    break;
  }
  p.has_steps = c.rule != Rule::sgd || c.momentum;
  // Operands, segment by segment.
  for (int i = 0; i < n; ++i) p.inputs.push_back(random_f32({sizes[i]}, seed++));
  for (int i = 0; i < n; ++i) p.inputs.push_back(random_f32({sizes[i]}, seed++, -2, 2));
  for (int s = 0; s < p.slots; ++s)
    for (int i = 0; i < n; ++i) // second moments and accumulators are >= 0
      p.inputs.push_back(s == 0 && c.rule != Rule::adadelta ? random_f32({sizes[i]}, seed++)
                                                            : random_f32({sizes[i]}, seed++, 0, 1));
  if (p.has_steps)
    for (int i = 0; i < n; ++i) p.inputs.push_back(scalar_i64(c.first_step + i));
  const bool adam_like = c.rule == Rule::adam || c.rule == Rule::adamw;
  std::vector<int64_t> segments = {n, n, p.slots * n, p.has_steps ? n : 0};
  auto hyper = [&](bool present, double v) {
    segments.push_back(present);
    if (present) p.inputs.push_back(scalar_f64(v));
  };
  hyper(true, 0.01);                                  // lr
  hyper(c.momentum, 0.9);                             // momentum
  hyper(c.dampening, 0.1);                            // dampening
  hyper(adam_like, 0.9);                              // beta1
  hyper(adam_like, 0.999);                            // beta2
  hyper(c.rule == Rule::adadelta, 0.9);               // rho
  hyper(adam_like || c.rule == Rule::adadelta, 1e-6); // eps
  hyper(c.weight_decay, 0.05);                        // weight_decay

  ResultTypes results;
  for (int i = 0; i < n + p.slots * n; ++i) results.push_back(p.inputs[i < n ? i : n + i]->type());
  if (p.has_steps)
    for (int i = 0; i < n; ++i) results.push_back(TensorType{{}, DType::i64});
  const int clipped = c.max_grad_norm && c.return_clipped ? n : 0;
  for (int i = 0; i < clipped; ++i) results.push_back(p.inputs[n + i]->type());
  if (c.max_grad_norm) results.push_back(TensorType{{}, DType::f32});

  AttrList attrs = {{AttrName::kind, static_cast<int64_t>(c.rule)},
                    {AttrName::nesterov, int64_t{c.nesterov}},
                    {AttrName::amsgrad, int64_t{c.amsgrad}},
                    {AttrName::maximize, int64_t{c.maximize}},
                    {AttrName::grad_norm_type, c.norm_type},
                    {AttrName::operand_segments, IntList(segments.begin(), segments.end())},
                    {AttrName::result_segments, IntList{n, p.slots * n, p.has_steps ? n : 0,
                                                        clipped, c.max_grad_norm ? 1 : 0}}};
  if (c.max_grad_norm) attrs.push_back({AttrName::max_grad_norm, *c.max_grad_norm});
  std::vector<TensorType> types;
  for (const auto& b : p.inputs) types.push_back(b->type());
  p.graph = one_op_graph(OpKind::multi_tensor_update, types, std::move(results), std::move(attrs));
  return p;
}

/// Two steps of the host kernel, once into fresh buffers and once in place
/// (new params, states and steps over their operands, as the memory plan
/// and donated parameters do), against two steps of the ref kernel.
void compare_optimizer(const OptimizerCase& c, const std::vector<int64_t>& sizes) {
  SCOPED_TRACE(c.describe());
  OptimizerProblem p = make_optimizer_problem(c, sizes, 100);
  const GraphNode& node = p.graph.nodes.back();
  std::unique_ptr<CpuKernel> kernel = host_kernel(p.graph);
  if (!kernel) return;
  const int n = p.num_params;
  const int updated = n + p.slots * n + (p.has_steps ? n : 0); // results paired with operands
  // Operand position of the j-th paired result: params, states, steps.
  auto paired_operand = [&](int j) { return j < n ? j : n + j; };

  // The same operations in the same order as the ref kernel: bitwise
  // equal, except that the clipping norm's f64 sums add in another order.
  const double rel = c.max_grad_norm ? 1e-6 : 0;
  BufferList ref_inputs = copies(p.inputs), host_inputs = copies(p.inputs),
             in_place = copies(p.inputs);
  BufferList in_place_results = allocate(node.results);
  for (int step = 0; step < 2; ++step) {
    const std::string what = absl::StrCat("step ", step);
    const BufferList expected = run_ref(node, ref_inputs);
    expect_all_close(expected, run_host(*kernel, node, host_inputs), rel, what);
    // In place: paired results are the operands' own buffers.
    std::vector<const void*> in;
    std::vector<void*> out;
    for (const auto& b : in_place) in.push_back(b->bytes());
    for (int j = 0; j < static_cast<int>(node.results.size()); ++j)
      out.push_back(j < updated ? in_place[paired_operand(j)]->bytes()
                                : in_place_results[j]->bytes());
    kernel->run(in.data(), out.data());
    for (int j = 0; j < static_cast<int>(node.results.size()); ++j)
      expect_close(*expected[j], j < updated ? *in_place[paired_operand(j)] : *in_place_results[j],
                   rel, absl::StrCat(what, " in place, result ", j));
    // Next step: the updated values become the operands; a new lr shows
    // the kernel reads its hyperparameters on every run.
    for (int j = 0; j < updated; ++j) {
      std::memcpy(ref_inputs[paired_operand(j)]->bytes(), expected[j]->bytes(),
                  expected[j]->type().bytes());
      std::memcpy(host_inputs[paired_operand(j)]->bytes(), expected[j]->bytes(),
                  expected[j]->type().bytes());
    }
    const int lr = n + n + p.slots * n + (p.has_steps ? n : 0);
    for (BufferList* b : {&ref_inputs, &host_inputs, &in_place}) (*b)[lr]->data<double>()[0] = 0.02;
  }
}

const std::vector<int64_t> kOddSizes = {1, 3, 17, 1000003};

TEST(CpuHostOptimizerTest, SgdEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (bool momentum : {false, true})
    for (bool dampening : {false, true})
      for (bool nesterov : {false, true})
        for (bool weight_decay : {false, true})
          for (bool maximize : {false, true}) {
            if ((dampening || nesterov) && !momentum) continue;
            if (nesterov && dampening) continue;
            OptimizerCase c{Rule::sgd};
            c.momentum = momentum;
            c.dampening = dampening;
            c.nesterov = nesterov;
            c.weight_decay = weight_decay;
            c.maximize = maximize;
            compare_optimizer(c, {1, 3, 17, 1003});
          }
}

TEST(CpuHostOptimizerTest, AdamAndAdamWEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (Rule rule : {Rule::adam, Rule::adamw})
    for (bool amsgrad : {false, true})
      for (bool weight_decay : {false, true})
        for (bool maximize : {false, true}) {
          OptimizerCase c{rule};
          c.amsgrad = amsgrad;
          c.weight_decay = weight_decay;
          c.maximize = maximize;
          compare_optimizer(c, {1, 3, 17, 1003});
        }
}

TEST(CpuHostOptimizerTest, AdadeltaEveryFlag) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (bool weight_decay : {false, true})
    for (bool maximize : {false, true}) {
      OptimizerCase c{Rule::adadelta};
      c.weight_decay = weight_decay;
      c.maximize = maximize;
      compare_optimizer(c, {1, 3, 17, 1003});
    }
}

TEST(CpuHostOptimizerTest, OddSizesUpToAMillionElements) {
  SKIP_WITHOUT_HOST_KERNELS();
  OptimizerCase adamw{Rule::adamw};
  adamw.weight_decay = true;
  compare_optimizer(adamw, kOddSizes);
  OptimizerCase sgd{Rule::sgd};
  sgd.momentum = sgd.nesterov = true;
  compare_optimizer(sgd, kOddSizes);
  compare_optimizer(adamw, {1000003});
}

TEST(CpuHostOptimizerTest, GradientClippingEveryNormType) {
  SKIP_WITHOUT_HOST_KERNELS();
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()})
    for (bool return_clipped : {false, true})
      for (double max_norm : {0.5, 1e9}) { // clips / does not clip
        OptimizerCase c{Rule::adamw};
        c.weight_decay = true;
        c.max_grad_norm = max_norm;
        c.norm_type = norm_type;
        c.return_clipped = return_clipped;
        compare_optimizer(c, {1, 3, 17, 1003});
        compare_optimizer(c, {17}); // one parameter: its norm is the total
        if (return_clipped && max_norm < 1) compare_optimizer(c, kOddSizes);
      }
  OptimizerCase sgd{Rule::sgd};
  sgd.momentum = sgd.dampening = true;
  sgd.max_grad_norm = 1.0;
  compare_optimizer(sgd, {3, 1000003});
}

TEST(CpuHostOptimizerTest, NonFloat32ParametersKeepTheRefKernel) {
  OptimizerCase c{Rule::sgd};
  OptimizerProblem p = make_optimizer_problem(c, {3}, 1);
  p.graph.nodes[0].results[0].dtype = DType::f64;
  p.graph.nodes[1].results[0].dtype = DType::f64;
  p.graph.nodes.back().results[0].dtype = DType::f64;
  auto k =
      make_host_kernel(KernelRequest{p.graph, static_cast<uint32_t>(p.graph.nodes.size() - 1)});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, nullptr);
}

} // namespace
} // namespace mstep::cpu
