// Oracle registration: a custom op with a scalar form (cases/
// custom_scalar_form.py). On ref its kernel runs; on the cpu backend
// (oracle_cpu) the fused scalar form does: both against PyTorch.
#include "test/custom_ops/ScaledElu.h"
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

MSTEP_ORACLE_OP("custom_scaled_elu", [](const OracleCase& c) {
  return std::vector<Tensor>{
      test_ops::scaled_elu(c.in(0), c.attr_double("alpha"), c.attr_double("scale"))};
});

} // namespace
} // namespace mstep::oracle
