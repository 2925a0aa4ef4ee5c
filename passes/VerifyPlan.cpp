//===- VerifyPlan.cpp - conduit-verify-plan -------------------------------===//
//
// Proves a plan.program correct before it becomes a plan file: the semantic rules every
// runtime relies on (what the plan file reader checks), then a full simulation with NCCL
// matching rules that checks the guarantees of ARCHITECTURE.md §7 through events and stream
// order. A failure is reported on the offending instruction.
//
//===----------------------------------------------------------------------===//

#include "compiler/PlanExport.h"
#include "compiler/Simulator.h"
#include "passes/Passes.h"
#include "runtime/plan/PlanFile.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITVERIFYPLAN
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct VerifyPlan : conduit::impl::ConduitVerifyPlanBase<VerifyPlan> {
  void runOnOperation() override {
    for (plan::ProgramOp program : getOperation().getOps<plan::ProgramOp>())
      if (failed(verifyProgram(program)))
        return signalPassFailure();
  }

  LogicalResult verifyProgram(plan::ProgramOp program) {
    runtime::Plan plan = exportPlan(program);
    auto at = [&](int32_t rank, int64_t instruction) -> Operation * {
      std::vector<std::vector<Operation *>> ops = planInstructionOps(program);
      if (rank >= 0 && rank < static_cast<int32_t>(ops.size()) && instruction >= 0 &&
          instruction < static_cast<int64_t>(ops[rank].size()))
        return ops[rank][instruction];
      return program;
    };
    runtime::PlanLocation location;
    if (absl::Status status = runtime::checkPlanSemantics(plan, &location); !status.ok())
      return at(location.rank, location.instruction)->emitOpError()
             << std::string(status.message());
    llvm::Expected<CostModel> cost = buildCostModel(program);
    if (!cost)
      return program.emitOpError() << llvm::toString(cost.takeError());
    SimulationResult result = simulatePlan(plan, PlanCosts::fromCostModel(plan, *cost));
    if (!result.error)
      return success();
    return at(result.error->rank, result.error->instruction)->emitOpError()
           << result.error->message;
  }
};

} // namespace
