//===- VerifyProgram.cpp - prove a plan.program correct -------------------===//

#include "passes/VerifyProgram.h"

#include "passes/CostModelBuilder.h"
#include "passes/PassUtils.h"
#include "passes/PlanExport.h"
#include "runtime/plan/PlanChecks.h"

using namespace conduit;

mlir::FailureOr<VerifiedPlan>
conduit::verifyProgram(plan::ProgramOp program,
                       std::vector<std::vector<runtime::Instruction>> *instructions,
                       SimulationOptions simulation) {
  VerifiedPlan verified{exportPlan(program), {}};
  if (instructions)
    for (auto [rank, list] : llvm::zip(verified.plan.ranks, *instructions))
      rank.instructions = std::move(list);
  // Positions map back to ops only when something is wrong: building the map costs as much
  // as the export.
  auto at = [&](int32_t rank, int64_t instruction) -> mlir::InFlightDiagnostic {
    std::vector<std::vector<mlir::Operation *>> ops = planInstructionOps(program);
    if (rank < 0 || rank >= static_cast<int32_t>(ops.size()))
      return program.emitOpError();
    const std::vector<runtime::Instruction> &list = verified.plan.ranks[rank].instructions;
    if (instruction >= 0 && instruction < static_cast<int64_t>(ops[rank].size()))
      return ops[rank][instruction]->emitOpError();
    plan::RankOp rankOp = *std::next(program.getRanks().begin(), rank);
    if (instruction >= 0 && instruction < static_cast<int64_t>(list.size()))
      return rankOp.emitOpError() << "instruction " << instruction << " ("
                                  << runtime::opName(list[instruction].op) << "): ";
    return rankOp.emitOpError();
  };
  runtime::PlanLocation location;
  if (absl::Status status = runtime::checkPlanSemantics(verified.plan, &location); !status.ok()) {
    at(location.rank, location.instruction) << std::string(status.message());
    return mlir::failure();
  }
  llvm::Expected<CostModel> cost = buildCostModel(program);
  if (!cost) {
    program.emitOpError() << llvm::toString(cost.takeError());
    return mlir::failure();
  }
  verified.simulation = simulatePlan(
      verified.plan, PlanCosts::fromCostModel(verified.plan, *cost, rankStageParams(program)),
      simulation);
  if (const std::optional<SimulationError> &error = verified.simulation.error) {
    at(error->rank, error->instruction) << error->message;
    return mlir::failure();
  }
  return verified;
}
