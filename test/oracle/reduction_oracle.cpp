// Oracle registrations: reductions.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

std::vector<int64_t> dims_of(const OracleCase& c) {
  return c.has("dims") ? c.attr_ints("dims") : std::vector<int64_t>{};
}
bool keepdim_of(const OracleCase& c) { return c.attr_int("keepdim", 0) != 0; }

#define REDUCTION(op)                                               \
  MSTEP_ORACLE_OP(#op, [](const OracleCase& c) {                    \
    return V{op(c.in(0), dims_of(c), keepdim_of(c))};               \
  })
REDUCTION(sum);
REDUCTION(mean);
REDUCTION(max);
REDUCTION(min);
REDUCTION(logsumexp);
#undef REDUCTION

MSTEP_ORACLE_OP("argmax", [](const OracleCase& c) {
  std::optional<int64_t> dim;
  if (c.has("dim")) dim = c.attr_int("dim");
  return V{argmax(c.in(0), dim, keepdim_of(c))};
});
MSTEP_ORACLE_OP("var", [](const OracleCase& c) {
  return V{var(c.in(0), dims_of(c), c.attr_int("correction", 1), keepdim_of(c))};
});

}  // namespace
}  // namespace mstep::oracle
