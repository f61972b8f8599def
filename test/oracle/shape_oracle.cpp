// Oracle registrations: shape and data-movement ops. The attr "transpose0"
// (two dims) transposes input 0 first, so the op sees a permuted input.
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

V all_inputs(const OracleCase& c) {
  V out;
  for (size_t i = 0; i < c.inputs.size(); ++i) out.push_back(input(c, i));
  return out;
}

MSTEP_ORACLE_OP("reshape", [](const OracleCase& c) {
  return V{reshape(input(c, 0), c.attr_ints("shape"))};
});
MSTEP_ORACLE_OP("view", [](const OracleCase& c) {
  return V{view(input(c, 0), c.attr_ints("shape"))};
});
MSTEP_ORACLE_OP("flatten", [](const OracleCase& c) {
  return V{flatten(input(c, 0), c.attr_int("start_dim", 0),
                   c.attr_int("end_dim", -1))};
});
MSTEP_ORACLE_OP("permute", [](const OracleCase& c) {
  return V{permute(input(c, 0), c.attr_ints("perm"))};
});
MSTEP_ORACLE_OP("transpose", [](const OracleCase& c) {
  return V{transpose(input(c, 0), c.attr_int("dim0"), c.attr_int("dim1"))};
});
MSTEP_ORACLE_OP("expand", [](const OracleCase& c) {
  return V{expand(input(c, 0), c.attr_ints("shape"))};
});
MSTEP_ORACLE_OP("squeeze", [](const OracleCase& c) {
  return V{c.has("dim") ? squeeze(input(c, 0), c.attr_int("dim"))
                        : squeeze(input(c, 0))};
});
MSTEP_ORACLE_OP("unsqueeze", [](const OracleCase& c) {
  return V{unsqueeze(input(c, 0), c.attr_int("dim"))};
});

MSTEP_ORACLE_OP("slice", [](const OracleCase& c) {
  return V{slice(input(c, 0), c.attr_int("dim"), c.attr_int("start", 0),
                 c.attr_int("end", kSliceEnd), c.attr_int("step", 1))};
});
MSTEP_ORACLE_OP("cat", [](const OracleCase& c) {
  return V{cat(all_inputs(c), c.attr_int("dim", 0))};
});
MSTEP_ORACLE_OP("stack", [](const OracleCase& c) {
  return V{stack(all_inputs(c), c.attr_int("dim", 0))};
});
MSTEP_ORACLE_OP("chunk", [](const OracleCase& c) {
  return chunk(input(c, 0), c.attr_int("chunks"), c.attr_int("dim", 0));
});

MSTEP_ORACLE_OP("gather", [](const OracleCase& c) {
  return V{gather(input(c, 0), c.attr_int("dim"), input(c, 1))};
});
MSTEP_ORACLE_OP("index_select", [](const OracleCase& c) {
  return V{index_select(input(c, 0), c.attr_int("dim"), input(c, 1))};
});
MSTEP_ORACLE_OP("embedding", [](const OracleCase& c) {
  return V{embedding(input(c, 0), input(c, 1))};
});

MSTEP_ORACLE_OP("pad", [](const OracleCase& c) {
  return V{pad(input(c, 0), c.attr_ints("pads"), c.attr_double("value", 0))};
});
MSTEP_ORACLE_OP("triu", [](const OracleCase& c) {
  return V{triu(input(c, 0), c.attr_int("diagonal", 0))};
});
MSTEP_ORACLE_OP("tril", [](const OracleCase& c) {
  return V{tril(input(c, 0), c.attr_int("diagonal", 0))};
});

}  // namespace
}  // namespace mstep::oracle
