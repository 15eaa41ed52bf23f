// fusekit: fuse attention blocks of ONNX models, and say why the near misses did not fuse.
#include "cli.hpp"

int main(int argc, char** argv) { return fusekit::cli::run(argc, argv); }
