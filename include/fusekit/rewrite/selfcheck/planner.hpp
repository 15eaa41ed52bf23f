// Which alternative each choice point of a pattern takes, instance by instance, until every
// alternative is covered; and what a rule's examples ask of the choices.
#pragma once

#include "fusekit/rewrite/selfcheck/report.hpp"

namespace fusekit::selfcheck::detail {

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

  // Not a choice, but what every instance of the search shares: the dims the facts prove for a
  // written value, by its name and the model it is computed from (views.hpp's written_dims).
  std::unordered_map<std::string, std::optional<std::vector<std::int64_t>>> proven_dims;

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

}  // namespace fusekit::selfcheck::detail
