// Nodes that hold a shared attribute list (SharedAttrs; a custom op's call
// site records every kept call with one) instead of a copy: the same
// attributes and hashes as a node with its own list, and node hashes stay
// what they were before nodes could share one (cache keys, the disk cache
// and exported graphs are built from them).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/TraceNode.h"

namespace mstep {
namespace {

const TensorType kType{Shape{2, 3}, DType::f32};

/// One attribute of each kind: an int list, an int, a double (a host
/// constant, in the constant hash) and a dtype.
AttrList mixed_attrs() {
  AttrList attrs;
  attrs.push_back({AttrName::dims, IntList{0, 1}});
  attrs.push_back({AttrName::keepdim, int64_t{1}});
  attrs.push_back({AttrName::eps, 0.5});
  attrs.push_back({AttrName::dtype, DType::bf16});
  return attrs;
}

ResultTypes two_results() { return ResultTypes{kType, TensorType{Shape{}, DType::i64}}; }

TEST(SharedAttrs, ANodeHoldingThemEqualsANodeWithItsOwnCopy) {
  auto shared = std::make_shared<const SharedAttrs>(mixed_attrs());
  NodeRef own = make_op_node(OpKind::sum, Operands{}, mixed_attrs(), two_results());
  NodeRef held = make_op_node(OpKind::sum, Operands{}, shared, two_results());
  EXPECT_EQ(&held->attrs(), &shared->list()) << "the node holds the list, not a copy";
  EXPECT_EQ(attrs_to_string(held->attrs()), attrs_to_string(own->attrs()));
  EXPECT_EQ(held->structural_hash(), own->structural_hash());
  EXPECT_EQ(held->constant_hash(), own->constant_hash());
  EXPECT_NE(held->constant_hash(), 0u) << "the double is a host constant";
  EXPECT_EQ(held->type_hash(), own->type_hash());
}

// The values were printed by the build before SharedAttrs existed (same
// nodes, same functions): a changed value would change every cache key.
TEST(SharedAttrs, NodeHashesAreThoseOfTheBuildBeforeThem) {
  NodeRef add = make_op_node(OpKind::add, Operands{}, AttrList{}, ResultTypes{kType});
  EXPECT_EQ(add->structural_hash(), 0x7F7DF9224FF26AB7ull);
  EXPECT_EQ(add->type_hash(), 0x83A3D908510F6757ull);
  EXPECT_EQ(add->constant_hash(), 0u);
  NodeRef sum = make_op_node(OpKind::sum, Operands{}, mixed_attrs(), two_results());
  NodeRef held = make_op_node(OpKind::sum, Operands{},
                              std::make_shared<const SharedAttrs>(mixed_attrs()), two_results());
  for (const NodeRef& n : {sum, held}) {
    EXPECT_EQ(n->structural_hash(), 0x999A87E90F340975ull);
    EXPECT_EQ(n->type_hash(), 0xAEB86B9C34B93872ull);
    EXPECT_EQ(n->constant_hash(), 0x8521C576A797B922ull);
  }
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  NodeRef leaf = make_data_leaf(x.impl()->buffer(), x.type(), InputRole::parameter, {});
  EXPECT_EQ(leaf->structural_hash(), 0xB9A0085B07A1A6FAull);
  EXPECT_EQ(leaf->type_hash(), 0xB9C132F51C36D3A8ull);
  EXPECT_EQ(leaf->constant_hash(), 0u);
}

TEST(SharedAttrs, TheLastNodeHoldingThemFreesThem) {
  auto shared = std::make_shared<const SharedAttrs>(mixed_attrs());
  std::weak_ptr<const SharedAttrs> watch = shared;
  NodeRef a = make_op_node(OpKind::sum, Operands{}, shared, two_results());
  NodeRef b = make_op_node(OpKind::sum, Operands{}, shared, two_results());
  shared.reset();
  a.reset();
  EXPECT_FALSE(watch.expired()) << "b still holds them";
  EXPECT_EQ(attrs_to_string(b->attrs()), attrs_to_string(mixed_attrs()));
  b.reset();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace mstep
