//===- VerifyProgram.h - prove a plan.program correct -----------*- C++ -*-===//
//
// The engine behind conduit-verify-plan: the plan file's semantic rules, then a simulation of
// every rank with NCCL matching rules and the cost model's durations. The simulated step it
// proves correct is also the step the reports describe, so callers keep it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_VERIFYPROGRAM_H
#define CONDUIT_PASSES_VERIFYPROGRAM_H

#include "analysis/Simulator.h"
#include "dialects/plan/PlanOps.h"
#include "runtime/plan/Plan.h"

namespace conduit {

/// A plan proven correct, and its simulated step.
struct VerifiedPlan {
  runtime::Plan plan;
  SimulationResult simulation;
};

/// Verifies `program`: its plan.rank ops' instructions, or `instructions` (per rank, taken)
/// where the lowering kept them as data and left the plan.rank ops empty. On failure, reports
/// the problem on the offending instruction's op (with data: on its plan.rank, naming the
/// instruction; or on the program) and returns failure. `simulation` says what the simulated
/// step keeps.
mlir::FailureOr<VerifiedPlan>
verifyProgram(plan::ProgramOp program,
              std::vector<std::vector<runtime::Instruction>> *instructions = nullptr,
              SimulationOptions simulation = {});

} // namespace conduit

#endif // CONDUIT_PASSES_VERIFYPROGRAM_H
