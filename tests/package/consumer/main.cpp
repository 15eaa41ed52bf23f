#include <fusekit/graph/graph.hpp>
#include <fusekit/graph/model_builder.hpp>
#include <iostream>

int main() {
  fusekit::build::model_builder b;
  auto x = b.input("x", fusekit::dtype::float32, {2, "S"});
  b.output(b.op("Softmax", {x}));
  const auto model = b.build();
  const fusekit::graph g(model);
  const bool ok = g.node_count() == 1 && g.attribute_int(0, "axis") == -1;
  std::cout << (ok ? "consumer: ok" : "consumer: wrong index") << "\n";
  return ok ? 0 : 1;
}
