// What a rule's selfcheck reports (fusekit/rewrite/selfcheck.hpp): its options, each instance
// and mutant written, and the result with its table.
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
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
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
  // One of the rule's refusals (pattern/sources.hpp): the rule says its guard refuses it, so
  // fusing it fails, whatever it computes.
  bool declared = false;
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
  std::size_t fused = 0, same = 0, named = 0, absorbed = 0, guarded = 0, combinations = 0,
              declared = 0;
  for (const instance& i : instances) {
    fused += i.fused;
    same += i.parity == "ok";
    combinations += i.combination;
  }
  for (const mutant& m : mutants) {
    named += m.ok && !m.fused && !m.held_by_another;
    absorbed += m.ok && m.fused;
    guarded += m.ok && !m.fused && m.held_by_another;
    declared += m.declared;
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
      << "; " << mutants.size() << " mutants";
  if (declared) out << " (" << declared << " of them the rule's refusals)";
  out << ": " << named << " refused and named";
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
          (m.fused && m.declared ? std::string("fused: the rule declares that its guard refuses it")
           : m.fused
               ? "fused, parity: " + m.parity
               : "expected a near miss saying \"" + m.expect + "\", got " +
                     (m.near_miss.empty() ? std::string("none") : "\"" + m.near_miss + "\"")));
  for (std::size_t k = 0; k < failures.size() && k < most; ++k) out << "  " << failures[k] << "\n";
  if (const std::size_t rest = failures.size() - std::min(most, failures.size()); rest)
    out << "  " << rest << " more failure" << (rest == 1 ? "" : "s") << " not shown\n";
  return out.str();
}
#endif

}  // namespace fusekit::selfcheck
