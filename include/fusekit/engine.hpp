// fusekit is header-only, and the parts of its engine that no rule's type shapes are also
// compiled once, in the fusekit::engine library (engine.cpp): the facts pass, reading and writing
// a model, the driver, the edit checks and the names, the graph builder, the pattern's
// explanations and the selfcheck's planner and report. A program whose translation units are all
// compiled with FUSEKIT_ENGINE_LINKED, as linking fusekit::engine (or fusekit::rules, which uses
// it) makes them, sees those functions declared, not defined: a test or tool compiles the
// templates its rules instantiate and no more. A rule's test builds in half the time it takes
// header-only.
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
