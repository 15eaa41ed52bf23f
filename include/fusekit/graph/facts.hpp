// What the model does not state but its ops imply: every value's rank and dims (static, symbolic,
// or unknown), and the contents of small integer and float tensors (a Shape, the Slice of it,
// the √ of its last entry), inferred forward in one pass in topological order: linear in the
// graph, no recursion, no depth limit.
//
// Facts are proven, never assumed. A dim nothing names gets an atom of its own, so it is equal to
// itself wherever it travels and to nothing else; a dim that cannot be followed is unknown.
// Declared shapes (inputs, outputs, value_info) take part; a declaration that contradicts what
// the ops imply is recorded in contradictions() and the value's shape becomes unknown rather than
// either side being trusted.
//
// `facts_of(g)` builds the facts of a graph on first use and keeps them with it; like the index,
// they describe the graph as it was when they were built.
//
// The parts, one job each, in graph/facts/: the store and its queries (store.hpp), the algebra of
// dims (algebra.hpp), the forward pass (pass.hpp) with the checks of a node against its schema
// (schema_check.hpp) and the per-op rules by ONNX's op families (rules/math.hpp, tensor.hpp,
// generator.hpp, reduction.hpp, nn.hpp, on what rule_context.hpp gives them), and the
// explanations of unknown dims (explain.hpp). This header is the one to include.
#pragma once

#include "fusekit/graph/facts/explain.hpp"
#include "fusekit/graph/facts/pass.hpp"
#include "fusekit/graph/facts/store.hpp"
