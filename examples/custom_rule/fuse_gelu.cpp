// Fuses every exact GELU of a model into com.microsoft Gelu: fuse_gelu IN.onnx OUT.onnx
#include <iostream>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "gelu_rule.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuse_gelu IN.onnx OUT.onnx\n";
    return 2;
  }
  try {
    fusekit::model m = fusekit::load_model(argv[1]);
    const auto report = fusekit::rewrite::fuse<my_rules::gelu>(m);
    fusekit::rewrite::check_invariants(m);
    fusekit::save_model(m, argv[2]);
    std::cout << report.to_table();
  } catch (const fusekit::error& e) {
    std::cerr << "fuse_gelu: " << e.what() << "\n";
    return 1;
  }
}
