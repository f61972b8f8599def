#include <gtest/gtest.h>
#include "mstep/mstep.h"

using namespace mstep;

TEST(Smoke, AddMul) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = from_vector(std::vector<float>{4, 5, 6}, {3});
  Tensor c = (a + b) * 2.0;
  EXPECT_TRUE(c.is_pending());
  mark_step();
  EXPECT_FALSE(c.is_pending());
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{10, 14, 18}));
}
