// Saves a captured step of two segments for mstep-aot's test
// (mstep_aot_test.sh): g = x w, a mark_step, then w <- 0.5 w + 0.1 g, on
// ref. mstep-aot merges the segments into one function: the second
// segment reads the first one's g, and w is updated in place.
//
//   two_segment_worker step.mstep      (run with MSTEP_FUSE=0)
#include <cstdio>
#include <vector>

#include "mstep/mstep.h"

using namespace mstep;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: two_segment_worker step.mstep\n");
    return 2;
  }
  set_default_device(Device{DeviceType::ref, 0});
  std::vector<float> xv(16), wv(16);
  for (int i = 0; i < 16; ++i) {
    xv[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
    wv[i] = 0.125f * static_cast<float>((3 * i) % 7) - 0.25f;
  }
  Tensor x = from_vector(xv, {4, 4}), w = from_vector(wv, {4, 4});
  Tensor g;
  Graph graph;
  graph.capture_begin();
  g = matmul(x, w);
  mark_step();
  w.copy_(w * 0.5 + g * 0.1);
  mark_step();
  graph.capture_end();
  graph.save(argv[1], {{"x", x}, {"w", w}, {"g", g}});
  return graph.num_segments() == 2 ? 0 : 1;
}
