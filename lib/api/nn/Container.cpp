// nn::Sequential and nn::ModuleList.
#include "mstep/api/nn/Container.h"

#include "lib/api/nn/ModuleChecks.h"

namespace mstep::nn {
namespace {

[[noreturn]] void out_of_range(const std::string& container, size_t i, size_t size) {
  checks::fail(container, absl::StrCat("index ", i, " is out of range"),
               absl::StrCat(size, " children"), "Index with a value below size().");
}

}  // namespace

void Sequential::push_back(std::shared_ptr<Layer> layer) {
  if (!layer)
    checks::fail("Sequential", "cannot append a null layer", "nullptr",
                 "Create the layer with std::make_shared first.");
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

const std::shared_ptr<Layer>& Sequential::operator[](size_t i) const {
  if (i >= layers_.size()) out_of_range("Sequential", i, layers_.size());
  return layers_[i];
}

void Sequential::bad_type(size_t i) const {
  checks::fail("Sequential", absl::StrCat("layer ", i, " has another type"), layers_[i]->repr(),
               "Use the type the layer was created with.");
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& layer : layers_) x = layer->forward(x);
  return x;
}

std::string Sequential::repr() const {
  std::string out = "Sequential(";
  for (size_t i = 0; i < layers_.size(); ++i)
    absl::StrAppend(&out, i ? ", " : "", layers_[i]->repr());
  return out + ")";
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  if (!module)
    checks::fail("ModuleList", "cannot append a null module", "nullptr",
                 "Create the module with std::make_shared first.");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= modules_.size()) out_of_range("ModuleList", i, modules_.size());
  return modules_[i];
}

void ModuleList::bad_type(size_t i) const {
  checks::fail("ModuleList", absl::StrCat("module ", i, " has another type"),
               modules_[i]->type_name(), "Use the type the module was created with.");
}

}  // namespace mstep::nn
