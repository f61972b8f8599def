// A fake cuBLASLt table for tests without a GPU: every function succeeds
// (unless told to fail); cublasLtMatmul records a FakeCall named
// "cublasLtMatmul" on the recording fake driver (a node of the graph being
// captured when its stream is capturing), with the stream,
// target = D and args = {A, B} (its A and B, i.e. mstep's rhs and lhs),
// and the descriptor's epilogue to `matmul_epilogues`. The heuristic finds
// an algorithm unless the descriptor's epilogue is in `no_algorithm` (a
// device whose cuBLASLt lacks it). One fake at a time: the functions reach
// its state through a global, as C function pointers have no state.
#pragma once

#include <cublasLt.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/backends/cuda/CublasLt.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda::testing {

struct FakeCublasLtState {
  /// Where cublasLtMatmul records: the test's fake driver.
  FakeCudaDriver* recorder = nullptr;
  /// Every descriptor attribute the fake was given, in order, with its bytes.
  std::vector<std::pair<cublasLtMatmulDescAttributes_t, std::string>> attributes;
  /// Each matmul descriptor's compute and scale types, in order.
  std::vector<std::pair<cublasComputeType_t, cudaDataType_t>> desc_types;
  /// Each matrix layout's element type, in order (three per plan: A, B, C).
  std::vector<cudaDataType_t> layout_types;
  /// Every matrix layout attribute, in order (three per layout: A, B, C).
  std::vector<std::pair<cublasLtMatrixLayoutAttribute_t, std::string>> layout_attributes;
  /// Make cublasLtCreate / cublasLtMatmul fail (NOT_SUPPORTED).
  bool fail_create = false, fail_matmul = false;
  /// Epilogues the heuristic finds no algorithm for.
  std::set<cublasLtEpilogue_t> no_algorithm;
  /// Each cublasLtMatmul call's epilogue, in order.
  std::vector<cublasLtEpilogue_t> matmul_epilogues;
  /// Heuristic queries, and those that found nothing.
  int heuristic_queries = 0, heuristic_misses = 0;

  /// The last value given for `attribute`, as T.
  template <typename T> T last_attribute(cublasLtMatmulDescAttributes_t attribute) const {
    T value{};
    for (const auto& [a, bytes] : attributes)
      if (a == attribute && bytes.size() == sizeof(T)) std::memcpy(&value, bytes.data(), sizeof(T));
    return value;
  }
  /// The values given for layout `attribute`, in order, as T.
  template <typename T> std::vector<T> layout_values(cublasLtMatrixLayoutAttribute_t attribute) const {
    std::vector<T> values;
    for (const auto& [a, bytes] : layout_attributes)
      if (a == attribute && bytes.size() == sizeof(T)) {
        T value;
        std::memcpy(&value, bytes.data(), sizeof(T));
        values.push_back(value);
      }
    return values;
  }
};

/// The fake's state (tests reset it: `fake_cublaslt_state() = {}`).
inline FakeCublasLtState& fake_cublaslt_state() {
  static FakeCublasLtState state;
  return state;
}

/// A matmul descriptor of the fake: the epilogue it was given.
struct FakeCublasLtDesc {
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

inline std::shared_ptr<const CublasLtApi> fake_cublaslt() {
  auto api = std::make_shared<CublasLtApi>();
  static int handle_storage;
  api->cublasLtCreate = [](auto* h) {
    if (fake_cublaslt_state().fail_create) return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = reinterpret_cast<cublasLtHandle_t>(&handle_storage);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtDestroy = [](auto) { return CUBLAS_STATUS_SUCCESS; };
  api->cublasLtGetStatusName = [](auto) { return "CUBLAS_STATUS_FAKE"; };
  api->cublasLtGetStatusString = [](auto) { return "fake"; };
  api->cublasLtMatmulDescCreate = [](auto* d, cublasComputeType_t compute, cudaDataType_t scale) {
    fake_cublaslt_state().desc_types.push_back({compute, scale});
    *d = reinterpret_cast<cublasLtMatmulDesc_t>(new FakeCublasLtDesc);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulDescDestroy = [](auto d) {
    delete reinterpret_cast<FakeCublasLtDesc*>(d);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulDescSetAttribute = [](auto d, cublasLtMatmulDescAttributes_t attribute,
                                            const void* value, size_t size) {
    fake_cublaslt_state().attributes.push_back(
        {attribute, std::string(static_cast<const char*>(value), size)});
    if (attribute == CUBLASLT_MATMUL_DESC_EPILOGUE && size == sizeof(cublasLtEpilogue_t))
      std::memcpy(&reinterpret_cast<FakeCublasLtDesc*>(d)->epilogue, value, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatrixLayoutCreate = [](auto* l, cudaDataType_t type, auto, auto, auto) {
    fake_cublaslt_state().layout_types.push_back(type);
    *l = reinterpret_cast<cublasLtMatrixLayout_t>(new char);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatrixLayoutSetAttribute = [](auto, cublasLtMatrixLayoutAttribute_t attribute,
                                             const void* value, size_t size) {
    fake_cublaslt_state().layout_attributes.push_back(
        {attribute, std::string(static_cast<const char*>(value), size)});
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatrixLayoutDestroy = [](auto l) {
    delete reinterpret_cast<char*>(l);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulPreferenceCreate = [](auto* p) {
    *p = reinterpret_cast<cublasLtMatmulPreference_t>(new char);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulPreferenceDestroy = [](auto p) {
    delete reinterpret_cast<char*>(p);
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulPreferenceSetAttribute = [](auto, auto, auto, auto) {
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmulAlgoGetHeuristic = [](auto, auto d, auto, auto, auto, auto, auto, auto, auto,
                                           int* found) {
    FakeCublasLtState& state = fake_cublaslt_state();
    ++state.heuristic_queries;
    *found = state.no_algorithm.count(reinterpret_cast<FakeCublasLtDesc*>(d)->epilogue) ? 0 : 1;
    state.heuristic_misses += *found == 0;
    return CUBLAS_STATUS_SUCCESS;
  };
  api->cublasLtMatmul = [](auto, auto d, auto, const void* a, auto, const void* b, auto, auto,
                           auto, auto, void* out, auto, auto, auto, auto, cudaStream_t stream) {
    FakeCublasLtState& state = fake_cublaslt_state();
    if (state.recorder != nullptr) {
      // A node of the graph being captured when the stream is capturing.
      FakeCall& call = state.recorder->record_stream_call(
          "cublasLtMatmul", reinterpret_cast<CUstream>(stream),
          std::to_string(reinterpret_cast<uintptr_t>(a)));
      call.target = reinterpret_cast<uintptr_t>(out);
      call.args.push_back(std::to_string(reinterpret_cast<uintptr_t>(b)));
    }
    state.matmul_epilogues.push_back(reinterpret_cast<const FakeCublasLtDesc*>(d)->epilogue);
    return state.fail_matmul ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
  };
  return api;
}

}  // namespace mstep::cuda::testing
