//===- PlaceStages.cpp - conduit-place-stages -----------------------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Schedulers.h"

#include "mlir/IR/Builders.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITPLACESTAGES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct PlaceStages : conduit::impl::ConduitPlaceStagesBase<PlaceStages> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<sched::Placement> kind =
        llvm::StringSwitch<std::optional<sched::Placement>>(placement)
            .Case("loop", sched::Placement::Loop)
            .Case("v", sched::Placement::V)
            .Default(std::nullopt);
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (!kind) {
        model.emitOpError() << "conduit-place-stages: unknown placement '" << placement
                            << "'; expected 'loop' or 'v'";
        return signalPassFailure();
      }
      if (failed(requirePhase(model, pipe::Phase::Partitioned, "conduit-place-stages")))
        return signalPassFailure();
      llvm::SmallVector<pipe::StageOp> stages = getStageList(model);
      llvm::Expected<std::vector<int64_t>> ranks = sched::placeStages(
          static_cast<int64_t>(stages.size()), model.getParallelism().getPipeline(), *kind);
      if (!ranks) {
        model.emitOpError() << llvm::toString(ranks.takeError());
        return signalPassFailure();
      }
      Builder builder(model.getContext());
      for (auto [stage, rank] : llvm::zip(stages, *ranks))
        stage.setRankAttr(builder.getI64IntegerAttr(rank));
      model.setPhase(pipe::Phase::Placed);
    }
  }
};

} // namespace
