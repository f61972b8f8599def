// Oracle registration: the GIoU loss custom op of examples/custom_ops
// (cases/giou.py). Run on ref and, as oracle_cpu, on the cpu backend: both
// kernels and both backward kernels are checked against PyTorch.
#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

MSTEP_ORACLE_OP("giou_loss", [](const OracleCase& c) {
  return std::vector<Tensor>{examples::giou_loss(c.in(0), c.in(1), c.attr_str("reduction"))};
});

} // namespace
} // namespace mstep::oracle
