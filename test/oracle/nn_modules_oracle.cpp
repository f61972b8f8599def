// Oracle registrations: the nn modules. Each builds the mstep module from
// the case's attrs, assigns the leading inputs to its parameters (state_dict
// order, as nn_modules.py writes them) and runs forward on the rest.
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

nn::Size2d pair(const OracleCase& c, const std::string& key) {
  std::vector<int64_t> v = c.attr_ints(key);
  return {v.at(0), v.at(1)};
}

MSTEP_ORACLE_OP("module_linear", [](const OracleCase& c) {
  const bool bias = c.attr_int("bias") != 0;
  auto m =
      std::make_shared<nn::Linear>(c.attr_int("in_features"), c.attr_int("out_features"), bias);
  size_t next = 0;
  m->weight = c.in(next++);
  if (bias) m->bias = c.in(next++);
  return V{m->forward(c.in(next))};
});

MSTEP_ORACLE_OP("module_conv2d", [](const OracleCase& c) {
  const bool bias = c.attr_int("bias") != 0;
  auto m = std::make_shared<nn::Conv2d>(c.attr_int("in_channels"), c.attr_int("out_channels"),
                                        pair(c, "kernel"), pair(c, "stride"), pair(c, "padding"),
                                        pair(c, "dilation"), c.attr_int("groups"), bias);
  size_t next = 0;
  m->weight = c.in(next++);
  if (bias) m->bias = c.in(next++);
  return V{m->forward(c.in(next))};
});

MSTEP_ORACLE_OP("module_layer_norm", [](const OracleCase& c) {
  const bool affine = c.attr_int("affine") != 0;
  auto m = std::make_shared<nn::LayerNorm>(c.attr_ints("normalized_shape"), c.attr_double("eps"),
                                           affine);
  size_t next = 0;
  if (affine) {
    m->weight = c.in(next++);
    m->bias = c.in(next++);
  }
  return V{m->forward(c.in(next))};
});

MSTEP_ORACLE_OP("module_mha", [](const OracleCase& c) {
  const bool bias = c.attr_int("bias") != 0;
  auto m = std::make_shared<nn::MultiheadAttention>(
      c.attr_int("embed_dim"), c.attr_int("num_heads"), bias, c.attr_int("batch_first") != 0);
  size_t next = 0;
  m->in_proj_weight = c.in(next++);
  if (bias) m->in_proj_bias = c.in(next++);
  m->out_proj->weight = c.in(next++);
  if (bias) m->out_proj->bias = c.in(next++);

  const std::string qkv = c.attr_str("qkv");
  Tensor q = c.in(next++);
  Tensor k = qkv == "self" ? q : c.in(next++);
  Tensor v = qkv == "separate" ? c.in(next++) : k;
  nn::MultiheadAttentionForwardOptions o;
  if (c.attr_int("has_attn_mask", 0)) o.attn_mask = c.in(next++);
  if (c.attr_int("has_kpm", 0)) o.key_padding_mask = c.in(next++);
  o.need_weights = c.attr_int("need_weights") != 0;
  o.average_attn_weights = c.attr_int("average") != 0;
  o.is_causal = c.attr_int("is_causal") != 0;
  nn::MultiheadAttentionOutput out = m->forward(q, k, v, o);
  if (o.need_weights) return V({out.output, out.weights});  // parens: a macro argument
  return V{out.output};
});

}  // namespace
}  // namespace mstep::oracle
