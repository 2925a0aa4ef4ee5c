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
  VerifyPlan() = default;
  explicit VerifyPlan(VerifiedPlanSink sink) : sink(std::move(sink)) {}

  void runOnOperation() override {
    for (plan::ProgramOp program : getOperation().getOps<plan::ProgramOp>()) {
      FailureOr<VerifiedPlan> verified = verifyProgram(program);
      if (failed(verified))
        return signalPassFailure();
      if (sink)
        sink(std::move(*verified));
    }
  }

  VerifiedPlanSink sink;
};

} // namespace

std::unique_ptr<Pass> conduit::createConduitVerifyPlan(VerifiedPlanSink sink) {
  return std::make_unique<VerifyPlan>(std::move(sink));
}
