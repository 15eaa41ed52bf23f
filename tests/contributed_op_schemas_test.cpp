// The contributed ops' schemas: through fusekit::schemas(), onnx's checker holds a contrib op's
// node to ONNX Runtime's contract (its inputs, outputs and attributes) and answers every other op
// as onnx's own registry does. That they equal ONNX Runtime's registrations is
// tests/python/test_contributed_op_schemas.py's part.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/contributed_ops.hpp"

namespace {

onnx::NodeProto node(const std::string& name, const std::string& domain, const std::string& op,
                     const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs) {
  onnx::NodeProto n;
  n.set_name(name);
  n.set_domain(domain);
  n.set_op_type(op);
  for (const auto& input : inputs) n.add_input(input);
  for (const auto& output : outputs) n.add_output(output);
  return n;
}

void add_int(onnx::NodeProto& n, const std::string& name, int64_t value) {
  auto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void add_float(onnx::NodeProto& n, const std::string& name, float value) {
  auto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

// What the checker says of `n`: the message of the ValidationError that `verify` throws, or
// "no error".
template <class F>
std::string check_error(F verify) {
  try {
    verify();
  } catch (const onnx::checker::ValidationError& e) {
    return e.what();
  }
  return "no error";
}

std::string verify_error(const onnx::NodeProto& n, int opset) {
  const onnx::OpSchema* schema = fusekit::schemas().GetSchema(n.op_type(), opset, n.domain());
  if (schema == nullptr) return "no schema";
  return check_error([&] { schema->Verify(n); });
}

// Self-attention as fusekit emits it: q, k and v projected, no bias, no mask.
onnx::NodeProto multi_head_attention() {
  auto n = node("mha", "com.microsoft", "MultiHeadAttention", {"q", "k", "v"}, {"out"});
  add_int(n, "num_heads", 8);
  add_float(n, "scale", 0.125f);
  return n;
}

TEST(ContributedOpSchemas, OnePerContributedOp) {
  const auto& schemas = fusekit::contributed_op_schemas();
  // Beside them, ONNX Runtime's versions of an onnx op below its first onnx version.
  std::size_t below_onnx = 0;
  for (const auto& schema : schemas)
    if (const auto* own = onnx::OpSchemaRegistry::Instance()->GetSchema(
            schema.Name(), std::numeric_limits<int>::max(), schema.domain())) {
      EXPECT_GT(own->since_version(), schema.since_version()) << schema.Name();
      ++below_onnx;
    }
  EXPECT_EQ(below_onnx, 1u);  // LayerNormalization
  ASSERT_EQ(schemas.size(), std::size(fusekit::contributed_ops) + below_onnx);
  for (const auto& op : fusekit::contributed_ops) {
    const std::string name(op.name), domain(op.domain);
    const onnx::OpSchema* schema = fusekit::schemas().GetSchema(name, 1, domain);
    ASSERT_NE(schema, nullptr) << domain << "::" << name;
    EXPECT_EQ(schema->Name(), name);
    EXPECT_EQ(schema->domain(), domain);
    EXPECT_EQ(schema->since_version(), 1) << name;
    EXPECT_TRUE(schema >= schemas.data() && schema < schemas.data() + schemas.size()) << name;
    // The op table's input counts are the contract's: a pattern's arity check agrees with the
    // checker's.
    EXPECT_EQ(op.min_inputs, schema->min_input()) << name;
    EXPECT_EQ(op.max_inputs, schema->max_input()) << name;
  }
}

TEST(ContributedOpSchemas, MultiHeadAttentionVerifies) {
  EXPECT_EQ(verify_error(multi_head_attention(), 1), "no error");
  // An absent optional input before a present one is written as "".
  auto with_bias =
      node("mha", "com.microsoft", "MultiHeadAttention", {"q", "k", "v", "", "", "attention_bias"},
           {"out", "present_k", "present_v"});
  add_int(with_bias, "num_heads", 8);
  add_int(with_bias, "unidirectional", 1);
  EXPECT_EQ(verify_error(with_bias, 1), "no error");
}

TEST(ContributedOpSchemas, SimplifiedLayerNormalizationVerifies) {
  auto n = node("sln", "", "SimplifiedLayerNormalization", {"x", "weight"}, {"y"});
  add_int(n, "axis", -1);
  add_float(n, "epsilon", 1e-6f);
  EXPECT_EQ(verify_error(n, 17), "no error");
  n.set_domain("ai.onnx");
  EXPECT_EQ(verify_error(n, 17), "no error");
  EXPECT_EQ(fusekit::schemas().GetSchema("SimplifiedLayerNormalization", 17, "ai.onnx"),
            fusekit::schemas().GetSchema("SimplifiedLayerNormalization", 17, ""));
}

TEST(ContributedOpSchemas, NearMisses) {
  // ONNX Runtime cannot split the heads without num_heads.
  auto no_heads = multi_head_attention();
  no_heads.mutable_attribute()->DeleteSubrange(0, 1);
  EXPECT_EQ(verify_error(no_heads, 1), "Required attribute 'num_heads' is missing.");

  // ONNX Runtime reads num_heads as an integer and refuses the node with a float one.
  auto float_heads = multi_head_attention();
  float_heads.mutable_attribute(0)->set_type(onnx::AttributeProto::FLOAT);
  float_heads.mutable_attribute(0)->set_f(8);
  EXPECT_EQ(verify_error(float_heads, 1),
            "Mismatched attribute type in 'mha : num_heads'. Expected: 'INT', actual: 'FLOAT'");

  // MultiHeadAttention takes at most 10 inputs; an 11th is none of its operands.
  auto eleven = multi_head_attention();
  for (int i = 3; i < 11; ++i) eleven.add_input("extra" + std::to_string(i));
  EXPECT_EQ(verify_error(eleven, 1),
            "Node(mha) with schema(com.microsoft::MultiHeadAttention:1) has input size 11 not in "
            "range [min=1, max=10].");

  // num_head is no attribute of the op: a misspelling, the setting meant for num_heads lost.
  auto misspelt = multi_head_attention();
  add_int(misspelt, "num_head", 8);
  EXPECT_EQ(verify_error(misspelt, 1),
            "Unrecognized attribute: num_head for operator MultiHeadAttention");

  // SimplifiedLayerNormalization's scale is not optional.
  const auto no_scale = node("sln", "", "SimplifiedLayerNormalization", {"x"}, {"y"});
  EXPECT_EQ(verify_error(no_scale, 17),
            "Node(sln) with schema(::SimplifiedLayerNormalization:1) has input size 1 not in "
            "range [min=2, max=2].");

  // GroupQueryAttention's output and both present caches are always written.
  auto gqa = node("gqa", "com.microsoft", "GroupQueryAttention",
                  {"q", "k", "v", "past_k", "past_v", "seqlens_k", "total_length"}, {"out"});
  add_int(gqa, "num_heads", 8);
  add_int(gqa, "kv_num_heads", 2);
  EXPECT_EQ(verify_error(gqa, 1),
            "Node(gqa) with schema(com.microsoft::GroupQueryAttention:1) has output size 1 not in "
            "range [min=3, max=4].");
}

TEST(ContributedOpSchemas, OtherOpsAsOnnxAnswers) {
  const auto& registry = fusekit::schemas();
  // ONNX Runtime has this one, but it is no contributed op: the checker skips it as before.
  EXPECT_EQ(registry.GetSchema("DecoderMaskedMultiHeadAttention", 1, "com.microsoft"), nullptr);
  EXPECT_EQ(registry.GetSchema("NoSuchOp", 1, "com.microsoft"), nullptr);
  // No opset of com.microsoft before 1 has MultiHeadAttention.
  EXPECT_EQ(registry.GetSchema("MultiHeadAttention", 0, "com.microsoft"), nullptr);

  const onnx::OpSchema* softmax = registry.GetSchema("Softmax", 13, "");
  ASSERT_NE(softmax, nullptr);
  EXPECT_EQ(softmax, onnx::OpSchemaRegistry::Schema("Softmax", 13, ""));
  EXPECT_EQ(softmax->since_version(), 13);
  EXPECT_EQ(registry.GetSchema("Softmax", 12, "")->since_version(), 11);
  EXPECT_EQ(registry.GetSchema("Softmax", 13, "ai.onnx"),
            onnx::OpSchemaRegistry::Schema("Softmax", 13, "ai.onnx"));
}

// A model's graph with one MultiHeadAttention node that lacks num_heads.
onnx::GraphProto graph_without_num_heads() {
  onnx::GraphProto g;
  g.set_name("attention");
  // [batch, sequence, hidden]: 8 heads of 64.
  const auto declare = [](onnx::ValueInfoProto& value, const char* name) {
    value.set_name(name);
    auto& tensor = *value.mutable_type()->mutable_tensor_type();
    tensor.set_elem_type(onnx::TensorProto::FLOAT16);
    for (int64_t dim : {1, 16, 512}) tensor.mutable_shape()->add_dim()->set_dim_value(dim);
  };
  for (const char* name : {"q", "k", "v"}) declare(*g.add_input(), name);
  declare(*g.add_output(), "out");
  auto n = multi_head_attention();
  n.mutable_attribute()->DeleteSubrange(0, 1);
  *g.add_node() = n;
  return g;
}

TEST(ContributedOpSchemas, CheckerUsesThem) {
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(onnx::IR_VERSION);
  ctx.set_opset_imports({{"", 17}, {"com.microsoft", 1}});
  const onnx::checker::LexicalScopeContext scope;
  const auto g = graph_without_num_heads();

  // Without them the checker has no schema for the node and lets it through.
  EXPECT_EQ(check_error([&] { onnx::checker::check_graph(g, ctx, scope); }), "no error");

  ctx.set_schema_registry(&fusekit::schemas());
  EXPECT_EQ(check_error([&] { onnx::checker::check_graph(g, ctx, scope); }),
            "Required attribute 'num_heads' is missing.\n\n==> Context: Bad node spec for node. "
            "Name: mha OpType: MultiHeadAttention");
}

}  // namespace
