// cuDNN SDPA graphs (lib/backends/cuda/CudnnSdpa, CudnnGraph): built and
// finalized here, without a GPU or a handle, with the toolkit's
// libcudnn.so.9; what cuDNN cannot express; bad shapes. The engine, plan
// and numbers need a GPU (gpu/cudnn_sdpa_gpu_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "lib/backends/cuda/CudnnSdpa.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CudnnSdpaGraph : public ::testing::Test {
protected:
  void SetUp() override {
    auto api = load_cudnn();
    if (!api.ok()) GTEST_SKIP() << api.status();
    api_ = *api;
  }
  static CudnnSdpaConfig config() {
    CudnnSdpaConfig c;
    c.batch = 2;
    c.heads = 4;
    c.seq_q = 128;
    c.seq_kv = 128;
    c.head_dim = 64;
    c.scale = 0.125;
    return c;
  }
  /// How many operations of the graph have `kind` ("matmul", ...).
  static int count(const CudnnOperationGraph& g, absl::string_view kind) {
    int n = 0;
    for (const std::string& name : g.operation_names)
      n += absl::StrContains(name, absl::StrCat("(", kind, ")"));
    return n;
  }
  /// How many engines cuDNN has for the finalized graph (an attribute
  /// only a finalized graph has).
  int64_t engine_count(const CudnnOperationGraph& g) {
    int64_t engines = -1, n = 0;
    EXPECT_EQ(api_->cudnnBackendGetAttribute(g.graph.get(),
                                             CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                             CUDNN_TYPE_INT64, 1, &n, &engines),
              CUDNN_STATUS_SUCCESS);
    return engines;
  }
  std::shared_ptr<const CudnnApi> api_;
};

TEST_F(CudnnSdpaGraph, ForwardFinalizesWithoutAHandle) {
  auto g = build_sdpa_forward_graph(api_, config());
  ASSERT_TRUE(g.ok()) << g.status();
  // bmm1, scale, the 7 softmax steps (max, sub, exp, sum, log, stats, div), bmm2.
  EXPECT_EQ(g->operations.size(), 10u);
  EXPECT_GT(engine_count(*g), 0);
  EXPECT_EQ(count(*g, "matmul"), 2);
  EXPECT_EQ(count(*g, "reduction"), 2);
  // K [2, 4, 128, 64] packed is read as K^T [2, 4, 64, 128].
  const CudnnTensorInfo* k = g->tensor("k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->uid, sdpa_uid::k);
  EXPECT_THAT(k->dims, ElementsAre(2, 4, 64, 128));
  EXPECT_THAT(k->strides, ElementsAre(4 * 128 * 64, 128 * 64, 1, 64));
  const CudnnTensorInfo* stats = g->tensor("stats");
  ASSERT_NE(stats, nullptr);
  EXPECT_EQ(stats->type, CUDNN_DATA_FLOAT);
  EXPECT_THAT(stats->dims, ElementsAre(2, 4, 128, 1));
  const CudnnTensorInfo* q = g->tensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, CUDNN_DATA_BFLOAT16);
  EXPECT_THAT(q->strides, ElementsAre(4 * 128 * 64, 128 * 64, 64, 1));
  EXPECT_THAT(g->what, HasSubstr("sdpa forward [2, 4, 128, 64]"));
}

TEST_F(CudnnSdpaGraph, ForwardOptionsAddTheirNodes) {
  CudnnSdpaConfig c = config();
  c.causal = true;
  auto causal = build_sdpa_forward_graph(api_, c);
  ASSERT_TRUE(causal.ok()) << causal.status();
  EXPECT_EQ(causal->operations.size(), 14u); // + 2 index, compare, select
  EXPECT_NE(causal->tensor("negative_inf"), nullptr);

  c = config();
  c.mask = SdpaMaskKind::additive;
  c.mask_per_batch = false; // [1, H, L, S], broadcast over the batch
  auto masked = build_sdpa_forward_graph(api_, c);
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_EQ(masked->operations.size(), 11u); // + add
  ASSERT_NE(masked->tensor("mask"), nullptr);
  EXPECT_THAT(masked->tensor("mask")->dims, ElementsAre(1, 4, 128, 128));

  c = config();
  c.padding = SdpaPadding::right;
  c.causal = true;
  auto padded = build_sdpa_forward_graph(api_, c);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(padded->operations.size(),
            20u); // + causal 4 + padding 6 (2 index, 2 compare, and, select)
  ASSERT_NE(padded->tensor("seq_len_q"), nullptr);
  EXPECT_EQ(padded->tensor("seq_len_q")->type, CUDNN_DATA_INT32);
  EXPECT_THAT(padded->tensor("seq_len_kv")->dims, ElementsAre(2, 1, 1, 1));

  c = config();
  c.dtype = DType::f16;
  c.seq_kv = 96;
  c.head_dim_v = 32;
  auto f16 = build_sdpa_forward_graph(api_, c);
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_EQ(f16->tensor("out")->type, CUDNN_DATA_HALF);
  EXPECT_THAT(f16->tensor("out")->dims, ElementsAre(2, 4, 128, 32));
  EXPECT_THAT(f16->tensor("v")->dims, ElementsAre(2, 4, 96, 32));
}

TEST_F(CudnnSdpaGraph, BackwardFinalizesWithoutAHandle) {
  auto g = build_sdpa_backward_graph(api_, config());
  ASSERT_TRUE(g.ok()) << g.status();
  // rowsum(dO * O): 3; P: 4 (bmm, scale, sub, exp); dV: 2; dS: 4; dK: 2; dQ: 3.
  EXPECT_EQ(g->operations.size(), 18u);
  EXPECT_GT(engine_count(*g), 0);
  EXPECT_EQ(count(*g, "matmul"), 5);
  EXPECT_EQ(count(*g, "reshape"), 3);
  // V [2, 4, 128, 64] packed is read as V^T; dQ is accumulated in fp32.
  EXPECT_THAT(g->tensor("v")->dims, ElementsAre(2, 4, 64, 128));
  EXPECT_THAT(g->tensor("v")->strides, ElementsAre(4 * 128 * 64, 128 * 64, 1, 64));
  EXPECT_EQ(g->tensor("grad_q_accum")->type, CUDNN_DATA_FLOAT);
  EXPECT_THAT(g->tensor("grad_k")->dims, ElementsAre(2, 4, 128, 64));

  for (auto option : {0, 1, 2}) {
    CudnnSdpaConfig c = config();
    if (option == 0) c.causal = true;
    if (option == 1) c.padding = SdpaPadding::right;
    if (option == 2) c.mask = SdpaMaskKind::additive;
    auto with = build_sdpa_backward_graph(api_, c);
    ASSERT_TRUE(with.ok()) << c.to_string() << ": " << with.status();
    EXPECT_EQ(with->operations.size(), 18u + (option == 0   ? 4
                                              : option == 1 ? 6
                                                            : 1))
        << c.to_string();
  }
}

// Everything up to the finalized operation graph works without a GPU;
// the engine heuristics finalize too, but with no device to ask they
// offer no engine configuration, and an engine's configuration does not
// finalize: from here on (CudnnExecutionPlan) a GPU is needed.
TEST_F(CudnnSdpaGraph, TheEngineHeuristicsAreTheFirstStepThatNeedsAGpu) {
  if (CudnnHandle::create(api_, nullptr).ok()) GTEST_SKIP() << "this machine has a GPU";
  auto g = build_sdpa_forward_graph(api_, config());
  ASSERT_TRUE(g.ok()) << g.status();
  auto heur = CudnnDescriptor::create(*api_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
  ASSERT_TRUE(heur.ok());
  ASSERT_TRUE(heur->set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g->graph.get()).ok());
  ASSERT_TRUE(heur->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A).ok());
  ASSERT_TRUE(heur->finalize().ok());
  int64_t configs = -1;
  ASSERT_EQ(api_->cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &configs, nullptr),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(configs, 0);
  // Engine 0 of the graph exists, but its configuration needs the device.
  auto engine = CudnnDescriptor::create(*api_, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine 0");
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE(engine->set_descriptor(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g->graph.get()).ok());
  ASSERT_TRUE(engine->set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, int64_t{0}).ok());
  ASSERT_TRUE(engine->finalize().ok());
  auto engine_config =
      CudnnDescriptor::create(*api_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine 0 config");
  ASSERT_TRUE(engine_config.ok());
  ASSERT_TRUE(engine_config->set_descriptor(CUDNN_ATTR_ENGINECFG_ENGINE, engine->get()).ok());
  absl::Status finalized = engine_config->finalize();
  EXPECT_EQ(finalized.code(), absl::StatusCode::kUnimplemented) << finalized;
  EXPECT_THAT(finalized.message(),
              HasSubstr("engine 0 config: cudnnBackendFinalize: CUDNN_STATUS_NOT_SUPPORTED"));
}

TEST_F(CudnnSdpaGraph, WhatCudnnCannotExpressIsNamed) {
  struct Case {
    std::function<void(CudnnSdpaConfig&)> set;
    std::string option;
  };
  const std::vector<Case> cases = {
      {[](CudnnSdpaConfig& c) { c.dtype = DType::f32; }, "dtype f32"},
      {[](CudnnSdpaConfig& c) { c.dropout_p = 0.1; }, "dropout"},
      {[](CudnnSdpaConfig& c) { c.mask = SdpaMaskKind::boolean; }, "a boolean mask"},
      {[](CudnnSdpaConfig& c) {
         c.mask = SdpaMaskKind::additive;
         c.mask_grad = true;
       },
       "the mask's gradient"},
      {[](CudnnSdpaConfig& c) { c.padding = SdpaPadding::left; },
       "valid_seq_len with left padding"},
      {[](CudnnSdpaConfig& c) { c.return_probs = true; }, "returned attention probabilities"},
      {[](CudnnSdpaConfig& c) { c.return_dropout_mask = true; }, "a returned dropout mask"},
      {[](CudnnSdpaConfig& c) { c.saved_probs = true; }, "saved probabilities"},
      {[](CudnnSdpaConfig& c) { c.softmax_mode_none = false; }, "a softmax_mode"},
      {[](CudnnSdpaConfig& c) { c.head_dim = 60; }, "head dims 60 and 60"},
      {[](CudnnSdpaConfig& c) { c.head_dim_v = 512; }, "head dims 64 and 512"},
  };
  for (const Case& k : cases) {
    CudnnSdpaConfig c = config();
    k.set(c);
    absl::Status s = cudnn_sdpa_expressible(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << k.option;
    EXPECT_THAT(s.message(), HasSubstr("not expressible in cuDNN: " + k.option)) << s;
    // The graphs refuse it the same way.
    EXPECT_EQ(build_sdpa_forward_graph(api_, c).status(), s);
    EXPECT_EQ(build_sdpa_backward_graph(api_, c).status(), s);
  }
}

TEST_F(CudnnSdpaGraph, BadConfigsAreInvalidArguments) {
  CudnnSdpaConfig c = config();
  c.seq_kv = 0;
  absl::Status s = cudnn_sdpa_expressible(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("every size must be at least 1"));
  EXPECT_THAT(s.message(), HasSubstr("seq_kv 0"));

  c = config();
  c.scale = std::nan("");
  EXPECT_THAT(cudnn_sdpa_expressible(c).message(), HasSubstr("the scale must be finite"));
  c = config();
  c.dropout_p = 1.0;
  EXPECT_THAT(cudnn_sdpa_expressible(c).message(), HasSubstr("dropout_p must be in [0, 1)"));
  c = config();
  c.causal = true;
  c.mask = SdpaMaskKind::additive;
  EXPECT_EQ(cudnn_sdpa_expressible(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(build_sdpa_forward_graph(api_, c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudnnSdpaGraph, CudnnRejectsAMatmulOfMismatchedShapesAtTheStepThatBuildsIt) {
  CudnnGraphBuilder g(api_, "mismatch test");
  auto a = g.tensor("a", {1, 1, 4, 8}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, 1);
  auto b =
      g.tensor("b", {1, 1, 4, 8}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, 2); // needs [.., 8, n]
  auto c = g.tensor("c", {1, 1, 4, 8}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, 3);
  g.matmul("a x b", a, b, c);
  auto graph = g.finalize();
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("cudnn: mismatch test: a x b (matmul): cudnnBackendFinalize: "));
  EXPECT_THAT(graph.status().message(), HasSubstr("CUDNN_STATUS_BAD_PARAM"));
}

TEST_F(CudnnSdpaGraph, ABuilderErrorIsTheFirstOneAndNamesTheTensor) {
  CudnnGraphBuilder g(api_, "shape test");
  auto a = g.tensor("a", {1, 0, 4, 8}, CUDNN_DATA_FLOAT, CudnnTensorKind::io, 1);
  auto b = g.tensor("b", {1, 1, 8, 4}, CUDNN_DATA_FLOAT, CudnnTensorKind::io,
                    1); // same uid: not reported
  g.matmul("a x b", a, b, b);
  auto graph = g.finalize();
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(graph.status().message(),
              HasSubstr("shape test: tensor a [1, 0, 4, 8]: every dim must be at least 1"));
}

} // namespace
} // namespace mstep::cuda
