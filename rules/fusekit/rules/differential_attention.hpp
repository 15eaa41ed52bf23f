// Differential attention (DiffLlama) attends twice a layer with one q and one k, once per half of
// v. The dynamo exporter's optimizer writes the two softmaxes as one, whose probabilities two
// MatMuls multiply, their outputs joined on the head-size axis:
//
//   before                                                after
//   p ─┬─ MatMul(·, v₁) ─ [Reshape ≡] ─ [Transpose] ─┐     v₁, v₂ ─ Concat(last axis) ─┐
//      └─ MatMul(·, v₂) ─ [Reshape ≡] ─ [Transpose] ─┴─    p ──────────────────── MatMul ─
//                                      Concat(axis a) ─ y                   [Transpose] ─ y
//
// p·[v₁ | v₂] = [p·v₁ | p·v₂]: one product on v whole, which the attention rules then fuse as a
// block whose v has a head size of its own (2H). It holds where v₁ and v₂ are proven to agree in
// every dim but the last (so that they join, and broadcast against p as each did), both views are
// one Transpose or none (a Reshape between, proven to keep every dim, is no view at all), the
// Concat's axis is the products' last axis through that Transpose, and both products read the
// probabilities as one value, uncast after (a converter that keeps one MatMul in float32 by its
// name and not the other is a near miss: one product would compute both in one type).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rules {

namespace differential {

using namespace pattern;

// A Reshape that leaves every dim as it was: an identity, whatever its target says.
inline bool keeps_every_dim(const graph& g, node_id reshape) {
  const facts& f = facts_of(g);
  const value_id in = g.input(reshape, 0), out = g.output(reshape, 0);
  const auto rank = f.rank(in);
  if (!rank || f.rank(out) != rank) return false;
  for (int i = 0; i < int(*rank); ++i)
    if (f.same_dim(in, i, out, i) != truth::yes) return false;
  return true;
}

// Whether the Concat joins, through at most three views or Casts each, two MatMuls whose first
// operands one Softmax computes, through at most six Casts, Identities and the NaN guard's Where
// and IsNaN, each read at its input 0 (the Where's condition is IsNaN of the Softmax).
inline bool products_of_one_softmax(const graph& g, node_id concat) {
  if (g.inputs(concat).size() != 2) return false;
  const auto passed = [&](node_id n) {
    const std::string_view op = g.op_type(n);
    return g.domain(n).empty() &&
           (op == "Cast" || op == "Identity" || op == "Where" || op == "IsNaN");
  };
  node_id product[2] = {no_id, no_id}, weights[2] = {no_id, no_id};
  for (int k = 0; k < 2; ++k) {
    node_id p = g.producer(g.input(concat, std::size_t(k)));
    for (int step = 0; step < 3 && p != no_id && g.op_type(p) != "MatMul"; ++step)
      p = g.producer(g.input(p, 0));
    if (p == no_id || g.op_type(p) != "MatMul") return false;
    product[k] = p;
    node_id w = g.producer(g.input(p, 0));
    for (int step = 0; step < 6 && w != no_id && passed(w); ++step) w = g.producer(g.input(w, 0));
    if (w == no_id || g.op_type(w) != "Softmax") return false;
    weights[k] = w;
  }
  return product[0] != product[1] && weights[0] == weights[1];
}

// What products_of_one_softmax finds above both products, as attention computes it.
inline constexpr auto probabilities = op<"Softmax">(
    op<"MatMul">(capture<"q">, op<"Transpose">(capture<"k">).attr<"perm">(ints(0, 1, 3, 2))));

template <fixed_string P, fixed_string V, fixed_string Product, fixed_string Turn>
inline constexpr auto weighed =
    optional_op(
        op<"Transpose">(optional_op(op<"Reshape">(through_casts(op<"MatMul">(capture<P>, capture<V>)
                                                                    .template bind<Product>()),
                                                  any())
                                        .where("keeps every dim", keeps_every_dim))))
        .template bind<Turn>();

inline constexpr auto joined =
    op<"Concat">(weighed<"p1", "v1", "product1", "turn1">, weighed<"p2", "v2", "product2", "turn2">)
        .where("joins two products of one softmax's probabilities", products_of_one_softmax);

}  // namespace differential

struct differential_attention_values {
  static constexpr std::string_view name = "differential-attention-values";
  static constexpr auto pattern = differential::joined;
  // The join's predicate walks up from both products to one Softmax (of attention's scores).
  static constexpr auto sources =
      pattern::sources(pattern::source<"p1">(differential::probabilities),
                       pattern::source<"p2">(pattern::capture<"p1">));

  // Only a join of two products that one softmax's probabilities weigh is the block: anything
  // else joined (a rotary embedding's cat(θ, θ), one product read twice; two projections of one
  // input) is left as it is, and is no near miss.
  static bool resembles(const graph& g, node_id n) {
    return differential::products_of_one_softmax(g, n);
  }

  static rewrite::verdict guard(const graph& g, const auto& m) {
    using rewrite::verdict;
    const facts& f = facts_of(g);
    // A converter that keeps some ops in float32 by name may cast one product's operands and not
    // the other's: one product on v whole would compute one half in another type than the model.
    const value_id p1 = get<"p1">(m), p2 = get<"p2">(m);
    if (p1 != p2) {
      const auto as = [&](value_id p) {
        return std::string(dtype_name(g.type(p))) + " '" + std::string(g.name(p)) + "'";
      };
      return verdict::no("the two products read the probabilities as " + as(p1) + " and " + as(p2) +
                         (g.type(p1) != g.type(p2)
                              ? ": one product on v whole would compute one of them in another "
                                "type than the model"
                              : ", not one value"));
    }
    // The join is rewritten as one product, not as a product and the Casts after it.
    for (const node_id product : {get<"product1">(m), get<"product2">(m)})
      for (const use& u : g.consumers(g.output(product, 0)))
        if (g.op_type(u.node) == "Cast" && !g.passes_input_at_inference(u.node))
          return verdict::no(g.describe(product) + " is cast before the join");
    const value_id v1 = get<"v1">(m), v2 = get<"v2">(m);
    const auto rank = f.rank(v1);
    if (!rank || *rank < 2 || f.rank(v2) != rank)
      return verdict::no("v₁ " + f.shape_text(v1) + " and v₂ " + f.shape_text(v2) +
                         " are not proven of one rank");
    for (int i = 0; i + 1 < int(*rank); ++i)
      if (f.same_dim(v1, i, v2, i) != truth::yes)
        return verdict::no("v₁ " + f.shape_text(v1) + " and v₂ " + f.shape_text(v2) +
                           " are not proven to agree in every dim but the last");
    if (g.type(v1) != g.type(v2))
      return verdict::no("v₁ is " + std::string(dtype_name(g.type(v1))) + ", v₂ " +
                         std::string(dtype_name(g.type(v2))));
    const node_id turn1 = get<"turn1">(m), turn2 = get<"turn2">(m);
    const auto perm = [&](node_id t) {
      std::vector<std::int64_t> out;
      if (t == no_id) return out;
      if (const auto p = g.attribute_ints(t, "perm")) out.assign(p->begin(), p->end());
      return out;
    };
    if ((turn1 == no_id) != (turn2 == no_id) || perm(turn1) != perm(turn2))
      return verdict::no("the two products are not viewed alike before the Concat");
    // The joined axis, through the Transpose, must be the products' last.
    const auto out_rank = f.rank(g.output(m.root(), 0));
    const auto axis = g.attribute_int(m.root(), "axis");
    if (!out_rank || !axis)
      return verdict::no(g.describe(m.root()) + "'s output rank is not proven");
    const std::int64_t a = *axis < 0 ? *axis + std::int64_t(*out_rank) : *axis;
    const std::int64_t last = std::int64_t(*out_rank) - 1;
    // A Transpose without perm reverses the dims.
    std::vector<std::int64_t> turned = perm(turn1);
    if (turn1 != no_id && turned.empty())
      for (std::int64_t k = last; k >= 0; --k) turned.push_back(k);
    const std::int64_t joined = turn1 == no_id                              ? a
                                : a >= 0 && a < std::int64_t(turned.size()) ? turned[std::size_t(a)]
                                                                            : -1;
    if (joined != last)
      return verdict::no(g.describe(m.root()) +
                         " joins the products on another axis than their "
                         "last (v's head size)");
    return verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const std::string v =
        e.op("Concat", {e.value(get<"v1">(m)), e.value(get<"v2">(m))}, {{"axis", -1}});
    std::string y = e.op("MatMul", {e.value(get<"p1">(m)), v});
    if (const node_id turn = get<"turn1">(m); turn != no_id) {
      const auto perm = g.attribute_ints(turn, "perm");
      y = perm ? e.op("Transpose", {y},
                      {{"perm", std::vector<std::int64_t>(perm->begin(), perm->end())}})
               : e.op("Transpose", {y});
    }
    e.replace_root(y);
  }
};

}  // namespace fusekit::rules
