// run_passes IN.onnx OUT.onnx: the four classic passes over a model, to the fixed point, and the
// report's table; ONNX Runtime then judges OUT against IN (tests/python/test_passes.py).
#include <iostream>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/batch_normalization_folding.hpp"
#include "fusekit/rules/bias_folding.hpp"
#include "fusekit/rules/transpose_folding.hpp"
#include "quick_gelu.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: run_passes IN.onnx OUT.onnx\n";
    return 2;
  }
  try {
    fusekit::model m = fusekit::load_model(argv[1]);
    const auto report =
        fusekit::rewrite::fuse<fusekit::rules::batch_normalization_into_conv,
                               fusekit::rules::transpose_folding,
                               fusekit::rules::matmul_add_to_gemm, passes::quick_gelu>(m);
    fusekit::rewrite::check_invariants(m);
    fusekit::save_model(m, argv[2]);
    std::cout << report.to_table();
  } catch (const std::exception& e) {
    std::cerr << "run_passes: " << e.what() << "\n";
    return 1;
  }
}
