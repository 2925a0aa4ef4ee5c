//===- VerifyPlan.cpp - conduit-verify-plan -------------------------------===//
//
// Proves a plan.program correct before it becomes a plan file: the semantic rules every
// runtime relies on (what the plan file reader checks), then a full simulation with NCCL
// matching rules that checks the guarantees of ARCHITECTURE.md §7 through events and stream
// order. A failure is reported on the offending instruction.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/VerifyProgram.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITVERIFYPLAN
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct VerifyPlan : conduit::impl::ConduitVerifyPlanBase<VerifyPlan> {
  using ConduitVerifyPlanBase::ConduitVerifyPlanBase;
  VerifyPlan(VerifiedPlanSink sink, std::shared_ptr<LoweredInstructions> lowered, bool times)
      : sink(std::move(sink)), lowered(std::move(lowered)) {
    simulatedTimes = times;
  }

  void runOnOperation() override {
    for (plan::ProgramOp program : getOperation().getOps<plan::ProgramOp>()) {
      std::vector<std::vector<runtime::Instruction>> instructions;
      const bool kept = lowered && lowered->programs.count(program);
      if (kept) {
        instructions = std::move(lowered->programs[program]);
        lowered->programs.erase(program);
      }
      FailureOr<VerifiedPlan> verified =
          verifyProgram(program, kept ? &instructions : nullptr, SimulationOptions{simulatedTimes});
      if (failed(verified))
        return signalPassFailure();
      if (sink)
        sink(std::move(*verified));
    }
  }

  VerifiedPlanSink sink;
  std::shared_ptr<LoweredInstructions> lowered;
};

} // namespace

std::unique_ptr<Pass> conduit::createConduitVerifyPlan(VerifiedPlanSink sink,
                                                       std::shared_ptr<LoweredInstructions> lowered,
                                                       bool times) {
  return std::make_unique<VerifyPlan>(std::move(sink), std::move(lowered), times);
}
