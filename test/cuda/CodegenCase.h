// The on-disk form of one compiled cuda step for the GPU check: written at
// build time by cuda_codegen_cases (which links the compile half and MLIR),
// read on the GPU machine by cuda_codegen_gpu_test (runtime half only, no
// MLIR). One folder per case:
//
//   case.txt             the launch list, one record a line (below)
//   k<i>.ptx             kernel i's PTX (sm_80 target; the JIT's input)
//   k<i>.<arch>.cubin    kernel i's cubin for <arch> (sm_80, sm_90)
//   v<id>.in.f32         input value <id>'s data (raw little-endian bytes:
//                        f32, or the element size its value line gives)
//   v<id>.expected.f32   output value <id>'s expected result (f32)
//   v<id>.bound.f32      the absolute error allowed on each element (f32)
//
// case.txt (tokens separated by spaces; '#' starts a comment line):
//   value <id> <elements> [<bytes>]        every plan value, in id order: f32,
//                                          or elements of <bytes> bytes (an
//                                          i64 index, an f64 scalar, a bool);
//                                          outputs are f32
//   input <id>                             a step input (has v<id>.in.f32)
//   output <id>                            a step output (expected + bound)
//   kernel <i> <name> <gx> <gy> <gz> <bx> <by> <bz> <arch>...
//   launch <kernel> <value id>...          one device pointer per argument
//   matmul <m> <n> <k> <batch> <a stride> <b stride> <c stride> <a> <b> <c>
//                                          a cuBLASLt step (CublasLtMatmul, f32,
//                                          see epilogue): `batch`
//                                          row-major [m, k] x [k, n] products,
//                                          operand i at its value + i * stride
//                                          elements; a, b, c are value ids
//   epilogue <ta> <tb> <activation> <bias> the previous matmul's transposes (0/1:
//                                          A stored [k, m], B [n, k]), activation
//                                          (0 none, 1 relu, 2 gelu: MatmulEpilogue)
//                                          and bias value id (-1: none), its
//                                          cuBLASLt epilogue
//   bandwidth                              report this case's bandwidth
//   fill <id> <value>                      input <id> is <value> everywhere (no
//                                          file: the HBM-sized case, whose
//                                          files would not fit the bundle)
//   expect <id> <value>                    output <id> must be exactly <value>
//                                          everywhere (no expected or bound file)
// Launches and matmuls run in file order on one stream.
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mstep::cuda::testing {

struct CodegenCaseKernel {
  std::string name;
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  std::vector<std::string> archs; ///< the cubins there are
};

/// A kernel launch, or (matmul) a cuBLASLt step with args {a, b, c}.
struct CodegenCaseLaunch {
  int kernel = 0;
  std::vector<int> args;
  bool matmul = false;
  int64_t m = 0, n = 0, k = 0, batch = 1, a_stride = 0, b_stride = 0, c_stride = 0;
  bool transpose_a = false, transpose_b = false;
  int activation = 0;  ///< MatmulEpilogue's value
  int bias = -1;       ///< the bias's value id
};

struct CodegenCase {
  std::vector<int64_t> elements; ///< per value id
  std::vector<int> element_bytes; ///< per value id: 4 (f32) unless told
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<CodegenCaseKernel> kernels;
  std::vector<CodegenCaseLaunch> launches;
  bool bandwidth = false;
  std::vector<std::pair<int, float>> fills;   ///< input id, its every element
  std::vector<std::pair<int, float>> expects; ///< output id, its every element
};

/// The fill or expectation of value `id` in `list`, or nullptr.
inline const float* codegen_case_constant(const std::vector<std::pair<int, float>>& list, int id) {
  for (const auto& [value, constant] : list)
    if (value == id) return &constant;
  return nullptr;
}

inline std::string codegen_case_text(const CodegenCase& c) {
  std::ostringstream out;
  out << "# mstep cuda codegen case (test/cuda/CodegenCase.h)\n";
  for (size_t id = 0; id < c.elements.size(); ++id) {
    out << "value " << id << " " << c.elements[id];
    if (id < c.element_bytes.size() && c.element_bytes[id] != 4) out << " " << c.element_bytes[id];
    out << "\n";
  }
  for (int id : c.inputs) out << "input " << id << "\n";
  for (int id : c.outputs) out << "output " << id << "\n";
  for (size_t i = 0; i < c.kernels.size(); ++i) {
    const CodegenCaseKernel& k = c.kernels[i];
    out << "kernel " << i << " " << k.name;
    for (unsigned g : k.grid) out << " " << g;
    for (unsigned b : k.block) out << " " << b;
    for (const std::string& arch : k.archs) out << " " << arch;
    out << "\n";
  }
  for (const CodegenCaseLaunch& l : c.launches) {
    if (l.matmul) {
      out << "matmul " << l.m << " " << l.n << " " << l.k << " " << l.batch << " " << l.a_stride
          << " " << l.b_stride << " " << l.c_stride;
      for (int a : l.args) out << " " << a;
      out << "\n";
      if (l.transpose_a || l.transpose_b || l.activation != 0 || l.bias >= 0)
        out << "epilogue " << l.transpose_a << " " << l.transpose_b << " " << l.activation << " "
            << l.bias << "\n";
      continue;
    }
    out << "launch " << l.kernel;
    for (int a : l.args) out << " " << a;
    out << "\n";
  }
  if (c.bandwidth) out << "bandwidth\n";
  out.precision(9);  // round-trips an f32
  for (const auto& [id, value] : c.fills) out << "fill " << id << " " << value << "\n";
  for (const auto& [id, value] : c.expects) out << "expect " << id << " " << value << "\n";
  return out.str();
}

/// Parses case.txt; on a malformed line returns false and says which in `error`.
inline bool parse_codegen_case(const std::string& text, CodegenCase& c, std::string& error) {
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    bool ok = true;
    if (tag == "value") {
      size_t id = 0;
      int64_t n = 0;
      ok = static_cast<bool>(in >> id >> n) && id == c.elements.size() && n > 0;
      int bytes = 4;
      if (ok && !(in >> bytes)) bytes = 4;
      ok = ok && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8);
      if (ok) {
        c.elements.push_back(n);
        c.element_bytes.push_back(bytes);
      }
    } else if (tag == "input" || tag == "output") {
      int id = -1;
      ok = static_cast<bool>(in >> id) && id >= 0 && id < static_cast<int>(c.elements.size());
      if (ok) (tag == "input" ? c.inputs : c.outputs).push_back(id);
    } else if (tag == "kernel") {
      size_t i = 0;
      CodegenCaseKernel k;
      ok = static_cast<bool>(in >> i >> k.name >> k.grid[0] >> k.grid[1] >> k.grid[2] >>
                             k.block[0] >> k.block[1] >> k.block[2]) &&
           i == c.kernels.size();
      for (std::string arch; ok && in >> arch;) k.archs.push_back(arch);
      if (ok) c.kernels.push_back(k);
    } else if (tag == "launch") {
      CodegenCaseLaunch l;
      ok = static_cast<bool>(in >> l.kernel) && l.kernel >= 0 &&
           l.kernel < static_cast<int>(c.kernels.size());
      for (int a; ok && in >> a;) {
        ok = a >= 0 && a < static_cast<int>(c.elements.size());
        l.args.push_back(a);
      }
      if (ok) c.launches.push_back(l);
    } else if (tag == "matmul") {
      CodegenCaseLaunch l;
      l.matmul = true;
      ok = static_cast<bool>(in >> l.m >> l.n >> l.k >> l.batch >> l.a_stride >> l.b_stride >>
                             l.c_stride) &&
           l.m > 0 && l.n > 0 && l.k > 0 && l.batch > 0;
      for (int a; ok && in >> a;) {
        ok = a >= 0 && a < static_cast<int>(c.elements.size());
        l.args.push_back(a);
      }
      ok = ok && l.args.size() == 3;
      if (ok) c.launches.push_back(l);
    } else if (tag == "epilogue") {
      int ta = 0, tb = 0;
      CodegenCaseLaunch* m = c.launches.empty() ? nullptr : &c.launches.back();
      ok = m != nullptr && m->matmul && static_cast<bool>(in >> ta >> tb >> m->activation >> m->bias) &&
           (ta == 0 || ta == 1) && (tb == 0 || tb == 1) && m->activation >= 0 &&
           m->activation <= 2 && m->bias >= -1 && m->bias < static_cast<int>(c.elements.size());
      if (ok) m->transpose_a = ta, m->transpose_b = tb;
    } else if (tag == "bandwidth") {
      c.bandwidth = true;
    } else if (tag == "fill" || tag == "expect") {
      int id = -1;
      float value = 0;
      ok = static_cast<bool>(in >> id >> value) && id >= 0 &&
           id < static_cast<int>(c.elements.size());
      if (ok) (tag == "fill" ? c.fills : c.expects).push_back({id, value});
    } else {
      ok = false;
    }
    if (!ok) {
      error = "line " + std::to_string(number) + " is malformed: '" + line + "'";
      return false;
    }
  }
  if (c.launches.empty() || c.outputs.empty()) {
    error = "no launch or no output";
    return false;
  }
  for (int id : c.outputs)
    if (c.element_bytes[id] != 4) {
      error = "output " + std::to_string(id) + " is not f32";
      return false;
    }
  return true;
}

inline bool read_file_bytes(const std::string& path, std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  bytes = s.str();
  return true;
}

inline bool write_file_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  return static_cast<bool>(out);
}

} // namespace mstep::cuda::testing
