// What a rule may declare, checked by the compiler alone (rewrite/rule.hpp): each member of a
// rule's vocabulary is accepted in its forms and refused in any other, since a member the engine
// cannot call would otherwise be skipped without a word. Only static_asserts; building the file is
// the test.
#include <cstddef>
#include <string_view>

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::graph;
using fusekit::node_id;
using fusekit::rewrite::emitter;
using fusekit::rewrite::rule;
using fusekit::rewrite::verdict;

struct base {
  static constexpr std::string_view name = "base";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto&, emitter&) {}
};
static_assert(rule<base>);

struct own_options {
  bool strict = true;
};

// ---- accepted forms

struct guarded : base {
  static verdict guard(const graph&, const auto&) { return verdict::yes(); }
};
static_assert(rule<guarded>);

struct guarded_with_options : base {
  using options = own_options;
  static verdict guard(const graph&, const auto&, const options&) { return verdict::yes(); }
  static void emit(const graph&, const auto&, emitter&, const options&) {}
};
static_assert(rule<guarded_with_options>);

struct with_policy : base {
  static constexpr int priority = 2;
  static constexpr std::size_t near_miss_depth = 3;
  static bool resembles(const graph&, node_id) { return true; }
  static bool is_its_block(const graph&, node_id) { return false; }
};
static_assert(rule<with_policy>);

// What the guard reads beyond the pattern, for selfcheck: a capture's producer, tied to another.
struct with_sources : base {
  static constexpr auto pattern = op<"Add">(capture<"x">, capture<"y">);
  static constexpr auto sources =
      fusekit::pattern::sources(source<"x">(op<"Abs">(any())), source<"y">(capture<"x">));
};
static_assert(rule<with_sources>);

// Combinations the guard accepts only together, for selfcheck, named by captures.
struct with_examples : base {
  static constexpr auto pattern =
      op<"Add">(any_of(op<"Abs">(capture<"x">).bind<"abs">(), capture<"x">), capture<"y">);
  static constexpr auto examples = fusekit::pattern::examples(
      example{.with = {"abs"}}, example{.with = {"x"}, .without = {"abs"}});
};
static_assert(rule<with_examples>);

// A rule that inherits its members is checked on what it inherits.
struct inherits_policy : with_policy {};
static_assert(rule<inherits_policy>);

// ---- refused: each would be skipped, and the rule run without it

struct guard_of_mutable_graph : base {
  static verdict guard(graph&, const auto&) { return verdict::yes(); }
};
static_assert(!rule<guard_of_mutable_graph>);

struct guard_returning_bool : base {
  static bool guard(const graph&, const auto&) { return true; }
};
static_assert(!rule<guard_returning_bool>);

struct guard_not_static : base {
  verdict guard(const graph&, const auto&) const { return verdict::yes(); }
};
static_assert(!rule<guard_not_static>);

struct guard_of_run_options : base {
  static verdict guard(const graph&, const auto&, const fusekit::rewrite::options&) {
    return verdict::yes();
  }
};
static_assert(!rule<guard_of_run_options>);

struct guard_of_other_options : base {
  using options = own_options;
  static verdict guard(const graph&, const auto&, const int&) { return verdict::yes(); }
};
static_assert(!rule<guard_of_other_options>);

struct emit_of_swapped_arguments : base {
  static void emit(const auto&, const graph&, emitter&) {}
};
static_assert(!rule<emit_of_swapped_arguments>);

struct no_emit {
  static constexpr std::string_view name = "no-emit";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
};
static_assert(!rule<no_emit>);

struct no_name {
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto&, emitter&) {}
};
static_assert(!rule<no_name>);

struct name_not_constant : base {
  static inline std::string_view name = "changes";
};
static_assert(!rule<name_not_constant>);

struct pattern_not_a_pattern : base {
  static constexpr int pattern = 1;
};
static_assert(!rule<pattern_not_a_pattern>);

struct priority_as_function : base {
  static int priority() { return 1; }
};
static_assert(!rule<priority_as_function>);

struct priority_as_double : base {
  static constexpr double priority = 1.5;
};
static_assert(!rule<priority_as_double>);

struct near_miss_depth_zero : base {
  static constexpr std::size_t near_miss_depth = 0;
};
static_assert(!rule<near_miss_depth_zero>);

struct resembles_of_mutable_graph : base {
  static bool resembles(graph&, node_id) { return true; }
};
static_assert(!rule<resembles_of_mutable_graph>);

struct is_its_block_of_value : base {
  static bool is_its_block(const graph&, fusekit::value_id, int) { return true; }
};
static_assert(!rule<is_its_block_of_value>);

struct source_of_no_capture : base {
  static constexpr auto sources = fusekit::pattern::sources(source<"y">(op<"Abs">(any())));
};
static_assert(!rule<source_of_no_capture>);

// A source stands for a value: a capture of a node (bind) is no leaf to write.
struct source_of_a_node : base {
  static constexpr auto pattern = op<"Relu">(op<"Abs">(capture<"x">).bind<"abs">());
  static constexpr auto sources = fusekit::pattern::sources(source<"abs">(any()));
};
static_assert(!rule<source_of_a_node>);

struct sources_not_sources : base {
  static constexpr auto sources = op<"Abs">(any());
};
static_assert(!rule<sources_not_sources>);

// An example naming what the pattern does not capture would steer nothing, and no one would know.
struct example_of_no_capture : base {
  static constexpr auto examples = fusekit::pattern::examples(example{.with = {"y"}});
};
static_assert(!rule<example_of_no_capture>);

// An example naming nothing is the pattern at its plainest, which selfcheck writes anyway.
struct example_of_nothing : base {
  static constexpr auto examples = fusekit::pattern::examples(example{});
};
static_assert(!rule<example_of_nothing>);

// One example, not the list examples() makes: the check reads a list, and a bare one is a typo.
struct examples_not_examples : base {
  static constexpr auto examples = example{.with = {"x"}};
};
static_assert(!rule<examples_not_examples>);

struct options_not_a_type : base {
  static constexpr int options = 0;
};
static_assert(!rule<options_not_a_type>);

struct final_rule final : base {};
static_assert(!rule<final_rule>);

}  // namespace
