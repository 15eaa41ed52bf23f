// Sweeps: the two clean-ups that are properties of the whole graph, not of a pattern at a node,
// and that run once over it after the rules' fixed point (fuse_all), each by its name.
//
//   duplicate-elimination: a node that computes what an earlier one computes (the same op and
//   domain, the same inputs, the same attributes) is read no more; its readers read the earlier
//   node's outputs.
//
//     x ── Shape ── Gather(1) ── a ── Reshape        x ── Shape ── Gather(1) ── a ── Reshape
//     x ── Shape ── Gather(1) ── b ── Expand   ==>                              └── Expand
//
//   It also merges what no two nodes spell alike but the model holds twice: initializers of the
//   same type, dims and bytes (one per reader in a TorchScript export), and integer values the
//   facts prove to hold the same elements, such as the batch size read by a Shape of each layer's
//   input, which is one dim of the model's input however many views it went through.
//
//     a ── Shape ── Gather(0) ── n ── Reshape        a ── Shape ── Gather(0) ── n ── Reshape
//     b ── Shape ── Gather(0) ── m ── Expand   ==>                              └── Expand
//     (dim 0 of a and of b proven to be one dim B)
//
//   dead-node-elimination: a node none of whose outputs is read, by a node, a subgraph or as a
//   graph output, goes, and so does what only it read; an initializer nothing reads that is no
//   graph input goes too, and so does a local function no node calls (every call inlined).
//   What an exporter leaves, and what a fusion that forwarded a value left behind it.
//
// Sweeps, not rules: the nodes that compute one value may be a chain of any length (a TorchScript
// export computes the same shape arithmetic once per reader), and a walk in topological order
// merges it whole, where a rule would merge one level per pass; whether a node is read at all is
// known only once every reader of the graph is.
//
// A node is merged only where the op gives the same outputs for the same inputs: ai.onnx and
// com.microsoft ops other than the random ones, holding no subgraph. Names must live on where a
// graph output or a subgraph reads them: such a node is never the one merged away. Node order is
// the model's, which ONNX requires to be topological.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/report.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rules {

inline constexpr std::string_view duplicate_elimination = "duplicate-elimination";
inline constexpr std::string_view dead_node_elimination = "dead-node-elimination";

// Per op type, the nodes a sweep removed (report::cleaned's form).
using removed_ops = std::map<std::string, int>;

// Merges the duplicate nodes of g and of its subgraphs, and the initializers of g of up to 64 KiB
// that hold the same tensor (counted as "initializer"), reading those in an external file from
// `directory`, the model's.
void merge_duplicates(onnx::GraphProto& g, removed_ops& removed,
                      const std::filesystem::path& directory = {});

// Merges each value of m's graph whose elements the facts prove equal to an earlier value's (an
// integer or boolean tensor of known dims, facts.hpp) into that value. A value that is a graph
// output, or that a subgraph reads, lives on. `as_is`: m's index, where the caller has it (its
// facts are then not computed again).
void merge_proven_equal(model& m, removed_ops& removed, const graph* as_is = nullptr);

// Removes the nodes of g and of its subgraphs that nothing reads, and the initializers nothing
// reads that are no graph input; returns how many initializers went.
int remove_dead(onnx::GraphProto& g, removed_ops& removed);

// Removes the local functions of m that no node calls, in its graph, its subgraphs or the body of
// a function called; returns how many went.
int remove_uncalled_functions(onnx::ModelProto& m);

// The sweeps `run` names (every one when it names none) over m's graph, each added to the
// report's rules (once) with what it removed; whether they removed anything. `as_is`: m's index,
// where the caller has it.
bool sweep(model& m, const rewrite::options& run, rewrite::report& out,
           const graph* as_is = nullptr);

}  // namespace fusekit::rules
