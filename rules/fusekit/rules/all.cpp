#include "all.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "attention_probabilities.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/io/error.hpp"
#include "sweeps.hpp"

namespace fusekit::rules {

namespace {

// The library, the rules of ONNX Runtime's ops alone with the rest where `ort_ops`.
std::vector<rewrite::any_rule> library(const attention_options& attention, bool ort_ops) {
  std::vector<rewrite::any_rule> out = {differential_attention_values_rule(),
                                        scaled_dot_product_attention_head_merge_rule(attention),
                                        scaled_dot_product_attention_rule(attention),
                                        layer_normalization_rule(attention),
                                        rms_normalization_rule(attention),
                                        gelu_rule(attention),
                                        gelu_tanh_rule(attention),
                                        rotary_embedding_rule(attention),
                                        rotary_embedding_interleaved_rule(attention),
                                        partial_rotary_embedding_rule()};
  // A residual folded into a norm, a bias into a GELU (the norms and GELUs of an earlier pass of
  // the same run, or of the exporter), and CLIP's GELU: ONNX Runtime's ops alone.
  if (ort_ops) {
    out.push_back(skip_layer_normalization_rule(attention));
    out.push_back(skip_rms_normalization_rule(attention));
    out.push_back(bias_gelu_rule(attention));
    out.push_back(quick_gelu_rule(attention));
  }
  for (rewrite::any_rule& clean : cleaning_rules(attention)) out.push_back(std::move(clean));
  return out;
}

}  // namespace

std::vector<rewrite::any_rule> bundled(const attention_options& attention) {
  return library(attention, attention.fused_target == target::ort);
}

rewrite::any_rule rule_named(std::string_view name, const attention_options& attention) {
  for (rewrite::any_rule& r : library(attention, true))
    if (r.name() == name) return r;
  throw error("the rule library has no rule named " + std::string(name));
}

std::vector<rewrite::any_rule> cleaning_rules(const fusion_options& options) {
  return {identity_elimination_rule(),
          noop_elimination_rule(),
          not_elimination_rule(),
          constant_to_initializer_rule(),
          constant_folding_rule(),
          constant_view_folding_rule(),
          constant_evaluation_rule(options),
          castlike_to_cast_rule(),
          transpose_folding_rule(),
          reshape_folding_rule(),
          reshape_target_folding_rule(),
          unsqueeze_folding_rule(),
          squeeze_unsqueeze_elimination_rule(),
          slice_folding_rule(),
          concat_folding_rule(),
          factor_folding_rule(),
          batch_normalization_into_conv_rule(),
          batch_normalization_into_conv_transpose_rule(),
          batch_normalization_into_gemm_rule(),
          pad_into_conv_rule(),
          pad_into_max_pool_rule(),
          pad_into_average_pool_rule(),
          bias_into_conv_rule(),
          bias_into_gemm_rule(),
          matmul_add_to_gemm_rule()};
}

std::vector<std::string_view> names() {
  const attention_options defaults;  // target ort: every rule
  std::vector<std::string_view> out;
  for (const rewrite::any_rule& r : bundled(defaults)) out.push_back(r.name());
  out.push_back(duplicate_elimination);
  out.push_back(dead_node_elimination);
  return out;
}

std::string_view current_name(std::string_view name) {
  // Kept for one release after the rename; then this table goes.
  static constexpr std::pair<std::string_view, std::string_view> renamed[] = {
      {"dit-attention-merged", "scaled-dot-product-attention-head-merge"},
      {"dit-attention", "scaled-dot-product-attention"}};
  for (const auto& [before, now] : renamed)
    if (name == before) return now;
  return name;
}

namespace {

// The ops an exporter or an earlier run fused already: the dynamo exporter writes ai.onnx
// Attention itself at opset 23. Reported, so a user reads "already fused", not silence.
void find_fused(const graph& g, std::span<const op_id> fused, std::vector<std::string>& out) {
  for (node_id n : g.topological_order()) {
    if (std::find(fused.begin(), fused.end(), g.op(n)) != fused.end()) out.push_back(g.describe(n));
    for (const subgraph_ref& body : g.subgraphs(n)) find_fused(*body.body, fused, out);
  }
}

}  // namespace

void find_fused_attention(const graph& g, rewrite::report& out) {
  static constexpr std::pair<std::string_view, std::string_view> fused_ops[] = {
      {"", "Attention"},
      {"com.microsoft", "MultiHeadAttention"},
      {"com.microsoft", "GroupQueryAttention"},
      {"com.microsoft", "Attention"}};
  std::vector<op_id> fused;
  for (const auto& [domain, op] : fused_ops)
    if (const std::optional<op_id> id = g.ops().find(domain, op)) fused.push_back(*id);
  find_fused(g, fused, out.already_fused);
}

namespace {

// The Softmaxes of g and its subgraphs that no near miss accounts for: none names it, nor a
// MatMul that reads its probabilities.
void unexplained_softmaxes(const graph& g, const std::unordered_set<std::string>& named,
                           std::vector<std::pair<const graph*, node_id>>& out) {
  for (node_id n : g.topological_order()) {
    if (g.op_type(n) == "Softmax" && g.domain(n).empty() && !named.contains(g.describe(n))) {
      const auto readers = sdpa::probability_readers(g, n);
      if (std::none_of(readers.begin(), readers.end(),
                       [&](const use& u) { return named.contains(g.describe(u.node)); }))
        out.emplace_back(&g, n);
    }
    for (const subgraph_ref& body : g.subgraphs(n)) unexplained_softmaxes(*body.body, named, out);
  }
}

}  // namespace

void explain_every_softmax(const graph& g, rewrite::report& out) {
  static const attention_options defaults;
  const std::string_view rule = scaled_dot_product_attention_rule(defaults).name();
  if (std::find(out.rules.begin(), out.rules.end(), rule) == out.rules.end()) return;
  std::unordered_set<std::string> named;
  for (const rewrite::near_miss& n : out.near_misses) {
    named.insert(n.anchor);
    named.insert(n.matched.begin(), n.matched.end());
  }
  std::vector<std::pair<const graph*, node_id>> left;
  unexplained_softmaxes(g, named, left);
  for (const auto& [where, softmax] : left) {
    std::string why = sdpa::not_a_block_because(*where, softmax);
    // A block the rule tries and reports: an anchor the report lost would be a defect, said so.
    if (why.empty()) why = "tried as an attention block, but no near miss was reported for it";
    out.near_misses.push_back({.rule = std::string(rule),
                               .anchor = where->describe(softmax),
                               .reason = std::move(why),
                               .matched = {where->describe(softmax)}});
  }
}

rewrite::report fuse_all(model& m, const rewrite::options& run,
                         const attention_options& attention) {
  rewrite::options current = run;
  for (std::string& name : current.rules) name = std::string(current_name(name));
  const std::vector<rewrite::any_rule> rules = bundled(attention);
  // What a sweep merged or removed can leave a rule more to do (a Not whose other reader was a
  // duplicate): the rules run again, and the sweeps after them, until neither changes the model,
  // so that a second run changes nothing. The sweeps and the Softmaxes' last word read the index
  // and facts of the pass that found nothing. The sweeps run to their own fixed point (sweep()):
  // where no rule changed the model since they did, they are not run again.
  int swept_at = -1;  // the passes the report counted when the sweeps last changed the model
  bool explained = false;
  const rewrite::at_rest settle = [&](const graph& g, model& rested, rewrite::report& out) {
    if (swept_at == out.passes) {  // g is the model as it is
      explain_every_softmax(g, out);
    } else if (sweep(rested, current, out, &g)) {
      swept_at = out.passes;
      return true;
    } else {
      // What a sweep leaves uncounted (declarations of values no node writes, a copy's readers
      // renamed) is no longer g.
      explain_every_softmax(graph(rested), out);
    }
    explained = true;
    return false;
  };
  rewrite::report out = rewrite::fuse(m, rules, current, &find_fused_attention, settle);
  // A run stopped at max_passes may end on a sweep that changed the model.
  if (!explained) explain_every_softmax(graph(m), out);
  for (const rewrite::any_rule& clean : cleaning_rules(attention))
    if (current.runs(clean.name())) out.count_instead_of_listing(std::string(clean.name()));
  return out;
}

}  // namespace fusekit::rules
