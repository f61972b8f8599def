// StableHLO in against a real client: runs a module JAX lowered
// (jax_stablehlo_programs.py) with mstep::import_stablehlo on one device
// and compares every result of every step with JAX's, within the
// tolerance the script wrote for it ("tol.result<i>"; the script says how
// it is derived). Between steps, each input the module donates
// (tf.aliasing_output) takes the result it is donated to, as JAX's
// training loop does.
//
//   stablehlo_import_worker DIR PROGRAM DEVICE
//
// reads DIR/PROGRAM.stablehlo.mlir (as_text(), the pretty form) and
// DIR/PROGRAM.generic.mlir (the generic form), runs each, and compares
// with .expected.safetensors given .inputs.safetensors; exit 0 when every
// result of both matches.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mstep/api/StableHloImport.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace {

using namespace mstep;

int fail(const std::string& message) {
  std::fprintf(stderr, "stablehlo_import_worker: FAILED: %s\n", message.c_str());
  return 1;
}

Tensor tensor_of(const HostTensor& h) { return from_buffer(h.bytes.data(), h.type()); }

int run(const std::string& dir, const std::string& program, const std::string& form,
        const std::string& device) {
  const std::string base = dir + "/" + program;
  StableHloFunction fn = import_stablehlo(base + "." + form + ".mlir");
  absl::StatusOr<SafetensorsContents> inputs = read_safetensors(base + ".inputs.safetensors");
  absl::StatusOr<SafetensorsContents> expected = read_safetensors(base + ".expected.safetensors");
  if (!inputs.ok()) return fail(std::string(inputs.status().message()));
  if (!expected.ok()) return fail(std::string(expected.status().message()));
  std::vector<Tensor> args;
  for (size_t i = 0; i < fn.input_types().size(); ++i)
    args.push_back(tensor_of(inputs->tensors.at("arg" + std::to_string(i))));
  const int steps = std::stoi(expected->metadata.at("steps"));
  bool ok = true;
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> results = fn(args);
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string key = "step" + std::to_string(s) + ".result" + std::to_string(i);
      const HostTensor& want = expected->tensors.at(key);
      const double tol = std::stod(expected->metadata.at("tol.result" + std::to_string(i)));
      if (results[i].type() != want.type())
        return fail(key + ": mstep gives " + results[i].type().to_string() + ", JAX " +
                    want.type().to_string());
      const std::vector<float> got = results[i].to_vector<float>();
      std::vector<float> ref(got.size());
      std::memcpy(ref.data(), want.bytes.data(), want.bytes.size());
      double worst = 0;
      for (size_t k = 0; k < got.size(); ++k)
        worst = std::max(worst, std::isnan(got[k]) ? INFINITY : std::fabs(double{got[k]} - ref[k]));
      const bool pass = worst <= tol;
      ok = ok && pass;
      std::printf("%s (%s) %s on %s: %s max |mstep - jax| = %.3g (tolerance %.3g) %s\n",
                  program.c_str(), form.c_str(), key.c_str(), device.c_str(),
                  fn.output_names()[i].c_str(), worst, tol, pass ? "ok" : "MISMATCH");
    }
    for (size_t i = 0; i < args.size(); ++i)
      if (fn.donated_to()[i] >= 0) args[i] = results[fn.donated_to()[i]];
  }
  return ok ? 0
            : fail(program + " (" + form + ") on " + device +
                   " differs from JAX beyond the tolerance");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: stablehlo_import_worker DIR PROGRAM DEVICE");
  try {
    absl::StatusOr<DeviceType> type = BackendRegistry::device_type(argv[3]);
    if (!type.ok()) return fail(std::string(type.status().message()));
    set_default_device(Device{*type, 0});
    int failed = 0;
    for (const char* form : {"stablehlo", "generic"})
      failed |= run(argv[1], argv[2], form, argv[3]);
    return failed;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
