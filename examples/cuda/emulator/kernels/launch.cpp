// The emulator runs what nvcc compiles: src/launch.cu itself, for the host compiler.
#include "../../src/launch.cu"
