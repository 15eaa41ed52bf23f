// Any rule behind one fixed interface. The driver runs a list of any_rule and is compiled once;
// a rule's templates (its pattern's matcher, guard and emit) are instantiated only in the
// translation unit that erases it with any_rule::of<R>(), so a library of many rules builds in
// parallel and a program that runs them does not compile them again.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/shape_source.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/names.hpp"
#include "fusekit/rewrite/report.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "fusekit/rewrite/validate.hpp"

namespace fusekit::rewrite {

// Whether a rule's pattern matched at a node, and if so its guard's verdict there.
struct probe_result {
  bool matched = false;
  verdict guard{.ok = false};  // read where matched
};

namespace detail {

// A match whose guard agreed, whose emit completed and whose edit checked out: what the driver
// chooses among and commits.
struct candidate {
  std::string_view rule;
  int priority;
  const graph* where;
  node_id root;
  std::size_t position;  // of the root in topological order
  std::vector<node_id> nodes;
  std::unique_ptr<emitter> edit;
  std::vector<value_id> reads;     // existing values the edit reads
  std::vector<value_id> replaced;  // matched values the edit computes anew
  // Shapes and Sizes outside the match reading a matched value's dims, with where they read
  // them instead.
  std::vector<node_id> rewired;
  std::vector<shape_source> rewired_from;

  footprint print() const { return {root, nodes, reads, replaced, rewired}; }
};

// A near miss whose message is written only if the pass reports it: a pass that finds edits is
// followed by another, whose near misses the report keeps, so its own are never read. The
// placeholder at `at` in the report's list keeps their order.
struct deferred_miss {
  std::size_t at;
  near_miss (*explain)(const graph&, node_id, const pattern::explanation& reach);
  const graph* where;
  node_id anchor;
  pattern::explanation reach;
};

// What one rule's attempt at one graph adds to: the edits found and the report's near misses,
// whose messages wait in `deferred` where one is given.
struct attempt_sink {
  const options& run;
  name_pool& names;
  std::vector<candidate>& found;
  report& out;
  std::vector<deferred_miss>* deferred = nullptr;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::string> describe_all(const graph& g,
                                                            std::span<const node_id> nodes) {
  std::vector<std::string> out;
  out.reserve(nodes.size());
  for (node_id n : nodes) out.push_back(g.describe(n));
  return out;
}
#else
std::vector<std::string> describe_all(const graph& g, std::span<const node_id> nodes);
#endif

// R's near miss at anchor n, whose match failed as `reach` (a match without messages) says.
template <class R>
near_miss explain_miss(const graph& g, node_id n, const pattern::explanation& reach) {
  pattern::explanation why = pattern::as_far_as(reach);
  pattern::match(R::pattern, g, n, &why);
  return {std::string(R::name),
          g.describe(n),
          std::move(why.message),
          why.depth,
          describe_all(g, why.matched),
          why.failing_node == no_id ? std::string() : g.describe(why.failing_node)};
}

// The deferred near misses' messages, written in their places.
inline void write_deferred(std::vector<deferred_miss>& deferred, report& out) {
  for (const deferred_miss& d : deferred)
    out.near_misses[d.at] = d.explain(*d.where, d.anchor, d.reach);
  deferred.clear();
}

// The Shapes and Sizes outside a match that read a matched value's dims, where the edit lets
// them read those dims instead (the pattern admitted the match on that condition), and the values
// read in their place, which must stay whatever else reads them.
struct dims_readers {
  std::vector<node_id> nodes;
  std::vector<shape_source> from;
  std::vector<value_id> reads;
};
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE dims_readers find_dims_readers(const graph& g, node_id root,
                                                     std::span<const node_id> matched) {
  dims_readers out;
  auto is_matched = [&](node_id n) {
    return std::find(matched.begin(), matched.end(), n) != matched.end();
  };
  auto each_matched = [&](auto&& visit) {
    for (node_id n : matched) visit(n);
  };
  for (node_id m : matched) {
    if (m == root) continue;
    for (value_id x : g.outputs(m)) {
      if (x == no_id) continue;
      for (const use& u : g.consumers(x)) {
        if (u.is_implicit() || u.slot != 0 || is_matched(u.node) || !reads_only_dims(g, u.node) ||
            std::find(out.nodes.begin(), out.nodes.end(), u.node) != out.nodes.end())
          continue;
        if (auto from = shape_source_of(g, x, u.node, is_matched, each_matched)) {
          out.nodes.push_back(u.node);
          out.from.push_back(*from);
          if (from->from != no_id) out.reads.push_back(from->from);
        }
      }
    }
  }
  return out;
}
#else
dims_readers find_dims_readers(const graph& g, node_id root, std::span<const node_id> matched);
#endif

// Tries R at every anchor of g: a match that fails, a guard's or emit's refusal and an edit that
// does not check out become near misses; the rest candidates.
template <class R>
void attempt(const void* rule_options, const graph& g, attempt_sink& to) {
  const auto& own = *static_cast<const options_of<R>*>(rule_options);
  // Where g lacks an op every match holds, every anchor fails: none is tried, and only those
  // that may be near misses are explained.
  static constexpr pattern::required_ops required = pattern::required_ops_of(R::pattern);
  const bool may_match = pattern::holds_every(g, required);
  auto failed = [&](node_id n) {
    // Most anchors are unrelated nodes: only one that could be a near miss pays for the
    // explanation. How far its match got decides whether it is one, without a message.
    if (!to.run.explain && !resembles<R>(g, n)) return;
    pattern::explanation reach{.messages = false};
    pattern::match(R::pattern, g, n, &reach);
    if (!to.run.explain && !is_near_miss<R>(g, n, reach)) return;
    if (to.deferred != nullptr) {
      to.deferred->push_back({to.out.near_misses.size(), &explain_miss<R>, &g, n, reach});
      to.out.near_misses.emplace_back();
    } else {
      to.out.near_misses.push_back(explain_miss<R>(g, n, reach));
    }
  };
  for (node_id n : pattern::anchors(R::pattern, g)) {
    if (!may_match) {
      failed(n);
      continue;
    }
    auto m = pattern::match(R::pattern, g, n);
    auto refuse = [&](std::string reason) {
      to.out.near_misses.push_back({std::string(R::name), g.describe(n), std::move(reason),
                                    m.nodes().size(), describe_all(g, m.nodes()), g.describe(n)});
    };
    if (!m) {
      failed(n);
      continue;
    }
    const verdict v = guard_of<R>(g, m, own);
    if (!v) {
      refuse(v.reason);
      continue;
    }
    auto edit = std::make_unique<emitter>(g, n, to.names, std::string(R::name));
    try {
      emit_of<R>(g, m, *edit, own);
    } catch (const std::exception& e) {
      refuse(std::string("emit failed, nothing changed: ") + e.what());
      continue;
    }
    // The Shapes the edit rewires go with it: what only they kept alive dies too.
    dims_readers readers = find_dims_readers(g, n, m.nodes());
    edit_check check(g, n, m.nodes(), *edit, readers.nodes, readers.reads);
    if (std::string why = check.run(); !why.empty()) {
      refuse(std::move(why));
      continue;
    }
    edit->name_replacements();
    std::vector<value_id> reads = check.reads();
    reads.insert(reads.end(), readers.reads.begin(), readers.reads.end());
    to.found.emplace_back(candidate{R::name, priority_of<R>(), &g, n, g.topological_position(n),
                                    std::vector<node_id>(m.nodes().begin(), m.nodes().end()),
                                    std::move(edit), std::move(reads), check.replaced(),
                                    std::move(readers.nodes), std::move(readers.from)});
  }
}

// R's pattern at one node alone, and its guard where it matched: what a rule's check asks, with
// no edit made.
template <class R>
probe_result probe(const void* rule_options, const graph& g, node_id at,
                   pattern::explanation* why) {
  const auto& own = *static_cast<const options_of<R>*>(rule_options);
  const auto m = pattern::match(R::pattern, g, at, why);
  if (!m) return {};
  return {.matched = true, .guard = guard_of<R>(g, m, own)};
}

}  // namespace detail

class any_rule {
 public:
  // R with its options' defaults (a rule without options has none to give). A rule that does
  // not check out (rule.hpp) fails to compile here, with the member's form in the message.
  template <class R>
  static any_rule of() {
    if constexpr (check_rule<R>()) {
      static const options_of<R> defaults{};
      return of<R>(defaults);
    } else {
      return any_rule({}, 0, nullptr, nullptr, nullptr);
    }
  }

  // R with the caller's options, which must outlive every run of the rule.
  template <class R>
  static any_rule of(const options_of<R>& rule_options) {
    if constexpr (check_rule<R>())
      return any_rule(R::name, priority_of<R>(), &rule_options, &detail::attempt<R>,
                      &detail::probe<R>);
    else
      return any_rule({}, 0, nullptr, nullptr, nullptr);
  }
  template <class R>
  static any_rule of(const options_of<R>&&) = delete;  // a temporary would not outlive the rule

  std::string_view name() const { return name_; }
  int priority() const { return priority_; }

  void attempt(const graph& g, detail::attempt_sink& to) const { attempt_(options_, g, to); }

  // The pattern matched at `at` alone (how far it got explained into `why`, where given) and the
  // guard's verdict on that match; nothing is edited. A check of the rule (selfcheck.hpp) judges
  // its instances so, and compiles none of the rule's templates again.
  probe_result probe(const graph& g, node_id at, pattern::explanation* why = nullptr) const {
    return probe_(options_, g, at, why);
  }

 private:
  using attempt_fn = void (*)(const void*, const graph&, detail::attempt_sink&);
  using probe_fn = probe_result (*)(const void*, const graph&, node_id, pattern::explanation*);

  any_rule(std::string_view name, int priority, const void* rule_options, attempt_fn attempt,
           probe_fn probe)
      : name_(name),
        priority_(priority),
        options_(rule_options),
        attempt_(attempt),
        probe_(probe) {}

  std::string_view name_;
  int priority_;
  const void* options_;
  attempt_fn attempt_;
  probe_fn probe_;
};

}  // namespace fusekit::rewrite
