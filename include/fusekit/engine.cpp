// The fusekit::engine library: the engine's heavy entry points, defined once (engine.hpp).
#define FUSEKIT_ENGINE_BUILDING
#include "fusekit/engine.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/selfcheck.hpp"
