// execution_order: engine queues merged under semaphore waits.
#include "lib/backends/neuron/ExecutionOrder.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mstep::neuron {

absl::StatusOr<std::vector<int64_t>> execution_order(const TileProgram& program) {
  const auto queues = program.engine_queues();
  std::array<size_t, kNumEngines> head{};
  std::vector<int32_t> count(program.num_semaphores, 0);
  std::vector<int64_t> order;
  order.reserve(program.instructions.size());
  auto ready = [&](int64_t index) {
    for (const SemaphoreWait& w : program.instructions[index].waits)
      if (w.semaphore < 0 || w.semaphore >= program.num_semaphores || count[w.semaphore] < w.value)
        return false;
    return true;
  };
  while (order.size() < program.instructions.size()) {
    int best = -1;
    for (int e = 0; e < kNumEngines; ++e) {
      if (head[e] == queues[e].size() || !ready(queues[e][head[e]])) continue;
      if (best < 0 || queues[e][head[e]] < queues[best][head[best]]) best = e;
    }
    if (best < 0) {
      std::string blocked;
      for (int e = 0; e < kNumEngines; ++e) {
        if (head[e] == queues[e].size()) continue;
        const int64_t i = queues[e][head[e]];
        for (const SemaphoreWait& w : program.instructions[i].waits) {
          const int32_t have =
              w.semaphore >= 0 && w.semaphore < program.num_semaphores ? count[w.semaphore] : 0;
          if (have < w.value)
            absl::StrAppend(&blocked, blocked.empty() ? "" : "; ",
                            describe_instruction(i, program.instructions[i]),
                            " waits for semaphore ", w.semaphore, " >= ", w.value, " (count ", have,
                            ")");
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "tile program '", program.name, "': rule deadlock: ", blocked,
          "; every engine queue left is blocked: signal the semaphore earlier or wait for less"));
    }
    const int64_t i = queues[best][head[best]++];
    for (int32_t s : program.instructions[i].signals)
      if (s >= 0 && s < program.num_semaphores) ++count[s];
    order.push_back(i);
  }
  return order;
}

} // namespace mstep::neuron
