// What the scaled dot-product attention rules add to the scaled scores: selects, additive masks
// and biases as terms of the fused op's attention bias (their dims, their regrouping from 3-D
// scores, their expansion and emission), whether the mask is causality alone (proven by
// causal.hpp), and the cap of soft-capped scores.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "causal.hpp"
#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "heads_in_batch.hpp"
#include "key_layouts.hpp"
#include "options.hpp"
#include "scale.hpp"
#include "windows_in_batch.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// A select's fill added to the scores instead gives the same softmax where the sum is the fill
// again: −inf in any type; in float32 or bfloat16, a fill at most half the lowest float32 (torch's
// finfo.min) absorbs any score below 2^100 in magnitude. float16's finfo.min absorbs only scores
// below 16, so there only −inf is taken.
inline bool fill_absorbs_scores(double fill, dtype t) {
  if (fill == -std::numeric_limits<double>::infinity()) return true;
  return (t == dtype::float32 || t == dtype::bfloat16) &&
         fill <= 0.5 * double(std::numeric_limits<float>::lowest());
}

// Why the block's mask is not causality alone ("" when it is). Then the op hides the keys after
// each query itself and the mask's computation goes where nothing else reads it. Both ops put the
// diagonal top-left, as the mask does, and so does a decoder's bottom-right one when queries and
// keys are as many. A fill that absorbs the scores hides as −inf does in every row that keeps a
// key, and every causal row keeps its own.
template <class M>
std::string not_causal_because(const graph& g, const M& m) {
  using causal::side;
  if (has<"bias">(m)) return "the scores have a bias besides the mask";
  if (has<"select">(m) && has<"mask">(m)) return "a select and an added mask, summed";
  const facts& f = facts_of(g);
  const value_id q = query(g, m), v = values(g, m);
  if (f.rank(q) != 4u || f.rank(v) != 4u) return "q and v are not proven 4-D";
  const sym &s = *f.dim_of(q, 2), &l = *f.dim_of(v, 2);
  std::string refused;
  if (has<"select">(m)) {
    refused = has<"keep">(m) ? causal::not_triangular(g, get<"keep">(m), side::keep, s, l)
                             : causal::not_triangular(g, get<"hide">(m), side::hide, s, l);
  } else {
    value_id mask = get<"mask">(m);
    node_id p = g.producer(mask);
    for (; p != no_id && g.domain(p).empty() && g.op_type(p) == "Expand"; p = g.producer(mask))
      mask = g.input(p, 0);
    if (p == no_id || !g.domain(p).empty() || g.op_type(p) != "Where")
      return "the mask '" + std::string(g.name(mask)) + "' " + causal::origin(g, mask) +
             ", not Where(causal, 0, fill)";
    const auto shown = causal::uniform_value(g, g.input(p, 1)),
               other = causal::uniform_value(g, g.input(p, 2));
    const bool hide = other == 0.0 && shown.has_value();
    if (!hide && !(shown == 0.0 && other.has_value()))
      return g.describe(p) + " does not choose between 0 and one fill";
    const double fill = hide ? *shown : *other;
    if (!fill_absorbs_scores(fill, g.type(g.output(p, 0))))
      return "the mask fills with " + pattern::number_text(fill) + ", which hides less than −inf";
    refused = causal::not_triangular(g, g.input(p, 0), hide ? side::hide : side::keep, s, l);
  }
  if (!refused.empty()) return refused;
  if (equal(s, l) != truth::yes)
    return "the query length " + f.text(s) + " and key length " + f.text(l) +
           " are not proven equal, where causality's diagonal is the same top-left and "
           "bottom-right";
  return {};
}

template <class M>
bool causal_alone(const graph& g, const M& m) {
  return (has<"select">(m) || has<"mask">(m)) && not_causal_because(g, m).empty();
}

// One term of what the block adds to the scaled scores: the parts broadcast together (a select's
// condition and fill, or one value) and the node that adds it (an Add, or the select's Where).
struct bias_term {
  std::vector<value_id> parts;
  node_id added_by = no_id;
};

// The block's terms: a select (as Where(keep, 0, fill)), a bias before the mask, the mask.
template <class M>
std::vector<bias_term> bias_terms(const graph& g, const M& m) {
  std::vector<bias_term> out;
  if (has<"select">(m)) {
    const node_id select = get<"select">(m);
    out.push_back({{g.input(select, 0), g.input(select, has<"keep">(m) ? 2 : 1)}, select});
  }
  if (has<"bias">(m)) out.push_back({{get<"bias">(m)}, get<"biased">(m)});
  if (has<"mask">(m)) out.push_back({{get<"mask">(m)}, get<"mask_add">(m)});
  return out;
}

// The type a term is added in: the select's scores', or the value added.
inline dtype term_type(const graph& g, const bias_term& t) {
  return g.op_type(t.added_by) == "Where" ? g.type(g.output(t.added_by, 0)) : g.type(t.parts[0]);
}

// A term's dims, broadcast from its parts; empty where they are not proven.
inline std::optional<std::vector<sym>> term_dims(const facts& f, const bias_term& t) {
  std::optional<std::vector<sym>> dims{std::vector<sym>{}};
  for (value_id part : t.parts)
    if (f.rank(part) && dims)
      dims = fused::broadcast(*dims, f.shape(part).dims);
    else
      dims.reset();
  return dims;
}

// Query heads folded into the query axis: the products are grouped attention where the fold's
// rows are k's and v's own heads (MatMul broadcasts heads, so [B, 1, G, H] against Nkv heads would
// be every query head against every key/value head) and every term added to the folded scores is
// one for all its heads and rows, as a single query's mask is.
template <class M>
rewrite::verdict packed_refused(const graph& g, const M& m) {
  using rewrite::verdict;
  if (!packed(g, m)) return verdict::yes();
  const facts& f = facts_of(g);
  const value_id folded = get<"q">(m), kt = key_transposed(m), v = values(g, m);
  if (f.rank(kt) != 4u || f.rank(v) != 4u || f.same_dim(folded, 1, kt, 1) != truth::yes ||
      f.same_dim(folded, 1, v, 1) != truth::yes)
    return verdict::no("q's heads are folded into its query axis as " + f.shape_text(folded) +
                       ", whose rows are not proven to be the key/value heads of kᵀ " +
                       f.shape_text(kt) + " and v " + f.shape_text(v));
  for (const bias_term& t : bias_terms(g, m)) {
    const auto dims = term_dims(f, t);
    const std::size_t r = dims ? dims->size() : 0;
    const bool one_for_all = dims && (r < 2 || (*dims)[r - 2].is_constant(1)) &&
                             (r < 3 || (*dims)[r - 3].is_constant(1));
    if (!one_for_all)
      return verdict::no(
          "q's heads are folded into its query axis, and " + g.describe(t.added_by) + " adds " +
          (dims ? fused::dims_text(f, *dims) : std::string("a term of unproven dims")) +
          ", not one row for all heads");
  }
  return verdict::yes();
}

// A term added to the 3-D scores of heads in the batch axis [B·N, S, L] with a leading dim of its
// own: the fused op reads it regrouped as the scores are, [B, N, …] (or [1, 1, …]). One of lower
// rank broadcasts from the right the same way in 3-D and in 4-D.
// `dims` are the term's (term_dims).
inline bool regrouped(const graph& g, const bias_term& t,
                      const std::optional<std::vector<sym>>& dims) {
  return facts_of(g).rank(g.output(t.added_by, 0)) == 3u && dims && dims->size() == 3;
}

// A regrouped term's dims: its leading dim must be 1 or q's batch·heads.
inline std::optional<std::vector<sym>> regrouped_dims(const facts& f, std::vector<sym> d,
                                                      value_id q) {
  const sym &b = *f.dim_of(q, 0), &n = *f.dim_of(q, 1);
  if (d[0].is_constant(1)) return std::vector<sym>{sym::constant(1), sym::constant(1), d[1], d[2]};
  if (equal(d[0], b * n) == truth::yes) return std::vector<sym>{b, n, d[1], d[2]};
  return std::nullopt;
}

// What the block adds to the scaled scores, as the fused ops' bias: the sum of its terms; none
// where it is `causal` alone, which the op applies itself.
template <class M>
fused::attention_call call_of(const graph& g, const M& m, bool causal) {
  const facts& f = facts_of(g);
  fused::attention_call c{
      .q = query(g, m), .kt = key_transposed(m), .v = values(g, m), .scale = scale_of(g, m)};
  if (has<"k_view">(m)) c.kt = get<"k_bnsh">(m), c.key_axis = 2;
  if (has<"k_merged">(m)) c.kt = unmerged(g, get<"k_merged">(m)), c.key_axis = 2;
  c.heads_paired = packed(g, m);
  c.type = fused::compute_type(g, {get<"scores">(m), get<"pv">(m)});
  const std::vector<bias_term> terms = bias_terms(g, m);
  if (terms.empty() || causal) return c;
  c.has_bias = true;
  // Each term is added in the type of the scores where it is; the op adds their sum in its own,
  // which must hold every one of them.
  c.bias_type = term_type(g, terms.front());
  // The ·V MatMul reads as many probabilities per query as v has keys, so the model runs only
  // where each term's key axis broadcasts to v's key length: one the facts do not prove that
  // length is 1 or equal to it at run time, and expanding the sum there is what the Adds did.
  // Where the scores Softmax reads are proven to have q's rows, each term's query axis is 1 or
  // that length where the model runs (GPT-2's causal mask sliced to Min(n_positions, S) rows),
  // and is expanded the same way; so is a query axis of 1 where q's length is not proven 1 (a
  // mask of one row for every query: the ops broadcast only its batch and heads).
  const sym* keys = f.rank(c.v) == 4u ? f.dim_of(c.v, 2) : nullptr;
  const value_id x = g.input(get<"softmax">(m), 0);
  const sym* rows = f.rank(c.q) == 4u && f.rank(x) && *f.rank(x) >= 2u &&
                            f.same_dim(x, int(*f.rank(x)) - 2, c.q, 2) == truth::yes
                        ? f.dim_of(c.q, 2)
                        : nullptr;
  const auto spans = [](std::vector<sym>& d, std::size_t from_end, const sym* length,
                        bool one_too) {
    if (d.size() < from_end || length == nullptr) return false;
    sym& own = d[d.size() - from_end];
    if ((own.is_constant(1) && (!one_too || length->is_constant(1))) ||
        equal(own, *length) == truth::yes)
      return false;
    own = *length;
    return true;
  };
  std::optional<std::vector<sym>> dims{std::vector<sym>{}};
  for (const bias_term& t : terms) {
    c.bias_type = fused::widest_type({c.bias_type, term_type(g, t)});
    auto own = term_dims(f, t);
    if (regrouped(g, t, own) && f.rank(c.q) == 4u) {
      own = regrouped_dims(f, *own, c.q);
    } else if (const value_id sum = g.output(t.added_by, 0); windowed(f, sum, own)) {
      const auto merged = f.rank(c.q) == 4u ? windowed_dims(f, *own, sum, c.q) : std::nullopt;
      own = merged ? std::optional(merged->op_dims) : std::nullopt;
    }
    if (own && spans(*own, 1, keys, false)) c.bias_expanded_over_keys = true;
    if (own && spans(*own, 2, rows, true)) c.bias_expanded_over_queries = true;
    dims = own && dims ? fused::broadcast(*dims, *own) : std::nullopt;
    for (value_id part : t.parts)
      c.bias_text += (c.bias_text.empty() ? "" : " + ") + f.shape_text(part);
  }
  if (dims && !dims->empty() && keys && equal(dims->back(), *keys) != truth::yes) {
    if (dims->size() < 4) dims->insert(dims->begin(), 4 - dims->size(), sym::constant(1));
    dims->back() = *keys;
    c.bias_expanded_over_keys = true;
  }
  c.bias_dims = std::move(dims);
  return c;
}

// The bias the fused op adds, 4-D: the sum of the block's terms, a select as Where(keep, 0, fill)
// or Where(hide, fill, 0), a term of 3-D scores regrouped to 4-D, one of scores split into
// windows merged back; "" for none. `absorbed`: the op
// reads the cache's past and new keys apart.
template <class M>
std::string bias(const graph& g, const M& m, rewrite::emitter& e, const fused::attention_call& call,
                 bool absorbed) {
  const facts& f = facts_of(g);
  std::string out;
  for (const bias_term& t : bias_terms(g, m)) {
    std::string term;
    if (has<"select">(m) && t.added_by == get<"select">(m)) {
      const std::string zero = e.constant(term_type(g, t), {}, {0.0});
      term = has<"keep">(m) ? e.op("Where", {e.value(t.parts[0]), zero, e.value(t.parts[1])})
                            : e.op("Where", {e.value(t.parts[0]), e.value(t.parts[1]), zero});
    } else {
      term = e.value(t.parts[0]);
    }
    if (term_type(g, t) != call.type) term = e.op("Cast", {term}, {{"to", call.type}});
    if (const auto dims = term_dims(f, t); regrouped(g, t, dims)) {
      const std::vector<sym>& d = *dims;
      const std::string q = e.value(call.q), shape = e.op("Shape", {term});
      const auto lead = [&](int axis) {
        return d[0].is_constant(1) ? e.ints({1}) : dim_tensor(e, *f.dim_of(call.q, axis), q, axis);
      };
      const auto own = [&](int axis) {
        if (auto k = d[std::size_t(axis)].constant()) return e.ints({*k});
        return e.op("Gather", {shape, e.ints({axis})});
      };
      term = e.op("Reshape",
                  {term, e.op("Concat", {lead(0), lead(1), own(1), own(2)}, {{"axis", 0}})});
    } else if (const value_id sum = g.output(t.added_by, 0); windowed(f, sum, dims)) {
      term = windows_merged(g, e, term, *dims, sum, call.q);
    }
    out = out.empty() ? term : e.op("Add", {out, term});
  }
  if (call.bias_expanded_over_keys || call.bias_expanded_over_queries) {
    const std::string one = e.ints({1});
    // With the cache moved into the op, v is the op's own present: past and new keys summed.
    const std::string keys =
        !call.bias_expanded_over_keys ? one
        : absorbed
            ? e.op("Add",
                   {dim_tensor(e, *f.dim_of(get<"v_past">(m), 2), e.value(get<"v_past">(m)), 2),
                    dim_tensor(e, *f.dim_of(get<"v_new">(m), 2), e.value(get<"v_new">(m)), 2)})
            : dim_tensor(e, *f.dim_of(call.v, 2), e.value(call.v), 2);
    const std::string rows = call.bias_expanded_over_queries
                                 ? dim_tensor(e, *f.dim_of(call.q, 2), e.value(call.q), 2)
                                 : one;
    out = e.op("Expand", {out, e.op("Concat", {e.ints({1, 1}), rows, keys}, {{"axis", 0}})});
  } else if (call.bias_dims && call.bias_dims->size() < 4) {
    // The ops read the bias 4-D, where the Adds broadcast a lower rank from the right.
    std::vector<std::int64_t> front(4 - call.bias_dims->size());
    for (std::size_t i = 0; i < front.size(); ++i) front[i] = std::int64_t(i);
    out = fused::unsqueezed(g, e, out, front);
  }
  return out;
}

// Gemma 2's soft-capping, tanh(s / c) · c: its cap c where the divisor (or the multiplier's
// reciprocal, rounded to its own type as the model rounded it) and the factor are one positive
// number, the only form GroupQueryAttention's `softcap` computes; else why not.
struct soft_cap {
  double cap = 0;
  std::string refused{};
};
template <class M>
soft_cap soft_cap_of(const graph& g, const M& m) {
  const facts& f = facts_of(g);
  // NaN for a number the facts do not know.
  const auto known = [&](value_id v) {
    return f.real_scalar(v).value_or(std::numeric_limits<double>::quiet_NaN());
  };
  const bool divides = has<"cap">(m);
  const double out = known(get<"cap_out">(m));
  const double in = known(divides ? get<"cap">(m) : get<"cap_inverse">(m));
  // As the constant's own type holds it: float32's 0.021, not its double.
  const auto text = [&](double x, value_id v) {
    return std::isnan(x) ? std::string("an unknown number")
                         : pattern::number_text(x, g.type(v) != dtype::float64);
  };

  const std::string form = "tanh(s " + std::string(divides ? "/ " : "· ") +
                           text(in, divides ? get<"cap">(m) : get<"cap_inverse">(m)) + ") · " +
                           text(out, get<"cap_out">(m));
  if (!(out > 0) || !std::isfinite(out))
    return {0, "the scores are soft-capped as " + form + ", with no positive cap proven"};
  if (divides ? in != out : in != rounded_to(1 / out, g.type(get<"cap_inverse">(m))))
    return {0, "the scores are soft-capped as " + form +
                   ", not tanh(s / c) · c with one c, which is the only cap the ops compute"};
  return {out};
}

}  // namespace fusekit::rules::sdpa
