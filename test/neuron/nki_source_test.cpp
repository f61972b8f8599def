// NkiSource.h: the NKI kernel of a tile program. Generated kernels of the
// program families (elementwise, tiled matmul, attention forward and
// backward, embedding's gather and scatter-add, dropout, the optimizer
// update) are valid Python (/usr/bin/python3 -m py_compile), have one
// statement per tile instruction in program order, say they are not
// compiled against the Neuron SDK; the attention kernel at a small shape
// matches the checked-in golden file byte for byte.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "NeuronTestPrograms.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/Lowering.h"
#include "lib/backends/neuron/NkiSource.h"
#include "lib/backends/neuron/TiledMatmulProgram.h"

#ifndef MSTEP_NEURON_GOLDEN_DIR
#error "MSTEP_NEURON_GOLDEN_DIR must name test/neuron/golden"
#endif

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;

std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("mstep_nki_test_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs py_compile on `file`; skips when the oracle Python is missing.
void expect_valid_python(const std::string& file) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string cmd = "/usr/bin/python3 -m py_compile '" + file + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << file << " is not valid Python";
}

/// One `nisa.` statement (or a call of the GpSimd Philox kernel or the
/// select the source defines) per instruction, the i-th naming "#i".
void expect_one_statement_per_instruction(const TileProgram& p, const std::string& src) {
  std::istringstream lines(src);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("    nisa.", 0) != 0 && line.rfind("    mstep_philox_uniform(dst=", 0) != 0 &&
        line.rfind("    mstep_select(dst=", 0) != 0)
      continue;
    ASSERT_LT(i, p.instructions.size()) << line;
    EXPECT_THAT(line, HasSubstr("  # #" + std::to_string(i) + " ")) << line;
    ++i;
  }
  EXPECT_EQ(i, p.instructions.size());
  EXPECT_THAT(src, HasSubstr("Not compiled against the Neuron SDK"));
}

void check_program(const TileProgram& p) {
  ASSERT_TRUE(validate(p).ok()) << validate(p);
  const std::string src = nki_source(p);
  expect_one_statement_per_instruction(p, src);
  absl::StatusOr<std::string> path = write_nki_source(scratch_dir().string(), p);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(read(*path), src);
  expect_valid_python(*path);
}

TEST(NeuronNkiSource, ElementwiseIsValidPython) {
  // exp(x) on [128, 70] + a 5-element tail: two pieces, activation on Scalar.
  const TensorType t{Shape({128 * 70 + 5}), DType::f32};
  GraphNode n{OpKind::exp, {}, {ValueRef{0, 0}}, {t}, nullptr};
  const TensorType types[] = {t};
  absl::StatusOr<LoweredOp> low = lower_node(n, types);
  ASSERT_TRUE(low.ok()) << low.status();
  check_program(low->program);
  EXPECT_THAT(nki_source(low->program), HasSubstr("nisa.activation(dst="));
}

/// The program of `node` over `types` (it must lower).
TileProgram lowered(const GraphNode& n, const std::vector<TensorType>& types) {
  absl::StatusOr<LoweredOp> low = lower_node(n, types);
  EXPECT_TRUE(low.ok()) << low.status();
  return low.ok() ? low->program : TileProgram{};
}

TEST(NeuronNkiSource, EmbeddingDropoutAndOptimizerAreValidPython) {
  const TensorType table{Shape({50, 16}), DType::f32}, ids{Shape({130}), DType::i64},
      rows{Shape({130, 16}), DType::f32};
  GraphNode gather{OpKind::index_select, {}, {}, {rows}, nullptr};
  gather.attrs.push_back({AttrName::dim, AttrValue(int64_t{0})});
  const TileProgram g = lowered(gather, {table, ids});
  check_program(g);
  EXPECT_THAT(nki_source(g), HasSubstr("vector_offset=sb_ids_0[0:128, 0:1], indirect_dim=0)"));
  GraphNode add{OpKind::index_add, {}, {}, {table}, nullptr};
  add.attrs.push_back({AttrName::dim, AttrValue(int64_t{0})});
  const TileProgram a = lowered(add, {table, ids, rows});
  check_program(a);
  EXPECT_THAT(nki_source(a), HasSubstr("dst_rmw_op=nl.add"));

  const TensorType x{Shape({1000}), DType::f32};
  GraphNode drop{OpKind::dropout, {}, {}, {x}, nullptr};
  drop.attrs.push_back({AttrName::p, AttrValue(0.1)});
  drop.attrs.push_back({AttrName::offset, AttrValue(int64_t{0})});
  const TileProgram d = lowered(drop, {x, TensorType{Shape({2}), DType::i64}});
  check_program(d);
  EXPECT_THAT(nki_source(d), HasSubstr("def mstep_philox_uniform("));
  EXPECT_THAT(nki_source(d), HasSubstr("op0=nl.greater_equal"));

  // SGD with clipping over one [1000] parameter.
  const TensorType f64{Shape({}), DType::f64};
  GraphNode sgd{
      OpKind::multi_tensor_update, {}, {}, {x, TensorType{Shape({}), DType::f32}}, nullptr};
  sgd.attrs = {{AttrName::kind, AttrValue(int64_t{0})},
               {AttrName::nesterov, AttrValue(int64_t{0})},
               {AttrName::amsgrad, AttrValue(int64_t{0})},
               {AttrName::maximize, AttrValue(int64_t{0})},
               {AttrName::grad_norm_type, AttrValue(2.0)},
               {AttrName::max_grad_norm, AttrValue(1.0)},
               {AttrName::operand_segments, AttrValue(IntList{1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})},
               {AttrName::result_segments, AttrValue(IntList{1, 0, 0, 0, 1})}};
  const TileProgram o = lowered(sgd, {x, x, f64});
  check_program(o);
  EXPECT_THAT(nki_source(o), HasSubstr("nl.sqrt"));
}

// Bool/int64 values (uint8 tiles, int32 words), where as a select, randn's
// second Philox word and cos, gelu.
TEST(NeuronNkiSource, IntegerSelectRandnAndGeluAreValidPython) {
  const TensorType i{Shape({300}), DType::i64}, b{Shape({300}), DType::boolean},
      f{Shape({300}), DType::f32};
  const TileProgram ne = lowered(GraphNode{OpKind::ne, {}, {ValueRef{0, 0}, ValueRef{1, 0}}, {b},
                                           nullptr},
                                 {i, i});
  check_program(ne);
  EXPECT_THAT(nki_source(ne), HasSubstr("op=nl.not_equal"));
  EXPECT_THAT(nki_source(ne), HasSubstr("nl.uint8"));
  const TileProgram where = lowered(
      GraphNode{OpKind::where, {}, {ValueRef{0, 0}, ValueRef{1, 0}, ValueRef{2, 0}}, {f}, nullptr},
      {b, f, f});
  check_program(where);
  EXPECT_THAT(nki_source(where), HasSubstr("def mstep_select("));
  GraphNode randn{OpKind::randn, {}, {ValueRef{0, 0}}, {f}, nullptr};
  randn.attrs.push_back({AttrName::offset, AttrValue(int64_t{0})});
  const TileProgram r = lowered(randn, {TensorType{Shape({2}), DType::i64}});
  check_program(r);
  EXPECT_THAT(nki_source(r), HasSubstr("word=1)"));
  EXPECT_THAT(nki_source(r), HasSubstr("op=nl.cos"));
  GraphNode gelu{OpKind::gelu, {}, {ValueRef{0, 0}}, {f}, nullptr};
  gelu.attrs.push_back({AttrName::approximate, AttrValue(int64_t{0})});
  const TileProgram g = lowered(gelu, {f});
  check_program(g);
  EXPECT_THAT(nki_source(g), HasSubstr("op=nl.gelu"));
}

TEST(NeuronNkiSource, MatmulIsValidPython) {
  const TileProgram p = tiled_matmul_program({200, 300, 600, DType::bf16, DType::f32});
  check_program(p);
  const std::string src = nki_source(p);
  EXPECT_THAT(src, HasSubstr("nisa.nc_matmul(dst=ps_psum0[0:128, 0:512], stationary="));
  EXPECT_THAT(src, HasSubstr("accumulate=True"));
}

TEST(NeuronNkiSource, AttentionIsValidPython) {
  AttentionShape s;
  s.batch = 2;
  s.q_len = 300;
  s.kv_len = 700;
  s.head_dim = s.value_dim = 128;
  s.causal = true;
  s.save_stats = true;
  check_program(attention_forward_program(s));
  check_program(attention_backward_program(s));
  s.dropout = true; // the draws (mstep_philox_uniform) in both programs
  s.dropout_p = 0.1;
  s.dropout_offset = 12;
  check_program(attention_forward_program(s));
  check_program(attention_backward_program(s));
}

// The golden attention kernel: one head, 200 query rows (a full and a
// 72-row Q tile), 160 keys (one chunk crossing the diagonal of both
// tiles; the first tile's ends at its last row, key 127), head dim 32,
// bf16, causal. Any change to the generated source
// (the program or its NKI form) shows here; update the file only after
// reading the diff (the failure message says how).
TEST(NeuronNkiSource, AttentionGolden) {
  AttentionShape s;
  s.q_len = 200;
  s.kv_len = 160;
  s.head_dim = s.value_dim = 32;
  s.scale = 0.125f;
  s.causal = true;
  const TileProgram p = attention_forward_program(s);
  const std::string src = nki_source(p);
  const std::filesystem::path golden =
      std::filesystem::path(MSTEP_NEURON_GOLDEN_DIR) / "attention_fwd_causal.py";
  const std::filesystem::path fresh = scratch_dir() / "attention_fwd_causal.py";
  std::ofstream(fresh) << src;
  ASSERT_TRUE(std::filesystem::exists(golden))
      << golden << " missing; the generated one is " << fresh;
  EXPECT_TRUE(read(golden) == src)
      << "the attention kernel's NKI source differs from " << golden << ": diff " << golden << " "
      << fresh << " (cp the new one over it if the change is intended)";
  expect_valid_python(golden.string());
}

TEST(NeuronNkiSource, UnwritableDumpDirSaysSo) {
  const std::filesystem::path file = scratch_dir() / "a_file";
  std::ofstream(file) << "x";
  absl::StatusOr<std::string> path =
      write_nki_source((file / "sub").string(), tiled_matmul_program({128, 128, 128}));
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("neuron NKI dump: cannot create"));
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("MSTEP_DUMP_DIR"));
}

} // namespace
} // namespace mstep::neuron
