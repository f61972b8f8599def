// The exported graph file (see GraphArchive.h). Body layout, after the
// envelope; integers little-endian, `bytes` a u64 length then the bytes,
// `type` as write_tensor_type:
//   backend bytes
//   custom_ops u32, each: name bytes | version u64      (version 2 on)
//   world_size u32 (0: no collectives)                 (version 3 on)
//   rng_seed u64 | rng_offset u64 | rng_consumed u64
//   slots u32, each:     name bytes | role u8 | written u8 | type | value bytes
//   constants u32, each: type | value bytes
//   segments u32, each:  executable bytes | rng_offset u64
//                        | inputs u32, each: type | source u8 | index u32 | slot u32
//                        | results u32, each: type
//                        | outputs u32, each: result u32 | slot u32
#include "lib/runtime/GraphArchive.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "mstep/core/ByteStream.h"

namespace mstep {

namespace {

constexpr absl::string_view kMagic = "MSTEPXGR";
constexpr uint8_t kMaxRole = static_cast<uint8_t>(InputRole::device_scalar);
constexpr uint8_t kMaxSource = static_cast<uint8_t>(GraphArchive::Binding::Source::rng);

using Source = GraphArchive::Binding::Source;

/// The format version in the envelope of `bytes` (the u32 after the 8-byte
/// magic), or 0 when there is none.
uint32_t stored_version(absl::string_view bytes) {
  if (bytes.size() < kMagic.size() + 4) return 0;
  ByteReader r(bytes.substr(kMagic.size(), 4), "version");
  return r.u32("version");
}

/// Reads the body; checks every index against what precedes it.
class Decoder {
 public:
  Decoder(absl::string_view body, absl::string_view what) : r_(body, what) {}

  absl::StatusOr<GraphArchive> decode(uint32_t version) {
    GraphArchive a;
    a.backend = std::string(r_.bytes("backend"));
    const uint32_t num_custom_ops = version >= 2 ? r_.count("custom ops", 16) : 0;
    for (uint32_t i = 0; i < num_custom_ops && r_.ok(); ++i) {
      CustomOpNeed op;
      op.name = std::string(r_.bytes("custom op name"));
      op.version = r_.i64("custom op version");
      if (r_.ok() && (op.name.empty() || op.version < 1))
        r_.fail(absl::StrCat("custom op ", i, " is '", op.name, "' version ", op.version,
                             "; a custom op has a name and a version of 1 or more"));
      a.custom_ops.push_back(std::move(op));
    }
    a.world_size = version >= 3 ? r_.u32("world size") : 0;
    a.rng_seed = r_.u64("rng seed");
    a.rng_offset = r_.u64("rng offset");
    a.rng_consumed = r_.u64("rng consumed");
    const uint32_t num_slots = r_.count("slots", 12);
    absl::flat_hash_set<std::string> names;
    for (uint32_t i = 0; i < num_slots && r_.ok(); ++i) {
      GraphArchive::Slot s;
      s.name = std::string(r_.bytes("slot name"));
      const uint8_t role = r_.u8("slot role");
      if (role > kMaxRole) r_.fail(absl::StrCat("slot ", i, " has role ", role, ", not a role"));
      s.role = static_cast<InputRole>(role);
      s.written = r_.u8("slot written") != 0;
      s.type = read_tensor_type(r_, "slot type");
      s.value = std::string(value(s.type, absl::StrCat("slot '", s.name, "'")));
      if (!names.insert(s.name).second) r_.fail(absl::StrCat("two slots are named '", s.name, "'"));
      a.slots.push_back(std::move(s));
    }
    const uint32_t num_constants = r_.count("constants", 10);
    for (uint32_t i = 0; i < num_constants && r_.ok(); ++i) {
      GraphArchive::Constant c;
      c.type = read_tensor_type(r_, "constant type");
      c.value = std::string(value(c.type, absl::StrCat("constant ", i)));
      a.constants.push_back(std::move(c));
    }
    const uint32_t num_segments = r_.count("segments", 24);
    for (uint32_t s = 0; s < num_segments && r_.ok(); ++s) a.segments.push_back(segment(a, s));
    r_.expect_end();
    if (!r_.ok()) return r_.status();
    if (a.segments.empty()) return absl::DataLossError("the exported graph has no segment");
    return a;
  }

 private:
  /// A stored value of `type`: exactly type.bytes() bytes.
  absl::string_view value(const TensorType& type, const std::string& what) {
    absl::string_view v = r_.bytes("value");
    if (r_.ok() && v.size() != type.bytes())
      r_.fail(absl::StrCat(what, " holds ", v.size(), " bytes; its type ", type.to_string(),
                           " needs ", type.bytes()));
    return v;
  }

  GraphArchive::Segment segment(const GraphArchive& a, uint32_t s) {
    GraphArchive::Segment seg;
    seg.executable = std::string(r_.bytes("executable"));
    seg.rng_offset = r_.u64("segment rng offset");
    const uint32_t num_inputs = r_.count("segment inputs", 11);
    for (uint32_t j = 0; j < num_inputs && r_.ok(); ++j) {
      const std::string where = absl::StrCat("input ", j, " of segment ", s);
      seg.input_types.push_back(read_tensor_type(r_, "input type"));
      GraphArchive::Binding b;
      const uint8_t source = r_.u8("input source");
      b.index = r_.u32("input index");
      b.slot = r_.u32("input slot");
      if (!r_.ok()) break;
      if (source > kMaxSource) {
        r_.fail(absl::StrCat(where, " has source ", source, ", not a source"));
        break;
      }
      b.source = static_cast<Source>(source);
      const TensorType* from = source_type(a, b, s);
      if (from == nullptr)
        r_.fail(absl::StrCat(where, " reads ", describe(b), ", which does not exist"));
      else if (b.source != Source::rng && *from != seg.input_types.back())
        r_.fail(absl::StrCat(where, " is ", seg.input_types.back().to_string(), " but reads ",
                             describe(b), " of type ", from->to_string()));
      seg.inputs.push_back(b);
    }
    const uint32_t num_results = r_.count("segment results", 2);
    for (uint32_t k = 0; k < num_results && r_.ok(); ++k)
      seg.result_types.push_back(read_tensor_type(r_, "result type"));
    const uint32_t num_outputs = r_.count("segment outputs", 8);
    for (uint32_t k = 0; k < num_outputs && r_.ok(); ++k) {
      GraphArchive::Output o{r_.u32("output result"), r_.u32("output slot")};
      if (!r_.ok()) break;
      if (o.result >= seg.result_types.size() || o.slot >= a.slots.size())
        r_.fail(absl::StrCat("output ", k, " of segment ", s, " binds result ", o.result,
                             " to slot ", o.slot, ", which does not exist"));
      else if (a.slots[o.slot].type != seg.result_types[o.result])
        r_.fail(absl::StrCat("output ", k, " of segment ", s, " binds a ",
                             seg.result_types[o.result].to_string(), " result to slot '",
                             a.slots[o.slot].name, "' of type ", a.slots[o.slot].type.to_string()));
      seg.outputs.push_back(o);
    }
    return seg;
  }

  /// The type `b` reads, or null when it names nothing (only earlier
  /// segments may be read). For rng: any type (the state's own).
  const TensorType* source_type(const GraphArchive& a, const GraphArchive::Binding& b,
                                uint32_t s) {
    static const TensorType kAny;
    switch (b.source) {
      case Source::slot:
        return b.index < a.slots.size() ? &a.slots[b.index].type : nullptr;
      case Source::constant:
        return b.index < a.constants.size() ? &a.constants[b.index].type : nullptr;
      case Source::segment_result:
        return b.index < s && b.slot < a.segments[b.index].result_types.size()
                   ? &a.segments[b.index].result_types[b.slot]
                   : nullptr;
      case Source::segment_input:
        return b.index < s && b.slot < a.segments[b.index].input_types.size()
                   ? &a.segments[b.index].input_types[b.slot]
                   : nullptr;
      case Source::rng:
        return &kAny;
    }
    return nullptr;
  }

  static std::string describe(const GraphArchive::Binding& b) {
    switch (b.source) {
      case Source::slot: return absl::StrCat("slot ", b.index);
      case Source::constant: return absl::StrCat("constant ", b.index);
      case Source::segment_result: return absl::StrCat("result ", b.slot, " of segment ", b.index);
      case Source::segment_input: return absl::StrCat("input ", b.slot, " of segment ", b.index);
      case Source::rng: return "the RNG state";
    }
    return "?";
  }

  ByteReader r_;
};

}  // namespace

std::string encode_graph_archive(const GraphArchive& a) {
  ByteWriter w;
  w.bytes(a.backend);
  w.u32(static_cast<uint32_t>(a.custom_ops.size()));
  for (const CustomOpNeed& op : a.custom_ops) {
    w.bytes(op.name);
    w.u64(static_cast<uint64_t>(op.version));
  }
  w.u32(a.world_size);
  w.u64(a.rng_seed);
  w.u64(a.rng_offset);
  w.u64(a.rng_consumed);
  w.u32(static_cast<uint32_t>(a.slots.size()));
  for (const GraphArchive::Slot& s : a.slots) {
    w.bytes(s.name);
    w.u8(static_cast<uint8_t>(s.role));
    w.u8(s.written ? 1 : 0);
    write_tensor_type(w, s.type);
    w.bytes(s.value);
  }
  w.u32(static_cast<uint32_t>(a.constants.size()));
  for (const GraphArchive::Constant& c : a.constants) {
    write_tensor_type(w, c.type);
    w.bytes(c.value);
  }
  w.u32(static_cast<uint32_t>(a.segments.size()));
  for (const GraphArchive::Segment& seg : a.segments) {
    w.bytes(seg.executable);
    w.u64(seg.rng_offset);
    w.u32(static_cast<uint32_t>(seg.inputs.size()));
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      write_tensor_type(w, seg.input_types[j]);
      w.u8(static_cast<uint8_t>(seg.inputs[j].source));
      w.u32(seg.inputs[j].index);
      w.u32(seg.inputs[j].slot);
    }
    w.u32(static_cast<uint32_t>(seg.result_types.size()));
    for (const TensorType& t : seg.result_types) write_tensor_type(w, t);
    w.u32(static_cast<uint32_t>(seg.outputs.size()));
    for (const GraphArchive::Output& o : seg.outputs) {
      w.u32(o.result);
      w.u32(o.slot);
    }
  }
  return seal(kMagic, kGraphArchiveVersion, w.data());
}

absl::StatusOr<GraphArchive> decode_graph_archive(absl::string_view bytes,
                                                  absl::string_view what) {
  // Versions 1 (no custom-op list) and 2 (no world size) are still read;
  // any other version is unseal's error.
  const uint32_t stored = stored_version(bytes);
  const uint32_t version = stored == 1 || stored == 2 ? stored : kGraphArchiveVersion;
  absl::StatusOr<absl::string_view> body = unseal(bytes, kMagic, version, what);
  if (absl::IsUnimplemented(body.status()))
    return absl::DataLossError(
        absl::StrCat(what, " is not an exported mstep graph (no MSTEPXGR header)"));
  if (!body.ok()) return body.status();
  return Decoder(*body, what).decode(version);
}

}  // namespace mstep
