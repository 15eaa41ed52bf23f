// A rule checks itself from its own pattern: `selfcheck::check<R>()` writes the graphs the pattern
// describes and runs the rule on them.
//
//   instances  every alternative of every choice the pattern holds (a part it uses in two places
//              is one choice): each branch of any_of, both operand orders of commutative,
//              optional ops absent and present, maybe() inputs given and omitted,
//              transparent() and through_casts() with and without the node they look through, the
//              instance's float type, the opset (a Reduce op's axes as attribute or input); each
//              constant inside its bounds and each attribute as the pattern wants it. Every
//              instance must fuse, and (options::python) compute in ONNX Runtime what the graph
//              it replaced computes.
//   mutants    per predicate, the same instance with that predicate alone broken: a constant out
//              of its bounds, an attribute off, a leaf of another dtype or rank, an extra reader
//              of an inner node's output, a capture that is two values. A mutant must not fuse,
//              and its near miss must name what was broken; one that fuses all the same (another
//              alternative of the pattern takes it) must compute what it replaced.
//   refusals   each of the rule's refusals (pattern/sources.hpp), the first instance that fused
//              with the captures it names written from its sources: the guard's reasons are
//              code, so the rule says how to meet each. It must not fuse, and its near miss must
//              hold the refusal's words.
//
// What a pattern leaves open is searched for, with the rule as the judge: each leaf input is
// first given options::shape, then its last dim alone, then a scalar, then options::shape with
// the two dims before its last exchanged (BNSH and BSNH), until the pattern and the
// guard accept the graph; a leaf of a broadcasting op first takes the shape of the op beside it
// (an op's inputs that are ops are written before its leaves). A view's open shape (a Reshape's
// or Expand's target, an Unsqueeze's axes, a Slice's bounds) is derived from the dims of what it
// reads: merges of adjacent dims, splits into dims options::shape holds, a broadcast of a 1, an
// axis, a half of the last axis; the candidates of the views below an op that states a
// predicate in code (.where) are tried together until that op's own pattern matches, and those
// no such op settles until the rule accepts the graph. Every other covering round takes new
// alternatives at several choice points at once (alternatives that fuse only together); an
// instance refused although each alternative it holds fused elsewhere is such a combination, the
// guard's to refuse, and no failure. A graph that is no model (an op its opset lacks, a node the
// facts prove cannot run: dims that do not broadcast) is no instance and is not judged. An
// alternative still uncovered is searched for from the pattern at its plainest holding it: one
// other choice changed at a time, toward a model the rule accepts (merged heads in q ask it of
// kᵀ, then of v); while such searches fuse a form none did before (GroupQueryAttention) or
// cover what others are made within, what is left is sought again. What the rule's code reads
// beyond the pattern comes from its sources (pattern/sources.hpp), written in place of the leaves
// and constants they name. A constant's same_dim<I, "w", J> takes its dim I from the dims written
// for w (a per-channel vector as long as a weight's dim 0); a leaf of a declared rank of 2 or more
// is searched as the free leaves are (trailing dims of options::shape, a square of its last, one
// row, the last two exchanged: [K, N] beside [M, K]), and a constant<> is written as such a leaf,
// of ones. Other predicates the pattern states as code (where_bound, proven_value of a capture) are
// not generated: they are checked, as everything is, by matching. An alternative that no instance
// fuses is reported with the reason of its last refusal.
//
// The parts, one job a header, each including the one before: selfcheck/report.hpp (options
// and result), planner.hpp (choices), instance_writer.hpp (one instance), views.hpp (open
// views), judge.hpp (running and judging one); this file searches and checks.
#pragma once

#include "fusekit/rewrite/selfcheck/judge.hpp"

namespace fusekit::selfcheck {

namespace detail {

// What the search below asks of the rule it checks: writing a graph from its pattern, the one
// step its type shapes, and the rule erased (run, matched and guarded through any_rule), so that
// the search is compiled once (in fusekit::engine, where a program links it) and the rule's
// matcher, guard and emit only where it was erased.
struct rule_steps {
  std::string_view name;
  std::span<const pattern::example> examples;
  std::function<built(planner&, const std::vector<leaf_form>& forms, int mutate,
                      std::vector<int> views, std::size_t* view_graphs_left)>
      build;
  rewrite::any_rule compiled;
  // The rule's refusals (pattern/sources.hpp): what each near miss says, and the instance
  // written with refusal k's sources.
  std::vector<std::string_view> refusals{};
  std::function<built(planner&, const std::vector<leaf_form>& forms, std::vector<int> views,
                      int refusal)>
      build_refused{};
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE result search(const options& o, const rule_steps& rule) {
  result out;
  out.rule = std::string(rule.name);
  out.parity_checked = !o.python.empty();
  if (out.parity_checked && o.write_to.empty())
    throw error("selfcheck: parity with ONNX Runtime needs a directory to write the models to");
  if (!o.write_to.empty()) std::filesystem::create_directories(o.write_to);
  planner plan(o.seed);
  std::vector<std::string> pairs;
  std::set<std::string> mutated;

  struct fused_instance {
    std::vector<int> sequence;
    std::vector<detail::leaf_form> forms;
    std::vector<int> views;
    int sites;
  };
  std::vector<fused_instance> to_mutate;
  std::vector<std::vector<std::pair<detail::point_key, int>>> held;  // each instance's choices
  // The choices of each instance fused into each form, the kinds of op its fusion brought in
  // (MultiHeadAttention, or GroupQueryAttention): an alternative that fuses into one form alone
  // (soft-capped scores, GroupQueryAttention's) is sought from there too.
  std::map<std::set<std::string>, std::vector<planner::choices>> forms;

  const auto keep = [&](const std::string& stem, const onnx::ModelProto& before,
                        const onnx::ModelProto& after) {
    if (o.write_to.empty()) return std::string();
    save_model({.proto = before, .path = {}}, o.write_to / (stem + ".onnx"));
    save_model({.proto = after, .path = {}}, o.write_to / (stem + ".fused.onnx"));
    std::string runs = stem + ".onnx";
    if (const auto runnable = detail::without_own_type_casts(before)) {
      runs = stem + ".ort.onnx";
      save_model({.proto = *runnable, .path = {}}, o.write_to / runs);
    }
    pairs.push_back(stem + ".onnx\t" + stem + ".fused.onnx\t" + runs);
    return stem + ".onnx";
  };

  // An example the check could not judge: a failure of the check, with the reason.
  const auto unjudged = [&](const pattern::example& e, const std::string& choices,
                            std::string why) {
    instance i;
    i.choices = choices;
    i.reason = std::move(why);
    i.example = detail::example_text(e);
    out.instances.push_back(std::move(i));
    held.push_back(plan.taken());
  };
  const auto attempt = [&](planner::mode mode, planner::choices keyed = {},
                           const pattern::example* steer = nullptr) {
    plan.begin(mode, {}, std::move(keyed), steer);
    // Every leaf of the options' shape first: the search's first try, already built.
    std::size_t view_graphs_left = o.view_graphs;
    detail::built b = rule.build(plan, {}, -1, {}, &view_graphs_left);
    const std::vector<int> sequence = b.sequence;
    const std::string choices = b.choices;
    std::vector<detail::leaf_form> winner;
    // Its choices' combination may write an op its opset does not have, or ops that cannot run
    // on what they read (which another leaf shape may mend): no model to judge, and no instance.
    const auto judge = [&](const detail::built& written, std::string& no_model) {
      const graph g(written.model);
      no_model = detail::no_model(written.model, g);
      return no_model.empty() && !refused(rule.compiled, g, written.root);
    };
    // An example whose choices write what it does not ask (two of its captures in one any_of's
    // branches, or one its other choices rule out) is the rule's word broken, and no instance.
    if (steer != nullptr)
      if (const std::string off = detail::astray(*steer, b.names); !off.empty()) {
        unjudged(*steer, choices, "its choices write " + off);
        return;
      }
    std::string no_model;
    bool found = judge(b, no_model);
    // No leaf shape mends an op its opset lacks, or a type the op does not admit.
    const bool too_new =
        !detail::too_new_op(b.model).empty() || !detail::type_not_admitted(graph(b.model)).empty();
    const auto searches = detail::leaf_searches(b.free_leaves, o.shape_tries);
    for (std::size_t k = 1; !found && !too_new && k < searches.size(); ++k) {
      plan.begin(planner::mode::replay, sequence);
      detail::built next = rule.build(plan, searches[k], -1, {}, &view_graphs_left);
      std::string next_no_model;
      found = judge(next, next_no_model);
      if (!next_no_model.empty()) continue;
      // The first shapes that make a model are the instance's, refused or not.
      if (found || !no_model.empty()) {
        b = std::move(next);
        winner = searches[k];
        no_model.clear();
      }
    }
    if (!no_model.empty()) {
      plan.refused(no_model);
      ++out.no_models;
      // An example that writes no model is no instance, and still the rule's word broken.
      if (steer != nullptr) unjudged(*steer, choices, no_model);
      return;
    }
    instance i;
    i.choices = choices;
    if (steer != nullptr) i.example = detail::example_text(*steer);
    onnx::ModelProto fused = b.model;
    const rewrite::report r = run(rule.compiled, fused);
    i.fused = !r.fusions.empty();
    if (!i.fused) {
      const graph g(b.model);
      i.reason = detail::reason_at(r, g.describe(g.producer(*g.find_value(b.root))));
      const auto refusal = refused(rule.compiled, g, b.root);
      i.by_options = refusal && refusal->by_options;
      // No leaf shape mends what the options refuse.
      if (!found && !i.by_options) i.reason += " (and with every leaf shape searched)";
      plan.refused(i.reason);
      // Kept too, to see what the rule refused.
      if (!o.write_to.empty())
        save_model({.proto = b.model, .path = {}},
                   o.write_to / ("refused_" + std::to_string(out.instances.size()) + ".onnx"));
    } else {
      plan.fused();
      std::set<std::string> brought;
      for (const rewrite::fusion& each : r.fusions)
        for (const auto& added : each.added)
          if (!each.removed.contains(added.first)) brought.insert(added.first);
      forms[brought].push_back(plan.taken_choices());
      i.file = keep("instance_" + std::to_string(out.instances.size()), b.model, fused);
      if (mode != planner::mode::random) to_mutate.push_back({sequence, winner, b.views, b.sites});
    }
    out.instances.push_back(std::move(i));
    held.push_back(plan.taken());
  };

  for (std::size_t k = 0; k == 0 || (plan.wants_more() && k < o.cover_rounds); ++k)
    attempt(planner::mode::cover);
  // Whether every instance that meets the choice point `inner` holds `outer`: a choice made only
  // within that alternative (the ops of soft-capped scores).
  const auto within = [&](const detail::point_key& inner,
                          const std::pair<detail::point_key, int>& outer) {
    return std::all_of(held.begin(), held.end(), [&](const auto& taken) {
      const auto meets = [&](const auto& t) { return t.first == inner; };
      return std::none_of(taken.begin(), taken.end(), meets) ||
             std::find(taken.begin(), taken.end(), outer) != taken.end();
    });
  };
  // What the rule's options refuse: of an instance they refused, the one alternative no instance
  // fused beside others that fused, with the choices made within it.
  const auto refused_by_options = [&] {
    for (bool more = true; more;) {
      more = false;
      for (std::size_t k = 0; k < out.instances.size(); ++k) {
        if (!out.instances[k].by_options) continue;
        std::vector<std::pair<detail::point_key, int>> open;
        for (const auto& t : held[k])
          if (!plan.covered(t)) open.push_back(t);
        for (const auto& outer : open)
          if (std::all_of(open.begin(), open.end(),
                          [&](const auto& t) { return t == outer || within(t.first, outer); })) {
            for (const auto& t : open)
              if (!plan.refused_by_options(t)) {
                plan.refused_by_options(t, out.instances[k].reason);
                more = true;
              }
            break;
          }
      }
    }
  };
  refused_by_options();
  // What the rule says fuses only together: from there the search below reaches what is made
  // within it (the soft cap, GroupQueryAttention's alone).
  if (!rule.examples.empty()) {
    for (const pattern::example& e : rule.examples) attempt(planner::mode::keyed, {}, &e);
    refused_by_options();
  }
  // An alternative that fuses only beside others it needs (q's heads merged into the batch axis
  // ask the same of kᵀ, of v and of the probabilities) is left uncovered by rounds that choose
  // apart. From each form the rule fused into with it put in, from the pattern at its plainest
  // holding it, then from the last choices that held it: one other choice changed at a time, the
  // change kept that brings the graph nearer to one the rule accepts (detail::closeness, its
  // views searched a little: accepted where that search finds views the rule takes, else as
  // first derived), the first change found nearer, until the rule accepts it or no change comes
  // nearer; then that graph is an instance like any other. Each alternative sought has its part
  // of the graphs left: the first ones sought would otherwise spend them all.
  std::size_t descent_graphs_left = 0;
  const auto measure = [&](const planner::choices& picks) {
    descent_graphs_left -= std::min<std::size_t>(descent_graphs_left, 1);
    plan.begin(planner::mode::keyed, {}, picks);
    std::size_t view_graphs = o.descent_view_graphs;
    const detail::built b = rule.build(plan, {}, -1, {}, &view_graphs);
    return std::pair{closeness_of(rule.compiled, b.model, b.root), plan.taken_choices()};
  };
  // Whether a graph's choices hold the alternative: one that does not (the select's fill, gone
  // with the select) is no way to it.
  const auto holds_alternative = [](const planner::choices& picks,
                                    const std::pair<detail::point_key, int>& alternative) {
    const auto held = picks.find(alternative.first);
    return held != picks.end() && held->second == alternative.second;
  };
  // From `start`, toward a graph the rule accepts holding `alternative`; that graph, reached or
  // not, is attempted.
  const auto descent = [&](const std::pair<detail::point_key, int>& alternative,
                           const planner::choices& start) {
    const auto holds = [&](const planner::choices& picks) {
      return holds_alternative(picks, alternative);
    };
    // Named, not bound: the tries below capture them.
    auto measured = measure(start);
    detail::closeness& nearness = measured.first;
    planner::choices& picks = measured.second;
    if (!holds(picks)) nearness = detail::closeness::farthest();
    for (std::size_t step = 0;
         nearness != detail::closeness{} && step < o.descent_steps && descent_graphs_left > 0;
         ++step) {
      std::optional<std::pair<detail::closeness, planner::choices>> nearest;
      using change = std::pair<detail::point_key, int>;
      std::vector<change> singles;
      // The changes that alone make the graph further from a model: a pair of them may agree.
      std::vector<change> breaking;
      // Pairs of those that agree and leave the graph as near as it was (k and v both read
      // without a cache): a unit, which may need one more change beside it (a causal mask).
      std::vector<std::pair<change, change>> units;
      enum class tried_as { other, nearer, breaks, as_near };
      const auto tries = [&](const planner::choices& next) {
        if (descent_graphs_left == 0 || nearest) return tried_as::other;
        auto tried = measure(next);
        if (!holds(tried.second)) return tried_as::other;
        if (tried.first < nearness) {
          nearest = std::move(tried);
          return tried_as::nearer;
        }
        if (tried.first.unsettled > nearness.unsettled) return tried_as::breaks;
        return tried.first == nearness ? tried_as::as_near : tried_as::other;
      };
      const auto with = [&](std::initializer_list<change> changes) {
        planner::choices next = picks;
        for (const auto& [where, k] : changes) next[where] = k;
        return next;
      };
      for (const auto& [where, pick] : picks)
        for (int k = 0; k < int(plan.alternatives_at(where)); ++k)
          if (where != alternative.first && k != pick) {
            singles.emplace_back(where, k);
            if (tries(with({singles.back()})) == tried_as::breaks)
              breaking.push_back(singles.back());
          }
      for (std::size_t a = 0; a < breaking.size(); ++a)
        for (std::size_t b = a + 1; b < breaking.size(); ++b)
          if (breaking[a].first != breaking[b].first &&
              tries(with({breaking[a], breaking[b]})) == tried_as::as_near)
            units.emplace_back(breaking[a], breaking[b]);
      for (const auto& [a, b] : units)
        for (const change& c : singles)
          if (c.first != a.first && c.first != b.first) tries(with({a, b, c}));
      if (!nearest) break;
      std::tie(nearness, picks) = std::move(*nearest);
    }
    if (holds(picks)) attempt(planner::mode::keyed, picks);
  };
  // A search may fuse a form no instance fused before (GroupQueryAttention, reached while
  // seeking another alternative), or an alternative that others are made within (the soft cap,
  // whose ops are new choices): what is still uncovered is sought again from there, as long as
  // a round of searches comes nearer.
  for (std::pair<std::size_t, std::size_t> before{0, 0};;) {
    const auto sought = plan.uncovered_choices();
    const std::pair now{forms.size(), sought.size()};
    if (now == before || sought.empty()) break;
    before = now;
    // What is left of the graphs, shared among the alternatives still to seek: one reached at
    // once, or by another's search, leaves its part to those after it.
    std::size_t pool = o.descent_graphs;
    for (std::size_t n = 0; n < sought.size(); ++n) {
      const auto& alternative = sought[n].first;
      std::size_t mine = pool / (sought.size() - n);
      // Reached since it was listed, by another's search, or refused by the options since.
      refused_by_options();
      if (plan.covered(alternative) || plan.refused_by_options(alternative)) continue;
      // First from each form the rule fused into, with the alternative in it (half the part among
      // them: one that fuses there does so at once), then from the plainest and the last holding
      // it, each with half of what is left. The alternative goes in with the choices it is made
      // within (the soft cap's scale, only where the scores are capped): without them a form's
      // graph does not hold it. The last choices refused holding it, or, where none was (an
      // alternative met only in graphs that fused, within one that fused late), those of an
      // instance that met it.
      planner::choices met = sought[n].second;
      for (std::size_t k = 0; met.empty() && k < held.size(); ++k)
        if (std::any_of(held[k].begin(), held[k].end(),
                        [&](const auto& t) { return t.first == alternative.first; }))
          met = planner::choices(held[k].begin(), held[k].end());
      planner::choices enclosing{{alternative}};
      for (const auto& t : met)
        if (t.first != alternative.first && within(alternative.first, t)) enclosing.insert(t);
      // Of each form, the instance that holds most of those (the one already soft-capped, where
      // an alternative within the cap is sought): the fewest changes from a graph the rule took.
      const auto holding = [&](const planner::choices& picks) {
        return std::count_if(enclosing.begin(), enclosing.end(), [&](const auto& t) {
          const auto at = picks.find(t.first);
          return at != picks.end() && at->second == t.second;
        });
      };
      // An instance of a form that the rule accepts with these put in, as measured, is judged at
      // once (a BSNH k beside a q that keeps its heads, where the first instance merged them):
      // the plainest instances first (fewest choices other than their first alternative), a few
      // hundred at most.
      for (const auto& [form, fused] : forms) {
        std::vector<std::pair<std::size_t, const planner::choices*>> plainest;
        for (const planner::choices& each : fused)
          plainest.emplace_back(std::count_if(each.begin(), each.end(),
                                              [](const auto& pick) { return pick.second != 0; }),
                                &each);
        std::stable_sort(plainest.begin(), plainest.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        plainest.resize(std::min(plainest.size(), o.start_candidates));
        for (const auto& [unplain, candidate] : plainest) {
          planner::choices start = *candidate;
          for (const auto& [where, k] : enclosing) start[where] = k;
          descent_graphs_left = 1;
          const auto [near, taken] = measure(start);
          if (near == detail::closeness{} && holds_alternative(taken, alternative)) {
            attempt(planner::mode::keyed, start);
            break;
          }
        }
        if (plan.covered(alternative)) break;
      }
      if (plan.covered(alternative)) continue;
      std::vector<planner::choices> starts;
      // Starts one change from a graph the rule took: judged as they are first, their views and
      // leaf shapes searched in full (a descent's measures search a few, and may leave a graph
      // that fuses as written for a nearer-looking one that does not).
      std::vector<bool> one_change;
      for (const auto& [form, fused] : forms) {
        const planner::choices& nearest = *std::max_element(
            fused.begin(), fused.end(),
            [&](const auto& a, const auto& b) { return holding(a) < holding(b); });
        one_change.push_back(holding(nearest) + 1 >= std::ptrdiff_t(enclosing.size()));
        starts.push_back(nearest);
        for (const auto& [where, k] : enclosing) starts.back()[where] = k;
      }
      starts.push_back(enclosing);
      starts.push_back(met);
      for (std::size_t k = 0; k < starts.size(); ++k) {
        const planner::choices& start = starts[k];
        refused_by_options();
        if (plan.covered(alternative) || plan.refused_by_options(alternative) || start.empty())
          continue;
        descent_graphs_left = k < forms.size() ? std::max<std::size_t>(1, mine / (2 * forms.size()))
                                               : (k + 1 < starts.size() ? mine / 2 : mine);
        const std::size_t given = descent_graphs_left;
        if (k < one_change.size() && one_change[k]) {
          attempt(planner::mode::keyed, start);
          if (plan.covered(alternative)) continue;
        }
        descent(alternative, start);
        mine -= std::min(mine, given - descent_graphs_left);
        pool -= std::min(pool, given - descent_graphs_left);
      }
    }
  }
  for (std::size_t k = 0; k < o.cases; ++k) attempt(planner::mode::random);
  refused_by_options();
  out.alternatives = plan.alternatives();
  out.uncovered = plan.uncovered();
  out.refused_by_options = plan.refused_by_options();
  for (std::size_t k = 0; k < out.instances.size(); ++k)
    out.instances[k].combination = !out.instances[k].fused && plan.covers(held[k]);

  for (const fused_instance& f : to_mutate)
    for (int site = 0; site < f.sites; ++site) {
      plan.begin(planner::mode::replay, f.sequence);
      detail::built b = rule.build(plan, f.forms, site, f.views, nullptr);
      if (!mutated.insert(b.broken.breaks).second) continue;
      mutant m;
      m.breaks = b.broken.breaks;
      m.expect = b.broken.expect;
      onnx::ModelProto fused = b.model;
      const rewrite::report r = run(rule.compiled, fused);
      m.fused = !r.fusions.empty();
      if (m.fused) {
        m.file = keep("mutant_" + std::to_string(out.mutants.size()), b.model, fused);
        m.ok = true;  // unless ONNX Runtime finds it computes something else
      } else {
        // The reason given where the mutant's root is: the driver explains every anchor, and
        // another MatMul of the graph is no attention's root for reasons of its own.
        const graph g(b.model);
        const node_id root = g.producer(*g.find_value(b.root));
        m.near_miss = detail::reason_at(r, g.describe(root));
        m.ok = m.near_miss.find(m.expect) != std::string::npos;
        m.held_by_another = !m.ok && rule.compiled.probe(g, root).matched;
        m.ok = m.ok || m.held_by_another;
        if (!o.write_to.empty())
          save_model(
              {.proto = b.model, .path = {}},
              o.write_to / ("refused_mutant_" + std::to_string(out.mutants.size()) + ".onnx"));
      }
      out.mutants.push_back(std::move(m));
    }

  // Each refusal the rule declares, written into its first instance that fused: the guard must
  // refuse it, in the words the refusal says. Without such an instance the cover fails already.
  if (!to_mutate.empty())
    for (std::size_t k = 0; k < rule.refusals.size(); ++k) {
      const fused_instance& f = to_mutate.front();
      plan.begin(planner::mode::replay, f.sequence);
      const detail::built b = rule.build_refused(plan, f.forms, f.views, int(k));
      mutant m;
      m.breaks = "refusal \"" + std::string(rule.refusals[k]) + "\"";
      m.expect = std::string(rule.refusals[k]);
      m.declared = true;
      onnx::ModelProto fused = b.model;
      const rewrite::report r = run(rule.compiled, fused);
      m.fused = !r.fusions.empty();
      if (!m.fused) {
        const graph g(b.model);
        m.near_miss = detail::reason_at(r, g.describe(g.producer(*g.find_value(b.root))));
        m.ok = m.near_miss.find(m.expect) != std::string::npos;
      }
      if (!o.write_to.empty())
        save_model({.proto = b.model, .path = {}},
                   o.write_to / ("refusal_" + std::to_string(k) + ".onnx"));
      out.mutants.push_back(std::move(m));
    }

  if (out.parity_checked && !pairs.empty()) {
    const auto verdicts = detail::run_parity(o, pairs);
    for (instance& i : out.instances)
      if (!i.file.empty()) i.parity = verdicts.at(i.file);
    for (mutant& m : out.mutants)
      if (!m.file.empty()) {
        m.parity = verdicts.at(m.file);
        m.ok = m.parity == "ok";
      }
  }
  return out;
}
#else
result search(const options& o, const rule_steps& rule);
#endif

}  // namespace detail

// Checks R from its own pattern (the header's comment says how); `compiled`: R erased with its
// options (rewrite::any_rule::of<R>(own)) where it was compiled already, as a rule library
// compiles its rules: this file then compiles R's pattern's writer alone, not its matcher, guard
// and emit again.
template <class R>
result check(const options& o, const rewrite::any_rule& compiled) {
  if (compiled.name() != R::name)
    throw error("selfcheck: checking " + std::string(R::name) + " with the rule " +
                std::string(compiled.name()));
  std::span<const pattern::example> examples;
  if constexpr (rewrite::rule_detail::declares_examples<R>) examples = R::examples;
  return detail::search(
      o, {.name = R::name,
          .examples = examples,
          .build =
              [&](detail::planner& plan, const std::vector<detail::leaf_form>& forms, int mutate,
                  std::vector<int> views, std::size_t* view_graphs_left) {
                return detail::build<R>(plan, o, compiled, forms, mutate, std::move(views),
                                        view_graphs_left);
              },
          .compiled = compiled,
          .refusals = detail::refusal_texts<R>(),
          .build_refused =
              [&](detail::planner& plan, const std::vector<detail::leaf_form>& forms,
                  std::vector<int> views, int refusal) {
                return detail::build<R>(plan, o, compiled, forms, -1, std::move(views), nullptr,
                                        refusal);
              }});
}

// Checks R with its options `own`, compiled here.
template <class R>
result check(const options& o, const rewrite::options_of<R>& own) {
  return check<R>(o, rewrite::any_rule::of<R>(own));
}

template <class R>
result check(const options& o = {}) {
  static const rewrite::options_of<R> defaults{};
  return check<R>(o, defaults);
}

}  // namespace fusekit::selfcheck
