// Oracle registrations: softmax, log_softmax, layer_norm, rms_norm, dropout.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

MSTEP_ORACLE_OP("softmax", [](const OracleCase& c) {
  return V{softmax(c.in(0), c.attr_int("dim"))};
});
MSTEP_ORACLE_OP("log_softmax", [](const OracleCase& c) {
  return V{log_softmax(c.in(0), c.attr_int("dim"))};
});
MSTEP_ORACLE_OP("layer_norm", [](const OracleCase& c) {
  // Inputs: x, then weight and bias when present.
  size_t next = 1;
  Tensor weight = c.attr_int("has_weight", 0) ? c.in(next++) : Tensor();
  Tensor bias = c.attr_int("has_bias", 0) ? c.in(next++) : Tensor();
  return V{layer_norm(c.in(0), c.attr_ints("normalized_shape"), weight, bias,
                      c.attr_double("eps", 1e-5))};
});
MSTEP_ORACLE_OP("rms_norm", [](const OracleCase& c) {
  Tensor weight = c.attr_int("has_weight", 0) ? c.in(1) : Tensor();
  std::optional<double> eps;
  if (c.has("eps")) eps = c.attr_double("eps");
  return V{rms_norm(c.in(0), c.attr_ints("normalized_shape"), weight, eps)};
});
MSTEP_ORACLE_OP("dropout", [](const OracleCase& c) {
  return V{dropout(c.in(0), c.attr_double("p"), c.attr_int("train") != 0)};
});

}  // namespace
}  // namespace mstep::oracle
