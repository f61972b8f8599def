// The runtime's trace nodes (mstep/runtime/TraceNode.h): lib/ir frees them
// through Node's virtual destructor, without knowing their types.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/TraceNode.h"

namespace mstep {
namespace {

TEST(TraceNode, FreeingAnOpNodeFreesTheDataLeafItOwnsAndReleasesItsBuffer) {
  Tensor t = from_vector(std::vector<float>{1, 2}, {2});
  std::weak_ptr<Buffer> buffer = t.impl()->buffer();
  NodeRef leaf = make_data_leaf(t.impl()->buffer(), t.type(), InputRole::parameter, t.impl_ptr());
  EXPECT_EQ(leaf->op(), OpKind::data);
  EXPECT_EQ(leaf->input_role(), InputRole::parameter);
  EXPECT_EQ(data_leaf(*leaf).owner().lock(), t.impl_ptr());
  NodeRef neg = make_op_node(OpKind::neg, Operands{Value{leaf, 0}}, AttrList{}, ResultTypes{t.type()});
  leaf.reset();
  t = Tensor();
  EXPECT_FALSE(buffer.expired()) << "the op node keeps the leaf, which keeps the buffer";
  neg.reset();  // destroy_node (lib/ir) frees both
  EXPECT_TRUE(buffer.expired()) << "the DataLeaf's own members were destroyed";
}

TEST(TraceNode, TheRoleIsPartOfTheLeafsStructure) {
  Tensor t = from_vector(std::vector<float>{1}, {1});
  NodeRef a = make_data_leaf(t.impl()->buffer(), t.type(), InputRole::input, {});
  NodeRef b = make_data_leaf(t.impl()->buffer(), t.type(), InputRole::parameter, {});
  NodeRef c = make_data_leaf(t.impl()->buffer(), t.type(), InputRole::input, {});
  EXPECT_NE(a->structural_hash(), b->structural_hash());
  EXPECT_EQ(a->structural_hash(), c->structural_hash());
}

}  // namespace
}  // namespace mstep
