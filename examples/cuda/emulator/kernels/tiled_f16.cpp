// The emulator runs what nvcc compiles: src/tiled_f16.cu itself, for the host compiler.
#include "../../src/tiled_f16.cu"
