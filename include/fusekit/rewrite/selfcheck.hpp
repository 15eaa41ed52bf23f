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
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <compare>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>

#include "fusekit/engine.hpp"
#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::selfcheck {

struct options {
  // Random instances beyond those that cover every alternative (a fixed seed repeats them).
  std::size_t cases = 4;
  std::uint64_t seed = 1;
  // Bounds on the work for a large pattern: instances written to cover its alternatives, and leaf
  // shapes tried for each (an alternative they leave unfused is reported as not covered).
  std::size_t cover_rounds = 512;
  std::size_t shape_tries = 64;
  // The graphs the rule judges for one instance while its open views are searched, over every
  // leaf shape tried (a pattern of a dozen views at once would otherwise take hours).
  std::size_t view_graphs = 2048;
  // The search for alternatives that fuse only beside others: the choices it changes, one at a
  // time, for each, the graphs it measures in all (shared out among the alternatives it seeks),
  // and the graphs each measure may judge while its open views are searched (a neighbour whose
  // views must be derived anew, repeat_kv's beside a v that is no longer merged, is no nearer on
  // its first candidates; a large pattern's few dozen alternatives with a full search each would
  // take many minutes).
  std::size_t descent_steps = 16;
  std::size_t descent_graphs = 4096;
  std::size_t descent_view_graphs = 32;
  // Of each form's instances, how many are measured for one the rule accepts with the sought
  // alternative put in.
  std::size_t start_candidates = 256;
  // The shape of each leaf input, unless the pattern asks for another rank.
  std::vector<std::int64_t> shape{2, 3, 8};
  // The instances' float types and opsets: alternatives like the pattern's own.
  std::vector<dtype> types{dtype::float32, dtype::float16};
  std::vector<std::int64_t> opsets{17, 18};
  // Where each instance, its fused form and each fused mutant are written, and each instance and
  // mutant the rule refused ("" writes nothing).
  std::filesystem::path write_to{};
  // A Python with onnxruntime and numpy: runs each instance and its fused form on the same random
  // inputs (needs write_to). Empty: parity is not checked, and the result says so.
  std::string python{};
};

struct instance {
  std::string choices;  // the alternatives it holds, "; "-separated
  bool fused = false;
  std::string reason;  // why it did not fuse
  // Refused, though every alternative it holds fused in another instance (or is one the rule's
  // options refuse): a combination the guard refuses and the pattern cannot say (a view on one
  // product and not on the other).
  bool combination = false;
  // Refused for the rule's options alone (verdict::no_with_these_options): no failure; what it
  // holds that no instance fused may be what these options refuse (result::refused_by_options).
  bool by_options = false;
  // The rule's example it was written for (pattern::example, as text), or "": one the rule
  // refuses is a failure whatever else fused.
  std::string example;
  std::string file;    // its name under write_to
  std::string parity;  // "ok", "differs: …", "failed: …", "not run: …", or "" (not asked)

  // Whether not fusing fails the check: a combination may be refused, an example may not.
  bool refusal_fails() const { return !fused && !by_options && (!combination || !example.empty()); }
};

struct mutant {
  std::string breaks;     // the predicate broken
  std::string expect;     // what the near miss must say
  std::string near_miss;  // what it said
  bool fused = false;     // another alternative took it
  // Another alternative's pattern holds it (kᵀ as written, where the broken Transpose is now the
  // identity): its guard judges the graph, and the refusal is the guard's (near_miss).
  bool held_by_another = false;
  std::string file;
  std::string parity;
  bool ok = false;
};

struct result {
  std::string rule;
  std::vector<instance> instances;
  std::vector<mutant> mutants;
  // Alternatives that no instance fused, with the reason of the last refusal.
  std::vector<std::string> uncovered;
  // Alternatives the rule's options refuse (verdict::no_with_these_options), with the reason: no
  // gap in the cover, and no failure.
  std::vector<std::string> refused_by_options;
  std::size_t alternatives = 0;
  // Graphs written that were no model (detail::no_model): no instances.
  std::size_t no_models = 0;
  bool parity_checked = false;

  bool ok() const {
    if (!uncovered.empty()) return false;
    // Asked for, parity is proven or the check fails: an instance ONNX Runtime could not run is
    // not one that computes the same.
    for (const instance& i : instances)
      if (i.refusal_fails() || (i.fused && parity_checked && i.parity != "ok")) return false;
    for (const mutant& m : mutants)
      if (!m.ok) return false;
    return true;
  }

  // "gelu-erf: 14 instances fused, 9 alternatives covered; parity with ONNX Runtime 14/14; 6
  // mutants refused, each named" and a line for each failure, the first `most` of them: a
  // pattern of thousands of alternatives that fails at one place fails at most of them.
  std::string to_table(std::size_t most = 20) const;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string result::to_table(std::size_t most) const {
  std::ostringstream out;
  std::size_t fused = 0, same = 0, named = 0, absorbed = 0, guarded = 0, combinations = 0;
  for (const instance& i : instances) {
    fused += i.fused;
    same += i.parity == "ok";
    combinations += i.combination;
  }
  for (const mutant& m : mutants) {
    named += m.ok && !m.fused && !m.held_by_another;
    absorbed += m.ok && m.fused;
    guarded += m.ok && !m.fused && m.held_by_another;
  }
  out << rule << ": " << (ok() ? "ok" : "FAILED") << "; " << fused << " of " << instances.size()
      << " instances fused, " << alternatives - uncovered.size() - refused_by_options.size()
      << " of " << alternatives << " alternatives covered";
  if (!refused_by_options.empty())
    out << " (" << refused_by_options.size() << " refused by these options)";
  if (combinations)
    out << " (" << combinations << " refused combining alternatives that fused apart)";
  if (no_models)
    out << " (" << no_models << " graph" << (no_models == 1 ? "" : "s")
        << " written no model, not judged)";
  out << "; parity with ONNX Runtime "
      << (parity_checked ? std::to_string(same) + " of " + std::to_string(fused)
                         : std::string("not checked (no Python with onnxruntime given)"))
      << "; " << mutants.size() << " mutants: " << named << " refused and named";
  if (absorbed) out << ", " << absorbed << " fused by another alternative";
  if (guarded) out << ", " << guarded << " held by another alternative, whose guard refused it";
  out << "\n";
  for (std::size_t k = 0; k < refused_by_options.size() && k < most; ++k)
    out << "  refused by these options: " << refused_by_options[k] << "\n";
  std::vector<std::string> failures;
  for (const std::string& u : uncovered) failures.push_back("not covered: " + u);
  for (const instance& i : instances) {
    if (i.refusal_fails())
      failures.push_back(
          (i.example.empty() ? "instance [" + i.choices + "]" : "example " + i.example) +
          " did not fuse: " + i.reason);
    if (!i.parity.empty() && i.parity != "ok")
      failures.push_back("instance [" + i.choices + "] parity: " + i.parity);
  }
  for (const mutant& m : mutants)
    if (!m.ok)
      failures.push_back(
          "mutant (" + m.breaks + ") " +
          (m.fused ? "fused, parity: " + m.parity
                   : "expected a near miss saying \"" + m.expect + "\", got " +
                         (m.near_miss.empty() ? std::string("none") : "\"" + m.near_miss + "\"")));
  for (std::size_t k = 0; k < failures.size() && k < most; ++k) out << "  " << failures[k] << "\n";
  if (const std::size_t rest = failures.size() - std::min(most, failures.size()); rest)
    out << "  " << rest << " more failure" << (rest == 1 ? "" : "s") << " not shown\n";
  return out.str();
}
#endif

namespace detail {

// ---- choices: which alternative each choice point takes

struct point {
  std::size_t alternatives;
  std::string label;
};

// A pattern's description as a report quotes it: its first 60 characters.
inline std::string shortened(std::string text) {
  constexpr std::size_t most = 60;
  if (text.size() > most) text = text.substr(0, most) + "…";
  return text;
}

// A choice point: what the pattern writes there, by type and whole description. Not the node's
// address: a pattern is a value, and a part written once and used twice (the scores below each
// branch of the mask's choice) is two objects but one choice to cover. The planner numbers the
// points as it meets them: a large pattern's descriptions run to kilobytes, and every instance's
// choices hold each point.
struct point_key {
  std::size_t id;
  auto operator<=>(const point_key&) const = default;
};

class planner {
 public:
  explicit planner(std::uint64_t seed) : random_(seed) {}

  // replay: the choices of a sequence, one after the other; keyed: each point's choice from a
  // map (its first where the map has none), whichever choices came before it.
  enum class mode : std::uint8_t { cover, random, replay, keyed };
  using choices = std::map<point_key, int>;

  // steer: in keyed mode, where the map has no choice, the alternative the example prefers.
  void begin(mode m, std::vector<int> replay = {}, choices keyed = {},
             const pattern::example* steer = nullptr) {
    mode_ = m;
    replay_ = std::move(replay);
    keyed_ = std::move(keyed);
    steer_ = m == mode::keyed ? steer : nullptr;
    taken_.clear();
    sequence_.clear();
    novel_ = false;
    // Every other cover round takes new alternatives at several points at once, each at random
    // (every cover round, once each has failed alone enough): alternatives that fuse only
    // together (q's heads merged into the batch axis, and v's; two views that must be alike). A
    // replay of the round (its leaf shapes searched) is still that round.
    if (m != mode::replay) jointly_ = m == mode::cover && (rounds_++ % 2 == 1 || !wanted_alone());
  }

  // `text` says what the choice is made in, `between` what its alternatives are.
  template <class P>
  int choose(const P&, std::size_t alternatives, const std::string& text,
             std::string_view between) {
    return choose_at(point_named(typeid(P), alternatives, text, between), alternatives);
  }
  // A choice in `p`, part of the rule's pattern (an object of static storage), described by the
  // pattern's own text: the description (kilobytes at the root of a large pattern, written anew
  // at each choice below it) took most of a check's time, and the part's address names the point
  // after the first meeting.
  // `preferred`: the example's alternative there (steering()).
  template <class P>
  int choose(const P& p, std::size_t alternatives, std::string_view between, int preferred = 0) {
    const auto [known, first] = by_address_.try_emplace({&p, typeid(P)}, 0);
    if (first) known->second = point_named(typeid(P), alternatives, pattern::describe(p), between);
    return choose_at(known->second, alternatives, preferred);
  }
  const pattern::example* steering() const { return steer_; }

 private:
  int choose_at(std::size_t id, std::size_t alternatives, int preferred = 0) {
    const point_key where{id};
    int pick = 0;
    if (mode_ == mode::replay) {
      pick = sequence_.size() < replay_.size() ? replay_[sequence_.size()] : 0;
    } else if (mode_ == mode::keyed) {
      const auto held = keyed_.find(where);
      pick = held == keyed_.end() ? preferred : std::min(held->second, int(alternatives) - 1);
    } else {
      pick = int(random_() % alternatives);
      // Covering: one alternative no instance has fused yet, and beside it alternatives that
      // fused, so that a refusal is the new alternative's own.
      // A fused one is taken at random: the branches it leads to hold the points not yet seen.
      // Until an instance fuses there is nothing to try an alternative beside: after the first
      // round (each point's first alternative, the pattern at its plainest) the choices are
      // drawn at random, as choices that only fuse together are (q's heads merged into the batch
      // axis, and v's).
      if (mode_ == mode::cover && (!covered_.empty() || rounds_ == 1)) {
        int want = -1;
        std::vector<int> fused;
        for (std::size_t k = alternatives; k-- > 0;) {
          if (jointly_ ? wanted_jointly(where, int(k)) : wanted(where, int(k))) want = int(k);
          if (covered_.contains({where, int(k)})) fused.push_back(int(k));
        }
        if (want >= 0 && (!novel_ || fused.empty() || (jointly_ && random_() % 2 == 0))) {
          pick = want;
          novel_ = novel_ || !fused.empty();
        } else if (!fused.empty()) {
          pick = fused[random_() % fused.size()];
        }
      }
    }
    taken_.emplace_back(where, pick);
    sequence_.push_back(pick);
    return pick;
  }

 public:
  const std::vector<int>& sequence() const { return sequence_; }
  // Whether each of `taken` fused in an instance, or is what the rule's options refuse.
  bool covers(const std::vector<std::pair<point_key, int>>& taken) const {
    return std::all_of(taken.begin(), taken.end(), [&](const auto& t) {
      return covered_.contains(t) || by_options_.contains(t);
    });
  }
  const std::vector<std::pair<point_key, int>>& taken() const { return taken_; }
  // What this instance took, each point's first choice.
  choices taken_choices() const {
    choices out;
    for (const auto& [where, k] : taken_) out.emplace(where, k);
    return out;
  }
  std::size_t alternatives_at(const point_key& where) const {
    return points_.at(where).alternatives;
  }
  bool covered(const std::pair<point_key, int>& alternative) const {
    return covered_.contains(alternative);
  }
  // Each alternative no instance fused, with the choices of the last instance that held it
  // (none where no instance did).
  std::vector<std::pair<std::pair<point_key, int>, choices>> uncovered_choices() const {
    std::vector<std::pair<std::pair<point_key, int>, choices>> out;
    for (const auto& [where, p] : points_)
      for (int k = 0; k < int(p.alternatives); ++k)
        if (!covered_.contains({where, k})) {
          const auto last = last_refused_choices_.find({where, k});
          out.emplace_back(std::pair{where, k},
                           last == last_refused_choices_.end() ? choices{} : last->second);
        }
    return out;
  }

  void fused() {
    for (const auto& t : taken_) covered_.insert(t);
  }
  // A joint round's refusal is no alternative's own: it counts apart.
  // Before any instance fused, a refusal is no alternative's own either: none is charged.
  void refused(const std::string& why) {
    const choices held = taken_choices();
    for (const auto& t : taken_)
      if (!covered_.contains(t)) {
        if (!covered_.empty()) ++(jointly_ ? joint_failures_ : failures_)[t];
        last_refusal_[t] = why;
        last_refused_choices_[t] = held;
      }
  }
  // Whether a cover round could still reach an alternative no instance has fused.
  bool wants_more() const {
    for (const auto& [where, p] : points_)
      for (std::size_t k = 0; k < p.alternatives; ++k)
        if (wanted(where, int(k)) || wanted_jointly(where, int(k))) return true;
    return false;
  }
  std::size_t alternatives() const {
    std::size_t n = 0;
    for (const auto& [where, p] : points_) n += p.alternatives;
    return n;
  }
  // An alternative no instance fused that the rule's options refuse (verdict::
  // no_with_these_options): no longer uncovered.
  void refused_by_options(const std::pair<point_key, int>& alternative, std::string why) {
    by_options_[alternative] = std::move(why);
  }
  bool refused_by_options(const std::pair<point_key, int>& alternative) const {
    return by_options_.contains(alternative);
  }
  std::vector<std::string> uncovered() const;
  std::vector<std::string> refused_by_options() const;
  std::string describe_taken() const;

 private:
  static constexpr int tries_per_alternative = 3;
  static constexpr int joint_tries_per_alternative = 6;

  std::size_t point_named(std::type_index type, std::size_t alternatives, const std::string& text,
                          std::string_view between) {
    const auto [named, fresh] = ids_.try_emplace({type, text + std::string(between)}, ids_.size());
    if (fresh)
      points_.emplace(point_key{named->second},
                      point{alternatives, shortened(text) + std::string(between)});
    return named->second;
  }
  static bool below(const std::map<std::pair<point_key, int>, int>& failures,
                    const std::pair<point_key, int>& key, int tries) {
    const auto f = failures.find(key);
    return f == failures.end() || f->second < tries;
  }
  bool wanted(const point_key& where, int k) const {
    const auto key = std::pair{where, k};
    return !covered_.contains(key) && below(failures_, key, tries_per_alternative);
  }
  bool wanted_jointly(const point_key& where, int k) const {
    const auto key = std::pair{where, k};
    return !covered_.contains(key) && below(joint_failures_, key, joint_tries_per_alternative);
  }
  bool wanted_alone() const {
    for (const auto& [where, p] : points_)
      for (std::size_t k = 0; k < p.alternatives; ++k)
        if (wanted(where, int(k))) return true;
    return points_.empty();
  }
  static std::string alternative_text(const point& p, int k) {
    return p.label + ": " + std::to_string(k + 1) + " of " + std::to_string(p.alternatives);
  }

  std::mt19937_64 random_;
  mode mode_ = mode::cover;
  std::vector<int> replay_;
  choices keyed_;
  const pattern::example* steer_ = nullptr;
  bool novel_ = false;  // whether this round took its one new alternative
  bool jointly_ = false;
  std::size_t rounds_ = 0;
  std::vector<int> sequence_;
  std::vector<std::pair<point_key, int>> taken_;
  struct text_hash {
    std::size_t operator()(const std::pair<std::type_index, std::string>& k) const {
      return k.first.hash_code() ^ std::hash<std::string>{}(k.second);
    }
  };
  std::unordered_map<std::pair<std::type_index, std::string>, std::size_t, text_hash> ids_;
  std::map<std::pair<const void*, std::type_index>, std::size_t> by_address_;
  std::map<point_key, point> points_;  // in the order the pattern's walk first meets them
  std::set<std::pair<point_key, int>> covered_;
  std::map<std::pair<point_key, int>, int> failures_, joint_failures_;
  std::map<std::pair<point_key, int>, std::string> last_refusal_;
  std::map<std::pair<point_key, int>, choices> last_refused_choices_;
  std::map<std::pair<point_key, int>, std::string> by_options_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string planner::describe_taken() const {
  std::string out;
  for (const auto& [where, k] : taken_) {
    const point& p = points_.at(where);
    if (p.alternatives < 2) continue;
    out += (out.empty() ? "" : "; ") + alternative_text(p, k);
  }
  return out;
}

FUSEKIT_ENGINE_INLINE std::vector<std::string> planner::refused_by_options() const {
  std::vector<std::string> out;
  for (const auto& [alternative, why] : by_options_)
    out.push_back(alternative_text(points_.at(alternative.first), alternative.second) + ": " + why);
  return out;
}

FUSEKIT_ENGINE_INLINE std::vector<std::string> planner::uncovered() const {
  std::vector<std::string> out;
  for (const auto& [where, p] : points_)
    for (std::size_t k = 0; k < p.alternatives; ++k)
      if (!covered_.contains({where, int(k)}) && !by_options_.contains({where, int(k)})) {
        const auto why = last_refusal_.find({where, int(k)});
        out.push_back(alternative_text(p, int(k)) +
                      (why == last_refusal_.end() ? "" : ": " + why->second));
      }
  return out;
}
#endif

// "{with softcap, k_grouped; without k_cache}"
inline std::string example_text(const pattern::example& e) {
  std::string out;
  for (const auto& [word, names] : {std::pair{"with", e.with}, std::pair{"without", e.without}}) {
    std::string listed;
    for (const std::string_view name : names)
      if (!name.empty()) listed += (listed.empty() ? "" : ", ") + std::string(name);
    if (!listed.empty()) out += (out.empty() ? "" : "; ") + std::string(word) + " " + listed;
  }
  return "{" + out + "}";
}

// How a graph written for `e` is not what it asks: "" where it binds every capture of `with`
// and none of `without`.
inline std::string astray(const pattern::example& e,
                          const std::set<std::string, std::less<>>& names) {
  std::string out;
  const auto add = [&](std::string_view what, std::string_view name) {
    out += (out.empty() ? "" : ", ") + std::string(what) + std::string(name);
  };
  for (const std::string_view name : e.with)
    if (!name.empty() && !names.contains(name)) add("no ", name);
  for (const std::string_view name : e.without)
    if (!name.empty() && names.contains(name)) add("", name);
  return out;
}

// ---- building one instance

// What a value's predicates ask of the leaf that stands for it.
// A dim a constant takes from a leaf or constant written before it (same_dim<I, "other", J>): one
// more where a mutant breaks it.
struct dim_link {
  int dim;
  std::string other;
  int other_dim;
  bool off = false;
};

struct want {
  dtype type = dtype::undefined;
  int rank = -1;
  bool constant = false;  // a value the facts must know (proven_value): an initializer
  std::vector<dim_link> links;
};

// A leaf's shape, of those searched: the options' shape, its last dim alone, a scalar, and the
// options' shape with the two dims before its last exchanged (the other of the layouts
// [batch, heads, sequence, head size] and [batch, sequence, heads, head size]).
enum class leaf_form : std::uint8_t { full, last_dim, scalar, exchanged };
inline constexpr int leaf_forms = 4;

struct site {
  std::string breaks;
  std::string expect;
};

// A view whose shape or axes the pattern leaves open: the initializer that holds them (a
// Concat's axis: the node, whose attribute holds it), the value whose dims decide them, and the
// candidate it holds.
struct view {
  std::string op;
  std::string data;
  int holder = 0;  // the initializer's index; a Concat's: its node's
  int choice = 0;
  bool settled = false;  // an op's predicate, or a replay, decided it
};

// Why a graph was refused, and the node the reason is about ("" where it names none).
struct refusal {
  std::string reason;
  std::string node;
  bool by_options = false;  // verdict::no_with_these_options
};
// The first node a guard's reason names ('Slice_5'): the check that failed is about it.
inline std::string first_named(const std::string& reason) {
  const std::size_t open = reason.find('\'');
  const std::size_t close = open == std::string::npos ? open : reason.find('\'', open + 1);
  return close == std::string::npos ? std::string() : reason.substr(open + 1, close - open - 1);
}

struct state {
  build::model_builder b;
  planner& plan;
  const options& o;
  dtype type;
  std::int64_t opset;
  std::map<std::string, build::value, std::less<>> bound;
  // The nodes the pattern binds by name (.bind<"split">()), by index: a name bound twice is one
  // node, each place reading the output its pattern names.
  std::map<std::string, int, std::less<>> bound_nodes;
  // The names an optional op present or an any_of binds: with the two above, what an example
  // asks of the instance (pattern::example).
  std::set<std::string, std::less<>> named;
  std::vector<leaf_form> forms;  // of the free leaves, in order; missing ones: full
  std::size_t free_leaves = 0;
  // The dims written for each named leaf and constant, which a later one's same_dim reads.
  std::map<std::string, std::vector<std::int64_t>, std::less<>> leaf_dims;
  int mutate = -1;  // the mutation site to break, -1: none
  int sites = 0;
  site broken{};
  // What the mutant gives a reader outside the pattern, once the whole graph is written (the ops
  // above it settle their views by their own patterns, which that reader would fail), and the
  // readers' outputs.
  std::vector<build::value> read_outside, extra_outputs;
  std::size_t names = 0;
  int depth = 0;  // of the op being built: 0 is the root
  std::vector<view> views;
  std::vector<int> view_replay;  // each view's candidate, as an instance took it (a mutant's)
  std::size_t* view_graphs_left = nullptr;           // of the instance's options::view_graphs
  std::optional<std::vector<std::int64_t>> sibling;  // the dims a broadcasting op's leaf takes
  // The rule's sources (pattern/sources.hpp): writes a capture's value from its own, or nothing
  // where it has none. `sourcing`: the captures being written so, each written as a leaf inside
  // its own source. `naming`: the captures whose patterns are being written, each with the depth
  // at which a leaf is the captured value itself (capture<"v">(any_of(…, any()))).
  std::function<std::optional<build::value>(std::string_view, want)> source{};
  std::vector<std::string> sourcing;
  std::vector<std::pair<std::string, int>> naming;

  state(planner& p, const options& o, dtype t, std::int64_t opset)
      : b(opset), plan(p), o(o), type(t), opset(opset) {}

  // Whether the next mutation site is the one to break; records what breaking it must say.
  // A source's predicates are no sites: what refuses a graph without them is the guard.
  // `what`: the predicate's text, or what writes it (only the mutated site's is read).
  template <class What>
  bool breaks(const What& what, std::string expect) {
    if (!sourcing.empty() || sites++ != mutate) return false;
    if constexpr (std::is_invocable_v<const What&>)
      broken = {what(), std::move(expect)};
    else
      broken = {std::string(what), std::move(expect)};
    return true;
  }

  std::vector<std::int64_t> shape_for(const want& w) {
    std::vector<std::int64_t> dims = free_shape(w);
    for (const dim_link& l : w.links) {
      const auto other = leaf_dims.find(l.other);
      if (other == leaf_dims.end()) continue;
      const auto at = [](const std::vector<std::int64_t>& d, int i) {
        return i < 0 ? std::int64_t(d.size()) + i : std::int64_t(i);
      };
      const std::int64_t i = at(dims, l.dim), j = at(other->second, l.other_dim);
      if (i >= 0 && i < std::int64_t(dims.size()) && j >= 0 &&
          j < std::int64_t(other->second.size()))
        dims[std::size_t(i)] = other->second[std::size_t(j)] + (l.off ? 1 : 0);
    }
    return dims;
  }

  // A leaf's dims from options::shape and its form in the search; a declared rank of 0 or 1 has
  // one form only, and takes no place in the search.
  std::vector<std::int64_t> free_shape(const want& w) {
    const std::vector<std::int64_t>& full = o.shape;
    if (w.rank >= 0) {
      std::vector<std::int64_t> dims(std::size_t(w.rank), 1);
      for (int i = 0; i < w.rank && i < int(full.size()); ++i)
        dims[std::size_t(w.rank - 1 - i)] = full[full.size() - 1 - std::size_t(i)];
      if (w.rank < 2) return dims;
      const std::size_t index = free_leaves++;
      switch (index < forms.size() ? forms[index] : leaf_form::full) {
        case leaf_form::last_dim:  // a square of the last dim
          std::fill(dims.begin(), dims.end(), full.back());
          break;
        case leaf_form::scalar:  // one row
          std::fill(dims.begin(), dims.end() - 1, 1);
          break;
        case leaf_form::exchanged:
          std::swap(dims[dims.size() - 2], dims[dims.size() - 1]);
          break;
        case leaf_form::full:
          break;
      }
      return dims;
    }
    const std::size_t index = free_leaves++;
    switch (index < forms.size() ? forms[index] : leaf_form::full) {
      case leaf_form::last_dim:
        return {full.back()};
      case leaf_form::scalar:
        return {};
      case leaf_form::exchanged:
        if (full.size() >= 3) {
          std::vector<std::int64_t> dims = full;
          std::swap(dims[dims.size() - 3], dims[dims.size() - 2]);
          return dims;
        }
        break;
      case leaf_form::full:
        break;
    }
    return sibling ? *sibling : full;
  }

  build::value leaf(std::string_view name, want w);

  // The capture `name` written from its source, where the rule gives it one.
  std::optional<build::value> sourced(const std::string& name, want w) {
    if (!source || std::find(sourcing.begin(), sourcing.end(), name) != sourcing.end())
      return std::nullopt;
    sourcing.push_back(name);
    std::optional<build::value> v = source(name, w);
    sourcing.pop_back();
    return v;
  }

  std::string fresh(std::string_view name) {
    std::string clean;
    for (char c : name) clean += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return (clean.empty() ? std::string("in") : clean) + "_" + std::to_string(names++);
  }
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE build::value state::leaf(std::string_view name, want w) {
  const dtype t = w.type == dtype::undefined ? type : w.type;
  // A value the facts must know is a number the rule reads (a scale, a cap): a scalar.
  const std::vector<std::int64_t> dims =
      w.constant && w.rank < 0 ? std::vector<std::int64_t>{} : shape_for(w);
  if (w.constant) {
    std::int64_t count = 1;
    for (std::int64_t d : dims) count *= d;
    return b.initializer(fresh(name), t, dims, std::vector<double>(std::size_t(count), 0.5));
  }
  leaf_dims[std::string(name)] = dims;
  std::vector<build::dim_spec> shape(dims.begin(), dims.end());
  return b.input(fresh(name), t, shape);
}
#endif

// What a written source (pattern/sources.hpp) writes with: the value it stands for, of the type
// its reader wants (the instance's float type where the reader admits several).
class writer {
 public:
  writer(state& s, want w) : s_(s), w_(w) {}
  dtype type() const { return w_.type == dtype::undefined ? s_.type : w_.type; }
  // Dim `axis` (negative: from the last) of a capture already written, as the facts prove it;
  // an error where it is not written yet or not a number.
  std::int64_t dim(std::string_view capture, int axis) const;
  // The same, nullopt where the capture, written, has no such dim proven a number (a leaf the
  // shape search made a scalar): a source that can do without writes something else then.
  std::optional<std::int64_t> proven_dim(std::string_view capture, int axis) const;
  // Every dim of a capture already written, nullopt where one is not proven a number; an error
  // where it is not written yet.
  std::optional<std::vector<std::int64_t>> dims(std::string_view capture) const;
  // The shape the leaf search gives this value as it would a leaf of the pattern's (options::
  // shape, its last dim, a scalar …): a source whose shape follows no capture written before it
  // takes part in the search so.
  std::vector<std::int64_t> leaf_shape() { return s_.shape_for(w_); }
  // Whether a capture is written already (which of two branches the instance took).
  bool written(std::string_view capture) const { return s_.bound.contains(capture); }
  // The number a capture already written holds; an error where it is not written yet or holds
  // no constant scalar.
  double scalar(std::string_view capture) const;
  // A graph input: the parity run feeds a float one normal samples, an integer one 0s and 1s.
  build::value input(dtype t, std::vector<std::int64_t> dims) {
    return s_.b.input(s_.fresh("written"), t,
                      std::vector<build::dim_spec>(dims.begin(), dims.end()));
  }
  build::value initializer(dtype t, std::vector<std::int64_t> dims,
                           const std::vector<double>& values) {
    return s_.b.initializer(s_.fresh("written"), t, std::move(dims), values);
  }

 private:
  state& s_;
  want w_;
};

template <class P>
struct gen;

template <class P>
build::value make(const P& p, state& s, want w = {}) {
  return gen<P>::make(p, s, w);
}

// A choice point or a predicate as the report names it: the pattern's own text, cut short.
template <class P>
std::string text_of(const P& p) {
  return shortened(pattern::describe(p));
}

// A value other than v's: where a mutant breaks a number.
inline double off(double v, double tolerance) {
  if (std::isinf(v)) return v < 0 ? -1e4 : 1e4;
  return v + 0.5 + std::abs(v) * 0.5 + tolerance * 10;
}

// The largest finite number of a float type (of any other, of double).
constexpr double largest_finite(dtype t) {
  switch (t) {
    case dtype::float16:
      return 65504;
    case dtype::bfloat16:
      return bfloat16_to_float(0x7f7f);
    case dtype::float32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

template <>
struct gen<pattern::any_t> {
  static build::value make(const pattern::any_t&, state& s, want w) {
    if (!s.naming.empty() && s.naming.back().second == s.depth)
      if (const auto v = s.sourced(s.naming.back().first, w)) return *v;
    return s.leaf("any", w);
  }
};

template <class W>
struct gen<pattern::written_t<W>> {
  static build::value make(const pattern::written_t<W>&, state& s, want w) {
    writer out(s, w);
    return W::write(out);
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::capture_t<Name>> {
  static build::value make(const pattern::capture_t<Name>&, state& s, want w) {
    const std::string name(Name.view());
    if (const auto found = s.bound.find(name); found != s.bound.end()) {
      if (!s.breaks("'" + name + "' twice", "'" + name + "' must be the same value twice"))
        return found->second;
      return s.leaf(name, w);
    }
    if (const auto v = s.sourced(name, w)) return s.bound[name] = *v;
    return s.bound[name] = s.leaf(name, w);
  }
};

template <pattern::fixed_string Name, class Inner>
struct gen<pattern::captured<Name, Inner>> {
  static build::value make(const pattern::captured<Name, Inner>& p, state& s, want w) {
    const std::string name(Name.view());
    if (const auto found = s.bound.find(name); found != s.bound.end()) return found->second;
    s.naming.emplace_back(name, s.depth);
    const build::value v = detail::make(p.inner, s, w);
    s.naming.pop_back();
    return s.bound[name] = v;
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::constant_scalar_t<Name>> {
  static build::value make(const pattern::constant_scalar_t<Name>& p, state& s, want w) {
    const std::string name(Name.view());
    if (const auto v = s.sourced(name, w)) return *v;
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    // Inside the bounds as the type holds them: float16 writes a bound of 1e6 as inf.
    const double least = std::max(p.least, -largest_finite(t));
    const double most = std::min(p.most, largest_finite(t));
    double v = p.has_expected ? p.expected
               : p.has_least  ? least + 0.5
               : p.has_most   ? most - 0.5
                              : 0.5;
    if (p.has_least && p.has_most) v = (least + most) / 2;
    const bool bounded = p.has_expected || p.has_least || p.has_most;
    if (bounded && s.breaks("constant scalar '" + name + "'", "constant scalar '" + name + "'"))
      v = p.has_expected ? off(p.expected, p.tolerance) : p.has_most ? p.most + 1 : p.least - 1;
    // An initializer or a Constant node: both are constants to the pattern.
    if (s.plan.choose(p, 2, "constant scalar '" + name + "'", " as an initializer | a Constant") ==
        0)
      return s.b.initializer(s.fresh(name), t, {}, {v});
    return s.b.constant_scalar(t, v);
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::constant_t<Name>> {
  static build::value make(const pattern::constant_t<Name>& p, state& s, want w) {
    using pattern::tensor_rule;
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    const std::int64_t n = s.o.shape.back();
    if (p.rule == tensor_rule::none || p.rule == tensor_rule::all_equal ||
        p.rule == tensor_rule::all_ones) {
      // A leaf like any other, of ones: its rank and dims searched, or as its predicates ask.
      const std::vector<std::int64_t> dims = s.shape_for(w);
      s.leaf_dims[std::string(Name.view())] = dims;
      std::int64_t count = 1;
      for (std::int64_t d : dims) count *= d;
      return s.b.initializer(s.fresh(Name.view()), t, dims,
                             std::vector<double>(std::size_t(count), 1));
    }
    std::vector<double> square(std::size_t(n * n));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        square[std::size_t(i * n + j)] =
            p.rule == tensor_rule::lower_triangular_ones ? j <= i : j > i;
    const std::string name(Name.view());
    if (s.breaks("constant '" + name + "' " + pattern::detail::tensor_rule_text(p.rule),
                 "constant '" + name + "'"))
      square[std::size_t(n - 1)] = 1 - square[std::size_t(n - 1)];
    return s.b.initializer(s.fresh(name), t, {n, n}, square);
  }
};

template <pattern::fixed_string Name, std::size_t N>
struct gen<pattern::checked<pattern::constant_t<Name>, pattern::elements_are<Name, N>>> {
  using P = pattern::checked<pattern::constant_t<Name>, pattern::elements_are<Name, N>>;
  static build::value make(const P& p, state& s, want w) {
    std::vector<double> values(p.pred.values.begin(), p.pred.values.end());
    const std::string name(Name.view());
    if (s.breaks("constant '" + name + "' values", "constant '" + name + "'"))
      values[0] = off(values[0], p.pred.tolerance);
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    return s.b.initializer(s.fresh(name), t, {std::int64_t(N)}, values);
  }
};

template <class T>
inline constexpr bool is_leaf = false;
// A constant<> tensor: written with the ops (not a leaf), but of a type and rank its predicates
// ask, as a leaf is, and broken by the mutants as one.
template <class T>
inline constexpr bool is_constant_tensor = false;
template <pattern::fixed_string Name>
inline constexpr bool is_constant_tensor<pattern::constant_t<Name>> = true;
template <class Inner, class Pred>
inline constexpr bool is_constant_tensor<pattern::checked<Inner, Pred>> = is_constant_tensor<Inner>;
template <>
inline constexpr bool is_leaf<pattern::any_t> = true;
template <pattern::fixed_string Name>
inline constexpr bool is_leaf<pattern::capture_t<Name>> = true;
template <class Inner, class Pred>
inline constexpr bool is_leaf<pattern::checked<Inner, Pred>> = is_leaf<Inner>;

// A dtype that none of Types is: where a mutant breaks a dtype predicate.
template <dtype... Types>
constexpr dtype other_than() {
  for (dtype t : {dtype::float64, dtype::int32, dtype::float32, dtype::float16})
    if (((t != Types) && ...)) return t;
  return dtype::int64;
}

// The type a dtype predicate gives what it checks: `current` where the predicate holds it, else
// its first type; at the mutation site, a type none of its types is.
template <dtype... Types>
dtype type_for(const pattern::dtype_is<Types...>& pred, state& s, dtype current) {
  std::string text;
  pred.describe(text);
  constexpr dtype wrong = other_than<Types...>();
  if (s.breaks(text, "has dtype " + std::string(dtype_name(wrong)))) return wrong;
  return ((current == Types) || ...) ? current : std::get<0>(std::tuple{Types...});
}

template <class Inner, class Pred>
struct gen<pattern::checked<Inner, Pred>> {
  static build::value make(const pattern::checked<Inner, Pred>& p, state& s, want w) {
    refine(p.pred, s, w);
    return detail::make(p.inner, s, w);
  }

 private:
  template <dtype... Types>
  static void refine(const pattern::dtype_is<Types...>& pred, state& s, want& w) {
    // Only a leaf can be written of another type; an op's output has its inputs' type.
    if constexpr (is_leaf<Inner> || is_constant_tensor<Inner>)
      w.type = type_for(pred, s, s.type);
    else
      w.type = ((s.type == Types) || ...) ? s.type : std::get<0>(std::tuple{Types...});
  }
  template <std::size_t Rank>
  static void refine(const pattern::rank_is<Rank>&, state& s, want& w) {
    rank(Rank, s, w);
  }
  template <std::size_t Rank>
  static void refine(const pattern::proven_rank_is<Rank>&, state& s, want& w) {
    rank(Rank, s, w);
  }
  template <class F>
  static void refine(const pattern::proven_value_is<F>&, state&, want& w) {
    w.constant = true;
  }
  // A constant's dims, which no op above settles, are written from those it names, and a mutant
  // breaks them. A leaf's are left to the search: its shape is its readers' to settle too.
  template <int I, pattern::fixed_string Other, int J>
  static void refine(const pattern::same_dim_as<I, Other, J>& pred, state& s, want& w) {
    if constexpr (is_constant_tensor<Inner>) {
      std::string text;
      pred.describe(text);
      const bool off = s.breaks(text, "is not equal to dim " + std::to_string(J));
      w.links.push_back({I, std::string(Other.view()), J, off});
    }
  }
  template <class Other>
  static void refine(const Other&, state&, want&) {}

  static void rank(std::size_t r, state& s, want& w) {
    w.rank = int(r);
    if constexpr (is_leaf<Inner> || is_constant_tensor<Inner>)
      if (s.breaks("rank " + std::to_string(r), "rank")) w.rank = int(r) + 1;
  }
};

template <class P, bool AnyCasts>
struct gen<pattern::transparent_t<P, AnyCasts>> {
  static build::value make(const pattern::transparent_t<P, AnyCasts>& p, state& s, want w) {
    const build::value v = detail::make(p.inner, s, w);
    if (s.plan.choose(p, 2,
                      AnyCasts ? " without | with a Cast to its own type"
                               : " without | with an Identity") == 0)
      return v;
    if constexpr (AnyCasts)
      return s.b.op("Cast", {v}, {{"to", w.type == dtype::undefined ? s.type : w.type}});
    else
      return s.b.op("Identity", {v});
  }
};

// The first alternative that binds the most of what the example asks for (pattern::steered).
template <class... Binds>
int preferred(const planner& plan) {
  const pattern::example* e = plan.steering();
  if (e == nullptr) return 0;
  const std::array scores{pattern::steered<Binds>(*e)...};
  return int(std::max_element(scores.begin(), scores.end()) - scores.begin());
}

template <class P>
struct gen<pattern::maybe_t<P>> {
  static build::value make(const pattern::maybe_t<P>& p, state& s, want w) {
    const int steer =
        preferred<typename pattern::captures_of<P>::type, pattern::decl_list<>>(s.plan);
    if (s.plan.choose(p, 2, " given | omitted", steer) == 1) return {""};
    return detail::make(p.inner, s, w);
  }
};

template <class Op, pattern::fixed_string Bind>
struct gen<pattern::optional_t<Op, Bind>> {
  static build::value make(const pattern::optional_t<Op, Bind>& p, state& s, want w) {
    // Absent first: the first instance is the pattern at its plainest, the one most likely to
    // fuse before any alternative has, and the base the others are each tried beside.
    using absent = typename pattern::captures_of<decltype(p.inner.inputs.head)>::type;
    const int steer = preferred<absent, typename pattern::optional_t<Op, Bind>::captures>(s.plan);
    if (s.plan.choose(p, 2, " absent | present", steer) == 0)
      return detail::make(p.inner.inputs.head, s, w);
    if constexpr (pattern::optional_t<Op, Bind>::binds) s.named.emplace(Bind.view());
    return detail::make(p.inner, s, w);
  }
};

template <pattern::fixed_string Bind, class... Alts>
struct gen<pattern::any_of_t<Bind, Alts...>> {
  static build::value make(const pattern::any_of_t<Bind, Alts...>& p, state& s, want w) {
    const int k = s.plan.choose(p, sizeof...(Alts), " branch",
                                preferred<typename pattern::captures_of<Alts>::type...>(s.plan));
    if constexpr (pattern::any_of_t<Bind, Alts...>::binds) s.named.emplace(Bind.view());
    return pick(p.alts, k, s, w);
  }

 private:
  template <class Pack>
  static build::value pick(const Pack& alts, int k, state& s, want w) {
    if constexpr (std::is_same_v<Pack, pattern::pack<>>)
      return {""};
    else if (k == 0)
      return detail::make(alts.head, s, w);
    else
      return pick(alts.tail, k - 1, s, w);
  }
};

// ---- an op node: its predicates first (an attribute, the axes, a dtype that retypes what it
// reads), then its inputs

struct node_parts {
  std::vector<build::attr> attrs;
  bool has_axes = false;
  std::vector<std::int64_t> axes;
};

inline std::optional<std::int64_t> attribute_value(const pattern::int_is& m, bool broken, state&) {
  return broken ? m.value + 1 : m.value;
}
template <std::size_t N>
std::optional<std::int64_t> attribute_value(const pattern::int_in<N>& m, bool broken, state& s) {
  std::int64_t v = m.values[0];
  // The instance's own type where the attribute is a type (a Cast's `to`).
  for (std::int64_t x : m.values)
    if (x == std::int64_t(s.type)) v = x;
  if (broken)
    for (v = 0; std::find(m.values.begin(), m.values.end(), v) != m.values.end();) ++v;
  return v;
}

template <pattern::fixed_string Attr, class Matcher>
void attribute(const Matcher& m, state& s, node_parts& parts) {
  const std::string name(Attr.view());
  std::string text;
  m.describe(text);
  const auto breaks = [&] { return s.breaks(name + "=" + text, name + " = "); };
  if constexpr (std::is_same_v<Matcher, pattern::last_axis_t>) {
    parts.attrs.emplace_back(name, std::int64_t(breaks() ? 0 : -1));
  } else if constexpr (std::is_same_v<Matcher, pattern::float_near>) {
    parts.attrs.emplace_back(name, breaks() ? off(m.value, m.tolerance) : m.value);
  } else if constexpr (std::is_same_v<Matcher, pattern::string_is>) {
    parts.attrs.emplace_back(name, std::string(m.value) + (breaks() ? "_other" : ""));
  } else if constexpr (requires {
                         m.on_axes(std::declval<const graph&>(), node_id{},
                                   std::declval<const pattern::int_list&>());
                       }) {
    std::vector<std::int64_t> v(m.values.begin(), m.values.end());
    // A permutation broken is another permutation, which a graph can hold: its last two swapped.
    if (breaks()) {
      if (name == "perm" && v.size() >= 2)
        std::swap(v[v.size() - 2], v.back());
      else
        v.push_back(v.empty() ? 0 : v.back() + 1);
    }
    parts.attrs.emplace_back(name, v);
  } else if constexpr (requires { attribute_value(m, false, s); }) {
    parts.attrs.emplace_back(name, *attribute_value(m, breaks(), s));
  }
  // satisfies(text, fn): a predicate in code, which nothing here can write; the match judges it.
}

template <class Pred>
void predicate(const Pred&, state&, node_parts&) {}
template <pattern::fixed_string Attr, class Matcher>
void predicate(const pattern::node_check<pattern::attribute_is<Attr, Matcher>>& p, state& s,
               node_parts& parts) {
  attribute<Attr>(p.matcher, s, parts);
}
template <class Matcher>
void predicate(const pattern::axes_are<Matcher>& p, state& s, node_parts& parts) {
  std::string text;
  p.describe(text);
  const bool broken = s.breaks(text, "axes");
  parts.has_axes = true;
  if constexpr (std::is_same_v<Matcher, pattern::last_axis_t>) {
    parts.axes = {broken ? 0 : -1};
  } else {
    parts.axes.assign(p.matcher.values.begin(), p.matcher.values.end());
    if (broken) parts.axes.push_back(parts.axes.empty() ? 0 : parts.axes.back() + 1);
  }
}
// A dtype of the op's output: the instance's type where it is one of them; broken, a type none
// is, for every value the op reads.
template <dtype... Types>
void predicate(const pattern::dtype_is<Types...>& p, state& s, node_parts&) {
  s.type = type_for(p, s, s.type);
}

// An attribute the op does not have at the instance's opset (is_test after BatchNormalization-6):
// the pattern holds it of the node as written, and a node that states it is no model.
template <class Spec, class Pred>
bool not_at_opset(const Pred&, const state&) {
  return false;
}
template <class Spec, pattern::fixed_string Attr, class Matcher>
bool not_at_opset(const pattern::node_check<pattern::attribute_is<Attr, Matcher>>&,
                  const state& s) {
  if (!Spec::domain.empty()) return false;
  const onnx::OpSchema* schema =
      schemas().GetSchema(std::string(Spec::name), int(s.opset), std::string(Spec::domain));
  return schema != nullptr && !schema->attributes().contains(std::string(Attr.view()));
}

template <class Spec, class Preds>
void predicates(const Preds& preds, state& s, node_parts& parts) {
  if constexpr (!std::is_same_v<Preds, pattern::pack<>>) {
    if (!not_at_opset<Spec>(preds.head, s)) predicate(preds.head, s, parts);
    predicates<Spec>(preds.tail, s, parts);
  }
}

// An op's schema at an opset: onnx's, or ONNX Runtime's for a contributed op; null if neither.
inline const onnx::OpSchema* schema_of(std::string_view op, std::string_view domain,
                                       std::int64_t opset) {
  return schemas().GetSchema(std::string(op), int(opset),
                             domain.empty() ? onnx::ONNX_DOMAIN : std::string(domain));
}

// The one element type an op's input admits where its schema (onnx's, or ONNX Runtime's for a
// contributed op) allows only one (a Where's condition is bool, a Reshape's shape int64, a
// RotaryEmbedding's positions int64); undefined where it allows several, or is unknown.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE dtype only_type(std::string_view op, std::string_view domain,
                                      std::int64_t opset, std::size_t slot) {
  const onnx::OpSchema* schema = schema_of(op, domain, opset);
  if (schema == nullptr || schema->inputs().empty()) return dtype::undefined;
  const auto& formal = schema->inputs()[std::min(slot, schema->inputs().size() - 1)];
  std::vector<std::string> allowed{formal.GetTypeStr()};
  for (const auto& c : schema->typeConstraintParams())
    if (c.type_param_str == formal.GetTypeStr()) allowed = c.allowed_type_strs;
  if (allowed.size() != 1 || !allowed[0].starts_with("tensor(")) return dtype::undefined;
  const onnx::TypeProto t =
      onnx::Utils::DataTypeUtils::ToTypeProto(onnx::Utils::DataTypeUtils::ToType(allowed[0]));
  return dtype(t.tensor_type().elem_type());
}
#else
dtype only_type(std::string_view op, std::string_view domain, std::int64_t opset, std::size_t slot);
#endif

// Why a written graph is no model: an ai.onnx op it holds came after the opset it imports (a
// pattern's branch of an opset-23 op, written into an instance of 17). "" where none did.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string too_new_op(const onnx::ModelProto& m) {
  int opset = 0;
  for (const onnx::OperatorSetIdProto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = int(o.version());
  for (const onnx::NodeProto& n : m.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    if (onnx::OpSchemaRegistry::Schema(n.op_type(), opset, onnx::ONNX_DOMAIN)) continue;
    const onnx::OpSchema* latest = onnx::OpSchemaRegistry::Schema(
        n.op_type(), std::numeric_limits<int>::max(), onnx::ONNX_DOMAIN);
    if (latest == nullptr) continue;
    int first = opset + 1;
    while (!onnx::OpSchemaRegistry::Schema(n.op_type(), first, onnx::ONNX_DOMAIN)) ++first;
    return "the instance holds " + n.op_type() + ", which came in ai.onnx opset " +
           std::to_string(first) + ", and imports " + std::to_string(opset) +
           ": no model, not judged";
  }
  return "";
}
#else
std::string too_new_op(const onnx::ModelProto& m);
#endif

// Why a written graph is no model: an op too new for its opset (too_new_op), or a node the facts
// prove cannot run (q's heads merged into the batch axis and kᵀ's not: batch dims that do not
// broadcast). "" where it is one. `g` is m's graph.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string no_model(const onnx::ModelProto& m, const graph& g) {
  if (std::string why = too_new_op(m); !why.empty()) return why;
  if (const auto stuck = facts_of(g).cannot_run(); !stuck.empty())
    return g.describe(stuck.front()) + " cannot run on what it reads: no model, not judged";
  return "";
}
#else
std::string no_model(const onnx::ModelProto& m, const graph& g);
#endif

// How far a written graph is from a model: each dim of a node's output the facts cannot give as
// a number (an output of unknown rank counts four), and a thousand for an op too new for its
// opset. The leaves are of fixed shapes, so a graph whose ops all run has every dim a number.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::size_t unsettled(const onnx::ModelProto& m, const graph& g) {
  if (!too_new_op(m).empty()) return 1000;
  const facts& f = facts_of(g);
  std::size_t out = 0;
  for (node_id n = 0; n < g.node_count(); ++n)
    for (value_id v : g.outputs(n)) {
      if (v == no_id) continue;
      const shape_fact& s = f.shape(v);
      if (!s.known) {
        out += 4;
        continue;
      }
      for (const sym& d : s.dims) out += !d.constant();
    }
  return out;
}
#else
std::size_t unsettled(const onnx::ModelProto& m, const graph& g);
#endif

// Whether input `slot` of `op` is written of the type its output has: not a Where's condition,
// not what IsNaN or a comparison reads. Unknown schemas: yes.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE bool follows_output_type(std::string_view op, std::string_view domain,
                                               std::int64_t opset, std::size_t slot) {
  const onnx::OpSchema* schema = schema_of(op, domain, opset);
  if (schema == nullptr || schema->inputs().empty() || schema->outputs().empty()) return true;
  const auto& formal = schema->inputs()[std::min(slot, schema->inputs().size() - 1)];
  return formal.GetTypeStr() == schema->outputs()[0].GetTypeStr();
}
#else
bool follows_output_type(std::string_view op, std::string_view domain, std::int64_t opset,
                         std::size_t slot);
#endif

// ---- views whose shape or axes the pattern leaves open

// The view an open input of an op is, by its slot: a Slice's four (its starts, ends, axes and
// steps), one of the other views'; "" where it is none.
inline std::string_view view_of(std::string_view op, std::size_t slot, std::int64_t opset) {
  static constexpr std::string_view slice[] = {"", "Slice starts", "Slice ends", "Slice axes",
                                               "Slice steps"};
  if (op == "Slice") return slot < std::size(slice) ? slice[slot] : "";
  if (slot != 1) return "";
  if (op == "Reshape" || op == "Expand" || op == "Tile") return op;
  if (op == "Gather") return "Gather indices";
  if (op == "Split") return opset >= 13 ? "Split split" : "";
  return (op == "Unsqueeze" || op == "Squeeze") && opset >= 13 ? op : "";
}
template <class T>
inline constexpr bool is_open = false;
template <>
inline constexpr bool is_open<pattern::any_t> = true;
template <>
inline constexpr bool is_open<pattern::maybe_t<pattern::any_t>> = true;

template <class Pred>
inline constexpr bool is_code = false;
template <class F>
inline constexpr bool is_code<pattern::node_check<pattern::node_where<F>>> = true;
template <class Preds>
inline constexpr bool states_code = false;
template <class... Ps>
inline constexpr bool states_code<pattern::pack<Ps...>> = (is_code<Ps> || ...);

// What a view of dims `d` is tried with, likeliest first: a Reshape merges two or three adjacent
// dims or splits one in two (into sizes the instance has first), an Expand broadcasts a 1 and a
// Tile repeats an axis to one of them, an Unsqueeze inserts an axis, a Squeeze drops a 1, a Split
// halves an axis, a Gather takes one of the first two of its axis, an axis attribute is any axis
// from the last.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::vector<std::int64_t>> view_candidates(
    std::string_view op, const std::vector<std::int64_t>& d,
    const std::vector<std::int64_t>& sizes) {
  std::vector<std::vector<std::int64_t>> out;
  const auto add = [&](std::vector<std::int64_t> c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  };
  const auto known = [&](std::int64_t x) {
    return std::find(sizes.begin(), sizes.end(), x) != sizes.end();
  };
  const std::size_t r = d.size();
  if (op == "Reshape") {
    for (const std::size_t width : {2u, 3u})
      for (std::size_t i = 0; i + width <= r; ++i) {
        std::vector<std::int64_t> c(d.begin(), d.begin() + std::ptrdiff_t(i));
        std::int64_t product = 1;
        for (std::size_t k = i; k < i + width; ++k) product *= d[k];
        c.push_back(product);
        c.insert(c.end(), d.begin() + std::ptrdiff_t(i + width), d.end());
        add(std::move(c));
      }
    for (const bool both_known : {true, false})
      for (std::size_t i = 0; i < r; ++i)
        for (const std::int64_t a : sizes) {
          if (a <= 1 || a >= d[i] || d[i] % a != 0 || known(d[i] / a) != both_known) continue;
          std::vector<std::int64_t> c(d.begin(), d.begin() + std::ptrdiff_t(i));
          c.push_back(a);
          c.push_back(d[i] / a);
          c.insert(c.end(), d.begin() + std::ptrdiff_t(i + 1), d.end());
          add(std::move(c));
        }
    add(d);
  } else if (op == "Expand" || op == "Tile") {
    const bool tile = op == "Tile";
    const std::vector<std::int64_t> same = tile ? std::vector<std::int64_t>(r, 1) : d;
    add(same);
    for (std::size_t i = 0; i < r; ++i)
      for (const std::int64_t v : sizes)
        if (v > 1 && (tile || d[i] == 1)) {
          std::vector<std::int64_t> c = same;
          c[i] = v;
          add(std::move(c));
        }
  } else if (op == "Unsqueeze") {
    for (std::size_t k = 0; k <= r; ++k) add({std::int64_t(k)});
  } else if (op == "Squeeze") {
    for (std::size_t k = 0; k < r; ++k)
      if (d[k] == 1) add({std::int64_t(k)});
  } else if (op.ends_with(" axis")) {
    for (std::size_t k = 1; k <= r; ++k) add({-std::int64_t(k)});
  } else if (op == "Split split") {
    for (std::size_t k = r; k-- > 0;)
      if (d[k] % 2 == 0) add({d[k] / 2, d[k] / 2});
  } else if (op == "Gather indices") {
    add({0});
    add({1});
  } else if (op.starts_with("Slice") && r > 0 && d.back() % 2 == 0) {
    // A half of the last axis (rotate_half's, a pair's): [0, h) or [h, L) of axis -1, which a
    // Slice of three inputs (axis 0) does not name.
    const std::int64_t h = d.back() / 2;
    if (op == "Slice starts") {
      add({0});
      add({h});
    } else if (op == "Slice ends") {
      add({h});
      add({d.back()});
    } else if (op == "Slice axes") {
      add({-1});
    } else if (op == "Slice steps") {
      add({1});
    }
  }
  return out;
}

FUSEKIT_ENGINE_INLINE std::optional<std::vector<std::int64_t>> static_dims(const graph& g,
                                                                           std::string_view name) {
  const auto id = g.find_value(name);
  const facts& f = facts_of(g);
  const auto rank = id ? f.rank(*id) : std::nullopt;
  if (!rank) return std::nullopt;
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < *rank; ++i) {
    const auto size = f.dim_of(*id, int(i))->constant();
    if (!size) return std::nullopt;
    dims.push_back(*size);
  }
  return dims;
}

FUSEKIT_ENGINE_INLINE std::vector<std::vector<std::int64_t>> candidates_of(state& s,
                                                                           const view& v) {
  const onnx::ModelProto m = s.b.build();
  const auto dims = static_dims(graph(m), v.data);
  return dims ? view_candidates(v.op, *dims, s.o.shape) : std::vector<std::vector<std::int64_t>>{};
}

FUSEKIT_ENGINE_INLINE std::optional<std::vector<std::int64_t>> writer::dims(
    std::string_view capture) const {
  const auto bound = s_.bound.find(capture);
  if (bound == s_.bound.end())
    throw error("selfcheck: a written source reads the dims of '" + std::string(capture) +
                "', which is not written before it");
  const onnx::ModelProto m = s_.b.build();
  return static_dims(graph(m), bound->second.name);
}

FUSEKIT_ENGINE_INLINE std::optional<std::int64_t> writer::proven_dim(std::string_view capture,
                                                                     int axis) const {
  if (!written(capture))
    throw error("selfcheck: a written source reads dim " + std::to_string(axis) + " of '" +
                std::string(capture) + "', which is not written before it");
  const auto all = dims(capture);
  const std::int64_t rank = all ? std::int64_t(all->size()) : 0;
  const std::int64_t at = axis < 0 ? rank + axis : axis;
  if (at < 0 || at >= rank) return std::nullopt;
  return (*all)[std::size_t(at)];
}

FUSEKIT_ENGINE_INLINE std::int64_t writer::dim(std::string_view capture, int axis) const {
  if (const auto size = proven_dim(capture, axis)) return *size;
  throw error("selfcheck: a written source reads dim " + std::to_string(axis) + " of '" +
              std::string(capture) + "', which has no such dim proven a number");
}

FUSEKIT_ENGINE_INLINE double writer::scalar(std::string_view capture) const {
  const auto bound = s_.bound.find(capture);
  const onnx::ModelProto m = s_.b.build();
  const graph g(m);
  const auto v = bound == s_.bound.end() ? std::nullopt : g.find_value(bound->second.name);
  const std::optional<double> x = v ? facts_of(g).real_scalar(*v) : std::nullopt;
  if (!x)
    throw error("selfcheck: a written source reads the number '" + std::string(capture) +
                "' holds, " +
                (bound == s_.bound.end() ? std::string("which is not written before it")
                                         : "which is no constant scalar"));
  return *x;
}

FUSEKIT_ENGINE_INLINE void hold(state& s, const view& v, const std::vector<std::int64_t>& values) {
  if (v.op.ends_with(" axis")) {
    for (onnx::AttributeProto& a : *s.b.proto().mutable_node(v.holder)->mutable_attribute())
      if (a.name() == "axis") a.set_i(values.at(0));
    return;
  }
  // A Gather of a 0-d index drops the axis, as the patterns that take one element read it.
  const std::vector<std::int64_t> dims =
      v.op == "Gather indices" ? std::vector<std::int64_t>{}
                               : std::vector<std::int64_t>{std::int64_t(values.size())};
  onnx::TensorProto& t = *s.b.proto().mutable_initializer(v.holder);
  t = build::make_tensor(t.name(), dtype::int64, dims,
                         std::vector<double>(values.begin(), values.end()));
}
#else
std::vector<std::vector<std::int64_t>> view_candidates(std::string_view op,
                                                       const std::vector<std::int64_t>& d,
                                                       const std::vector<std::int64_t>& sizes);
std::optional<std::vector<std::int64_t>> static_dims(const graph& g, std::string_view name);
std::vector<std::vector<std::int64_t>> candidates_of(state& s, const view& v);
void hold(state& s, const view& v, const std::vector<std::int64_t>& values);
#endif

// A view's shape or axes: an initializer holding its first candidate, or, replayed, the one the
// instance took.
inline void choose_view(state& s, view v) {
  if (s.views.size() < s.view_replay.size()) v.choice = s.view_replay[s.views.size()];
  if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
    v.choice = std::min(v.choice, int(candidates.size()) - 1);
    hold(s, v, candidates[std::size_t(v.choice)]);
  }
  s.views.push_back(v);
}
inline build::value open_view(state& s, std::string_view op, const build::value& data) {
  const view v{.op = std::string(op), .data = data.name, .holder = s.b.proto().initializer_size()};
  const std::size_t space = op.find(' ');
  const std::string_view part = space != std::string_view::npos        ? op.substr(space + 1)
                                : op == "Unsqueeze" || op == "Squeeze" ? "axes"
                                                                       : "shape";
  const build::value held = s.b.initializer(s.fresh(part), dtype::int64, {0}, {});
  choose_view(s, v);
  return held;
}

// Which node reads a view's initializer (an axis view: the node that holds it).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string reader_of(state& s, const view& v) {
  const onnx::GraphProto& g = s.b.proto();
  if (v.op.ends_with(" axis")) return g.node(v.holder).name();
  const std::string& held = g.initializer(v.holder).name();
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& in : n.input())
      if (in == held) return n.name();
  return {};
}
// The nodes `node` reads from (`down`: that read it), itself included, by name: what its check
// can depend on, its own inputs or the walk from the root down to it.
FUSEKIT_ENGINE_INLINE std::set<std::string> reach_of(state& s, const std::string& node, bool down) {
  const onnx::GraphProto& g = s.b.proto();
  std::multimap<std::string, const onnx::NodeProto*> next;  // by the value between them
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& v : down ? n.input() : n.output()) next.emplace(v, &n);
  std::set<std::string> seen;
  std::vector<const onnx::NodeProto*> frontier;
  for (const onnx::NodeProto& n : g.node())
    if (n.name() == node) frontier.push_back(&n);
  while (!frontier.empty()) {
    const onnx::NodeProto* n = frontier.back();
    frontier.pop_back();
    if (!seen.insert(n->name()).second) continue;
    for (const std::string& v : down ? n->output() : n->input())
      for (auto [at, end] = next.equal_range(v); at != end; ++at) frontier.push_back(at->second);
  }
  return seen;
}
#else
std::string reader_of(state& s, const view& v);
std::set<std::string> reach_of(state& s, const std::string& node, bool down);
#endif

// The views from `first` on that nothing settled yet, tried together until `judge` accepts the
// graph (it returns the refusal, nullopt where it accepts): the combinations of their candidates
// by the sum of the candidates' ranks, likeliest first (repeat_kv's Unsqueeze, Expand and
// Reshape under the dynamo detour's two Reshapes need the third, first, fifth and sixth), at most
// view_tries graphs, for a dozen views at most; then, from their first candidates, one view at a
// time where the refusal points (repair_views); settled either way, where nothing was found on
// their first candidates.
inline constexpr int view_tries = 256;

// A dozen views at once (an interleaved rotation's pairs, their Squeeze and Unsqueeze axes, the
// halves' bounds) are far past the ranks' sums: the refusal names the node whose check failed,
// and only the views it reads (itself, then what is upstream of it) can mend it. Each candidate
// of its views is tried alone and beside each of another of its own views' (a Slice's start and
// end; its bounds, of the dims the Reshape above it makes; of a node without views, those above
// it: an Unsqueeze's axis and the Reshape after it); a change is kept where the refusal moves to
// a node it never named (one it named again is a check the change broke anew), until the graph
// is accepted, no change moves it, or `budget` graphs are spent.
template <class Judge>
bool repair_views(state& s, const std::vector<std::size_t>& open, Judge& judge, int& budget) {
  std::vector<std::vector<std::int64_t>> held(open.size());
  for (std::size_t k = 0; k < open.size(); ++k) {
    view& v = s.views[open[k]];
    if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
      hold(s, v, candidates.front());
      v.choice = 0;
      held[k] = candidates.front();
    }
  }
  if (budget-- <= 0) return false;
  std::optional<refusal> why = judge();
  // The graph's nodes stay as they are while views change: who reads each view, once.
  std::vector<std::string> readers;
  for (const std::size_t k : open) readers.push_back(reader_of(s, s.views[k]));
  std::set<std::string> blamed;
  while (why && budget > 0) {
    blamed.insert(why->node);
    // Its own views, then those upstream of it, then those below it (a walk the guard ends at a
    // node passed through them); the others cannot mend its check.
    const std::set<std::string> upstream = reach_of(s, why->node, false),
                                downstream = reach_of(s, why->node, true);
    std::vector<std::size_t> order, own;
    for (const int rank : {0, 1, 2})
      for (std::size_t k = 0; k < open.size(); ++k) {
        const std::string& reader = readers[k];
        const int r = reader == why->node           ? 0
                      : upstream.contains(reader)   ? 1
                      : downstream.contains(reader) ? 2
                                                    : 3;
        if (r == rank) order.push_back(k);
        if (rank == 0 && r == 0) own.push_back(k);
      }
    // A node of no views of its own (a Cos of angles a Reshape made) is mended by two above it.
    if (own.empty())
      for (const std::size_t k : order)
        if (upstream.contains(readers[k])) own.push_back(k);
    bool moved = false;
    // Holds candidate c of view k; kept, with what it changed, where the refusal moved.
    const auto move = [&](std::size_t k, std::size_t c, const std::vector<std::int64_t>& to) {
      hold(s, s.views[open[k]], to);
      --budget;
      std::optional<refusal> next = judge();
      if (next && blamed.contains(next->node)) return false;
      s.views[open[k]].choice = int(c);
      held[k] = to;
      why = std::move(next);
      return moved = true;
    };
    for (std::size_t i = 0; !moved && i < order.size() && budget > 0; ++i) {
      const std::size_t k = order[i];
      const auto candidates = candidates_of(s, s.views[open[k]]);
      for (std::size_t c = 0; !moved && c < candidates.size() && budget > 0; ++c) {
        if (candidates[c] == held[k] || move(k, c, candidates[c])) continue;
        const std::vector<std::int64_t> was = held[k];
        held[k] = candidates[c];
        for (std::size_t j = 0; !moved && j < own.size() && budget > 0; ++j) {
          if (own[j] == k) continue;
          const auto theirs = candidates_of(s, s.views[open[own[j]]]);
          for (std::size_t d = 0; !moved && d < theirs.size() && budget > 0; ++d)
            if (theirs[d] != held[own[j]] && !move(own[j], d, theirs[d]))
              hold(s, s.views[open[own[j]]], held[own[j]]);
        }
        if (moved) {
          s.views[open[k]].choice = int(c);
        } else {
          held[k] = was;
          hold(s, s.views[open[k]], was);
        }
      }
      if (!moved && !candidates.empty()) hold(s, s.views[open[k]], held[k]);
    }
    if (!moved) return false;
  }
  return !why;
}

template <class Judge>
bool settle_views(state& s, std::size_t first, Judge&& judge) {
  std::vector<std::size_t> open;
  for (std::size_t k = first; k < s.views.size(); ++k)
    if (!s.views[k].settled) open.push_back(k);
  if (open.empty()) return false;
  const auto left = [&] {
    return s.view_graphs_left == nullptr
               ? view_tries
               : int(std::min<std::size_t>(view_tries, *s.view_graphs_left));
  };
  const auto spend = [&](int given, int budget) {
    if (s.view_graphs_left != nullptr)
      *s.view_graphs_left -=
          std::min<std::size_t>(*s.view_graphs_left, std::size_t(given - std::max(budget, 0)));
  };
  const int given = left();
  int budget = given;
  bool reached = false;  // whether a combination of this sum exists
  const auto search = [&](const auto& self, std::size_t k, std::size_t rest) -> bool {
    if (k == open.size()) {
      if (rest != 0) return false;
      reached = true;
      return budget-- > 0 && !judge();
    }
    view& v = s.views[open[k]];
    const auto candidates = candidates_of(s, v);
    if (candidates.empty()) return self(self, k + 1, rest);
    for (std::size_t c = 0; c < candidates.size() && c <= rest && budget > 0; ++c) {
      hold(s, v, candidates[c]);
      v.choice = int(c);
      if (self(self, k + 1, rest - c)) return true;
    }
    return false;
  };
  // Past a dozen views the sums reach two changed views at most within view_tries (364
  // combinations of 12 sum to 3): the repair reaches farther, for fewer graphs.
  bool found = false;
  for (std::size_t sum = 0; !found && budget > 0 && open.size() <= 12; ++sum) {
    reached = false;
    found = search(search, 0, sum);
    if (!reached) break;
  }
  spend(given, budget);
  if (!found) {
    const int again = left();
    budget = again;
    found = repair_views(s, open, judge, budget);
    spend(again, budget);
  }
  for (const std::size_t k : open) {
    view& v = s.views[k];
    if (!found)
      if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
        hold(s, v, candidates.front());
        v.choice = 0;
      }
    v.settled = true;
  }
  return found;
}

// What an op reads, in two passes: first the inputs that are ops, then its leaves and views,
// which take their shapes from those (a view's from what it regroups, a broadcasting op's leaf
// first the shape of the op it sits beside: a mask as large as the scores it is added to).
template <class Spec, std::size_t Slot = 0, class Inputs>
void inputs(const Inputs& in, state& s, want w, std::vector<build::value>& out, bool leaves) {
  if constexpr (!std::is_same_v<Inputs, pattern::pack<>>) {
    using head = std::remove_cvref_t<decltype(in.head)>;
    if ((is_leaf<head> || is_open<head>) == leaves) {
      if (const std::string_view view = view_of(Spec::name, Slot, s.opset);
          is_open<head> && !view.empty() && !out.front().name.empty()) {
        out[Slot] = open_view(s, view, out.front());
      } else {
        want slot = w;
        if (!follows_output_type(Spec::name, Spec::domain, s.opset, Slot))
          slot.type = dtype::undefined;
        if (const dtype t = only_type(Spec::name, Spec::domain, s.opset, Slot);
            t != dtype::undefined)
          slot.type = t;
        out[Slot] = detail::make(in.head, s, slot);
      }
    }
    inputs<Spec, Slot + 1>(in.tail, s, w, out, leaves);
  }
}

inline bool broadcasts(std::string_view op) {
  static constexpr std::string_view ops[] = {
      "Add", "Sub", "Mul",   "Div",  "Pow",     "Where",          "Max",         "Min",
      "And", "Or",  "Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual", "Mod"};
  return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
}

template <class Spec, class Inputs>
void inputs(const Inputs& in, state& s, want w, std::vector<build::value>& out) {
  out.assign(pattern::pack_traits<Inputs>::size, build::value{""});
  inputs<Spec>(in, s, w, out, false);
  const std::optional<std::vector<std::int64_t>> outer = s.sibling;
  s.sibling.reset();
  // The largest of them: a scalar beside a leaf (a constant factor) says nothing of its shape.
  if (broadcasts(Spec::name)) {
    const onnx::ModelProto m = s.b.build();
    const graph g(m);
    for (const build::value& v : out)
      if (!v.name.empty())
        if (auto dims = static_dims(g, v.name);
            dims && !dims->empty() && (!s.sibling || dims->size() > s.sibling->size()))
          s.sibling = std::move(dims);
  }
  inputs<Spec>(in, s, w, out, true);
  s.sibling = outer;
}

// Where a Reduce op takes its axes: an input from ReduceSum 13 and the others 18 on.
inline bool axes_as_input(std::string_view op, std::int64_t opset) {
  return opset >= (op == "ReduceSum" ? 13 : 18);
}

// The name an op's pattern binds its node to, "" where it binds none.
template <class Pred>
inline constexpr std::string_view node_bound_as{};
template <pattern::fixed_string Name>
inline constexpr std::string_view node_bound_as<pattern::bind_node<Name>> = Name.view();
template <class Preds>
inline constexpr std::string_view bound_name{};
template <class... Ps>
inline constexpr std::string_view bound_name<pattern::pack<Ps...>> = [] {
  std::string_view name;
  ((name = name.empty() ? node_bound_as<Ps> : name), ...);
  return name;
}();

// Output `slot` of the node bound to `name` where one of that op is written already (a Split
// whose two outputs two places read), with as many outputs as that takes.
inline std::optional<build::value> bound_output(state& s, std::string_view name,
                                                std::string_view op, std::string_view domain,
                                                std::uint32_t slot) {
  const auto at = s.bound_nodes.find(name);
  if (at == s.bound_nodes.end()) return std::nullopt;
  onnx::NodeProto& node = *s.b.proto().mutable_node(at->second);
  if (node.op_type() != op || node.domain() != domain) return std::nullopt;
  while (std::uint32_t(node.output_size()) <= slot)
    node.add_output(node.name() + "_" + std::to_string(node.output_size()));
  return build::value{node.output(int(slot))};
}

template <class Spec, class Inputs, class Preds, bool Commute>
struct gen<pattern::op_pattern<Spec, Inputs, Preds, Commute>> {
  using P = pattern::op_pattern<Spec, Inputs, Preds, Commute>;
  static build::value make(const P& p, state& s, want w) {
    if constexpr (!bound_name<Preds>.empty())
      if (auto out = bound_output(s, bound_name<Preds>, Spec::name, Spec::domain, p.slot))
        return *out;
    const bool root = s.depth++ == 0;
    const dtype outer = s.type;
    const std::size_t views_from = s.views.size();
    node_parts parts;
    predicates<Spec>(p.preds, s, parts);
    // What an op reads is of its output's type, but for a Cast, which makes that type.
    want in;
    in.type = Spec::name == "Cast" ? dtype::undefined : w.type;
    std::vector<build::value> args;
    if constexpr (P::variadic) {
      args.push_back(detail::make(p.inputs.head.element, s, in));
      args.push_back(detail::make(p.inputs.head.element, s, in));
    } else {
      inputs<Spec>(p.inputs, s, in, args);
    }
    if constexpr (Commute) {
      if (s.plan.choose(p, 2, " operands as written | swapped") == 1) std::swap(args[0], args[1]);
    }
    while (!args.empty() && args.back().name.empty()) args.pop_back();
    if (parts.has_axes) {
      // Input 1 is the axes' own, whatever the pattern wrote there (maybe(any()), as the pattern
      // README asks): the attribute before the op's opset took them as an input, that input after.
      args.resize(1);
      if (axes_as_input(Spec::name, s.opset)) {
        args.push_back(s.b.initializer(s.fresh("axes"), dtype::int64,
                                       {std::int64_t(parts.axes.size())},
                                       std::vector<double>(parts.axes.begin(), parts.axes.end())));
      } else {
        parts.attrs.emplace_back("axes", parts.axes);
      }
    }
    const auto named = [&](std::string_view a) {
      for (const build::attr& x : parts.attrs)
        if (x.proto.name() == a) return true;
      return false;
    };
    // Attributes ONNX requires and no predicate gave.
    if (Spec::name == "Cast" && !named("to"))
      parts.attrs.emplace_back("to", w.type == dtype::undefined ? outer : w.type);
    // An axis the pattern leaves to code is searched as a view's shape is: the sequence axis of a
    // cache's Concat, the last of a pair's halves, the pair's axis a Split or Gather takes apart.
    constexpr bool axis_searched =
        Spec::name == "Concat" || Spec::name == "Split" || Spec::name == "Gather";
    const bool axis_open = axis_searched && !named("axis");
    if (axis_open) parts.attrs.emplace_back("axis", std::int64_t(-1));
    // A Split of one output is none: two at least.
    const int outputs = int(p.slot) + 1 + (Spec::name == "Split" && p.slot == 0);
    const auto outs =
        s.b.ops(Spec::name, args, {}, {.domain = std::string(Spec::domain), .outputs = outputs});
    const int index = s.b.proto().node_size() - 1;
    auto& node = *s.b.proto().mutable_node(index);
    for (const build::attr& a : parts.attrs) *node.add_attribute() = a.proto;
    if constexpr (!bound_name<Preds>.empty()) s.bound_nodes.emplace(bound_name<Preds>, index);
    if (axis_open && !args.empty())
      choose_view(
          s, {.op = std::string(Spec::name) + " axis", .data = args.front().name, .holder = index});
    // An op whose predicate is code settles the views below it: its own pattern is their judge
    // (the root's is the rule, in build()).
    if constexpr (states_code<Preds>)
      if (!root)
        settle_views(s, views_from, [&]() -> std::optional<refusal> {
          const onnx::ModelProto m = s.b.build();
          const graph g(m);
          const auto id = g.find_value(outs[p.slot].name);
          pattern::explanation why;
          if (id && pattern::match(p, g, g.producer(*id), &why)) return std::nullopt;
          return refusal{why.message, why.failing_node == no_id ? first_named(why.message)
                                                                : g.node(why.failing_node).name()};
        });
    s.type = outer;
    --s.depth;
    const build::value out = outs[p.slot];
    if (!root && p.policy == pattern::use_policy::contained &&
        s.breaks([&] { return "a reader outside the pattern of " + text_of(p); },
                 "is also read by"))
      s.read_outside.push_back(out);
    return out;
  }
};

// ---- judging an instance

struct built {
  onnx::ModelProto model;
  std::string root;  // the root node's output
  site broken;
  int sites = 0;
  std::vector<int> sequence;
  std::string choices;
  std::size_t free_leaves = 0;
  std::vector<int> views;  // each open view's candidate
  // The captures it writes and the nodes it binds, where written for an example.
  std::set<std::string, std::less<>> names;
};

// Why the rule's pattern does not match at `root`'s producer or its guard refuses; nullopt where
// it accepts.
template <class R>
std::optional<refusal> refused(const graph& g, const std::string& root,
                               const rewrite::options_of<R>& own) {
  const node_id at = g.producer(*g.find_value(root));
  if (at == no_id) return refusal{"no node gives the root", ""};
  pattern::explanation why;
  const auto m = pattern::match(R::pattern, g, at, &why);
  if (!m)
    return refusal{why.message, why.failing_node == no_id ? first_named(why.message)
                                                          : g.node(why.failing_node).name()};
  if (rewrite::verdict v = rewrite::guard_of<R>(g, m, own); !v)
    return refusal{v.reason, first_named(v.reason), v.by_options};
  return std::nullopt;
}
template <class R>
bool accepted(const graph& g, const std::string& root, const rewrite::options_of<R>& own) {
  return !refused<R>(g, root, own);
}

// How near a written graph is to one the rule accepts, nearest least: first how far it is from
// a model (unsettled), then accepted before refused by the guard before unmatched, an unmatched
// one by how far its match got (pattern/context.hpp's progress, then the values it held).
struct closeness {
  std::size_t unsettled = 0;
  int verdict = 0;  // 0 accepted, 1 refused by the guard, 2 unmatched
  std::size_t short_of = 0, unheld = 0;
  auto operator<=>(const closeness&) const = default;
  static constexpr closeness farthest() {
    constexpr std::size_t far = std::numeric_limits<std::size_t>::max();
    return {far, 2, far, far};
  }
};
template <class R>
closeness closeness_of(const onnx::ModelProto& model, const std::string& root,
                       const rewrite::options_of<R>& own) {
  constexpr std::size_t far = std::numeric_limits<std::size_t>::max();
  const graph g(model);
  closeness c{.unsettled = unsettled(model, g)};
  if (c.unsettled > 0) return {c.unsettled, 2, far, far};
  const node_id at = g.producer(*g.find_value(root));
  if (at == no_id) return {c.unsettled, 2, far, far};
  pattern::explanation why;
  const auto m = pattern::match(R::pattern, g, at, &why);
  if (!m) return {c.unsettled, 2, far - why.progress, far - why.held};
  c.verdict = rewrite::guard_of<R>(g, m, own) ? 0 : 1;
  return c;
}

// The value of the capture `name` written from its source in `all`, if it has one.
template <class... S>
std::optional<build::value> from_sources(const pattern::sources_t<S...>& all, std::string_view name,
                                         state& s, want w) {
  std::optional<build::value> out;
  std::apply(
      [&](const auto&... each) {
        ((out || each.name != name ? void() : void(out = make(each.pattern, s, w))), ...);
      },
      all.each);
  return out;
}

template <class R>
built build(planner& plan, const options& o, const rewrite::options_of<R>& own,
            const std::vector<leaf_form>& forms, int mutate, std::vector<int> views = {},
            std::size_t* view_graphs_left = nullptr) {
  std::string types = "float type", opsets = "opset";
  for (dtype t : o.types) types += (types.size() == 10 ? " " : "|") + std::string(dtype_name(t));
  for (std::int64_t v : o.opsets) opsets += (opsets.size() == 5 ? " " : "|") + std::to_string(v);
  const dtype t = o.types[std::size_t(plan.choose(o.types, o.types.size(), types, ""))];
  const std::int64_t opset =
      o.opsets[std::size_t(plan.choose(o.opsets, o.opsets.size(), opsets, ""))];
  state s(plan, o, t, opset);
  s.forms = forms;
  s.mutate = mutate;
  s.view_replay = std::move(views);
  s.view_graphs_left = view_graphs_left;
  if constexpr (rewrite::rule_detail::declares_sources<R>)
    s.source = [&s](std::string_view name, want w) { return from_sources(R::sources, name, s, w); };
  s.b.opset_import("com.microsoft", 1);
  const build::value root = make(R::pattern, s);
  for (const build::value& v : s.read_outside) s.extra_outputs.push_back(s.b.op("Identity", {v}));
  // The views no predicate below the root settled: the rule is their judge. A mutant keeps its
  // instance's (the rule must refuse it); one an op's predicate settles is derived again, from
  // what the broken predicate made of what it regroups.
  if (s.view_replay.empty())
    settle_views(s, 0, [&] {
      onnx::ModelProto m = s.b.build();
      m.mutable_graph()->add_output()->set_name(root.name);
      for (const build::value& v : s.extra_outputs)
        m.mutable_graph()->add_output()->set_name(v.name);
      return refused<R>(graph(m), root.name, own);
    });
  built out;
  for (const view& v : s.views) out.views.push_back(v.choice);
  out.model = s.b.build();
  out.sites = s.sites;
  out.broken = s.broken;
  out.sequence = plan.sequence();
  out.choices = plan.describe_taken();
  out.free_leaves = s.free_leaves;
  if (plan.steering() != nullptr) {  // read only against an example
    out.names = std::move(s.named);
    for (const auto& [name, value] : s.bound) out.names.insert(name);
    for (const auto& [name, index] : s.bound_nodes) out.names.insert(name);
  }
  // The outputs, typed as the facts prove them: ONNX Runtime and the checker want their types.
  const graph g(out.model);
  const facts& f = facts_of(g);
  for (const build::value& v : [&] {
         std::vector<build::value> all{root};
         all.insert(all.end(), s.extra_outputs.begin(), s.extra_outputs.end());
         return all;
       }()) {
    const value_id id = *g.find_value(v.name);
    auto& info = *out.model.mutable_graph()->add_output();
    info.set_name(v.name);
    auto& tensor = *info.mutable_type()->mutable_tensor_type();
    tensor.set_elem_type(int(g.type(id)));
    if (const auto rank = f.rank(id)) {
      auto& shape = *tensor.mutable_shape();
      for (std::size_t i = 0; i < *rank; ++i) {
        const auto size = f.dim_of(id, int(i))->constant();
        if (size)
          shape.add_dim()->set_dim_value(*size);
        else
          shape.add_dim();
      }
    }
  }
  out.root = root.name;
  return out;
}

// The leaf forms to try, fewest changed leaves first.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::vector<leaf_form>> leaf_searches(std::size_t leaves,
                                                                        std::size_t most) {
  std::vector<std::vector<leaf_form>> all;
  for (std::size_t changed = 0; changed <= leaves && all.size() < most; ++changed) {
    std::vector<int> digits(leaves, 0);
    for (;;) {
      std::size_t nonzero = 0;
      for (int d : digits) nonzero += d != 0;
      if (nonzero == changed) {
        std::vector<leaf_form> forms;
        for (int d : digits) forms.push_back(leaf_form(d));
        all.push_back(std::move(forms));
        if (all.size() >= most) break;
      }
      std::size_t i = 0;
      while (i < leaves && ++digits[i] == leaf_forms) digits[i++] = 0;
      if (i == leaves) break;
    }
  }
  return all;
}
#else
std::vector<std::vector<leaf_form>> leaf_searches(std::size_t leaves, std::size_t most);
#endif

// The rule run as the driver runs it, every anchor explained.
template <class R>
rewrite::report run(onnx::ModelProto& m, const rewrite::options_of<R>& own) {
  fusekit::model whole{.proto = m, .path = {}};
  const std::array rules{rewrite::any_rule::of<R>(own)};
  rewrite::report r = rewrite::fuse(whole, rules, {.explain = true});
  m = std::move(whole.proto);
  return r;
}

inline std::string reason_at(const rewrite::report& r, const std::string& root_text) {
  for (const rewrite::near_miss& n : r.near_misses)
    if (n.anchor == root_text) return n.reason;
  return r.near_misses.empty() ? std::string("no near miss") : r.near_misses.front().reason;
}

// The original as ONNX Runtime runs it: a Cast to the type its input has is an Identity, which
// its CPU provider fails to load in float16 (the float32 Casts it inserts around the node meet
// the node's own type). nullopt where the original has no such Cast.
FUSEKIT_ENGINE_INLINE std::optional<onnx::ModelProto> without_own_type_casts(
    const onnx::ModelProto& m);

// Runs each original and its fused form in ONNX Runtime on the same random inputs.
inline constexpr std::string_view parity_script =
    R"(import sys, pathlib, numpy as np, onnxruntime as ort
root = pathlib.Path(sys.argv[1])
tolerance = {np.float32: 1e-4, np.float16: 2e-2, np.float64: 1e-9}
def run(path, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)
for line in (root / "pairs.txt").read_text().splitlines():
    name, fused, runs = line.split("\t")
    try:
        rng = np.random.default_rng(0)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(root / runs), options, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in session.get_inputs():
            shape = [d if isinstance(d, int) else 2 for d in i.shape]
            kind = i.type[len("tensor("):-1]
            dtype = {"float": np.float32, "float16": np.float16, "double": np.float64, "int64": np.int64,
                     "int32": np.int32, "bool": np.bool_}[kind]
            feeds[i.name] = (rng.integers(0, 2, shape) if dtype in (np.int64, np.int32, np.bool_)
                             else rng.standard_normal(shape)).astype(dtype)
        expected = run(root / runs, feeds)
    except Exception as e:
        print(name + "\tnot run: ONNX Runtime cannot run the original: " + str(e).splitlines()[0][:200])
        continue
    try:
        got = run(root / fused, feeds)
    except Exception as e:
        print(name + "\tfailed: ONNX Runtime cannot run the fused model: " + str(e).splitlines()[0][:200])
        continue
    worst = ""
    for k, (a, b) in enumerate(zip(expected, got)):
        t = tolerance.get(a.dtype.type, 1e-4)
        if a.shape != b.shape:
            worst = "output %d has shape %s, expected %s" % (k, b.shape, a.shape)
        elif not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=t, atol=t, equal_nan=True):
            worst = "output %d differs by up to %g" % (k, float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
    print(name + "\t" + ("differs: " + worst if worst else "ok"))
)";

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::optional<onnx::ModelProto> without_own_type_casts(
    const onnx::ModelProto& m) {
  const graph g(m);
  std::set<std::string, std::less<>> identities;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (g.op_type(n) == "Cast" && g.passes_input_at_inference(n))
      identities.insert(std::string(g.name(g.output(n, 0))));
  if (identities.empty()) return std::nullopt;
  onnx::ModelProto out = m;
  for (onnx::NodeProto& node : *out.mutable_graph()->mutable_node())
    if (node.op_type() == "Cast" && identities.contains(node.output(0))) {
      node.set_op_type("Identity");
      node.clear_attribute();
    }
  return out;
}

FUSEKIT_ENGINE_INLINE std::map<std::string, std::string> run_parity(
    const options& o, const std::vector<std::string>& pairs) {
  {
    std::ofstream script(o.write_to / "parity.py");
    script << parity_script;
    std::ofstream list(o.write_to / "pairs.txt");
    for (const std::string& p : pairs) list << p << "\n";
  }
  const std::filesystem::path log = o.write_to / "parity.txt";
  const std::string command = "\"" + o.python + "\" \"" + (o.write_to / "parity.py").string() +
                              "\" \"" + o.write_to.string() + "\" > \"" + log.string() + "\" 2>&1";
  std::map<std::string, std::string> verdicts;
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (const auto tab = line.find('\t'); tab != std::string::npos)
      verdicts[line.substr(0, tab)] = line.substr(tab + 1);
  if (status != 0 || verdicts.size() != pairs.size()) {
    std::string first;
    std::ifstream again(log);
    std::getline(again, first);
    throw error("selfcheck: running ONNX Runtime with " + o.python + " failed: " + first);
  }
  return verdicts;
}
#else
std::map<std::string, std::string> run_parity(const options& o,
                                              const std::vector<std::string>& pairs);
#endif

}  // namespace detail

// Checks R from its own pattern (the header's comment says how); `own`: the rule's options.
template <class R>
result check(const options& o, const rewrite::options_of<R>& own) {
  using detail::planner;
  result out;
  out.rule = std::string(R::name);
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
    detail::built b = detail::build<R>(plan, o, own, {}, -1, {}, &view_graphs_left);
    const std::vector<int> sequence = b.sequence;
    const std::string choices = b.choices;
    std::vector<detail::leaf_form> winner;
    // Its choices' combination may write an op its opset does not have, or ops that cannot run
    // on what they read (which another leaf shape may mend): no model to judge, and no instance.
    const auto judge = [&](const detail::built& written, std::string& no_model) {
      const graph g(written.model);
      no_model = detail::no_model(written.model, g);
      return no_model.empty() && detail::accepted<R>(g, written.root, own);
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
    const bool too_new = !detail::too_new_op(b.model).empty();
    const auto searches = detail::leaf_searches(b.free_leaves, o.shape_tries);
    for (std::size_t k = 1; !found && !too_new && k < searches.size(); ++k) {
      plan.begin(planner::mode::replay, sequence);
      detail::built next = detail::build<R>(plan, o, own, searches[k], -1, {}, &view_graphs_left);
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
    const rewrite::report r = detail::run<R>(fused, own);
    i.fused = !r.fusions.empty();
    if (!i.fused) {
      const graph g(b.model);
      i.reason = detail::reason_at(r, g.describe(g.producer(*g.find_value(b.root))));
      const auto refusal = detail::refused<R>(g, b.root, own);
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
  if constexpr (rewrite::rule_detail::declares_examples<R>) {
    for (const pattern::example& e : R::examples) attempt(planner::mode::keyed, {}, &e);
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
    const detail::built b = detail::build<R>(plan, o, own, {}, -1, {}, &view_graphs);
    return std::pair{detail::closeness_of<R>(b.model, b.root, own), plan.taken_choices()};
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
      detail::built b = detail::build<R>(plan, o, own, f.forms, site, f.views);
      if (!mutated.insert(b.broken.breaks).second) continue;
      mutant m;
      m.breaks = b.broken.breaks;
      m.expect = b.broken.expect;
      onnx::ModelProto fused = b.model;
      const rewrite::report r = detail::run<R>(fused, own);
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
        m.held_by_another = !m.ok && pattern::match(R::pattern, g, root);
        m.ok = m.ok || m.held_by_another;
        if (!o.write_to.empty())
          save_model(
              {.proto = b.model, .path = {}},
              o.write_to / ("refused_mutant_" + std::to_string(out.mutants.size()) + ".onnx"));
      }
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

template <class R>
result check(const options& o = {}) {
  static const rewrite::options_of<R> defaults{};
  return check<R>(o, defaults);
}

}  // namespace fusekit::selfcheck
