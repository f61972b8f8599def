// Oracle registrations: the scatter ops (scatter_add, index_add,
// slice_scatter). The attr "transpose0" (two dims) transposes input 0
// first, so the op sees a permuted input.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

Tensor input(const OracleCase& c, size_t i) {
  Tensor t = c.in(i);
  if (i == 0 && c.has("transpose0")) {
    std::vector<int64_t> d = c.attr_ints("transpose0");
    t = transpose(t, d.at(0), d.at(1));
  }
  return t;
}

MSTEP_ORACLE_OP("scatter_add", [](const OracleCase& c) {
  return V{scatter_add(input(c, 0), c.attr_int("dim"), input(c, 1), input(c, 2))};
});
MSTEP_ORACLE_OP("index_add", [](const OracleCase& c) {
  return V{index_add(input(c, 0), c.attr_int("dim"), input(c, 1), input(c, 2))};
});
MSTEP_ORACLE_OP("slice_scatter", [](const OracleCase& c) {
  return V{slice_scatter(input(c, 0), input(c, 1), c.attr_int("dim", 0), c.attr_int("start", 0),
                         c.attr_int("end", kSliceEnd), c.attr_int("step", 1))};
});

}  // namespace
}  // namespace mstep::oracle
