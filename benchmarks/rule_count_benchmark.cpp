// fuse's cost against the number of rules it runs, on a 1000-layer DiT (examples/sample_model) and
// a 1000-layer LLaMA-style decoder (llama_decoder_model.hpp): one bundled rule, every bundled
// rule, and every bundled rule beside 100 or 1000 synthetic rules that never match. Each
// synthetic rule roots a deep pattern at an op of its own, as a library of many rules mostly
// does; 100 more root theirs at MatMul, which every layer has, to show what a rule sharing a
// common root costs. rules_floor is the protobuf parse and serialise of the same bytes, the
// floor every run is read against (benchmarks/RESULTS.md).
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dit_model.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"
#include "llama_decoder_model.hpp"

namespace {

using namespace fusekit;
using namespace fusekit::pattern;

// "Synthetic0042" for K = 42.
template <int K>
constexpr auto synthetic_op() {
  fixed_string<14> s("Synthetic0000");
  for (int i = 12, k = K; i >= 9; --i, k /= 10) s.chars[i] = char('0' + k % 10);
  return s;
}

// Attention written out, under a root of the rule's own: five nodes deep, never matched.
template <fixed_string Root, fixed_string Domain>
inline constexpr auto deep_pattern = op<Root, Domain>(
    op<"MatMul">(op<"Softmax">(op<"Add">(op<"Mul">(op<"MatMul">(capture<"q">, capture<"k">),
                                                   constant_scalar<"scale">),
                                         capture<"mask">)),
                 capture<"v">));

template <int K>
struct synthetic_rule {
  static constexpr auto root = synthetic_op<K>();
  static constexpr std::string_view name = root.view();
  static constexpr auto pattern = deep_pattern<root, "bench.synthetic">;
  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.value(get<"v">(m)));
  }
};

// A MatMul whose first input is a Softmax of a Sub: no layer of either model has one, so every
// MatMul is tried and fails at its second node.
template <int K>
struct shared_root_rule {
  static constexpr auto label = synthetic_op<K>();
  static constexpr std::string_view name = label.view();
  static constexpr auto pattern =
      op<"MatMul">(op<"Softmax">(op<"Sub">(capture<"a">, constant_scalar<"b">)), capture<"v">);
  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.value(get<"v">(m)));
  }
};

template <template <int> class Rule, int... K>
std::vector<rewrite::any_rule> erase(std::integer_sequence<int, K...>) {
  return {rewrite::any_rule::of<Rule<K>>()...};
}

const std::vector<rewrite::any_rule>& synthetic_rules() {
  static const auto rules = erase<synthetic_rule>(std::make_integer_sequence<int, 1000>{});
  return rules;
}
const std::vector<rewrite::any_rule>& shared_root_rules() {
  static const auto rules = erase<shared_root_rule>(std::make_integer_sequence<int, 100>{});
  return rules;
}

enum class family { dit, decoder };
enum class rule_set { one, bundled, with_100, with_1000, with_100_shared_root };

const std::string& model_bytes(family f) {
  static std::map<family, std::string> files;
  auto [it, added] = files.try_emplace(f);
  if (added)
    it->second = fusekit::detail::serialize_deterministic(
        f == family::dit ? samples::make_dit_model({.layers = 1000})
                         : samples::make_llama_decoder_model({.layers = 1000}));
  return it->second;
}

std::vector<rewrite::any_rule> rules_of(rule_set set) {
  static const rules::attention_options attention;
  std::vector<rewrite::any_rule> out = rules::bundled(attention);
  if (set == rule_set::one) {
    std::erase_if(out, [](const rewrite::any_rule& r) {
      return r.name() != "scaled-dot-product-attention-head-merge";
    });
    return out;
  }
  const auto& synthetic = synthetic_rules();
  if (set == rule_set::with_100) out.insert(out.end(), synthetic.begin(), synthetic.begin() + 100);
  if (set == rule_set::with_1000) out.insert(out.end(), synthetic.begin(), synthetic.end());
  if (set == rule_set::with_100_shared_root)
    out.insert(out.end(), shared_root_rules().begin(), shared_root_rules().end());
  return out;
}

void set_counters(benchmark::State& state, family f) {
  state.counters["nodes"] = double(parse_model(model_bytes(f)).proto.graph().node_size());
  state.counters["bytes"] = double(model_bytes(f).size());
}

// Parse and serialise: what any tool that reads and writes the model pays.
void rules_floor(benchmark::State& state, family f) {
  const std::string& bytes = model_bytes(f);
  for (auto _ : state) {
    model m = parse_model(bytes);
    benchmark::DoNotOptimize(fusekit::detail::serialize_deterministic(m.proto));
  }
  set_counters(state, f);
}

// Parse, fuse with the rule set, serialise.
void rules_run(benchmark::State& state, family f, rule_set set) {
  const std::string& bytes = model_bytes(f);
  const std::vector<rewrite::any_rule> running = rules_of(set);
  std::size_t fusions = 0;
  for (auto _ : state) {
    model m = parse_model(bytes);
    fusions = rewrite::fuse(m, running).fusions.size();
    benchmark::DoNotOptimize(fusekit::detail::serialize_deterministic(m.proto));
  }
  if (fusions == 0) state.SkipWithError("nothing fused");
  set_counters(state, f);
  state.counters["rules"] = double(running.size());
  state.counters["fusions"] = double(fusions);
}

[[maybe_unused]] const bool registered = [] {
  for (const auto& [f, model] : {std::pair{family::dit, "dit"}, {family::decoder, "decoder"}}) {
    benchmark::RegisterBenchmark((std::string("rules_floor/") + model).c_str(), rules_floor, f)
        ->Unit(benchmark::kMillisecond);
    for (const auto& [set, label] : {std::pair{rule_set::one, "one"},
                                     {rule_set::bundled, "bundled"},
                                     {rule_set::with_100, "bundled+100"},
                                     {rule_set::with_1000, "bundled+1000"},
                                     {rule_set::with_100_shared_root, "bundled+100_at_MatMul"}})
      benchmark::RegisterBenchmark((std::string("rules_run/") + model + "/" + label).c_str(),
                                   rules_run, f, set)
          ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
