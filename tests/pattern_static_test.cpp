// Compile-time properties of the pattern DSL, checked by the compiler alone: this file is only
// static_asserts, and building it is the test (an OBJECT library in tests/CMakeLists.txt).
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/op_table.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::find_known_op;
using fusekit::known_ops;
using fusekit::node_id;
using fusekit::value_id;

// The type get<Name>() returns on a match of P.
template <class P, fixed_string Name>
using get_t = decltype(std::declval<match_result_for<P>>().template get<Name>());

// The kind a pattern records for a capture name.
template <class P>
constexpr capture_kind kind_of(std::string_view name) {
  return P::captures::kinds[index_of<typename P::captures>(name)];
}

// ---- fixed_string: the text of a template argument, without its terminating zero

static_assert(fixed_string("MatMul").view() == "MatMul");
static_assert(fixed_string("").view().empty());
static_assert(sizeof(fixed_string("abc")) == 4);

// ---- the capture list: names in order of first appearance, each with its kind

constexpr auto sdpa = op<"MatMul">(
    op<"Softmax">(
        commutative(op<"Mul">(op<"MatMul">(capture<"q">, capture<"kt">), constant_scalar<"scale">)))
        .bind<"softmax">()
        .bind_attr<"axis", "axis">(),
    capture<"v">);
using sdpa_t = decltype(sdpa);
using sdpa_captures = sdpa_t::captures;

static_assert(sdpa_captures::size == 6);
static_assert(sdpa_captures::names[0] == "q");
static_assert(sdpa_captures::names[1] == "kt");
static_assert(sdpa_captures::names[2] == "scale");
static_assert(sdpa_captures::names[3] == "softmax");
static_assert(sdpa_captures::names[4] == "axis");
static_assert(sdpa_captures::names[5] == "v");
static_assert(sdpa_captures::kinds[0] == capture_kind::value);
static_assert(sdpa_captures::kinds[2] == capture_kind::number);
static_assert(sdpa_captures::kinds[3] == capture_kind::node);
static_assert(sdpa_captures::kinds[4] == capture_kind::attribute);
static_assert(sdpa_captures::kinds[5] == capture_kind::value);

// A pattern that binds nothing has an empty capture list.
static_assert(decltype(op<"Relu">(any()))::captures::size == 0);
static_assert(
    std::same_as<decltype(op<"Add">(any(), any().dtype<dtype::float32>()))::captures, decl_list<>>);

// A value predicate keeps the captures of what it checks.
static_assert(
    std::same_as<decltype(capture<"x">.rank<4>())::captures, decltype(capture<"x">)::captures>);

// capture<"x">(p) binds x and everything p binds, x first.
constexpr auto named_relu = capture<"y">(op<"Relu">(capture<"x">));
static_assert(decltype(named_relu)::captures::size == 2);
static_assert(decltype(named_relu)::captures::names[0] == "y");
static_assert(decltype(named_relu)::captures::names[1] == "x");

// ---- duplicates merge: one name used twice is one capture (the same value, matched twice)

static_assert(decltype(op<"Add">(capture<"x">, capture<"x">))::captures::size == 1);

// A DAG: the same sub-pattern, with its captures and node binding, reached along two paths.
constexpr auto shared_relu = op<"Relu">(capture<"x">).bind<"relu">();
constexpr auto diamond = op<"Add">(shared_relu, op<"Sigmoid">(shared_relu));
using diamond_captures = decltype(diamond)::captures;
static_assert(diamond_captures::size == 2);
static_assert(diamond_captures::names[0] == "x");
static_assert(diamond_captures::names[1] == "relu");
static_assert(diamond_captures::kinds[1] == capture_kind::node);

// The same constant_scalar name in two places is one number.
static_assert(decltype(op<"Add">(op<"Mul">(capture<"a">, constant_scalar<"s">),
                                 op<"Mul">(capture<"b">, constant_scalar<"s">)))::captures::size ==
              3);

// ---- get<"name">(): the C++ type follows the capture's kind

constexpr auto typed = op<"Add">(
    op<"Mul">(capture<"x">, constant_scalar<"scale">).bind<"mul">(),
    any_of(op<"Gather">(constant<"table">, capture<"index">), capture<"bias">).bind<"branch">());
constexpr auto typed_softmax = op<"Softmax">(typed).bind_attr<"axis", "axis">();
using typed_t = decltype(typed_softmax);

static_assert(std::same_as<get_t<typed_t, "x">, value_id>);
static_assert(std::same_as<get_t<typed_t, "mul">, node_id>);
static_assert(std::same_as<get_t<typed_t, "scale">, double>);
static_assert(std::same_as<get_t<typed_t, "table">, const onnx::TensorProto*>);
static_assert(std::same_as<get_t<typed_t, "axis">, const onnx::AttributeProto*>);
static_assert(std::same_as<get_t<typed_t, "branch">, std::size_t>);
static_assert(std::same_as<get_t<typed_t, "index">, value_id>);
static_assert(std::same_as<get_t<typed_t, "bias">, value_id>);

// value_id and node_id are both std::uint32_t, so the kind tells a value from a node.
static_assert(kind_of<typed_t>("x") == capture_kind::value);
static_assert(kind_of<typed_t>("mul") == capture_kind::node);
static_assert(kind_of<typed_t>("branch") == capture_kind::branch);

// optional<>(…).bind<"n">() binds a node: no_id when the optional op was absent.
constexpr auto maybe_cast = op<"Relu">(optional<"Cast">(capture<"x">).bind<"cast">());
static_assert(std::same_as<get_t<decltype(maybe_cast), "cast">, node_id>);
static_assert(kind_of<decltype(maybe_cast)>("cast") == capture_kind::node);

// has<> is a bool for every kind.
static_assert(
    std::same_as<decltype(std::declval<match_result_for<typed_t>>().has<"scale">()), bool>);

// capture_type maps each kind to the type get<> returns.
static_assert(std::same_as<capture_type<capture_kind::value>, value_id>);
static_assert(std::same_as<capture_type<capture_kind::node>, node_id>);
static_assert(std::same_as<capture_type<capture_kind::number>, double>);
static_assert(std::same_as<capture_type<capture_kind::tensor>, const onnx::TensorProto*>);
static_assert(std::same_as<capture_type<capture_kind::attribute>, const onnx::AttributeProto*>);
static_assert(std::same_as<capture_type<capture_kind::branch>, std::size_t>);

// ---- index_of: position in the capture list, npos when absent

static_assert(index_of<sdpa_captures>("q") == 0);
static_assert(index_of<sdpa_captures>("v") == 5);
static_assert(index_of<sdpa_captures>("nope") == npos);
static_assert(index_of<decl_list<>>("q") == npos);

// ---- nodes: the op nodes a match can hold (the size of the matched-node array)

static_assert(decltype(capture<"x">)::nodes == 0);
static_assert(decltype(any())::nodes == 0);
static_assert(decltype(constant_scalar<"s">)::nodes == 0);
static_assert(decltype(constant<"t">)::nodes == 0);
static_assert(decltype(op<"Relu">(any()))::nodes == 1);
static_assert(sdpa_t::nodes == 4);
// A node reached along two paths is counted twice.
static_assert(decltype(diamond)::nodes == 4);
// any_of takes the largest of its alternatives.
static_assert(decltype(any_of(capture<"a">, op<"Relu">(op<"Neg">(any())),
                              op<"Sigmoid">(any())))::nodes == 2);
// optional counts its op; predicates, bindings and commutative() add none.
static_assert(decltype(optional<"Cast">(any()))::nodes == 1);
static_assert(decltype(optional<"Cast">(op<"Relu">(any())))::nodes == 2);
static_assert(decltype(op<"LeakyRelu">(any()).bind<"n">().attr<"alpha">(0.01f))::nodes == 1);
static_assert(decltype(commutative(op<"Mul">(op<"Relu">(any()), any())))::nodes == 2);
static_assert(decltype(capture<"y">(op<"Relu">(any())))::nodes == 1);
static_assert(decltype(op<"Relu">(any()).dtype<dtype::float16>())::nodes == 1);
// The match result is sized by them: one slot per capture, one node id per node.
static_assert(std::same_as<match_result_for<sdpa_t>, match_result<sdpa_captures, 4>>);

// ---- arity: the number of inputs the op pattern expects

static_assert(decltype(op<"Relu">(any()))::arity == 1);
static_assert(decltype(op<"MatMul">(any(), any()))::arity == 2);
static_assert(decltype(op<"Clip">(any()))::arity == 1);
static_assert(decltype(op<"Clip">(any(), any(), any()))::arity == 3);
static_assert(decltype(op<"Concat">(any(), any(), any(), any(), any()))::arity == 5);
static_assert(decltype(commutative(op<"Add">(any(), any())))::arity == 2);

// ---- commutative(): same captures, same inputs, both orders at match time

constexpr auto mul = op<"Mul">(capture<"x">, constant_scalar<"s">).bind<"mul">();
constexpr auto mul_either = commutative(mul);
static_assert(std::same_as<decltype(mul_either)::captures, decltype(mul)::captures>);
static_assert(std::same_as<decltype(mul_either)::spec, decltype(mul)::spec>);
static_assert(!std::same_as<decltype(mul_either), decltype(mul)>);

// ---- patterns are constant expressions: small, trivially copyable structs

constexpr auto relu = op<"Relu">(capture<"x">);
static_assert(std::is_empty_v<decltype(capture<"x">)>);
static_assert(std::is_empty_v<decltype(any())>);
static_assert(sizeof(capture<"x">) == 1);
static_assert(sizeof(relu) <= 16);
static_assert(sizeof(op<"MatMul">(capture<"a">, capture<"b">)) <= 16);
static_assert(std::is_trivially_copyable_v<decltype(relu)>);
static_assert(std::is_trivially_copyable_v<sdpa_t>);
static_assert(std::is_trivially_copyable_v<typed_t>);
static_assert(std::is_trivially_copyable_v<decltype(maybe_cast)>);
static_assert(std::is_trivially_copyable_v<match_result_for<sdpa_t>>);

// Builder calls evaluate at compile time, and what they set can be read back.
static_assert(relu.policy == use_policy::contained);
static_assert(relu.multi_use().policy == use_policy::any);
static_assert(relu.one_user().policy == use_policy::one_user);
static_assert(relu.one_use().policy == use_policy::one_use);
static_assert(op<"Split">(any()).output(1).slot == 1);
static_assert(mul_either.policy == use_policy::contained);
static_assert(constant_scalar<"one">.value(1.0).has_expected);
static_assert(constant_scalar<"one">.value(1.0).expected == 1.0);
static_assert(constant_scalar<"one">.value(1.0, 0.5).tolerance == 0.5);
static_assert(!constant_scalar<"one">.has_expected);

// Predicates with arguments are constexpr too.
constexpr auto transpose = op<"Transpose">(capture<"x">.shape(2, "seq", any_dim, 64))
                               .attr<"perm">(ints(0, 2, 1, 3))
                               .dtype<dtype::float16, dtype::bfloat16>()
                               .opset<13>()
                               .one_use();
static_assert(transpose.inputs.head.pred.dims[0].size == 2);
static_assert(std::string_view(transpose.inputs.head.pred.dims[1].symbol) == "seq");
static_assert(transpose.inputs.head.pred.dims[3].size == 64);
static_assert(transpose.preds.head.matcher.values[2] == 1);
static_assert(transpose.policy == use_policy::one_use);
constexpr auto softmax_last = op<"Softmax">(any()).attr<"axis">(last_axis);
static_assert(decltype(softmax_last)::nodes == 1);
static_assert(one_of(1, 10).values[1] == 10);
static_assert(one_of_dtypes<dtype::float16, dtype::float32>().values[0] ==
              std::int64_t(dtype::float16));
static_assert(optional<"Cast">(any()).to<dtype::float32>().inner.preds.head.matcher.values[0] ==
              std::int64_t(dtype::float32));

// ---- maybe(), all<>, transparent(): arity, captures, nodes

// maybe(p): an input the node may omit; the inputs before the last required one are required.
constexpr auto slice = op<"Slice">(capture<"data">, constant<"starts">, constant<"ends">,
                                   maybe(constant<"axes">), maybe(constant<"steps">));
using slice_t = decltype(slice);
static_assert(slice_t::arity == 5);
static_assert(slice_t::required == 3);
static_assert(!slice_t::variadic);
static_assert(slice_t::nodes == 1);
static_assert(slice_t::captures::size == 5);
static_assert(kind_of<slice_t>("axes") == capture_kind::tensor);
static_assert(std::same_as<get_t<slice_t, "steps">, const onnx::TensorProto*>);
static_assert(decltype(op<"Clip">(any(), maybe(any()), any()))::required == 3);
static_assert(decltype(maybe(op<"Relu">(any())))::nodes == 1);
static_assert(std::is_trivially_copyable_v<slice_t>);

// all<"parts">: every input, bound as a list of value ids (a span into the graph's index).
constexpr auto concat = op<"Concat">(all<"parts">);
using concat_t = decltype(concat);
static_assert(concat_t::variadic);
static_assert(concat_t::arity == 1);
static_assert(concat_t::nodes == 1);
static_assert(kind_of<concat_t>("parts") == capture_kind::list);
static_assert(std::same_as<get_t<concat_t, "parts">, std::span<const value_id>>);
static_assert(std::same_as<capture_type<capture_kind::list>, std::span<const value_id>>);
static_assert(decltype(op<"Sum">(all<"xs">(any().dtype<dtype::float16>())))::captures::size == 1);
static_assert(sizeof(all<"parts">) == 1);
static_assert(std::is_trivially_copyable_v<concat_t>);

// transparent(p) may hold up to 4 skipped nodes besides p's.
static_assert(decltype(transparent(capture<"x">))::nodes == 4);
static_assert(decltype(transparent(op<"Softmax">(op<"Relu">(any()))))::nodes == 6);
static_assert(std::same_as<decltype(transparent(op<"Relu">(capture<"x">)))::captures,
                           decltype(op<"Relu">(capture<"x">))::captures>);

// ---- predicates on facts and on earlier captures: checks only, they bind nothing

static_assert(std::same_as<decltype(capture<"k">.same_dim<-1, "q", -2>())::captures,
                           decltype(capture<"k">)::captures>);
static_assert(decltype(any().proven_rank<4>())::captures::size == 0);
static_assert(decltype(any().proven_rank<4>().same_dim<0, "q", 0>())::nodes == 0);
constexpr auto bound_check = capture<"x">.where_bound(
    "after q",
    [](const fusekit::graph&, value_id, const auto& bound) { return bound.template has<"q">(); });
static_assert(std::same_as<decltype(bound_check)::captures, decltype(capture<"x">)::captures>);
static_assert(std::is_trivially_copyable_v<decltype(bound_check)>);
// The bound view reads slots with the types get<> returns, and is one pointer.
static_assert(std::same_as<
              decltype(std::declval<bound_captures<typed_t::captures>>().get<"scale">()), double>);
static_assert(
    std::same_as<decltype(std::declval<bound_captures<concat_t::captures>>().get<"parts">()),
                 std::span<const value_id>>);
static_assert(sizeof(bound_captures<sdpa_captures>) == sizeof(void*));

// ---- ranges of constant scalars and rules on constant tensors are constexpr

static_assert(constant_scalar<"fill">.at_most(-1e4).has_most);
static_assert(constant_scalar<"fill">.at_most(-1e4).most == -1e4);
static_assert(constant_scalar<"fill">.at_least(0).at_most(1).least == 0);
static_assert(!constant_scalar<"fill">.at_least(0).has_most);
static_assert(constant_scalar<"fill">.value(-std::numeric_limits<double>::infinity()).expected ==
              -std::numeric_limits<double>::infinity());
static_assert(constant<"m">.rule == tensor_rule::none);
static_assert(constant<"m">.all_ones().rule == tensor_rule::all_ones);
static_assert(constant<"m">.all_equal().rule == tensor_rule::all_equal);
static_assert(constant<"m">.lower_triangular_ones().rule == tensor_rule::lower_triangular_ones);
static_assert(constant<"m">.strictly_upper_triangular_ones().rule ==
              tensor_rule::strictly_upper_triangular_ones);
static_assert(decltype(constant<"m">.all_ones())::nodes == 0);
static_assert(kind_of<decltype(op<"Where">(constant<"m">.lower_triangular_ones(), any(), any()))>(
                  "m") == capture_kind::tensor);

// ---- op names resolve at compile time

static_assert(find_known_op("", "MatMul").has_value());
static_assert(known_ops[*find_known_op("", "MatMul")].name == "MatMul");
static_assert(find_known_op("ai.onnx", "MatMul") == find_known_op("", "MatMul"));
static_assert(fusekit::canonical_domain("ai.onnx").empty());
static_assert(fusekit::canonical_domain("com.microsoft") == "com.microsoft");
static_assert(find_known_op("com.microsoft", "MultiHeadAttention").has_value());
static_assert(known_ops[*find_known_op("com.microsoft", "MultiHeadAttention")].domain ==
              "com.microsoft");
static_assert(find_known_op("", "MatMull") == std::nullopt);
static_assert(find_known_op("", "MultiHeadAttention") == std::nullopt);
static_assert(find_known_op("com.microsoft", "MatMul") == std::nullopt);
static_assert(find_known_op("my.domain", "MatMul") == std::nullopt);

// Input counts are the widest over the op's opset versions.
constexpr auto matmul_info = known_ops[*find_known_op("", "MatMul")];
static_assert(matmul_info.min_inputs == 2 && matmul_info.max_inputs == 2);
constexpr auto clip_info = known_ops[*find_known_op("", "Clip")];
static_assert(clip_info.min_inputs == 1 && clip_info.max_inputs == 3);
constexpr auto concat_info = known_ops[*find_known_op("", "Concat")];
static_assert(concat_info.min_inputs == 1 && concat_info.max_inputs == fusekit::variadic);

// The table is sorted by (domain, name), as its comment says.
constexpr bool known_ops_sorted() {
  for (std::size_t i = 1; i < fusekit::known_op_count; ++i) {
    const auto& a = known_ops[i - 1];
    const auto& b = known_ops[i];
    if (a.domain > b.domain || (a.domain == b.domain && a.name >= b.name)) return false;
  }
  return true;
}
static_assert(known_ops_sorted());

// An op pattern carries its op's id; ops of a custom domain have none and match by name.
static_assert(decltype(op<"MatMul">(any(), any()))::spec::id == find_known_op("", "MatMul"));
static_assert(decltype(op<"MatMul", "ai.onnx">(any(), any()))::spec::id ==
              find_known_op("", "MatMul"));
static_assert(decltype(op<"MatMul", "ai.onnx">(any(), any()))::spec::domain.empty());
static_assert(decltype(op<"MultiHeadAttention", "com.microsoft">(any(), any(), any()))::spec::id ==
              find_known_op("com.microsoft", "MultiHeadAttention"));
static_assert(!decltype(op<"MyOp", "my.domain">(any()))::spec::id.has_value());
static_assert(decltype(op<"MyOp", "my.domain">(any()))::spec::name == "MyOp");
static_assert(decltype(op<"MyOp", "my.domain">(any()))::spec::domain == "my.domain");

// ---- the ops every match holds: what a driver may skip a graph for lacking

constexpr required_ops::op matmul{"", "MatMul"}, softmax{"", "Softmax"}, cast{"", "Cast"},
    mean{"", "ReduceMean"}, add_op{"", "Add"}, mul_op{"", "Mul"};
// An optional op is not required, what it wraps is; a capture or constant requires nothing.
constexpr auto attention_ops =
    required_ops_of(op<"MatMul">(optional<"Cast">(op<"Softmax">(capture<"x">)), constant<"v">));
static_assert(attention_ops.size == 2 && attention_ops.contains(matmul) &&
              attention_ops.contains(softmax) && !attention_ops.contains(cast));
// Alternatives require only what each of them does; a commutative op is its op.
constexpr auto either_norm =
    required_ops_of(any_of(commutative(op<"Add">(capture<"a">, op<"ReduceMean">(capture<"x">))),
                           op<"Mul">(transparent(op<"ReduceMean">(capture<"x">)), capture<"b">)));
static_assert(either_norm.size == 1 && either_norm.contains(mean));
// A domain is part of the op: com.microsoft's Gelu is not ai.onnx's, ai.onnx is "".
static_assert(
    required_ops_of(op<"Gelu", "com.microsoft">(any())).contains({"com.microsoft", "Gelu"}));
static_assert(required_ops_of(op<"Add", "ai.onnx">(any(), any())).contains(add_op));
static_assert(required_ops_of(maybe(op<"Mul">(any(), any()))).size == 0);
static_assert(required_ops_of(capture<"y">(op<"Mul">(any(), any()))).contains(mul_op));
// around<>'s input is one of the op's, wherever it stands: its ops are required.
constexpr auto joined = required_ops_of(op<"Concat">(around<"a", "b">(op<"Mul">(any(), any()))));
static_assert(joined.size == 2 && joined.contains(mul_op) && joined.contains({"", "Concat"}));

// ---- dtype conversions are constexpr

static_assert(fusekit::float_to_half(1.0f) == 0x3c00);
static_assert(fusekit::float_to_half(-2.0f) == 0xc000);
static_assert(fusekit::float_to_half(65504.0f) == 0x7bff);
static_assert(fusekit::float_to_half(65520.0f) == 0x7c00);  // rounds past the largest half
static_assert(fusekit::half_to_float(0x3c00) == 1.0f);
static_assert(fusekit::half_to_float(0x7bff) == 65504.0f);
static_assert(fusekit::half_to_float(0x0001) == 0x1p-24f);  // smallest subnormal
static_assert(fusekit::float_to_half(fusekit::half_to_float(0x0001)) == 0x0001);
static_assert(fusekit::float_to_bfloat16(1.0f) == 0x3f80);
static_assert(fusekit::bfloat16_to_float(0x3f80) == 1.0f);

}  // namespace
