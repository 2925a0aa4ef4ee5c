//===- VerifyProgram.cpp - prove a plan.program correct -------------------===//

#include "passes/VerifyProgram.h"

#include "passes/CostModelBuilder.h"
#include "passes/PlanExport.h"
#include "runtime/plan/PlanChecks.h"

using namespace conduit;

mlir::FailureOr<VerifiedPlan> conduit::verifyProgram(plan::ProgramOp program) {
  VerifiedPlan verified{exportPlan(program), {}};
  // Positions map back to ops only when something is wrong: building the map costs as much
  // as the export.
  auto at = [&](int32_t rank, int64_t instruction) -> mlir::Operation * {
    std::vector<std::vector<mlir::Operation *>> ops = planInstructionOps(program);
    if (rank >= 0 && rank < static_cast<int32_t>(ops.size()) && instruction >= 0 &&
        instruction < static_cast<int64_t>(ops[rank].size()))
      return ops[rank][instruction];
    return program;
  };
  runtime::PlanLocation location;
  if (absl::Status status = runtime::checkPlanSemantics(verified.plan, &location); !status.ok()) {
    at(location.rank, location.instruction)->emitOpError() << std::string(status.message());
    return mlir::failure();
  }
  llvm::Expected<CostModel> cost = buildCostModel(program);
  if (!cost) {
    program.emitOpError() << llvm::toString(cost.takeError());
    return mlir::failure();
  }
  verified.simulation = simulatePlan(verified.plan, PlanCosts::fromCostModel(verified.plan, *cost));
  if (const std::optional<SimulationError> &error = verified.simulation.error) {
    at(error->rank, error->instruction)->emitOpError() << error->message;
    return mlir::failure();
  }
  return verified;
}
