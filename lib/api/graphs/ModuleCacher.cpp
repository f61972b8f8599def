// ModuleCacher: one graphed callable per input signature and non-tensor
// arguments, least recently used evicted beyond max_graphs.
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Graphed.h"
#include "mstep/core/Hash.h"

namespace mstep {

namespace {

uint64_t hash_arg(const CallArg& a) {
  uint64_t h = hash_combine(0xA56, a.index());
  if (const auto* i = std::get_if<int64_t>(&a)) return hash_combine(h, static_cast<uint64_t>(*i));
  if (const auto* d = std::get_if<double>(&a)) return hash_combine(h, hash_double(*d));
  if (const auto* b = std::get_if<bool>(&a)) return hash_combine(h, *b);
  return hash_combine(h, hash_string(std::get<std::string>(a)));
}

}  // namespace

ModuleCacher::ModuleCacher(Fn fn, std::vector<Tensor> parameters, ModuleCacherOptions options)
    : fn_(std::move(fn)), parameters_(std::move(parameters)), options_(options) {
  if (options_.max_graphs == 0)
    detail::throw_op_error("ModuleCacher", "max_graphs is 0", "",
                           "Keep at least one graph (the default is 8).");
}

std::vector<Tensor> ModuleCacher::operator()(const std::vector<Tensor>& inputs,
                                             const CallArgs& args) {
  // The key: everything that shapes the graph but is not a tensor's value.
  uint64_t key = hash_combine(inputs.size(), args.size());
  for (const Tensor& t : inputs) {
    if (!t.defined())
      detail::throw_op_error("ModuleCacher", "an input is undefined", "", "");
    key = hash_combine(key, static_cast<uint64_t>(t.dtype()));
    for (int64_t d : t.shape()) key = hash_combine(key, static_cast<uint64_t>(d));
    key = hash_combine(key, hash_combine(static_cast<uint64_t>(t.device().type), t.device().index));
    key = hash_combine(key, t.requires_grad());
  }
  for (const CallArg& a : args) key = hash_combine(key, hash_arg(a));
  key = hash_combine(key, grad_enabled());
  if (mode_) key = hash_combine(key, mode_());

  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->first != key) continue;
    graphs_.splice(graphs_.begin(), graphs_, it);
    ++hits_;
    return graphs_.front().second(inputs);
  }
  // Miss: capture on these inputs, with the arguments frozen into this graph
  // only (a different value is a different key).
  Fn fn = fn_;
  CallArgs frozen = args;
  GraphedCallable graphed = make_graphed_callable(
      [fn, frozen](const std::vector<Tensor>& in) { return fn(in, frozen); }, inputs, parameters_);
  ++captures_;
  graphs_.emplace_front(key, std::move(graphed));
  while (graphs_.size() > options_.max_graphs) {
    graphs_.pop_back();
    ++evictions_;
  }
  return graphs_.front().second(inputs);
}

}  // namespace mstep
