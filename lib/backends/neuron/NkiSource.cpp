// nki_source: declarations, then one NKI statement per tile instruction.
#include "lib/backends/neuron/NkiSource.h"

#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace mstep::neuron {

namespace {

/// A Python identifier from `name` (keywords and clashes get a suffix).
std::string identifier(absl::string_view name, std::set<std::string>& taken) {
  static const std::set<std::string> kKeywords = {
      "and",      "as",     "assert", "async",  "await",  "break",  "class",   "continue",
      "def",      "del",    "elif",   "else",   "except", "False",  "finally", "for",
      "from",     "global", "if",     "import", "in",     "is",     "lambda",  "None",
      "nonlocal", "not",    "or",     "pass",   "raise",  "return", "True",    "try",
      "while",    "with",   "yield",  "math",   "nki",    "nisa",   "nl"};
  std::string id;
  for (char c : name) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "t_" + id;
  if (kKeywords.count(id) || id == "mstep_philox_uniform" || id == "mstep_select")
    id += "_"; // the stubs
  std::string unique = id;
  for (int k = 1; taken.count(unique); ++k) unique = absl::StrCat(id, "_", k);
  taken.insert(unique);
  return unique;
}

std::string py_float(double v) {
  if (std::isnan(v)) return "math.nan";
  if (std::isinf(v)) return v < 0 ? "-math.inf" : "math.inf";
  std::string s = absl::StrFormat("%.9g", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string nl_dtype(DType d) {
  switch (d) {
  case DType::bf16:
    return "nl.bfloat16";
  case DType::f16:
    return "nl.float16";
  case DType::i32:
    return "nl.int32";
  case DType::boolean:
    return "nl.uint8";
  default:
    return "nl.float32";
  }
}

std::string nl_alu(AluOp op) {
  switch (op) {
  case AluOp::add:
    return "nl.add";
  case AluOp::subtract:
    return "nl.subtract";
  case AluOp::multiply:
    return "nl.multiply";
  case AluOp::max:
    return "nl.maximum";
  case AluOp::min:
    return "nl.minimum";
  case AluOp::divide:
    return "nl.divide";
  case AluOp::is_ge:
    return "nl.greater_equal";
  case AluOp::is_equal:
    return "nl.equal";
  case AluOp::not_equal:
    return "nl.not_equal";
  }
  return "?";
}

std::string nl_activation(ActivationFunction f) {
  switch (f) {
  case ActivationFunction::identity:
    return "nl.copy";
  case ActivationFunction::exp:
    return "nl.exp";
  case ActivationFunction::tanh:
    return "nl.tanh";
  case ActivationFunction::relu:
    return "nl.relu";
  case ActivationFunction::sigmoid:
    return "nl.sigmoid";
  case ActivationFunction::square:
    return "nl.square";
  case ActivationFunction::rsqrt:
    return "nl.rsqrt";
  case ActivationFunction::log:
    return "nl.log";
  case ActivationFunction::sqrt:
    return "nl.sqrt";
  case ActivationFunction::erf:
    return "nl.erf";
  case ActivationFunction::gelu:
    return "nl.gelu";
  case ActivationFunction::gelu_tanh:
    return "nl.gelu_apprx_tanh";
  case ActivationFunction::cos:
    return "nl.cos";
  }
  return "?";
}

std::string nisa_engine(Engine e) {
  switch (e) {
  case Engine::vector:
    return "nisa.engine.vector";
  case Engine::scalar:
    return "nisa.engine.scalar";
  case Engine::gpsimd:
    return "nisa.engine.gpsimd";
  default:
    return "nisa.engine.unknown";
  }
}

class Writer {
public:
  explicit Writer(const TileProgram& p) : p_(p) {
    std::set<std::string> taken;
    for (const HbmTensor& t : p.hbm) hbm_names_.push_back(identifier(t.name, taken));
    // Each allocation is declared in the dtype of its first access.
    alloc_dtype_.assign(p.allocations.size(), DType::f32);
    std::vector<bool> seen(p.allocations.size(), false);
    auto note = [&](const AccessPattern& ap) {
      if (ap.kind == BufferKind::hbm || ap.buffer < 0 ||
          ap.buffer >= static_cast<int32_t>(p.allocations.size()) || seen[ap.buffer])
        return;
      seen[ap.buffer] = true;
      alloc_dtype_[ap.buffer] = ap.dtype;
    };
    for (const Instruction& inst : p.instructions) {
      note(inst.dst);
      for (const AccessPattern& s : inst.srcs) note(s);
      if (inst.bias) note(*inst.bias);
      if (inst.accum) note(*inst.accum);
    }
    for (const Allocation& a : p.allocations)
      alloc_names_.push_back(
          identifier(absl::StrCat(a.kind == BufferKind::psum ? "ps_" : "sb_", a.name), taken));
    kernel_name_ = identifier(p.name, taken);
  }

  std::string source() const;

private:
  int64_t row_elements(int32_t alloc, DType d) const {
    return std::max<int64_t>(1, p_.allocations[alloc].bytes_per_partition /
                                    static_cast<int64_t>(element_size(d)));
  }
  std::string pattern(const AccessPattern& ap, int64_t partition_step) const {
    std::vector<std::string> pairs = {absl::StrCat("[", partition_step, ", ", ap.partitions, "]")};
    for (const FreeDim& d : ap.dims)
      pairs.push_back(absl::StrCat("[", d.stride, ", ", d.size, "]"));
    return absl::StrCat("[", absl::StrJoin(pairs, ", "), "]");
  }
  std::string operand(const AccessPattern& ap) const;
  std::string statement(const Instruction& inst) const;

  const TileProgram& p_;
  std::vector<std::string> hbm_names_, alloc_names_;
  std::vector<DType> alloc_dtype_;
  std::string kernel_name_;
};

std::string Writer::operand(const AccessPattern& ap) const {
  if (ap.kind == BufferKind::hbm)
    return absl::StrCat(hbm_names_[ap.buffer], ".ap(pattern=", pattern(ap, ap.partition_stride),
                        ", offset=", ap.offset, ")");
  std::string base = alloc_names_[ap.buffer];
  const bool same_dtype = ap.dtype == alloc_dtype_[ap.buffer];
  if (same_dtype && ap.dims.size() == 1 && ap.dims[0].stride == 1)
    return absl::StrCat(base, "[", ap.start_partition, ":", ap.start_partition + ap.partitions,
                        ", ", ap.offset, ":", ap.offset + ap.dims[0].size, "]");
  if (!same_dtype) absl::StrAppend(&base, ".view(", nl_dtype(ap.dtype), ")");
  const int64_t row = row_elements(ap.buffer, ap.dtype);
  return absl::StrCat(base, ".ap(pattern=", pattern(ap, row),
                      ", offset=", ap.start_partition * row + ap.offset, ")");
}

std::string Writer::statement(const Instruction& inst) const {
  const std::string dst = operand(inst.dst);
  auto src = [&](size_t k) { return operand(inst.srcs[k]); };
  auto affine = [&]() {
    std::vector<std::string> pairs;
    for (size_t d = 0; d < inst.dst.dims.size(); ++d)
      pairs.push_back(absl::StrCat("[", d < inst.affine.steps.size() ? inst.affine.steps[d] : 0,
                                   ", ", inst.dst.dims[d].size, "]"));
    return absl::StrCat("pattern=[", absl::StrJoin(pairs, ", "), "], offset=", inst.affine.offset,
                        ", channel_multiplier=", inst.affine.channel_multiplier);
  };
  switch (inst.opcode) {
  case Opcode::dma_copy:
    return absl::StrCat("nisa.dma_copy(dst=", dst, ", src=", src(0), ")");
  case Opcode::dma_indirect: {
    // The HBM side's rows come from the index tile (vector_offset).
    auto indirect = [&](const AccessPattern& ap) {
      std::string s = operand(ap);
      s.insert(s.size() - 1, absl::StrCat(", vector_offset=", src(1), ", indirect_dim=0"));
      return s;
    };
    const bool gathers = inst.srcs[0].kind == BufferKind::hbm;
    return absl::StrCat("nisa.dma_copy(dst=", gathers ? dst : indirect(inst.dst),
                        ", src=", gathers ? indirect(inst.srcs[0]) : src(0),
                        inst.accumulate ? ", dst_rmw_op=nl.add" : "", ")");
  }
  case Opcode::philox_uniform:
    return absl::StrCat("mstep_philox_uniform(dst=", dst, ", state=", src(0), ", ", affine(),
                        inst.philox_word != 0 ? absl::StrCat(", word=", inst.philox_word) : "", ")");
  case Opcode::nc_matmul:
    return absl::StrCat("nisa.nc_matmul(dst=", dst, ", stationary=", src(0), ", moving=", src(1),
                        ", accumulate=", inst.accumulate ? "True" : "False", ")");
  case Opcode::tensor_tensor:
    return absl::StrCat("nisa.tensor_tensor(dst=", dst, ", data1=", src(0), ", data2=", src(1),
                        ", op=", nl_alu(inst.alu), ", engine=", nisa_engine(inst.engine), ")");
  case Opcode::select:
    return absl::StrCat("mstep_select(dst=", dst, ", pred=", src(0), ", on_true=", src(1),
                        ", on_false=", src(2), ")");
  case Opcode::tensor_scalar: {
    std::string s = absl::StrCat("nisa.tensor_scalar(dst=", dst, ", data=", src(0),
                                 ", op0=", nl_alu(inst.alu), ", operand0=", py_float(inst.scalar));
    if (inst.reverse) s += ", reverse0=True";
    if (inst.alu2)
      absl::StrAppend(&s, ", op1=", nl_alu(*inst.alu2), ", operand1=", py_float(inst.scalar2));
    return absl::StrCat(s, ", engine=", nisa_engine(inst.engine), ")");
  }
  case Opcode::activation: {
    std::string s = absl::StrCat(
        "nisa.activation(dst=", dst, ", op=", nl_activation(inst.function), ", data=", src(0),
        ", bias=", inst.bias ? operand(*inst.bias) : py_float(inst.bias_value),
        ", scale=", py_float(inst.scale));
    if (inst.accum)
      absl::StrAppend(&s, ", reduce_op=nl.add, reduce_res=", operand(*inst.accum),
                      ", reduce_cmd=nisa.reduce_cmd.reset_reduce");
    return s + ")";
  }
  case Opcode::tensor_copy:
    return absl::StrCat("nisa.tensor_copy(dst=", dst, ", src=", src(0),
                        ", engine=", nisa_engine(inst.engine), ")");
  case Opcode::tensor_reduce:
    return absl::StrCat("nisa.tensor_reduce(dst=", dst, ", op=", nl_alu(inst.alu),
                        ", data=", src(0), ", axis=(", inst.srcs[0].dims.size(), ",))");
  case Opcode::bn_stats:
    return absl::StrCat("nisa.bn_stats(dst=", dst, ", data=", src(0), ")");
  case Opcode::bn_aggr:
    return absl::StrCat("nisa.bn_aggr(dst=", dst, ", data=", src(0), ")");
  case Opcode::iota:
    return absl::StrCat("nisa.iota(dst=", dst, ", ", affine(), ")");
  case Opcode::affine_select:
    return absl::StrCat("nisa.affine_select(dst=", dst, ", ", affine(), ", on_true_tile=", src(0),
                        ", on_false_value=", py_float(inst.scalar),
                        ", cmp_op=", inst.cmp == CmpOp::equal ? "nl.equal" : "nl.greater_equal",
                        ")");
  }
  return "pass";
}

std::string Writer::source() const {
  std::string out = absl::StrCat(
      "# NKI kernel '", p_.name, "': ", p_.instructions.size(),
      " instructions, written by mstep from its tile\n"
      "# program (lib/backends/neuron, issue 19): one statement per tile instruction, in\n"
      "# program order; HBM tensors are the (flat) arguments, outputs are dst= operands.\n"
      "# Not compiled against the Neuron SDK: NKI 0.2+ style, checked only to be valid\n"
      "# Python. The NKI compiler inserts its own synchronisation; each statement's\n"
      "# comment gives the tile program's semaphore waits (s<id> >= n) and signals.\n"
      "import math\n\n"
      "import nki\n"
      "import nki.isa as nisa\n"
      "import nki.language as nl\n\n\n");
  bool philox = false;
  for (const Instruction& inst : p_.instructions) philox |= inst.opcode == Opcode::philox_uniform;
  if (philox)
    absl::StrAppend(
        &out, "def mstep_philox_uniform(dst, state, pattern, offset, channel_multiplier, word=0):\n"
              "    # A GpSimd custom kernel, not an NKI builtin: dst = Philox4x32-10 uniform\n"
              "    # (word >> 8) * 2**-24 of key state[0:2] and counter state[2:4] + the\n"
              "    # affine expression, as mstep's Philox::uniform (include/mstep/core/Philox.h).\n"
              "    raise NotImplementedError('mstep_philox_uniform: GpSimd custom kernel')\n\n\n");
  bool select = false;
  for (const Instruction& inst : p_.instructions) select |= inst.opcode == Opcode::select;
  if (select)
    absl::StrAppend(&out, "def mstep_select(dst, pred, on_true, on_false):\n"
                          "    # The Vector engine's select (mstep's tile IR): dst = pred ? on_true\n"
                          "    # : on_false, element by element.\n"
                          "    dst[...] = nl.where(pred, on_true, on_false)\n\n\n");
  absl::StrAppend(&out, "@nki.jit\ndef ", kernel_name_, "(", absl::StrJoin(hbm_names_, ", "),
                  "):\n");
  for (size_t t = 0; t < p_.hbm.size(); ++t)
    absl::StrAppend(&out, "    # ", hbm_names_[t], ": HBM ", dtype_name(p_.hbm[t].dtype), " [",
                    p_.hbm[t].elements, "]\n");
  for (size_t a = 0; a < p_.allocations.size(); ++a) {
    const Allocation& al = p_.allocations[a];
    const bool psum = al.kind == BufferKind::psum;
    const std::string live = al.released_at == std::numeric_limits<int64_t>::max()
                                 ? "end"
                                 : absl::StrCat(al.released_at);
    absl::StrAppend(&out, "    ", alloc_names_[a], " = nl.ndarray((nl.par_dim(", kPartitions, "), ",
                    row_elements(static_cast<int32_t>(a), alloc_dtype_[a]),
                    "), dtype=", nl_dtype(alloc_dtype_[a]),
                    ", buffer=", psum ? "nl.psum" : "nl.sbuf", ")  # bytes [", al.byte_offset, ", ",
                    al.byte_offset + al.bytes_per_partition, "), live [", al.allocated_at, ", ",
                    live, ")\n");
  }
  for (size_t i = 0; i < p_.instructions.size(); ++i) {
    const Instruction& inst = p_.instructions[i];
    std::string note = absl::StrCat("#", i, " ", engine_name(inst.engine));
    if (inst.opcode == Opcode::dma_copy || inst.opcode == Opcode::dma_indirect)
      absl::StrAppend(&note, " dma", inst.dma_engine);
    std::vector<std::string> waits, signals;
    for (const SemaphoreWait& w : inst.waits)
      waits.push_back(absl::StrCat("s", w.semaphore, ">=", w.value));
    for (int32_t s : inst.signals) signals.push_back(absl::StrCat("s", s));
    if (!waits.empty()) absl::StrAppend(&note, "; wait ", absl::StrJoin(waits, " "));
    if (!signals.empty()) absl::StrAppend(&note, "; signal ", absl::StrJoin(signals, " "));
    absl::StrAppend(&out, "    ", statement(inst), "  # ", note, "\n");
  }
  if (p_.instructions.empty() && p_.allocations.empty()) absl::StrAppend(&out, "    pass\n");
  return out;
}

} // namespace

std::string nki_source(const TileProgram& program) { return Writer(program).source(); }

absl::StatusOr<std::string> write_nki_source(const std::string& dir, const TileProgram& program) {
  static std::atomic<int> counter{0};
  const std::filesystem::path folder = std::filesystem::path(dir) / "neuron_nki";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("neuron NKI dump: cannot create '",
                                                   folder.string(), "': ", ec.message(),
                                                   "; check MSTEP_DUMP_DIR"));
  std::set<std::string> none;
  const std::filesystem::path file =
      folder / absl::StrCat(identifier(program.name, none), "_", counter++, ".py");
  std::ofstream os(file);
  os << nki_source(program);
  os.close();
  if (!os)
    return absl::InvalidArgumentError(
        absl::StrCat("neuron NKI dump: cannot write '", file.string(), "'; check MSTEP_DUMP_DIR"));
  return file.string();
}

} // namespace mstep::neuron
