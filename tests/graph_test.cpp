#include <gtest/gtest.h>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"

using fusekit::dtype;
using fusekit::build::model_builder;

TEST(Graph, Smoke) {
  model_builder b(17);
  auto q = b.input("q", dtype::float16, {2, 16, "S", 64});
  auto kt = b.input("kt", dtype::float16, {2, 16, 64, "S"});
  auto s = b.op("MatMul", {q, kt});
  auto c = b.op("Cast", {s}, {{"to", dtype::float32}});
  auto m = b.op("Mul", {c, b.scalar(dtype::float32, 0.125)});
  auto p = b.op("Softmax", {m});
  b.output(p);
  auto model = b.build();
  fusekit::graph g(model);
  EXPECT_EQ(g.node_count(), 4u);
  EXPECT_EQ(g.type(*g.find_value(p.name)), dtype::float32);
}
