// Oracle registrations: creation and elementwise ops.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

#define UNARY(op) MSTEP_ORACLE_OP(#op, [](const OracleCase& c) { return V{op(c.in(0))}; })
UNARY(neg); UNARY(abs); UNARY(exp); UNARY(log); UNARY(log1p); UNARY(sqrt);
UNARY(rsqrt); UNARY(sin); UNARY(cos); UNARY(tanh); UNARY(sigmoid); UNARY(relu);
UNARY(silu); UNARY(erf); UNARY(reciprocal); UNARY(isnan); UNARY(isfinite);
UNARY(logical_not);
#undef UNARY
MSTEP_ORACLE_OP("gelu", [](const OracleCase& c) {
  return V{gelu(c.in(0), c.attr_str("approximate", "none"))};
});
MSTEP_ORACLE_OP("to", [](const OracleCase& c) { return V{to(c.in(0), c.attr_dtype("dtype"))}; });

#define BINARY(op)                                                                   \
  MSTEP_ORACLE_OP(#op, [](const OracleCase& c) { return V{op(c.in(0), c.in(1))}; }); \
  MSTEP_ORACLE_OP(#op "_scalar", [](const OracleCase& c) { return V{op(c.in(0), c.scalar())}; })
BINARY(add); BINARY(sub); BINARY(mul); BINARY(div); BINARY(pow);
BINARY(eq); BINARY(ne); BINARY(lt); BINARY(le); BINARY(gt); BINARY(ge);
#undef BINARY
// r<op>_scalar: the host scalar on the left (1 - x, 2 / x, 2 ** x).
MSTEP_ORACLE_OP("rsub_scalar", [](const OracleCase& c) { return V{sub(c.scalar(), c.in(0))}; });
MSTEP_ORACLE_OP("rdiv_scalar", [](const OracleCase& c) { return V{div(c.scalar(), c.in(0))}; });
MSTEP_ORACLE_OP("rpow_scalar", [](const OracleCase& c) { return V{pow(c.scalar(), c.in(0))}; });
MSTEP_ORACLE_OP("maximum", [](const OracleCase& c) { return V{maximum(c.in(0), c.in(1))}; });
MSTEP_ORACLE_OP("minimum", [](const OracleCase& c) { return V{minimum(c.in(0), c.in(1))}; });
MSTEP_ORACLE_OP("logical_and", [](const OracleCase& c) { return V{logical_and(c.in(0), c.in(1))}; });
MSTEP_ORACLE_OP("logical_or", [](const OracleCase& c) { return V{logical_or(c.in(0), c.in(1))}; });
MSTEP_ORACLE_OP("where", [](const OracleCase& c) { return V{where(c.in(0), c.in(1), c.in(2))}; });
MSTEP_ORACLE_OP("where_scalar", [](const OracleCase& c) {
  return V{where(c.in(0), c.in(1), c.scalar())};
});
MSTEP_ORACLE_OP("rwhere_scalar", [](const OracleCase& c) {
  return V{where(c.in(0), c.scalar(), c.in(1))};
});

Scalar attr_scalar(const OracleCase& c, const std::string& key) {
  const std::string s = c.attr_str(key);
  if (s.find_first_of(".eE") == std::string::npos) return Scalar(int64_t{std::stoll(s)});
  return Scalar(std::stod(s));
}

MSTEP_ORACLE_OP("arange", [](const OracleCase& c) {
  return V{arange(attr_scalar(c, "start"), attr_scalar(c, "end"), attr_scalar(c, "step"))};
});
MSTEP_ORACLE_OP("full", [](const OracleCase& c) {
  return V{full(Shape(c.attr_ints("shape")), attr_scalar(c, "value"))};
});
MSTEP_ORACLE_OP("zeros", [](const OracleCase& c) { return V{zeros(Shape(c.attr_ints("shape")))}; });
MSTEP_ORACLE_OP("ones", [](const OracleCase& c) {
  return V{ones(Shape(c.attr_ints("shape")), c.attr_dtype("dtype"))};
});

}  // namespace
}  // namespace mstep::oracle
