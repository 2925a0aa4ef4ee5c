//===- SplitMicrobatches.cpp - conduit-split-microbatches -----------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Schedulers.h"

#include "mlir/IR/Builders.h"

#include <numeric>

namespace conduit {
#define GEN_PASS_DEF_CONDUITSPLITMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

/// Each stage's boundaries: explicit partitions, or equal micro-batches.
FailureOr<std::vector<std::vector<int64_t>>> chooseBoundaries(pipe::ModelOp model,
                                                              int64_t numStages) {
  pipe::ParallelismAttr par = model.getParallelism();
  std::vector<std::vector<int64_t>> bounds;
  auto explicitSizes = llvm::dyn_cast_if_present<ArrayAttr>(model.getMicrobatchPartitionsAttr());
  if (!explicitSizes) {
    if (Attribute other = model.getMicrobatchPartitionsAttr();
        other && other != StringAttr::get(model.getContext(), "auto"))
      return model.emitOpError("microbatch_partitions must be \"auto\" or one array of "
                               "micro-batch sizes per stage");
    bounds.assign(numStages,
                  sched::equalBoundaries(par.getMicrobatches(), par.getMicrobatchSize()));
    return bounds;
  }
  if (static_cast<int64_t>(explicitSizes.size()) != numStages)
    return model.emitOpError() << "microbatch_partitions lists " << explicitSizes.size()
                               << " stages but the model has " << numStages;
  for (auto [s, attr] : llvm::enumerate(explicitSizes)) {
    auto sizes = llvm::dyn_cast<DenseI64ArrayAttr>(attr);
    if (!sizes || sizes.empty())
      return model.emitOpError() << "microbatch_partitions[" << s
                                 << "] must be a non-empty array of sizes";
    std::vector<int64_t> list(sizes.asArrayRef().begin(), sizes.asArrayRef().end());
    if (llvm::any_of(list, [](int64_t n) { return n < 1; }))
      return model.emitOpError() << "microbatch_partitions[" << s
                                 << "] has a micro-batch without samples";
    int64_t total = std::accumulate(list.begin(), list.end(), int64_t(0));
    if (total != par.getBatchSamples())
      return model.emitOpError() << "microbatch_partitions[" << s << "] adds up to " << total
                                 << " samples but the batch has " << par.getBatchSamples();
    bounds.push_back(sched::boundariesFromSizes(list));
  }
  return bounds;
}

struct SplitMicrobatches : conduit::impl::ConduitSplitMicrobatchesBase<SplitMicrobatches> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Placed, "conduit-split-microbatches")))
        return signalPassFailure();
      llvm::SmallVector<pipe::StageOp> stages = getStageList(model);
      FailureOr<std::vector<std::vector<int64_t>>> bounds =
          chooseBoundaries(model, static_cast<int64_t>(stages.size()));
      if (failed(bounds))
        return signalPassFailure();
      Builder builder(model.getContext());
      for (auto [stage, b] : llvm::zip(stages, *bounds))
        stage.setSamplesAttr(builder.getDenseI64ArrayAttr(b));
      model.setPhase(pipe::Phase::Split);
    }
  }
};

} // namespace
