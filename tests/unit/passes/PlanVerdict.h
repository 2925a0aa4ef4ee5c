//===- PlanVerdict.h - what the checks say of a plan broken by hand -*- C++ -*-===//
//
// For tests that break a compiled plan on purpose: the error of the plan reader's checks or,
// when they pass, of the verifier's simulation ("" when both accept it).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_PASSES_PLANVERDICT_H
#define CONDUIT_TESTS_UNIT_PASSES_PLANVERDICT_H

#include "analysis/Simulator.h"
#include "runtime/plan/PlanChecks.h"

#include <string>

namespace conduit {

inline std::string verdict(const runtime::Plan &plan) {
  absl::Status semantics = runtime::checkPlanSemantics(plan);
  if (!semantics.ok())
    return std::string(semantics.message());
  SimulationResult result = simulatePlan(plan, PlanCosts::unit(plan));
  return result.error ? result.error->message : "";
}

} // namespace conduit

#endif // CONDUIT_TESTS_UNIT_PASSES_PLANVERDICT_H
