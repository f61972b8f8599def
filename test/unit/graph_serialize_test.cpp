// The binary TraceGraph form (ir/GraphSerialize.h): real graphs and every
// attribute kind come back equal; corrupt, truncated and hostile bytes are
// a DataLoss error that names the problem, never a crash.
#include <cmath>
#include <limits>
#include <string>

#include "mstep/core/ByteStream.h"
#include "mstep/core/Checksum.h"
#include "mstep/ir/GraphSerialize.h"
#include "test/unit/GraphSerializeCases.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using testing::mlp_training_step_graph;
using testing::optimized_graph;

constexpr absl::string_view kMagic = "MSTEPGRF";

/// Decodes `bytes` and expects equality with `graph`: the same bytes when
/// encoded again (every field is encoded) and the same listing.
void expect_round_trip(const TraceGraph& graph) {
  const std::string bytes = serialize_graph(graph);
  absl::StatusOr<TraceGraph> decoded = deserialize_graph(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(serialize_graph(*decoded), bytes);
  EXPECT_EQ(decoded->to_text(), graph.to_text());
  EXPECT_EQ(decoded->input_roles, graph.input_roles);
  EXPECT_EQ(decoded->donated_to, graph.donated_to);
  EXPECT_EQ(decoded->outputs, graph.outputs);
  ASSERT_EQ(decoded->nodes.size(), graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    EXPECT_EQ(decoded->nodes[i].op, graph.nodes[i].op) << "node " << i;
    EXPECT_EQ(decoded->nodes[i].operands, graph.nodes[i].operands) << "node " << i;
    EXPECT_EQ(decoded->nodes[i].results, graph.nodes[i].results) << "node " << i;
    EXPECT_EQ(decoded->nodes[i].body != nullptr, graph.nodes[i].body != nullptr) << "node " << i;
  }
}

/// The error of decoding `bytes` (a failure if it decodes).
std::string error_of(absl::string_view bytes) {
  absl::StatusOr<TraceGraph> decoded = deserialize_graph(bytes);
  if (decoded.ok()) {
    ADD_FAILURE() << "decoded " << bytes.size() << " corrupt bytes";
    return "";
  }
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
  return std::string(decoded.status().message());
}

/// x: f32[2, 3] -> exp(x) + x, with a parameter and one attribute of each kind.
TraceGraph small_graph() {
  TraceGraph g;
  const TensorType t{{2, 3}, DType::f32};
  g.input_types = {t};
  g.input_roles = {InputRole::parameter};
  g.donated_to = {0};
  g.nodes.push_back({OpKind::parameter, {{AttrName::index, int64_t{0}}}, {}, {t}, nullptr});
  g.nodes.push_back({OpKind::exp, {}, {{0, 0}}, {t}, nullptr});
  g.nodes.push_back({OpKind::add,
                     {{AttrName::value, 2.5},
                      {AttrName::dims, IntList{0, -1, 7}},
                      {AttrName::dtype, DType::bf16}},
                     {{1, 0}, {0, 0}},
                     {t},
                     nullptr});
  g.outputs = {{2, 0}};
  return g;
}

/// `graph` with fusion bodies nested `depth` levels deep.
TraceGraph nested_fusions(int depth) {
  TraceGraph g;
  const TensorType t{{4}, DType::f32};
  g.input_types = {t};
  g.nodes.push_back({OpKind::parameter, {{AttrName::index, int64_t{0}}}, {}, {t}, nullptr});
  if (depth == 0) {
    g.nodes.push_back({OpKind::neg, {}, {{0, 0}}, {t}, nullptr});
  } else {
    g.nodes.push_back({OpKind::fusion, {}, {{0, 0}}, {t},
                       std::make_shared<const TraceGraph>(nested_fusions(depth - 1))});
  }
  g.outputs = {{1, 0}};
  return g;
}

TEST(Checksum, Xxhash64MatchesTheReferenceVectors) {
  // From xxHash's reference implementation (and LLVM's xxHash64).
  EXPECT_EQ(xxhash64(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxhash64("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(xxhash64("abc"), 0x44BC2CF5AD770999ull);
  std::string long_input;  // past one 32-byte stripe and every tail step
  for (int n = 0; n < 100; ++n) long_input.push_back(static_cast<char>((n * 131 + 7) & 0xff));
  EXPECT_EQ(xxhash64(long_input), 0x9DDADA11D3DC2D8Full);
}

TEST(GraphSerialize, SmallGraphWithEveryAttrKindRoundTrips) {
  expect_round_trip(small_graph());
  // Doubles keep their exact bits: NaN, infinities, -0.0, denormals.
  TraceGraph g = small_graph();
  for (double v : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity(),
                   -0.0, std::numeric_limits<double>::denorm_min(), 1e308}) {
    g.nodes[2].attrs[0].value = v;
    absl::StatusOr<TraceGraph> decoded = deserialize_graph(serialize_graph(g));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const double back = std::get<double>(decoded->nodes[2].attrs[0].value);
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << v;
  }
  // Every dtype as an attribute, in a result type and an input type; an
  // empty int list; a 0-d tensor and a zero-size one.
  for (int d = 0; d < kNumDTypes; ++d) {
    TraceGraph h = small_graph();
    const TensorType t{{2, 3}, static_cast<DType>(d)};
    h.input_types = {t};
    for (GraphNode& n : h.nodes) n.results = {t};
    h.nodes[2].attrs[1].value = IntList{};
    h.nodes[2].attrs[2].value = static_cast<DType>(d);
    h.nodes.push_back({OpKind::sum, {}, {{2, 0}}, {TensorType{{}, t.dtype}}, nullptr});
    h.nodes.push_back({OpKind::full, {}, {{3, 0}}, {TensorType{{0, 5}, t.dtype}}, nullptr});
    h.outputs = {{3, 0}, {4, 0}, {0, 0}};
    expect_round_trip(h);
  }
  // Every input role.
  TraceGraph r = small_graph();
  for (int role = 0; role < kNumInputRoles; ++role) {
    r.input_roles = {static_cast<InputRole>(role)};
    expect_round_trip(r);
  }
  // No roles and no donation (their empty forms).
  r.input_roles.clear();
  r.donated_to.clear();
  expect_round_trip(r);
}

TEST(GraphSerialize, TrainingStepGraphRoundTrips) {
  std::shared_ptr<const TraceGraph> traced = mlp_training_step_graph(Device{DeviceType::ref, 0});
  ASSERT_NE(traced, nullptr);
  // The step has parameters, optimizer state, the rng state and donation.
  auto has_role = [&](InputRole role) {
    return std::find(traced->input_roles.begin(), traced->input_roles.end(), role) !=
           traced->input_roles.end();
  };
  EXPECT_TRUE(has_role(InputRole::parameter));
  EXPECT_TRUE(has_role(InputRole::optimizer_state));
  EXPECT_TRUE(has_role(InputRole::rng_state));
  EXPECT_TRUE(std::any_of(traced->donated_to.begin(), traced->donated_to.end(),
                          [](int32_t d) { return d >= 0; }));
  expect_round_trip(*traced);

  // After the pipeline: fusion bodies, a multi_tensor_update.
  const TraceGraph optimized = optimized_graph(*traced);
  EXPECT_TRUE(std::any_of(optimized.nodes.begin(), optimized.nodes.end(),
                          [](const GraphNode& n) { return n.body != nullptr; }));
  expect_round_trip(optimized);
}

TEST(GraphSerialize, NestedFusionBodiesRoundTripUpToTheLimit) {
  expect_round_trip(nested_fusions(kMaxGraphNesting));
  EXPECT_THAT(error_of(serialize_graph(nested_fusions(kMaxGraphNesting + 1))),
              HasSubstr("nest more than"));
}

/// The optimized training step's bytes: fusion bodies, every op family
/// of an MLP step.
std::string training_step_bytes() {
  std::shared_ptr<const TraceGraph> traced = mlp_training_step_graph(Device{DeviceType::ref, 0});
  EXPECT_NE(traced, nullptr);
  return traced ? serialize_graph(optimized_graph(*traced)) : std::string();
}

TEST(GraphSerialize, EveryTruncationIsAnError) {
  const std::string bytes = training_step_bytes();
  ASSERT_FALSE(bytes.empty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<TraceGraph> decoded = deserialize_graph(bytes.substr(0, n));
    ASSERT_FALSE(decoded.ok()) << "a prefix of " << n << " bytes decoded";
    ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
  }
  EXPECT_THAT(error_of(bytes + "x"), HasSubstr("header says"));
}

TEST(GraphSerialize, EveryFlippedByteIsAnError) {
  // The checksum (or the header's own checks) catches every flip.
  const std::string bytes = serialize_graph(small_graph());
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string corrupt = bytes;
      corrupt[i] = static_cast<char>(corrupt[i] ^ mask);
      absl::StatusOr<TraceGraph> decoded = deserialize_graph(corrupt);
      ASSERT_FALSE(decoded.ok()) << "byte " << i << " ^ " << int{mask} << " decoded";
      ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    }
}

TEST(GraphSerialize, FlippedPayloadBytesWithAValidChecksumNeverCrash) {
  // What a fuzzer would try: the payload changed and the checksum made to
  // match. Every result is a clean error or a graph that passes the
  // structural checks (re-encoding it gives the same bytes).
  const std::string bytes = training_step_bytes();
  ASSERT_FALSE(bytes.empty());
  const std::string payload(*unseal(bytes, kMagic, kGraphFormatVersion, "graph"));
  int errors = 0, decoded_ok = 0;
  for (size_t i = 0; i < payload.size(); i += 1 + i / 512) {
    for (uint8_t mask : {0x01, 0x04, 0x40, 0xff}) {
      std::string corrupt = payload;
      corrupt[i] = static_cast<char>(corrupt[i] ^ mask);
      const std::string sealed = seal(kMagic, kGraphFormatVersion, corrupt);
      absl::StatusOr<TraceGraph> decoded = deserialize_graph(sealed);
      if (!decoded.ok()) {
        ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
        ++errors;
      } else {
        ASSERT_EQ(serialize_graph(*decoded), sealed) << "byte " << i;
        ++decoded_ok;
      }
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(decoded_ok, 0);  // e.g. a changed dimension or constant
}

TEST(GraphSerialize, HeaderErrorsNameTheProblem) {
  const std::string bytes = serialize_graph(small_graph());
  std::string wrong_magic = bytes;
  wrong_magic[0] = 'X';
  EXPECT_THAT(error_of(wrong_magic), HasSubstr("bad magic"));
  std::string wrong_version = bytes;
  wrong_version[8] = static_cast<char>(kGraphFormatVersion + 1);
  EXPECT_THAT(error_of(wrong_version), HasSubstr("format version 2, this build reads version 1"));
  std::string wrong_sum = bytes;
  wrong_sum.back() = static_cast<char>(wrong_sum.back() ^ 1);
  EXPECT_THAT(error_of(wrong_sum), HasSubstr("checksum mismatch"));
  EXPECT_THAT(error_of(bytes.substr(0, 10)), HasSubstr("truncated header"));
  EXPECT_THAT(error_of(""), HasSubstr("bad magic"));
}

/// A valid checksum around a hostile graph: serialize_graph writes the
/// struct's values as they are, out-of-range ones included.
struct Hostile {
  const char* name;
  void (*corrupt)(TraceGraph&);
  const char* error;
};

TEST(GraphSerialize, HostileGraphsAreRejectedWithTheirProblemNamed) {
  const Hostile cases[] = {
      {"op kind", [](TraceGraph& g) { g.nodes[1].op = static_cast<OpKind>(kNumOpKinds); },
       "not a valid OpKind"},
      {"result dtype",
       [](TraceGraph& g) { g.nodes[1].results[0].dtype = static_cast<DType>(kNumDTypes); },
       "not a valid DType"},
      {"input dtype", [](TraceGraph& g) { g.input_types[0].dtype = static_cast<DType>(200); },
       "input 0 has dtype 200"},
      {"dtype attribute",
       [](TraceGraph& g) { g.nodes[2].attrs[2].value = static_cast<DType>(9); },
       "attribute 'dtype' is dtype 9"},
      {"attribute name",
       [](TraceGraph& g) { g.nodes[2].attrs[0].name = static_cast<AttrName>(kNumAttrNames); },
       "not a valid AttrName"},
      {"input role", [](TraceGraph& g) { g.input_roles[0] = static_cast<InputRole>(kNumInputRoles); },
       "not a valid InputRole"},
      {"operand of a later node", [](TraceGraph& g) { g.nodes[1].operands[0] = {2, 0}; },
       "operand 0 refers to node 2, not one of the 1 nodes before it"},
      {"operand of a missing result", [](TraceGraph& g) { g.nodes[2].operands[1] = {1, 3}; },
       "refers to result 3 of node 1, which has 1"},
      {"output of a missing node", [](TraceGraph& g) { g.outputs[0] = {9, 0}; },
       "output 0 refers to node 9"},
      {"parameter index", [](TraceGraph& g) { g.nodes[0].attrs[0].value = int64_t{1}; },
       "reads input 1 of 1"},
      {"negative parameter index", [](TraceGraph& g) { g.nodes[0].attrs[0].value = int64_t{-1}; },
       "reads input -1 of 1"},
      {"parameter without index", [](TraceGraph& g) { g.nodes[0].attrs.clear(); },
       "no int attribute 'index'"},
      {"parameter of another type",
       [](TraceGraph& g) { g.nodes[0].results[0] = TensorType{{6}, DType::f32}; },
       "is f32[6] but input 0 is f32[2, 3]"},
      {"second parameter of one input",
       [](TraceGraph& g) {
         g.nodes.insert(g.nodes.begin() + 1, g.nodes[0]);
         for (size_t i = 2; i < g.nodes.size(); ++i)
           for (ValueRef& v : g.nodes[i].operands) v.node += v.node >= 1;
         for (ValueRef& v : g.outputs) v.node += 1;
       },
       "a second time"},
      {"roles for too few inputs",
       [](TraceGraph& g) { g.input_roles.push_back(InputRole::input); }, "2 input roles for 1"},
      {"donation to a missing output", [](TraceGraph& g) { g.donated_to[0] = 1; },
       "donated to output 1 of 1"},
      {"negative dimension",
       [](TraceGraph& g) { g.nodes[1].results[0].shape = Shape{2, -3}; }, "(negative)"},
      {"huge tensor",
       [](TraceGraph& g) { g.nodes[1].results[0].shape = Shape{1 << 30, 1 << 30}; },
       "exceed 2^48 bytes"},
      {"body on a non-fusion op",
       [](TraceGraph& g) { g.nodes[1].body = std::make_shared<const TraceGraph>(nested_fusions(0)); },
       "has a body; only a fusion node has one"},
      {"fusion without body", [](TraceGraph& g) { g.nodes[1].op = OpKind::fusion; },
       "has no body"},
      {"fusion body of other types",
       [](TraceGraph& g) {
         g.nodes[1].op = OpKind::fusion;
         g.nodes[1].body = std::make_shared<const TraceGraph>(nested_fusions(0));
       },
       "body input 0 is f32[4], its operand f32[2, 3]"},
  };
  for (const Hostile& c : cases) {
    SCOPED_TRACE(c.name);
    TraceGraph g = small_graph();
    c.corrupt(g);
    EXPECT_THAT(error_of(serialize_graph(g)), HasSubstr(c.error));
  }
}

TEST(GraphSerialize, HugeCountsAreRejectedBeforeAllocating) {
  // A node count of 2^32 - 1 in a tiny payload: checked against the bytes
  // left, never allocated.
  ByteWriter w;
  w.u32(0);  // inputs
  w.u32(0);  // roles
  w.u32(0);  // donations
  w.u32(0xffffffffu);  // nodes
  EXPECT_THAT(error_of(seal(kMagic, kGraphFormatVersion, w.data())),
              HasSubstr("the node count is 4294967295, more than the 0 bytes left can hold"));
  ByteWriter rank;
  rank.u32(1);
  rank.u8(0);    // f32
  rank.u8(200);  // rank
  EXPECT_THAT(error_of(seal(kMagic, kGraphFormatVersion, rank.data())),
              HasSubstr("input 0 has rank 200"));
}

}  // namespace
}  // namespace mstep
