// Backend registry: backends by name, registered at static-init time,
// each created once on first use.
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

namespace {
constexpr int kNumDeviceTypes = static_cast<int>(DeviceType::async_host) + 1;
}  // namespace

struct BackendRegistry::Entry {
  std::string name;
  DeviceType type;
  Factory factory = nullptr;
  FallibleFactory fallible = nullptr;  // set instead of `factory`
  std::once_flag created;
  std::unique_ptr<Backend> instance;  // written once, under `created`
  absl::Status error;                 // of `fallible`, written under `created`
};

struct BackendRegistry::State {
  mutable std::mutex mutex;                     // guards `entries`
  std::vector<std::unique_ptr<Entry>> entries;  // never shrinks: entries stay put
  // Set once under `mutex`, read without it: get(DeviceType) runs per op.
  std::array<std::atomic<Entry*>, kNumDeviceTypes> by_type{};

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (int i = 0; i < kNumDeviceTypes; ++i)
      if (Entry* e = by_type[i].load(std::memory_order_acquire)) out.push_back(e->name);
    return out;
  }
  /// "available: ref, cpu", for errors.
  std::string available() const {
    return absl::StrCat("available: ", absl::StrJoin(names(), ", "));
  }
};

BackendRegistry::BackendRegistry() : state_(std::make_unique<State>()) {}
BackendRegistry::~BackendRegistry() = default;

BackendRegistry& BackendRegistry::global() {
  static BackendRegistry registry;
  return registry;
}

absl::Status BackendRegistry::add(absl::string_view name, DeviceType type, Factory factory) {
  return add_entry(*state_, name, type, factory, nullptr);
}

absl::Status BackendRegistry::add(absl::string_view name, DeviceType type,
                                  FallibleFactory factory) {
  return add_entry(*state_, name, type, nullptr, factory);
}

absl::Status BackendRegistry::add_entry(State& state, absl::string_view name, DeviceType type,
                                        Factory factory, FallibleFactory fallible) {
  std::lock_guard<std::mutex> lock(state.mutex);
  for (const auto& e : state.entries)
    if (e->name == name || e->type == type)
      return absl::AlreadyExistsError(absl::StrCat(
          "cannot register backend '", name, "' for device type '", device_type_name(type),
          "': backend '", e->name, "' already has ",
          e->name == name ? "that name" : "that device type"));
  auto entry = std::make_unique<Entry>();
  entry->name = std::string(name);
  entry->type = type;
  entry->factory = factory;
  entry->fallible = fallible;
  state.by_type[static_cast<int>(type)].store(entry.get(), std::memory_order_release);
  state.entries.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::StatusOr<Backend*> BackendRegistry::backend(DeviceType type) {
  Entry* e = state_->by_type[static_cast<int>(type)].load(std::memory_order_acquire);
  if (e == nullptr)
    return absl::UnavailableError(absl::StrCat("no backend for device '", device_type_name(type),
                                               "' is built into this library; ",
                                               state_->available()));
  std::call_once(e->created, [e] {
    if (e->factory != nullptr) {
      e->instance = e->factory();
      return;
    }
    absl::StatusOr<std::unique_ptr<Backend>> made = e->fallible();
    if (made.ok())
      e->instance = std::move(*made);
    else
      e->error = made.status();
  });
  if (!e->error.ok()) return e->error;
  if (!e->instance)
    return absl::InternalError(absl::StrCat("backend '", e->name, "' failed to start"));
  return e->instance.get();
}

absl::StatusOr<Backend*> BackendRegistry::backend(absl::string_view name) {
  MSTEP_ASSIGN_OR_RETURN(DeviceType type, lookup(name));
  return backend(type);
}

absl::StatusOr<DeviceType> BackendRegistry::lookup(absl::string_view name) const {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const auto& e : state_->entries)
      if (e->name == name) return e->type;
  }
  return absl::NotFoundError(absl::StrCat("no backend named '", name,
                                          "' is built into this library; ",
                                          state_->available()));
}

std::vector<std::string> BackendRegistry::names() const { return state_->names(); }

std::vector<DeviceType> BackendRegistry::types() const {
  std::vector<DeviceType> out;
  for (int i = 0; i < kNumDeviceTypes; ++i)
    if (state_->by_type[i].load(std::memory_order_acquire))
      out.push_back(static_cast<DeviceType>(i));
  return out;
}

namespace {
void abort_unless_ok(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "mstep: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}
}  // namespace

void BackendRegistry::register_backend(absl::string_view name, DeviceType type, Factory factory) {
  abort_unless_ok(global().add(name, type, factory));
}

void BackendRegistry::register_backend(absl::string_view name, DeviceType type,
                                       FallibleFactory factory) {
  abort_unless_ok(global().add(name, type, factory));
}

}  // namespace mstep
