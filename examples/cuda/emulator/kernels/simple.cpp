// The emulator runs what nvcc compiles: src/simple.cu itself, for the host compiler.
#include "../../src/simple.cu"
