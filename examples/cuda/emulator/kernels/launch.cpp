// src/launch.cu, unchanged, compiled by the host compiler for the emulator.
#include "../../src/launch.cu"
