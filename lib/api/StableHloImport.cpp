// mstep::import_stablehlo: the compiler reads the module into a trace graph
// (compiler/StableHloImport.h); calling the function records that graph as
// lazy ops (graphs/RecordGraph.h).
#include "mstep/api/StableHloImport.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "lib/api/graphs/RecordGraph.h"
#include "mstep/api/Creation.h"
#include "mstep/compiler/StableHloImport.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Runtime.h"

namespace mstep {

struct StableHloFunction::Impl {
  std::string path;
  ImportedStableHlo imported;
  // The function's arguments: the graph's first inputs (its large
  // constants follow).
  std::vector<TensorType> input_types, output_types;
  std::vector<std::string> input_names;
  std::vector<int32_t> donated_to;
};

const std::vector<TensorType>& StableHloFunction::input_types() const {
  return impl_->input_types;
}
const std::vector<TensorType>& StableHloFunction::output_types() const {
  return impl_->output_types;
}
const std::vector<std::string>& StableHloFunction::input_names() const {
  return impl_->input_names;
}
const std::vector<std::string>& StableHloFunction::output_names() const {
  return impl_->imported.output_names;
}
const std::vector<int32_t>& StableHloFunction::donated_to() const { return impl_->donated_to; }

std::vector<Tensor> StableHloFunction::operator()(const std::vector<Tensor>& inputs) const {
  const std::vector<TensorType>& want = input_types();
  auto fail = [&](const std::string& problem) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("StableHloFunction (", impl_->path, "): ", problem)));
  };
  if (inputs.size() != want.size())
    fail(absl::StrCat("the function takes ", want.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = absl::StrCat("input ", i, " (", impl_->input_names[i], ")");
    if (!inputs[i].defined()) fail(absl::StrCat(name, " is undefined"));
    if (inputs[i].type() != want[i])
      fail(absl::StrCat(name, " is ", inputs[i].type().to_string(), " but the module declares ",
                        want[i].to_string(), "; lower the function again for this shape"));
    if (inputs[i].device() != inputs[0].device())
      fail(absl::StrCat(name, " is on ", inputs[i].device().to_string(), " but input 0 is on ",
                        inputs[0].device().to_string(), "; put every input on one device"));
  }
  const Device device = inputs.empty() ? default_device() : inputs[0].device();
  // The large constants: uploaded on each call (a capture freezes them).
  std::vector<Tensor> all = inputs;
  const TraceGraph& graph = impl_->imported.graph;
  for (const ImportedStableHlo::Constant& c : impl_->imported.constants)
    all.push_back(from_buffer(c.bytes.data(), graph.input_types[c.input], device));
  return detail::record_trace_graph("StableHloFunction", graph, all, device);
}

StableHloFunction import_stablehlo(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw Error(absl::NotFoundError(
        absl::StrCat("mstep::import_stablehlo: cannot read '", path, "'")));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<ImportedStableHlo> imported = stablehlo_to_trace_graph(text.str(), path);
  if (!imported.ok())
    throw Error(absl::Status(imported.status().code(),
                             absl::StrCat("mstep::import_stablehlo: ", imported.status().message())));
  auto impl = std::make_shared<StableHloFunction::Impl>();
  impl->path = path;
  impl->imported = *std::move(imported);
  const TraceGraph& graph = impl->imported.graph;
  const size_t n = impl->imported.num_arguments;
  impl->input_types.assign(graph.input_types.begin(), graph.input_types.begin() + n);
  impl->input_names.assign(impl->imported.input_names.begin(),
                           impl->imported.input_names.begin() + n);
  impl->donated_to.assign(graph.donated_to.begin(), graph.donated_to.begin() + n);
  for (const ValueRef& v : graph.outputs) impl->output_types.push_back(graph.type_of(v));
  return StableHloFunction(std::move(impl));
}

}  // namespace mstep
