// Module and optimizer checkpoints on top of the safetensors format, and
// the load report shared by both.
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/checkpoint/CheckpointInternal.h"
#include "mstep/api/Checkpoint.h"
#include "mstep/api/nn/Module.h"
#include "mstep/api/optim/Optimizer.h"
#include "mstep/mstep.h"

namespace mstep {

std::string LoadReport::to_string() const {
  std::string out;
  for (const std::string& name : missing) absl::StrAppend(&out, "missing: ", name, "\n");
  for (const std::string& name : unexpected) absl::StrAppend(&out, "unexpected: ", name, "\n");
  for (const LoadMismatch& m : mismatched)
    absl::StrAppend(&out, "mismatched: ", m.name, " expected ", m.expected, ", got ", m.got, "\n");
  return out;
}

namespace checkpoint {

void throw_load_error(absl::string_view op, absl::string_view problem, const LoadReport& report) {
  const size_t count = report.missing.size() + report.unexpected.size() + report.mismatched.size();
  std::string msg = absl::StrCat("mstep::", op, ": ", problem, " (", count,
                                 count == 1 ? " problem" : " problems", "):\n");
  // Every problem, one per line, so one run shows everything to fix.
  std::string lines = report.to_string();
  for (size_t start = 0; start < lines.size();) {
    size_t end = lines.find('\n', start);
    absl::StrAppend(&msg, "  ", lines.substr(start, end - start), "\n");
    start = end + 1;
  }
  absl::StrAppend(&msg, "Nothing was loaded. Pass strict=false to load the entries that match "
                        "and get this report back.");
  throw Error(absl::InvalidArgumentError(msg));
}

}  // namespace checkpoint

namespace {

/// Checks `state` against the module, throws (strict) or loads what
/// matches. `source` names where the entries came from, for the message.
LoadReport load_into(nn::Module& module, const std::map<std::string, Tensor>& state, bool strict,
                     const std::string& source) {
  // state_dict() holds handles sharing each parameter's TensorImpl, so
  // copy_ into them updates the module's own members in place.
  std::map<std::string, Tensor> targets = module.state_dict();
  LoadReport report;
  for (const auto& [name, t] : state)
    if (!targets.count(name)) report.unexpected.push_back(name);
  std::vector<std::pair<Tensor, Tensor>> loads;  // (target, source)
  for (auto& [name, target] : targets) {
    auto it = state.find(name);
    if (it == state.end()) {
      report.missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != target.shape()) {
      report.mismatched.push_back(
          {name, target.type().to_string(),
           it->second.defined() ? it->second.type().to_string() : std::string("undefined")});
    } else {
      loads.emplace_back(target, it->second);
    }
  }
  if (strict && !report.ok())
    checkpoint::throw_load_error(
        "load", absl::StrCat(source, " does not match the ", module.type_name(), " module"),
        report);
  NoGradGuard no_grad;
  for (auto& [target, source] : loads)
    // A dtype that differs converts, as torch's param.copy_(input) does.
    target.copy_(detail::cast_to(source.detach(), target.dtype()));
  return report;
}

}  // namespace

LoadReport load_state_dict(nn::Module& module, const std::map<std::string, Tensor>& state,
                           bool strict) {
  return load_into(module, state, strict, "the state dict");
}

namespace {
/// Runs `write` on rank 0 only (or on every rank with `all_ranks`), then
/// waits for the other ranks, so the file is complete when any returns.
template <typename Write>
void save_from_rank0(bool all_ranks, Write write) {
  const bool many = distributed::world_size() > 1;
  if (!many || all_ranks || distributed::rank() == 0) write();
  if (many) distributed::barrier();
}
}  // namespace

void save(const nn::Module& module, const std::string& path, bool all_ranks) {
  save_from_rank0(all_ranks, [&] {
    save_safetensors(path, module.state_dict(),
                     {{"format", "pt"}, {"mstep.module", module.type_name()}});
  });
}

LoadReport load(nn::Module& module, const std::string& path, bool strict) {
  return load_into(module, load_safetensors(path), strict, "'" + path + "'");
}

void save(const optim::Optimizer& optimizer, const std::string& path, bool all_ranks) {
  save_from_rank0(all_ranks, [&] {
    save_safetensors(path, optimizer.state_dict(), {{"mstep.optimizer", optimizer.name()}});
  });
}

LoadReport load(optim::Optimizer& optimizer, const std::string& path, bool strict) {
  std::map<std::string, Tensor> state = load_safetensors(path);
  try {
    return optimizer.load_state_dict(state, strict);
  } catch (const Error& e) {
    // Name the file in front of the optimizer's own message.
    throw Error(absl::Status(e.code(), absl::StrCat("mstep::load: '", path, "': ", e.what())));
  }
}

}  // namespace mstep
