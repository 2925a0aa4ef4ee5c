//===- PartitionStages.cpp - conduit-partition-stages ---------------------===//
//
// Builds the partition problem from the cost model (time of one equal micro-batch through
// each layer, forward plus backward) and writes the exact min-max partition as pipe.stage ops,
// or the job's explicit layout. Multi-token prediction modules stay on the last stage with the
// head, whose matrix they use (and, untied, the token table's copy that stage keeps), as
// DeepSeek-V3 and Megatron-Core place them.
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Schedulers.h"

#include "mlir/IR/Builders.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITPARTITIONSTAGES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

/// The layout to write: explicit from the model, or the optimal one.
FailureOr<sched::Partition> choosePartition(pipe::ModelOp model) {
  pipe::ParallelismAttr par = model.getParallelism();
  const int64_t stages = par.getNumStages();
  const int64_t layers = static_cast<int64_t>(llvm::range_size(model.getLayers()));
  std::optional<pipe::TransformerAttr> arch = model.getArchitecture();
  const int64_t mtp = arch ? arch->getMtpLayers() : 0;
  if (std::optional<ArrayRef<int64_t>> layout = model.getStageLayers()) {
    if (static_cast<int64_t>(layout->size()) != stages)
      return model.emitOpError() << "stage_layers lists " << layout->size()
                                 << " stages but the model has " << stages;
    sched::Partition partition;
    partition.bounds.push_back(0);
    for (int64_t count : *layout) {
      if (count < 1)
        return model.emitOpError("stage_layers needs at least one layer per stage");
      partition.bounds.push_back(partition.bounds.back() + count);
    }
    if (partition.bounds.back() != layers)
      return model.emitOpError() << "stage_layers assigns " << partition.bounds.back()
                                 << " layers but the model has " << layers;
    if (mtp > 0 && layout->back() < mtp + 1)
      return model.emitOpError() << "stage_layers needs at least " << mtp + 1
                                 << " layers on the last stage (the multi-token prediction "
                                    "modules stay there with the head), got "
                                 << layout->back();
    return partition;
  }

  llvm::Expected<CostModel> cost = buildCostModel(model);
  if (!cost)
    return model.emitOpError() << llvm::toString(cost.takeError());
  sched::PartitionProblem problem;
  problem.numStages = stages;
  problem.tailLayers = mtp > 0 ? mtp + 1 : 0;
  for (int64_t l = 0; l < layers; ++l)
    problem.layerCosts.push_back(l > 0 && cost->repeatsPrevious(l)
                                     ? problem.layerCosts.back()
                                     : cost->forwardTime(l, par.getMicrobatchSize()) +
                                           cost->backwardTime(l, par.getMicrobatchSize()));
  llvm::Expected<sched::Partition> partition = sched::partitionMinMax(problem);
  if (!partition)
    return model.emitOpError() << "cannot partition: " << llvm::toString(partition.takeError());
  return *partition;
}

struct PartitionStages : conduit::impl::ConduitPartitionStagesBase<PartitionStages> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Model, "conduit-partition-stages")))
        return signalPassFailure();
      FailureOr<sched::Partition> partition = choosePartition(model);
      if (failed(partition))
        return signalPassFailure();
      OpBuilder builder = OpBuilder::atBlockEnd(&model.getBody().front());
      for (int64_t s = 0; s < partition->numStages(); ++s)
        pipe::StageOp::create(builder, model.getLoc(), s, partition->bounds[s],
                              partition->bounds[s + 1], IntegerAttr(), DenseI64ArrayAttr());
      model.setPhase(pipe::Phase::Partitioned);
    }
  }
};

} // namespace
