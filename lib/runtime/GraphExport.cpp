// Graph::save: a captured graph as an exported graph file (GraphArchive),
// which LoadedGraph replays with the runtime alone. The file lists the
// custom ops its segments call, so that a process without them refuses it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/GraphArchive.h"
#include "lib/runtime/TrustedPath.h"
#include "lib/runtime/distributed/Communicator.h"
#include "lib/runtime/CapturedSegment.h"
#include "mstep/api/Tensor.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::internal {

/// The host bytes of `buffer`.
std::string download(const BufferPtr& buffer) {
  std::string bytes(buffer->type().bytes(), '\0');
  Backend* backend = value_or_throw(BackendRegistry::get(buffer->device().type));
  throw_if_error(backend->copy_out(*buffer, bytes.data(), bytes.size()));
  return bytes;
}

/// Writes `bytes` to `path` through a temporary file and a rename, mode
/// 0600: a reader never sees half a file, and only this user can change
/// code that load_graph will run.
void write_file(const std::string& path, const std::string& bytes, const char* who) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(absl::FailedPreconditionError(absl::StrCat(
                  who, ": cannot create ", tmp, ": ", std::strerror(errno))));
  absl::Status written = internal::write_all(fd, bytes);
  if (written.ok() && ::fsync(fd) != 0) written = absl::DataLossError(std::strerror(errno));
  if (::close(fd) != 0 && written.ok()) written = absl::DataLossError(std::strerror(errno));
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    written = absl::DataLossError(std::strerror(errno));
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    throw Error(absl::DataLossError(
        absl::StrCat(who, ": cannot write ", path, ": ", written.message())));
  }
}

absl::flat_hash_map<const TensorImpl*, std::string> tensor_names(
    const std::map<std::string, Tensor>& names, const char* who) {
  absl::flat_hash_map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, tensor] : names) {
    if (!name_of.emplace(tensor.impl(), name).second)
      throw Error(absl::InvalidArgumentError(absl::StrCat(
          who, ": '", name, "' names a tensor that has another name already")));
  }
  return name_of;
}

void save_captured_graph(const std::string& path, const std::map<std::string, Tensor>& names,
                         const std::vector<Segment>& segments, uint64_t rng_consumed) {
  Tracer& tracer = Tracer::get();
  GraphArchive archive;
  const Device device = segments.front().device;
  archive.backend = std::string(value_or_throw(BackendRegistry::get(device.type))->name());
  archive.rng_seed = tracer.rng_seed();
  archive.rng_offset = tracer.rng_offset();
  archive.rng_consumed = rng_consumed;

  const absl::flat_hash_map<const TensorImpl*, std::string> name_of =
      tensor_names(names, "Graph::save");
  // One slot per tensor the step reads or writes, in first-use order.
  absl::flat_hash_map<const TensorImpl*, uint32_t> slot_of;
  // `kind` names an unnamed slot: its role, or "output" for a result.
  auto slot = [&](const std::shared_ptr<TensorImpl>& t, InputRole role,
                  absl::string_view kind) -> uint32_t {
    auto [it, added] = slot_of.try_emplace(t.get(), archive.slots.size());
    if (added) {
      GraphArchive::Slot s;
      auto named = name_of.find(t.get());
      s.name = named != name_of.end()
                   ? named->second
                   : absl::StrCat(kind, "_", archive.slots.size());
      s.role = role;
      s.type = t->type();
      if (t->is_pending()) throw_if_error(tracer.sync(*t));
      s.value = t->buffer() ? download(t->buffer()) : std::string(s.type.bytes(), '\0');
      archive.slots.push_back(std::move(s));
    }
    return it->second;
  };
  for (size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    if (seg.device != device)
      throw Error(absl::UnimplementedError(absl::StrCat(
          "Graph::save: the graph runs on ", device.to_string(), " and ", seg.device.to_string(),
          "; an exported graph runs on one backend. Capture the step on one device")));
    GraphArchive::Segment out;
    auto blob = seg.executable->serialize("");
    if (!blob.ok())
      throw Error(absl::Status(blob.status().code(),
                               absl::StrCat("Graph::save: segment ", s, ": ",
                                            blob.status().message())));
    out.executable = *std::move(blob);
    if (seg.graph && archive.world_size == 0)
      archive.world_size = static_cast<uint32_t>(dist::recorded_world_size(*seg.graph));
    for (const CustomOpNeed& op : seg.custom_ops)
      if (std::find(archive.custom_ops.begin(), archive.custom_ops.end(), op) ==
          archive.custom_ops.end())
        archive.custom_ops.push_back(op);
    out.rng_offset = seg.rng_offset;
    out.result_types = seg.result_types;
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      const InputBinding& b = seg.inputs[j];
      out.input_types.push_back(seg.input_info[j].type);
      GraphArchive::Binding a;
      switch (b.source) {
        case InputBinding::Source::tensor:
          a = {GraphArchive::Binding::Source::slot, slot(b.tensor, seg.input_info[j].role,
                       input_role_name(seg.input_info[j].role)),
               0};
          break;
        case InputBinding::Source::segment:
          a = {GraphArchive::Binding::Source::segment_result, b.segment, b.slot};
          break;
        case InputBinding::Source::segment_input:
          a = {GraphArchive::Binding::Source::segment_input, b.segment, b.slot};
          break;
        case InputBinding::Source::constant:
          a = {GraphArchive::Binding::Source::constant,
               static_cast<uint32_t>(archive.constants.size()), 0};
          archive.constants.push_back({b.constant->type(), download(b.constant)});
          break;
        case InputBinding::Source::rng:
          a = {GraphArchive::Binding::Source::rng, 0, 0};
          break;
      }
      out.inputs.push_back(a);
    }
    for (const Segment::OutputBinding& o : seg.outputs) {
      const uint32_t k = slot(o.tensor, InputRole::input, "output");
      archive.slots[k].written = true;
      out.outputs.push_back({o.result, k});
    }
    archive.segments.push_back(std::move(out));
  }
  write_file(path, encode_graph_archive(archive), "Graph::save");
}

}  // namespace mstep::internal
