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
    std::optional<pipe::Placement> chosen;
    if (!placement.empty() && !(chosen = pipe::symbolizePlacement(placement))) {
      for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>())
        model.emitOpError() << "conduit-place-stages: unknown placement '" << placement
                            << "'; expected 'loop' or 'v'";
      return signalPassFailure();
    }
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Partitioned, "conduit-place-stages")))
        return signalPassFailure();
      pipe::ParallelismAttr par = model.getParallelism();
      pipe::Placement kind = chosen.value_or(par.getPlacement());
      llvm::SmallVector<pipe::StageOp> stages = getStageList(model);
      llvm::Expected<std::vector<int64_t>> ranks = sched::placeStages(
          static_cast<int64_t>(stages.size()), par.getPipeline(),
          kind == pipe::Placement::V ? sched::Placement::V : sched::Placement::Loop);
      if (!ranks) {
        model.emitOpError() << llvm::toString(ranks.takeError());
        return signalPassFailure();
      }
      Builder builder(model.getContext());
      for (auto [stage, rank] : llvm::zip(stages, *ranks))
        stage.setRankAttr(builder.getI64IntegerAttr(rank));
      if (kind != par.getPlacement())
        model.setParallelismAttr(
            withSchedule(par, par.getSchedule(), par.getGroupSize(), kind, par.getSplitBackward()));
      model.setPhase(pipe::Phase::Placed);
    }
  }
};

} // namespace
