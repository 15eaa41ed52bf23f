// fusekit is header-only, and its engine's heavy entry points (the facts pass: facts::facts and
// facts::why_unknown; the driver: rewrite::fuse) are also compiled once, in the fusekit::engine
// library (engine.cpp). A program whose translation units are all compiled with
// FUSEKIT_ENGINE_LINKED, as linking fusekit::engine (or fusekit::rules, which uses it) makes
// them, sees those entry points declared, not defined: each of its tests or tools no longer
// compiles the engine again, which was most of a rule test's compile time.
#pragma once

#if defined(FUSEKIT_ENGINE_LINKED) && !defined(FUSEKIT_ENGINE_BUILDING)
#define FUSEKIT_ENGINE_DEFINITIONS 0
#else
#define FUSEKIT_ENGINE_DEFINITIONS 1
#endif

// inline in a header-only program; elsewhere one external definition, in engine.cpp.
#if defined(FUSEKIT_ENGINE_LINKED) || defined(FUSEKIT_ENGINE_BUILDING)
#define FUSEKIT_ENGINE_INLINE
#else
#define FUSEKIT_ENGINE_INLINE inline
#endif
