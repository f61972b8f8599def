// CompilerRegistry: backends' compile halves by backend name, registered at
// static-init time, each created once on first use.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

absl::StatusOr<std::string> BackendCompiler::compile_stored(mlir::ModuleOp module,
                                                             const RuntimeOptions& options) {
  (void)module;
  (void)options;
  return absl::UnimplementedError(
      absl::StrCat(backend_name(), " cannot compile ahead of time without its device"));
}

namespace {

struct Entry {
  CompilerRegistry::Factory factory;
  std::once_flag created;
  std::unique_ptr<BackendCompiler> instance;  // written once, under `created`
};

struct Registry {
  std::mutex mutex;  // guards `entries`; entries never move once added
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> entries;
};

Registry& registry() {
  static Registry* r = new Registry();  // outlives static destructors
  return *r;
}

}  // namespace

void CompilerRegistry::register_compiler(absl::string_view backend_name, Factory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto [it, inserted] = r.entries.try_emplace(std::string(backend_name));
  if (!inserted) {
    std::fprintf(stderr, "mstep: two compile halves registered for backend '%.*s'\n",
                 static_cast<int>(backend_name.size()), backend_name.data());
    std::abort();
  }
  it->second = std::make_unique<Entry>();
  it->second->factory = factory;
}

absl::StatusOr<BackendCompiler*> CompilerRegistry::get(absl::string_view backend_name) {
  Registry& r = registry();
  Entry* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(backend_name);
    if (it != r.entries.end()) e = it->second.get();
  }
  if (e == nullptr && BackendRegistry::device_type(backend_name).ok())
    return absl::UnimplementedError(absl::StrCat(
        "no compiler for backend '", backend_name, "' is built into this library: '",
        backend_name, "' is a registered backend without a compile half, so no step can be "
        "compiled for it; compilers: ", absl::StrJoin(names(), ", ")));
  if (e == nullptr)
    return absl::NotFoundError(absl::StrCat("no compiler for backend '", backend_name,
                                            "' is built into this library; compilers: ",
                                            absl::StrJoin(names(), ", ")));
  std::call_once(e->created, [e] { e->instance = e->factory(); });
  return e->instance.get();
}

std::vector<std::string> CompilerRegistry::names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, entry] : r.entries) out.push_back(name);
  return out;
}

}  // namespace mstep
