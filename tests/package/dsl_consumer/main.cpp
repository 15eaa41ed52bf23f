#include <fusekit/graph/model_builder.hpp>
#include <fusekit/rewrite/driver.hpp>
#include <iostream>

#include "gelu_rule.hpp"

// fusekit_selfcheck(dsl_consumer), from the installed package, says where a selfcheck writes and
// which Python judges it.
static_assert(sizeof(FUSEKIT_SELFCHECK_DIR) > 1 && sizeof(FUSEKIT_PYTHON) > 1);

int main() {
  using fusekit::dtype;
  fusekit::build::model_builder b;
  auto x = b.input("x", dtype::float32, {2, 8});
  auto erf = b.op("Erf", {b.op("Div", {x, b.scalar(dtype::float32, 1.4142135)})});
  b.output(b.op("Mul", {b.op("Mul", {x, b.scalar(dtype::float32, 0.5)}),
                        b.op("Add", {erf, b.scalar(dtype::float32, 1.0)})}),
           dtype::float32, {2, 8});
  fusekit::model m = b.build_model();
  const auto report = fusekit::rewrite::fuse<my_rules::gelu>(m);
  const bool ok = report.fusions.size() == 1 && m.proto.graph().node_size() == 1 &&
                  m.proto.graph().node(0).op_type() == "Gelu";
  std::cout << (ok ? "dsl consumer: ok" : "dsl consumer: the example rule did not fuse") << "\n";
  return ok ? 0 : 1;
}
