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
    if (absl::Status status = runtime::checkPlanSemantics(plan); !status.ok())
      return program.emitOpError() << std::string(status.message());
    llvm::Expected<CostModel> cost = buildCostModel(program);
    if (!cost)
      return program.emitOpError() << llvm::toString(cost.takeError());
    SimulationResult result = simulatePlan(plan, PlanCosts::fromCostModel(plan, *cost));
    if (!result.error)
      return success();
    const SimulationError &error = *result.error;
    std::vector<std::vector<Operation *>> ops = planInstructionOps(program);
    Operation *where = program;
    if (error.rank >= 0 && error.instruction >= 0 &&
        error.instruction < static_cast<int64_t>(ops[error.rank].size()))
      where = ops[error.rank][error.instruction];
    return where->emitOpError() << error.message;
  }
};

} // namespace
