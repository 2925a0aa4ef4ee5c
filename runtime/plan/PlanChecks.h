//===- PlanChecks.h - the semantic rules of a plan --------------*- C++ -*-===//
//
// Every rule a runtime relies on beyond the file's structure: references resolve, counts and
// ranges agree, compute runs in order, every send has the matching receive in the same
// per-pair order. readPlan runs them on every file it reads; the compiler's VerifyProgram pass
// runs them on what it is about to write and points a failure back at the offending op.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_PLANCHECKS_H
#define CONDUIT_RUNTIME_PLAN_PLANCHECKS_H

#include "runtime/Status.h"
#include "runtime/plan/Plan.h"

namespace conduit::runtime {

/// Where a semantic rule failed: the instruction, when the rule concerns one.
struct PlanLocation {
  int32_t rank = -1;
  int64_t instruction = -1;
};

/// The semantic rules of a plan (readPlan runs them; the compiler runs them on what it writes).
/// On failure, `where` (if given) receives the offending instruction, if there is one.
absl::Status checkPlanSemantics(const Plan &plan, PlanLocation *where = nullptr);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_PLANCHECKS_H
