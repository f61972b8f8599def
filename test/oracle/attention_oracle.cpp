// Oracle registrations: scaled dot-product attention. Inputs are q, k, v,
// then the mask (attr has_mask) and valid_seq_len (attr has_valid_len);
// attrs is_causal, scale, padding_side ("left"/"right") and recompute (0:
// the backward reads saved probabilities) set the options.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

SdpaOptions options(const OracleCase& c) {
  SdpaOptions o;
  size_t next = 3;
  if (c.attr_int("has_mask", 0)) o.attn_mask = c.in(next++);
  if (c.attr_int("has_valid_len", 0)) o.valid_seq_len = c.in(next++);
  o.is_causal = c.attr_int("is_causal", 0) != 0;
  if (c.has("scale")) o.scale = c.attr_double("scale");
  o.padding_side = c.attr_str("padding_side", "right") == "left"
                       ? PaddingSide::left
                       : PaddingSide::right;
  o.recompute = c.attr_int("recompute", 1) != 0;
  return o;
}

MSTEP_ORACLE_OP("scaled_dot_product_attention", [](const OracleCase& c) {
  return V{scaled_dot_product_attention(c.in(0), c.in(1), c.in(2), options(c))};
});
// fused_sdpa returning {out, probabilities}.
MSTEP_ORACLE_OP("fused_sdpa", [](const OracleCase& c) {
  SdpaOptions o = options(c);
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(c.in(0), c.in(1), c.in(2), o);
  return V({r.out, r.attn_probs});  // parens: a macro argument
});

}  // namespace
}  // namespace mstep::oracle
