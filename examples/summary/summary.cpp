// fusekit-summary MODEL.onnx: what a model is made of, read through fusekit's graph index.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/io/model.hpp"

namespace {

std::string describe_type(const fusekit::graph& g, fusekit::value_id v) {
  std::string text(fusekit::dtype_name(g.type(v)));
  const auto& shape = g.shape(v);
  if (!shape.known) return text + " [?]";
  text += " [";
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    const auto& d = shape.dims[i];
    text += i ? ", " : "";
    text += d.is_static() ? std::to_string(d.size) : d.is_symbolic() ? d.symbol : "?";
  }
  return text + "]";
}

struct totals {
  std::map<std::string, int> ops;
  std::size_t nodes = 0, subgraphs = 0;
  std::uint64_t inline_bytes = 0, external_tensors = 0, initializers = 0;
};

void count(const fusekit::graph& g, totals& t) {
  t.nodes += g.node_count();
  for (const auto& init : g.proto().initializer()) {
    ++t.initializers;
    if (fusekit::is_external(init))
      ++t.external_tensors;
    else
      t.inline_bytes += init.ByteSizeLong();
  }
  for (fusekit::node_id n = 0; n < g.node_count(); ++n) {
    std::string key(g.domain(n).empty() ? "" : std::string(g.domain(n)) + ".");
    ++t.ops[key + std::string(g.op_type(n))];
    for (const auto& sub : g.subgraphs(n)) {
      ++t.subgraphs;
      count(*sub.body, t);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fusekit-summary MODEL.onnx\n";
    return 2;
  }
  try {
    const fusekit::model m = fusekit::load_model(argv[1]);
    const fusekit::graph g(m);
    std::cout << "model " << argv[1] << ": IR " << m.proto.ir_version() << ", producer '"
              << m.proto.producer_name() << "'\n  opsets:";
    for (const auto& opset : m.proto.opset_import())
      std::cout << " " << (opset.domain().empty() ? "ai.onnx" : opset.domain()) << " "
                << opset.version();
    std::cout << "\n";
    for (const auto& [label, list] :
         {std::pair{"input ", &g.proto().input()}, std::pair{"output", &g.proto().output()}})
      for (const auto& info : *list)
        std::cout << "  " << label << " " << info.name() << ": "
                  << describe_type(g, *g.find_value(info.name())) << "\n";
    totals t;
    count(g, t);
    std::cout << "  " << t.nodes << " nodes (" << g.node_count() << " in the main graph, "
              << t.subgraphs << " subgraphs), " << t.initializers << " initializers ("
              << t.inline_bytes << " bytes inline, " << t.external_tensors << " external)\n";
    std::vector<std::pair<std::string, int>> ops(t.ops.begin(), t.ops.end());
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::cout << "  ops:";
    for (const auto& [op, n] : ops) std::cout << " " << op << " " << n << ";";
    std::cout << "\n";
  } catch (const fusekit::error& e) {
    std::cerr << "fusekit-summary: " << e.what() << "\n";
    return 1;
  }
}
