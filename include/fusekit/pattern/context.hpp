// The state of one match attempt: capture slots, the nodes matched so far, and, only when the
// caller asked for it, the explanation of the deepest failure. Everything lives in fixed arrays
// on the stack; with no explanation sink nothing is formatted and nothing is allocated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "fusekit/graph/graph.hpp"
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

// The deepest failure of a match attempt: where and why, and the nodes matched up to there.
struct explanation {
  bool failed = false;
  std::size_t depth = 0;  // nodes matched when it failed
  std::string message;
  std::vector<node_id> matched;
  node_id failing_node = no_id;  // the node the message is about, when there is one
};

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
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    const double back = std::strtod(text, nullptr);
    if (as_float ? float(back) == float(x) : back == x) break;
  }
  return text;
}

inline std::string describe_value(const graph& g, value_id v) {
  if (v == no_id) return "an omitted optional input";
  const std::string name = "'" + std::string(g.name(v)) + "'";
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

template <class Captures, std::size_t Depth>
class context {
 public:
  using captures = Captures;
  static constexpr std::size_t slot_count = Captures::size;

  struct entry {
    node_id node;
    use_policy policy;
    bool root;
  };

  context(const graph& g, explanation* sink) : g(g), sink(sink) {}

  const graph& g;
  explanation* sink;
  std::array<slot, slot_count> slots{};
  std::array<entry, Depth> matched{};
  std::size_t matched_count = 0;

  bool explaining() const { return sink != nullptr; }

  // Records a failure if it is the deepest so far. `reason` is only called when explaining.
  template <class Reason>
  void fail(const site* where, node_id about, Reason&& reason) {
    if (sink != nullptr) explain(where, about, reason);
  }

 private:
  // Out of line and cold: formatting stays off the matching path, and out of the optimiser's way.
  template <class Reason>
  [[gnu::noinline, gnu::cold]] void explain(const site* where, node_id about, Reason& reason) {
    if (sink->failed && matched_count <= sink->depth) return;
    sink->failed = true;
    sink->depth = matched_count;
    sink->failing_node = about;
    sink->message.clear();
    for (const site* s = where; s != nullptr; s = s->parent) {
      sink->message += "input " + std::to_string(s->slot) + " of " + g.describe(s->node);
      sink->message += s->parent != nullptr ? ", " : ": ";
    }
    reason(sink->message);
    sink->matched.clear();
    for (std::size_t i = 0; i < matched_count; ++i) sink->matched.push_back(matched[i].node);
  }

 public:
  void push(node_id n, use_policy policy, bool root) {
    matched[matched_count++] = {n, policy, root};
  }
  void pop() { --matched_count; }

  bool is_matched(node_id n) const {
    for (std::size_t i = 0; i < matched_count; ++i)
      if (matched[i].node == n) return true;
    return false;
  }

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
    if (rest()) return true;
    if (fresh) s = slot{};
    return false;
  }

  // The interior nodes' outputs must not escape the match (see use_policy).
  bool uses_contained() {
    for (std::size_t i = 0; i < matched_count; ++i) {
      const entry& e = matched[i];
      if (e.root || e.policy == use_policy::any) continue;
      for (value_id out : g.outputs(e.node)) {
        if (out == no_id) continue;
        if (g.is_graph_output(out)) {
          fail(nullptr, e.node, [&](std::string& m) {
            m += "output of " + g.describe(e.node) +
                 " is a graph output, so it cannot be fused away";
          });
          return false;
        }
        const auto uses = g.consumers(out);
        for (const use& u : uses) {
          if (e.policy == use_policy::one_use && uses.size() != 1) {
            fail(nullptr, e.node, [&](std::string& m) {
              m += "output of " + g.describe(e.node) + " is read " + std::to_string(uses.size()) +
                   " times, the pattern allows one";
            });
            return false;
          }
          if (e.policy == use_policy::one_user && u.node != uses[0].node) {
            fail(nullptr, e.node, [&](std::string& m) {
              m += "output of " + g.describe(e.node) + " is read by " + g.describe(uses[0].node) +
                   " and " + g.describe(u.node) + ", the pattern allows one reader";
            });
            return false;
          }
          if (e.policy == use_policy::contained && !is_matched(u.node)) {
            fail(nullptr, e.node, [&](std::string& m) {
              m += "output of " + g.describe(e.node) + " is also read by " + g.describe(u.node) +
                   ", outside the pattern";
            });
            return false;
          }
        }
      }
    }
    return true;
  }
};

}  // namespace fusekit::pattern
