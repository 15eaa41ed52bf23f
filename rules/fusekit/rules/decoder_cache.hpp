// A decoder step's key/value cache in the scaled dot-product attention rules: k and v as
// Concat(past, new) along the sequence axis, which Concat is the cache (its result a graph output)
// and which is another stream joined to it (SD3's joint text and image tokens), and why a cache
// stays a Concat outside the fused op. Whether the block is causal is bias_terms.hpp's, proven
// by causal.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "heads_in_batch.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// A decoder step's cache: present = Concat(past, new) along the sequence axis of BNSH, a graph
// output besides what attention reads. Both fused ops take past and new apart and write present
// themselves; where the emit cannot move the cache into the op, the Concat stays as it is.
inline bool along_sequence(const graph& g, node_id concat) {
  const auto axis = g.attribute_int(concat, "axis");
  return facts_of(g).rank(g.output(concat, 0)) == 4u && axis && (*axis == 2 || *axis == -2);
}
template <fixed_string Past, fixed_string New, fixed_string Cache>
inline constexpr auto cached_or_not = any_of(op<"Concat">(capture<Past>, capture<New>)
                                                 .where("concatenated along the sequence axis",
                                                        along_sequence)
                                                 .multi_use()
                                                 .template bind<Cache>(),
                                             any());
inline constexpr auto k_source = cached_or_not<"k_past", "k_new", "k_cache">;
inline constexpr auto v_source = cached_or_not<"v_past", "v_new", "v_cache">;

// A cache is a Concat along the sequence whose result the model returns (present); any other such
// Concat (SD3's joint text and image tokens) is k or v as the op reads it.
inline bool is_cache(const graph& g, node_id concat) {
  return concat != no_id && g.is_graph_output(g.output(concat, 0));
}

// Whether what `reader` computes ends, within a few nodes, in the target shapes of the match's own
// views alone (a Shape of present that sizes repeat_kv's Expand and Reshape), never in a value the
// emit may read (a capture, the root's shape): it then dies with the match, an orphan
// (rewrite/validate.hpp, whose check of the edit proves it).
template <class M>
bool only_sizes_views(const graph& g, node_id reader, const M& m) {
  constexpr std::size_t most = 32;
  const auto matched = m.nodes();
  std::array<node_id, most> seen{};
  std::size_t count = 0, next = 0;
  seen[count++] = reader;
  while (next < count) {
    for (value_id out : g.outputs(seen[next++])) {
      if (out == no_id) continue;
      if (g.is_graph_output(out)) return false;
      for (const use& u : g.consumers(out)) {
        if (u.is_implicit()) return false;
        if (std::find(matched.begin(), matched.end(), u.node) != matched.end()) {
          const std::string_view op = g.op_type(u.node);
          if (u.node == m.root() || u.slot == 0 || !g.domain(u.node).empty() ||
              (op != "Reshape" && op != "Expand" && op != "Unsqueeze"))
            return false;
          continue;
        }
        if (std::find(seen.begin(), seen.begin() + count, u.node) != seen.begin() + count) continue;
        if (count == most) return false;
        seen[count++] = u.node;
      }
    }
  }
  return true;
}

// Why a decoder step's cache stays a Concat outside the fused op ("" when the op takes it, "no
// cache" for a block without one): the op must read the concatenated k and v themselves
// (MultiHeadAttention reads repeated heads), nothing but the replaced nodes may read present
// before the fused node, which computes it (`readers`: that condition checked too), and the op
// writes present in the type it computes in, `op_type`.
template <class M>
std::string cache_kept_because(const graph& g, const M& m, bool grouped, dtype op_type,
                               bool readers = true) {
  const value_id k_read = grouped            ? grouped_keys(g, m)
                          : has<"k_bnsh">(m) ? get<"k_bnsh">(m)
                                             : get<"k_flat">(m);
  const value_id v_read = grouped ? grouped_values(g, m) : get<"v">(m);
  const node_id k_cache = get<"k_cache">(m), v_cache = get<"v_cache">(m);
  if (!is_cache(g, k_cache) && !is_cache(g, v_cache)) return "no cache";
  // Repeated heads first: a repeat_kv the pattern could not prove also hides v's cache from it.
  if (!grouped && (has<"k_grouped">(m) || has<"v_grouped">(m)))
    return "the op reads the repeated heads, not the cache";
  if (!grouped && packed(g, m))
    return "the op reads the key/value heads repeated for each query head, not the cache";
  if (has<"k_merged">(m) || (!has<"v_view">(m) && merge_of(g, get<"v">(m)) != no_id))
    return "the op reads the concatenated cache through a merge to 3-D that stays";
  if (!is_cache(g, k_cache) || !is_cache(g, v_cache))
    return "only one of key and value is a cache (concatenated and returned)";
  if (k_cache == v_cache) return "key and value are one Concat's output";
  if (g.output(k_cache, 0) != k_read || g.output(v_cache, 0) != v_read)
    return "the op reads the repeated heads, not the cache";
  if (readers) {
    const auto nodes = m.nodes();
    for (node_id cache : {k_cache, v_cache})
      for (const use& u : g.consumers(g.output(cache, 0)))
        if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end() &&
            g.topological_position(u.node) < g.topological_position(m.root()) &&
            !only_sizes_views(g, u.node, m))
          return g.describe(u.node) + " reads '" + std::string(g.name(g.output(cache, 0))) +
                 "' before the attention";
  }
  for (const value_id x : {get<"k_past">(m), get<"v_past">(m), get<"k_new">(m), get<"v_new">(m)})
    if (g.type(x) != op_type)
      return "the op computes in " + std::string(dtype_name(op_type)) + ", the cache is " +
             std::string(dtype_name(g.type(x)));
  return {};
}

}  // namespace fusekit::rules::sdpa
