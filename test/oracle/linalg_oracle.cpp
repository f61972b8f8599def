// Oracle registrations: matmul, bmm, linear, conv2d and pooling. Spatial
// parameters arrive as int-list attrs; an absent attr takes the op's
// default, and the third input (when present) is the bias.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

std::vector<int64_t> ints_or(const OracleCase& c, const std::string& key,
                             std::vector<int64_t> fallback) {
  return c.has(key) ? c.attr_ints(key) : fallback;
}

Tensor optional_input(const OracleCase& c, size_t i) {
  return c.inputs.size() > i ? c.in(i) : Tensor();
}

MSTEP_ORACLE_OP("matmul", [](const OracleCase& c) {
  return V{matmul(c.in(0), c.in(1))};
});
MSTEP_ORACLE_OP("bmm",
                [](const OracleCase& c) { return V{bmm(c.in(0), c.in(1))}; });
MSTEP_ORACLE_OP("linear", [](const OracleCase& c) {
  return V{linear(c.in(0), c.in(1), optional_input(c, 2))};
});
MSTEP_ORACLE_OP("conv2d", [](const OracleCase& c) {
  return V{conv2d(c.in(0), c.in(1), optional_input(c, 2),
                  ints_or(c, "stride", {1}), ints_or(c, "padding", {0}),
                  ints_or(c, "dilation", {1}), c.attr_int("groups", 1))};
});
MSTEP_ORACLE_OP("max_pool2d", [](const OracleCase& c) {
  return V{max_pool2d(c.in(0), c.attr_ints("kernel"), ints_or(c, "stride", {}),
                      ints_or(c, "padding", {0}), ints_or(c, "dilation", {1}),
                      c.attr_int("ceil_mode", 0) != 0)};
});
MSTEP_ORACLE_OP("avg_pool2d", [](const OracleCase& c) {
  return V{avg_pool2d(c.in(0), c.attr_ints("kernel"), ints_or(c, "stride", {}),
                      ints_or(c, "padding", {0}),
                      c.attr_int("ceil_mode", 0) != 0,
                      c.attr_int("count_include_pad", 1) != 0)};
});

}  // namespace
}  // namespace mstep::oracle
