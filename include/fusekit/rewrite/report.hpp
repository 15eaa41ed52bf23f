// What a rewrite did and, more important, why each near miss did not fuse: as JSON for tools and
// as a table for people.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fusekit::rewrite {

struct fusion {
  std::string rule;
  std::string root;                    // the matched root node, as "Op 'name'"
  std::map<std::string, int> removed;  // op type → nodes removed
  std::map<std::string, int> added;    // op type → nodes added
  std::vector<std::string> nodes{};    // every matched node, root first
  nlohmann::json params = nlohmann::json::object();
};

struct near_miss {
  std::string rule;
  std::string anchor;                  // the node the rule tried, as "Op 'name'"
  std::string reason;                  // the deepest failure, or the guard's or emit's refusal
  std::size_t depth = 0;               // nodes matched before it failed
  std::vector<std::string> matched{};  // those nodes, anchor first
  std::string failing{};               // the node the reason is about, when there is one
};

struct report {
  std::vector<std::string> rules;  // every rule that ran, in order
  std::vector<fusion> fusions;
  std::vector<near_miss> near_misses;
  // Blocks the model held fused already (an exporter's own attention op), as "Op 'name'".
  std::vector<std::string> already_fused;
  int passes = 0;
  // False when the run stopped at max_passes with rules still matching: the model is consistent,
  // but running the rules again would change it.
  bool fixed_point = true;
  // What the caller should know that is no failure (an ONNX checker complaint the input had).
  std::vector<std::string> notes;
  // The rules whose edits are counted rather than listed (eliminations, which may be thousands):
  // per rule, the nodes it removed by op type. Their edits are not in `fusions`, nor in
  // removed() and added().
  std::map<std::string, std::map<std::string, int>> cleaned;

  // Counts `rule`'s edits in `cleaned` in place of listing them in `fusions`.
  void count_instead_of_listing(const std::string& rule) {
    auto& removed_by = cleaned[rule];
    std::erase_if(fusions, [&](const fusion& f) {
      if (f.rule != rule) return false;
      for (const auto& [op, n] : f.removed) removed_by[op] += n;
      return true;
    });
  }

  std::map<std::string, int> removed() const { return total(&fusion::removed); }
  std::map<std::string, int> added() const { return total(&fusion::added); }

  nlohmann::json to_json() const {
    nlohmann::json out;
    out["passes"] = passes;
    out["fixed_point"] = fixed_point;
    out["notes"] = notes;
    out["removed"] = removed();
    out["added"] = added();
    out["already_fused"] = already_fused;
    out["cleaned"] = cleaned;
    out["rules"] = nlohmann::json::array();
    for (const std::string& name : rules) {
      nlohmann::json r{{"name", name},
                       {"matches", nlohmann::json::array()},
                       {"near_misses", nlohmann::json::array()}};
      for (const fusion& f : fusions)
        if (f.rule == name)
          r["matches"].push_back({{"root", f.root},
                                  {"nodes", f.nodes},
                                  {"removed", f.removed},
                                  {"added", f.added},
                                  {"params", f.params}});
      for (const near_miss& n : near_misses)
        if (n.rule == name)
          r["near_misses"].push_back(
              {{"anchor", n.anchor}, {"reason", n.reason}, {"matched", n.matched}});
      out["rules"].push_back(std::move(r));
    }
    return out;
  }

  // "scaled-dot-product-attention: 22 fused, 1 near miss" per rule ("identity-elimination:
  // removed Identity 16;" for one counted, not listed), then the ops removed and
  // added, then each near miss with its reason.
  std::string to_table() const {
    std::ostringstream out;
    for (const std::string& name : rules) {
      if (auto it = cleaned.find(name); it != cleaned.end()) {
        out << name << ": " << (it->second.empty() ? "nothing removed" : "removed");
        for (const auto& [op, n] : it->second) out << " " << op << " " << n << ";";
        out << "\n";
        continue;
      }
      int fused = 0, missed = 0;
      for (const fusion& f : fusions) fused += f.rule == name;
      for (const near_miss& n : near_misses) missed += n.rule == name;
      out << name << ": " << fused << " fused, " << missed << " near miss"
          << (missed == 1 ? "" : "es") << "\n";
      for (const fusion& f : fusions) {
        if (f.rule != name) continue;
        out << "  fused " << f.root;
        if (!f.params.empty()) out << "  " << f.params.dump();
        out << "\n";
      }
    }
    for (const auto& [label, counts] : {std::pair{"removed", removed()}, {"added", added()}}) {
      if (counts.empty()) continue;
      out << label << ":";
      for (const auto& [op, n] : counts) out << " " << op << " " << n << ";";
      out << "\n";
    }
    for (const std::string& node : already_fused)
      out << "already fused: " << node << " (the model's own attention op)\n";
    for (const near_miss& n : near_misses)
      out << "near miss [" << n.rule << "] at " << n.anchor << ": " << n.reason << "\n";
    if (!fixed_point)
      out << "no fixed point: stopped after " << passes
          << " passes with rules still matching; running them again changes the model\n";
    for (const std::string& note : notes) out << "note: " << note << "\n";
    return out.str();
  }

 private:
  std::map<std::string, int> total(std::map<std::string, int> fusion::*field) const {
    std::map<std::string, int> sum;
    for (const fusion& f : fusions)
      for (const auto& [op, n] : f.*field) sum[op] += n;
    return sum;
  }
};

}  // namespace fusekit::rewrite
