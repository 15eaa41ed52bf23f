#include <fusekit/graph/graph.hpp>
#include <fusekit/graph/model_builder.hpp>
#include <fusekit/rules/all.hpp>
#include <iostream>

int main() {
  fusekit::build::model_builder b;
  auto x = b.input("x", fusekit::dtype::float32, {2, "S"});
  b.output(b.op("Softmax", {x}));
  const auto model = b.build();
  const fusekit::graph g(model);
  const bool index_ok = g.node_count() == 1 && g.attribute_int(0, "axis") == -1;
  // The compiled rule library links: its list is there, and fuses nothing in a lone Softmax.
  fusekit::model m{.proto = model, .path = "consumer.onnx"};
  const bool rules_ok =
      !fusekit::rules::names().empty() && fusekit::rules::fuse_all(m).fusions.empty();
  const bool ok = index_ok && rules_ok;
  std::cout << (ok         ? "consumer: ok"
                : index_ok ? "consumer: rules wrong"
                           : "consumer: wrong index")
            << "\n";
  return ok ? 0 : 1;
}
