// Oracle registration: the NMS custom op of examples/custom_ops
// (cases/nms.py). Run on ref and, as oracle_cpu, on the cpu backend: both
// kernels' keep masks are compared with PyTorch's exactly.
#include "examples/custom_ops/nms/Nms.h"
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

MSTEP_ORACLE_OP("nms", [](const OracleCase& c) {
  return std::vector<Tensor>{
      examples::nms_keep_mask(c.in(0), c.in(1), c.attr_double("iou_threshold"))};
});

} // namespace
} // namespace mstep::oracle
