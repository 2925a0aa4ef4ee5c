//===- PlanJson.h - a plan as readable JSON ---------------------*- C++ -*-===//
//
// The human-readable form of a plan file: `conduit-compile --emit=plan-json` and
// `conduit-run --dump` print it. Instructions show only the fields their op uses.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_PLANJSON_H
#define CONDUIT_RUNTIME_PLAN_PLANJSON_H

#include "runtime/plan/Plan.h"

#include <ostream>

namespace conduit::runtime {

void writePlanJson(const Plan &plan, std::ostream &os);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_PLANJSON_H
