// Oracle registrations: losses.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

Reduction reduction_of(const OracleCase& c) {
  const std::string r = c.attr_str("reduction", "mean");
  if (r == "none") return Reduction::none;
  if (r == "sum") return Reduction::sum;
  return Reduction::mean;
}

MSTEP_ORACLE_OP("nll_loss", [](const OracleCase& c) {
  return V{nll_loss(c.in(0), c.in(1), reduction_of(c), c.attr_int("ignore_index", -100))};
});
MSTEP_ORACLE_OP("cross_entropy", [](const OracleCase& c) {
  return V{cross_entropy(c.in(0), c.in(1), reduction_of(c), c.attr_int("ignore_index", -100),
                         c.attr_double("label_smoothing", 0.0))};
});
MSTEP_ORACLE_OP("mse_loss", [](const OracleCase& c) {
  return V{mse_loss(c.in(0), c.in(1), reduction_of(c))};
});
MSTEP_ORACLE_OP("binary_cross_entropy_with_logits", [](const OracleCase& c) {
  return V{binary_cross_entropy_with_logits(c.in(0), c.in(1), reduction_of(c))};
});

}  // namespace
}  // namespace mstep::oracle
