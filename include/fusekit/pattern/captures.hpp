// What a pattern binds, known at compile time: each capture has a name and a kind, and the kind
// decides the C++ type get<"name">() returns. Storage is a fixed array inside the match result.
#pragma once

#include <onnx/onnx_pb.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/fixed_string.hpp"

namespace fusekit::pattern {

enum class capture_kind : std::uint8_t {
  value,      // value_id
  node,       // node_id; no_id when an optional node was absent
  number,     // double, from constant_scalar
  tensor,     // const onnx::TensorProto*, from constant
  attribute,  // const onnx::AttributeProto*, schema default included
  branch,     // std::size_t: which any_of alternative matched
  list,       // std::span<const value_id>: the inputs all<> matched
};

template <fixed_string Name, capture_kind Kind>
struct decl {
  static constexpr std::string_view name = Name.view();
  static constexpr capture_kind kind = Kind;
};

template <class... Decls>
struct decl_list {
  static constexpr std::size_t size = sizeof...(Decls);
  static constexpr std::array<std::string_view, size> names{Decls::name...};
  static constexpr std::array<capture_kind, size> kinds{Decls::kind...};
};

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

template <class List>
constexpr std::size_t index_of(std::string_view name) {
  for (std::size_t i = 0; i < List::size; ++i)
    if (List::names[i] == name) return i;
  return npos;
}

namespace detail {

template <class List, class D>
struct add_decl;

template <class... Ds, class D>
struct add_decl<decl_list<Ds...>, D> {
  static constexpr std::size_t found = index_of<decl_list<Ds...>>(D::name);
  static_assert(found == npos || decl_list<Ds...>::kinds[found] == D::kind,
                "fusekit: one capture name is bound to two kinds (a value, a node, a number, a "
                "tensor, an attribute, a branch or a list); give each its own name");
  using type = std::conditional_t<found == npos, decl_list<Ds..., D>, decl_list<Ds...>>;
};

template <class A, class B>
struct merge2;

template <class A>
struct merge2<A, decl_list<>> {
  using type = A;
};

template <class A, class D, class... Ds>
struct merge2<A, decl_list<D, Ds...>> {
  using type = typename merge2<typename add_decl<A, D>::type, decl_list<Ds...>>::type;
};

}  // namespace detail

template <class... Lists>
struct merge;

template <>
struct merge<> {
  using type = decl_list<>;
};

template <class First, class... Rest>
struct merge<First, Rest...> {
  using type = typename detail::merge2<First, typename merge<Rest...>::type>::type;
};

template <class... Lists>
using merge_t = typename merge<Lists...>::type;

template <capture_kind Kind>
using capture_type = std::conditional_t<
    Kind == capture_kind::value, value_id,
    std::conditional_t<
        Kind == capture_kind::node, node_id,
        std::conditional_t<
            Kind == capture_kind::number, double,
            std::conditional_t<
                Kind == capture_kind::tensor, const onnx::TensorProto*,
                std::conditional_t<Kind == capture_kind::attribute, const onnx::AttributeProto*,
                                   std::conditional_t<Kind == capture_kind::list,
                                                      std::span<const value_id>, std::size_t>>>>>>;

// One capture's storage; `bound` tells a capture of an untaken branch from a real one. A list
// keeps its first element in `pointer` and its length in `id`.
struct slot {
  std::uint32_t id = no_id;
  double number = 0;
  const void* pointer = nullptr;
  bool bound = false;

  bool same_as(const slot& other) const {
    return id == other.id && number == other.number && pointer == other.pointer;
  }
};

// A slot read as its capture's C++ type (capture_type<Kind>).
template <capture_kind Kind>
capture_type<Kind> read_slot(const slot& s) {
  if constexpr (Kind == capture_kind::number)
    return s.number;
  else if constexpr (Kind == capture_kind::tensor)
    return static_cast<const onnx::TensorProto*>(s.pointer);
  else if constexpr (Kind == capture_kind::attribute)
    return static_cast<const onnx::AttributeProto*>(s.pointer);
  else if constexpr (Kind == capture_kind::branch)
    return std::size_t(s.id);
  else if constexpr (Kind == capture_kind::list)
    return s.bound ? std::span<const value_id>(static_cast<const value_id*>(s.pointer), s.id)
                   : std::span<const value_id>();
  else
    return s.id;
}

// The captures bound so far, as a predicate sees them in the middle of a match (where_bound):
// get<"q">() and has<"q">() as on a match result, over the context's slots; nothing is copied.
template <class Captures>
struct bound_captures {
  const slot* slots;

  template <fixed_string Name>
  auto get() const {
    constexpr std::size_t i = index_of<Captures>(Name.view());
    static_assert(i != npos, "fusekit: bound.get<>: the pattern has no capture of this name");
    if constexpr (i != npos) return read_slot<Captures::kinds[i]>(slots[i]);
  }
  template <fixed_string Name>
  bool has() const {
    constexpr std::size_t i = index_of<Captures>(Name.view());
    static_assert(i != npos, "fusekit: bound.has<>: the pattern has no capture of this name");
    if constexpr (i != npos)
      return slots[i].bound;
    else
      return false;
  }
};

}  // namespace fusekit::pattern
