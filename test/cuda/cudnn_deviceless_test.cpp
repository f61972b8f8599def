// cuDNN's SDPA graphs compiled for an H100 on this machine, which has no
// GPU (a binary of its own: it loads the toolkit's stub libcuda, which no
// other test may see). cuDNN 9.8+ makes heuristics and plans for a device
// described by a device-property descriptor; its runtime-compiled engines
// need libcuda to be loadable, and the stub is (its calls fail). So here
// the heuristics choose engine configurations for each graph and their
// plans get through the kernels' compilation (NVRTC, sm_90) to the one
// step that needs the device: loading the compiled module
// (cuLibraryLoadData fails with CUDA_ERROR_STUB_LIBRARY). The SDPA graphs
// must be compiled by engines other than the generic one that compiles a
// plain chain of two matmuls (cuDNN's attention engines recognise them).
//
// The H100's properties are test/cuda/data/h100_cudnn_device_properties.json,
// written by hand from the H100 SXM's figures (the keys are the ones cuDNN
// asks for); the GPU check prints the real device's JSON to compare.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "lib/backends/cuda/CudnnSdpa.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

class CudnnDeviceless : public ::testing::Test {
protected:
  void SetUp() override {
    auto api = load_cudnn();
    if (!api.ok()) GTEST_SKIP() << api.status();
    api_ = *api;
    // cuDNN dlopens "libcuda.so.1": the stub's soname, so this copy is it.
    if (dlopen(MSTEP_CUDA_STUB_LIBCUDA, RTLD_NOW | RTLD_GLOBAL) == nullptr)
      GTEST_SKIP() << "no stub libcuda: " << dlerror();
    std::ifstream file(MSTEP_CUDA_TEST_DATA_DIR "/h100_cudnn_device_properties.json");
    std::stringstream json;
    json << file.rdbuf();
    auto properties = CudnnDeviceProperties::from_json(api_, json.str());
    ASSERT_TRUE(properties.ok()) << properties.status();
    properties_ = std::make_unique<CudnnDeviceProperties>(std::move(*properties));
  }
  static CudnnSdpaConfig config() {
    CudnnSdpaConfig c;
    c.batch = 2;
    c.heads = 4;
    c.seq_q = c.seq_kv = 128;
    c.head_dim = 64;
    c.scale = 0.125;
    return c;
  }
  /// The engines (global indices) whose plan for `graph` compiled and
  /// failed only to load, read from the plan's error, which lists each
  /// configuration tried as "engine config i (engine N): <why>".
  std::set<int> compiled_engines(const CudnnOperationGraph& graph) {
    auto plan = CudnnExecutionPlan::create(*properties_, graph);
    EXPECT_FALSE(plan.ok()) << graph.what << ": a plan without a device";
    if (plan.ok()) return {};
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
    const std::string m(plan.status().message());
    std::set<int> engines;
    const std::regex entry(R"(engine config \d+ \(engine (\d+)\): ([^;]*))");
    for (auto it = std::sregex_iterator(m.begin(), m.end(), entry); it != std::sregex_iterator();
         ++it)
      if ((*it)[2].str().find("cuLibraryLoadData returned error  (34)") != std::string::npos)
        engines.insert(std::stoi((*it)[1].str()));
    std::printf("%s: compiled by engines", graph.what.c_str());
    for (int e : engines) std::printf(" %d", e);
    std::printf("\n");
    return engines;
  }
  /// Attention without its softmax (two chained matmuls): what a generic
  /// fusion engine compiles.
  std::set<int> generic_engines() {
    CudnnGraphBuilder g(api_, "no softmax");
    auto q = g.tensor("q", {2, 4, 128, 64}, CUDNN_DATA_BFLOAT16, CudnnTensorKind::io, 1);
    auto kt = g.tensor("k", {2, 4, 64, 128}, CUDNN_DATA_BFLOAT16, CudnnTensorKind::io, 2,
                       {32768, 8192, 1, 64});
    auto v = g.tensor("v", {2, 4, 128, 64}, CUDNN_DATA_BFLOAT16, CudnnTensorKind::io, 3);
    auto o = g.tensor("o", {2, 4, 128, 64}, CUDNN_DATA_BFLOAT16, CudnnTensorKind::io, 4);
    auto s = g.virtual_tensor("s", {2, 4, 128, 128}, CUDNN_DATA_BFLOAT16);
    g.matmul("q x k^T", q, kt, s);
    g.matmul("s x v", s, v, o);
    auto graph = g.finalize();
    EXPECT_TRUE(graph.ok()) << graph.status();
    return graph.ok() ? compiled_engines(*graph) : std::set<int>{};
  }
  /// `graph` compiles, and with an engine other than the generic ones.
  void expect_compiled(const absl::StatusOr<CudnnOperationGraph>& graph,
                       const std::set<int>& generic) {
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::set<int> engines = compiled_engines(*graph);
    EXPECT_FALSE(engines.empty()) << graph->what << " compiled with no engine";
    for (int e : engines)
      EXPECT_EQ(generic.count(e), 0u) << graph->what << ": engine " << e << " is generic";
  }
  std::shared_ptr<const CudnnApi> api_;
  std::unique_ptr<CudnnDeviceProperties> properties_;
};

TEST_F(CudnnDeviceless, TheDevicePropertiesRoundTrip) {
  auto json = properties_->to_json();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"multiProcessorCount\": 132"));
  EXPECT_THAT(*json, HasSubstr("\"deviceVer\": 900"));
  // A key missing is named.
  auto bad = CudnnDeviceProperties::from_json(api_, "{\"deviceVer\": 900}");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("device properties from JSON: cudnnBackendFinalize: "));
}

TEST_F(CudnnDeviceless, ForwardGraphsCompileForAnH100) {
  const std::set<int> generic = generic_engines();
  expect_compiled(build_sdpa_forward_graph(api_, config()), generic);
  CudnnSdpaConfig c = config();
  c.causal = true;
  expect_compiled(build_sdpa_forward_graph(api_, c), generic);
  c = config();
  c.padding = SdpaPadding::right;
  expect_compiled(build_sdpa_forward_graph(api_, c), generic);
  c = config();
  c.mask = SdpaMaskKind::additive;
  c.mask_per_batch = false;
  expect_compiled(build_sdpa_forward_graph(api_, c), generic);
}

TEST_F(CudnnDeviceless, BackwardGraphsCompileForAnH100) {
  const std::set<int> generic = generic_engines();
  expect_compiled(build_sdpa_backward_graph(api_, config()), generic);
  CudnnSdpaConfig c = config();
  c.causal = true;
  expect_compiled(build_sdpa_backward_graph(api_, c), generic);
  c = config();
  c.padding = SdpaPadding::right;
  expect_compiled(build_sdpa_backward_graph(api_, c), generic);
  c = config();
  c.mask = SdpaMaskKind::additive;
  expect_compiled(build_sdpa_backward_graph(api_, c), generic);
}

// GPT-mini's layout (issue 21): q, k, v read at strides of a packed qkv
// projection [B, S, 3 * H * D] (the heads' permutes and the slices as
// strides), out, grad_out and the gradients at strides of [B, S, H, D].
TEST_F(CudnnDeviceless, StridedGraphsCompileForAnH100) {
  const std::set<int> generic = generic_engines();
  CudnnSdpaConfig c = config();
  c.causal = true;
  const int64_t S = c.seq_q, E = c.heads * c.head_dim;
  const SdpaStrides qkv = {S * 3 * E, c.head_dim, 3 * E, 1}, heads = {S * E, c.head_dim, E, 1};
  c.layout = {qkv, qkv, qkv, heads, heads, heads, heads, heads};
  expect_compiled(build_sdpa_forward_graph(api_, c), generic);
  expect_compiled(build_sdpa_backward_graph(api_, c), generic);
}

// The check above can fail: a generic engine compiles the matmul chain.
TEST_F(CudnnDeviceless, AMatmulChainCompilesWithAGenericEngine) {
  EXPECT_FALSE(generic_engines().empty());
}

} // namespace
} // namespace mstep::cuda
