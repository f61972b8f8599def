// What an xla step calls out for: the xla unit tests record each step's
// graph (RecordSteps) and compile the last one for xla to list the ops its
// step function hands to cpu kernels.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::testing {

/// Records the graph of every step while it lives.
struct RecordSteps {
  RecordSteps() { Tracer::get().set_record_steps(true); }
  ~RecordSteps() { Tracer::get().set_record_steps(false); }
};

/// What the last step's graph, compiled for xla, calls out for.
inline std::vector<std::string> callouts_of_last_step() {
  const StepRecord& step = Tracer::get().last_step();
  if (!step.graph) return {"<no step recorded>"};
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {"<compile failed>"};
  auto* xla = dynamic_cast<xla::XlaExecutable*>(compiled->executable.get());
  if (!xla) return {"<not an xla executable>"};
  return xla->callout_names();
}

} // namespace mstep::testing
