// The state of one match attempt: capture slots, the nodes matched so far, and, only when the
// caller asked for it, the explanation of the deepest failure. Everything lives in fixed arrays
// on the stack; with no explanation sink nothing is formatted and nothing is allocated.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/shape_source.hpp"
#include "fusekit/pattern/captures.hpp"

namespace fusekit::pattern {

// "The rest of the match", as a callable the matchers receive and call once they have matched
// their part. It refers to a lambda living on the caller's stack: no allocation, one indirect call.
// Erasing the lambda's type is deliberate: with the type as a template argument, every matcher was
// instantiated once per distinct continuation, type names grew with the pattern's depth, and the
// debug information of a 20-pattern file reached gigabytes.
class continuation {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, continuation>) continuation(F&& f)
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object) { return (*static_cast<std::remove_reference_t<F>*>(object))(); }) {}

  bool operator()() const { return call_(object_); }

 private:
  void* object_;
  bool (*call_)(void*);
};

// How far outside the match an interior node's outputs may be read.
enum class use_policy : std::uint8_t {
  contained,  // default: every reader is a matched node, and no output is a graph output
  any,        // .multi_use(): readers outside the match are fine (the node is then kept)
  one_user,   // .one_user(): a single reading node, which may read it several times
  one_use,    // .one_use(): exactly one read
};

// The most specific failure of a match attempt: where and why, and the nodes matched up to there.
struct explanation {
  // Off, only how far the match got is kept (failed, depth, progress, held, in_predicate): what
  // deciding whether a failure is a near miss needs, without writing a message for every failure.
  bool messages = true;
  // A failure that explains less than this is not written: a first pass without messages found
  // that one does, so only the failures tied with the best pay for their message.
  std::size_t floor_progress = 0, floor_held = 0;
  bool floor_in_predicate = false;
  bool failed = false;
  std::size_t depth = 0;      // nodes matched when it failed
  std::size_t progress = 0;   // 2·depth, +1 when it failed inside a node whose op type matched
  std::size_t held = 0;       // values that had matched on its way (captures, constants, any())
  bool in_predicate = false;  // it failed in a value's own dtype, rank or shape
  // Set while a value's own dtype, rank or shape is checked: the value is the one its pattern
  // names, so its failure ("x has dtype float64") says more than another pattern refusing it in
  // its place ("x is not a constant", the operands swapped) at the same depth.
  bool checking_predicate = false;
  std::string message{};
  std::vector<node_id> matched{};
  node_id failing_node = no_id;  // the node the message is about, when there is one
};

// Which of two failures explains more: the one past more matched nodes (a failure on a node whose
// op type matched, a Softmax with the wrong axis, is past one at a node of the wrong type in the
// same place, an absent optional Cast); then the one past more values that matched (a scale of
// the wrong value, found past the x that matched beside it, explains more than x failing to be
// that scale); then the one in a value's own dtype, rank or shape (x of the wrong dtype, beside
// another pattern refusing x in its place: "x is not a constant", commutative operands swapped);
// then, so that the choice never depends on the order in which a pattern lists commutative
// operands or any_of branches, the message that sorts first.
inline bool explains_more(std::size_t progress, std::size_t held, bool in_predicate,
                          std::string_view message, const explanation& than) {
  if (!than.failed) return true;
  if (progress != than.progress) return progress > than.progress;
  if (held != than.held) return held > than.held;
  if (in_predicate != than.in_predicate) return in_predicate;
  return message < than.message;
}
inline bool explains_more(const explanation& a, const explanation& than) {
  return a.failed && explains_more(a.progress, a.held, a.in_predicate, a.message, than);
}

// An explanation that writes only the failures explaining as much as the best one `reach` (a
// match of the same pattern at the same anchor without messages) found: the same message, for
// a fraction of the string building.
inline explanation as_far_as(const explanation& reach) {
  explanation why;
  why.floor_progress = reach.progress;
  why.floor_held = reach.held;
  why.floor_in_predicate = reach.in_predicate;
  return why;
}

// Where a value was reached: input `slot` of `node`, itself reached from `parent`. Frames live on
// the matcher's call stack, so backtracking never has to undo them.
struct site {
  node_id node;
  std::uint32_t slot;
  const site* parent;
};

// Shortest text that reads back as the same number: 0.125, 100, 1e-05. Float attributes are
// compared as floats, so 0.1f prints as 0.1.
inline std::string number_text(double x, bool as_float = false) {
  char text[32];
  if (std::isfinite(x) && x == std::trunc(x) && std::fabs(x) < 1e15) {  // -10000, not -1e+04
    std::snprintf(text, sizeof text, "%.0f", x);
    return text;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    const double back = std::strtod(text, nullptr);
    if (as_float ? float(back) == float(x) : back == x) break;
  }
  return text;
}

// 'name', appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict overlap inside
// `"'" + std::string(...)` (GCC bug 105329).
inline std::string quoted(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out += '\'';
  out += name;
  out += '\'';
  return out;
}

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string describe_value(const graph& g, value_id v) {
  if (v == no_id) return "an omitted optional input";
  const std::string name = quoted(g.name(v));
  if (g.producer(v) != no_id) {
    std::string text = g.describe(g.producer(v));
    if (g.outputs(g.producer(v)).size() > 1)
      text = "output " + std::to_string(g.producer_slot(v)) + " of " + text;
    return text;
  }
  if (g.is_initializer(v)) return "initializer " + name;
  if (g.is_graph_input(v)) return "graph input " + name;
  if (g.is_outer_scope(v)) return "outer-scope value " + name;
  return "value " + name;
}
#else
std::string describe_value(const graph& g, value_id v);
#endif

// Failure texts, as plain functions: compiled once, not once per pattern.
namespace message {

inline void expected_op(std::string& m, const graph& g, std::string_view op, std::uint32_t slot,
                        value_id found) {
  m += "expected " + std::string(op);
  if (slot != 0) m += " output " + std::to_string(slot);
  m += ", found " + describe_value(g, found);
}

// `most` = npos: any number from `least` on (all<>).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void wrong_arity(std::string& m, const graph& g, node_id n, std::size_t given,
                                       std::size_t least, std::size_t most) {
  m += g.describe(n) + " has " + std::to_string(given) + " inputs, the pattern expects ";
  if (most == static_cast<std::size_t>(-1))
    m += "at least " + std::to_string(least);
  else if (least == most)
    m += std::to_string(most);
  else
    m += std::to_string(least) + " to " + std::to_string(most);
}
#else
void wrong_arity(std::string& m, const graph& g, node_id n, std::size_t given, std::size_t least,
                 std::size_t most);
#endif

inline void omitted(std::string& m, std::string_view name) {
  // Appended piece by piece: GCC 12 at -O3 misreads a temporary's concatenation here as out of
  // bounds (-Warray-bounds) where a small rule inlines it.
  m += "expected a value";
  if (!name.empty()) {
    m += " for '";
    m += name;
    m += "'";
  }
  m += ", the input is omitted";
}

inline void capture_conflict(std::string& m, const graph& g, std::string_view name, value_id bound,
                             value_id found) {
  m += quoted(name);
  m += " must be the same value twice, it is " + describe_value(g, bound) + " and " +
       describe_value(g, found);
}

inline void not_satisfied(std::string& m, const std::string& subject, const char* text) {
  m += subject + ": not " + text;
}

}  // namespace message

struct matched_entry {
  node_id node;
  use_policy policy;
  bool root;
};

// A non-owning reference to "write the reason": keeps the formatting code out of the matchers'
// instantiations.
class reason_ref {
 public:
  template <class F>
  reason_ref(F& f)
      : object_(&f),
        write_([](void* object, std::string& out) { (*static_cast<F*>(object))(out); }) {}
  void operator()(std::string& out) const { write_(object_, out); }

 private:
  void* object_;
  void (*write_)(void*, std::string&);
};

// Keeps the failure if it explains more than the one kept so far.
#if FUSEKIT_ENGINE_DEFINITIONS
[[gnu::cold]] FUSEKIT_ENGINE_INLINE void record_failure(explanation& sink, const graph& g,
                                                        const site* where, node_id about,
                                                        std::span<const matched_entry> matched,
                                                        bool in_node, std::size_t held,
                                                        reason_ref reason) {
  const bool in_predicate = sink.checking_predicate;
  const std::size_t progress = 2 * matched.size() + (in_node ? 1 : 0);
  if (sink.failed && (progress < sink.progress || (progress == sink.progress && held < sink.held)))
    return;
  if (!sink.messages) {
    if (sink.failed && progress == sink.progress && held == sink.held &&
        (sink.in_predicate || !in_predicate))
      return;
    sink.failed = true;
    sink.in_predicate = in_predicate;
    sink.depth = matched.size();
    sink.progress = progress;
    sink.held = held;
    return;
  }
  if (progress != sink.floor_progress ? progress < sink.floor_progress
      : held != sink.floor_held       ? held < sink.floor_held
                                      : sink.floor_in_predicate && !in_predicate)
    return;
  std::string message;
  for (const site* s = where; s != nullptr; s = s->parent) {
    message += "input " + std::to_string(s->slot) + " of " + g.describe(s->node);
    message += s->parent != nullptr ? ", " : ": ";
  }
  reason(message);
  if (!explains_more(progress, held, in_predicate, message, sink)) return;
  sink.failed = true;
  sink.in_predicate = in_predicate;
  sink.depth = matched.size();
  sink.progress = progress;
  sink.held = held;
  sink.failing_node = about;
  sink.message = std::move(message);
  sink.matched.clear();
  for (const matched_entry& e : matched) sink.matched.push_back(e.node);
}
#else
void record_failure(explanation& sink, const graph& g, const site* where, node_id about,
                    std::span<const matched_entry> matched, bool in_node, std::size_t held,
                    reason_ref reason);
#endif

// The first interior node whose outputs escape the match, by the node's use policy.
struct use_violation {
  enum class kind : std::uint8_t { none, graph_output, read_twice, two_readers, escapes };
  kind what = kind::none;
  node_id node = no_id;
  node_id reader = no_id;
  node_id other_reader = no_id;
  std::size_t uses = 0;
};

inline bool is_matched(std::span<const matched_entry> matched, node_id n) {
  for (const matched_entry& e : matched)
    if (e.node == n) return true;
  return false;
}

// A Shape or Size outside the match that reads only x's dims, which the rewrite can read elsewhere
// (graph/shape_source.hpp): it does not keep x alive.
inline bool dims_readable_elsewhere(const graph& g, value_id x, const use& u,
                                    std::span<const matched_entry> matched) {
  if (u.is_implicit() || u.slot != 0 || !reads_only_dims(g, u.node)) return false;
  return shape_source_of(
             g, x, u.node, [&](node_id n) { return is_matched(matched, n); },
             [&](auto&& visit) {
               for (const matched_entry& e : matched) visit(e.node);
             })
      .has_value();
}

inline use_violation find_use_violation(const graph& g, std::span<const matched_entry> matched) {
  using kind = use_violation::kind;
  for (const matched_entry& e : matched) {
    if (e.root || e.policy == use_policy::any) continue;
    for (value_id out : g.outputs(e.node)) {
      if (out == no_id) continue;
      if (g.is_graph_output(out)) return {.what = kind::graph_output, .node = e.node};
      const auto uses = g.consumers(out);
      for (const use& u : uses) {
        if (e.policy == use_policy::one_use && uses.size() != 1)
          return {.what = kind::read_twice, .node = e.node, .uses = uses.size()};
        if (e.policy == use_policy::one_user && u.node != uses[0].node)
          return {.what = kind::two_readers,
                  .node = e.node,
                  .reader = uses[0].node,
                  .other_reader = u.node};
        if (e.policy == use_policy::contained && !is_matched(matched, u.node) &&
            !dims_readable_elsewhere(g, out, u, matched))
          return {.what = kind::escapes, .node = e.node, .reader = u.node};
      }
    }
  }
  return {};
}

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void write_use_violation(std::string& m, const graph& g,
                                               const use_violation& v) {
  using kind = use_violation::kind;
  m += "output of " + g.describe(v.node);
  switch (v.what) {
    case kind::graph_output:
      m += " is a graph output, so it cannot be fused away";
      break;
    case kind::read_twice:
      m += " is read " + std::to_string(v.uses) + " times, the pattern allows one";
      break;
    case kind::two_readers:
      m += " is read by " + g.describe(v.reader) + " and " + g.describe(v.other_reader) +
           ", the pattern allows one reader";
      break;
    case kind::escapes:
      m += " is also read by " + g.describe(v.reader) + ", outside the pattern";
      // A Shape or Size stays with what it reads where no value the fusion keeps holds those
      // dims: say which dim nothing proves, and where its proof broke.
      if (reads_only_dims(g, v.reader)) {
        const facts& f = facts_of(g);
        const value_id read = g.input(v.reader, 0);
        m += ", and no value the fusion keeps holds its dims " + f.shape_text(read);
        for (int i = 0; f.shape(read).known && i < int(f.shape(read).rank()); ++i)
          if (std::string why = f.why_unknown(read, i); !why.empty()) {
            m += "; " + why;
            break;
          }
      }
      break;
    case kind::none:
      break;
  }
}
#else
void write_use_violation(std::string& m, const graph& g, const use_violation& v);
#endif

template <class Captures, std::size_t Depth>
class context {
 public:
  using captures = Captures;
  static constexpr std::size_t slot_count = Captures::size;

  context(const graph& g, explanation* sink) : g(g), sink(sink) {}

  const graph& g;
  explanation* sink;
  std::array<slot, slot_count> slots{};
  std::array<matched_entry, Depth> matched{};
  std::size_t matched_count = 0;
  bool in_node = false;  // checking a node whose op type matched, before it counts as matched
  std::size_t held = 0;  // values matched on the current path (see explains_more)

  // Records a failure if it explains more than those so far. `reason` is only called when
  // explaining.
  template <class Reason>
  void fail(const site* where, node_id about, Reason&& reason) {
    if (sink != nullptr)
      record_failure(*sink, g, where, about, {matched.data(), matched_count}, in_node, held,
                     reason_ref(reason));
  }

  // Runs the rest of the match past a value that matched, counting it for the explanation.
  bool hold(continuation rest) {
    ++held;
    if (rest()) return true;
    --held;
    return false;
  }

  void push(node_id n, use_policy policy, bool root) {
    matched[matched_count++] = {n, policy, root};
  }
  void pop() { --matched_count; }

  // Binds slot I to `value` (or checks it equals an earlier binding), runs the rest of the match,
  // and undoes the binding if the rest fails.
  template <std::size_t I>
  bool bind(const slot& value, continuation rest) {
    slot& s = slots[I];
    const bool fresh = !s.bound;
    if (!fresh && !s.same_as(value)) return false;
    if (fresh) {
      s = value;
      s.bound = true;
    }
    if (hold(rest)) return true;
    if (fresh) s = slot{};
    return false;
  }

  // The interior nodes' outputs must not escape the match (see use_policy).
  bool uses_contained() {
    const use_violation v = find_use_violation(g, {matched.data(), matched_count});
    if (v.what == use_violation::kind::none) return true;
    fail(nullptr, v.node, [&](std::string& m) { write_use_violation(m, g, v); });
    return false;
  }
};

}  // namespace fusekit::pattern
