// consumer.cpp: a program built against an installed mstep (find_package or
// pkg-config): two tensors on the default device, a lazy add cut by
// mark_step(), the result checked on the host. Exits nonzero on a mismatch.
#include <cstdio>
#include <vector>

#include "mstep/mstep.h"

int main() {
  using namespace mstep;
  const std::vector<float> a_data = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b_data = {10, 20, 30, 40, 50, 60};
  Tensor a = from_vector(a_data, {2, 3});
  Tensor b = from_vector(b_data, {2, 3});
  Tensor c = a + b;
  mark_step();
  const std::vector<float> got = c.to_vector<float>();
  if (got.size() != a_data.size()) {
    std::fprintf(stderr, "consumer: a + b has %zu elements, expected %zu\n", got.size(),
                 a_data.size());
    return 1;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != a_data[i] + b_data[i]) {
      std::fprintf(stderr, "consumer: (a + b)[%zu] = %g, expected %g\n", i, got[i],
                   a_data[i] + b_data[i]);
      return 1;
    }
  }
  std::printf("consumer: a + b on %s matches (%zu elements)\n",
              default_device().to_string().c_str(), got.size());
  return 0;
}
