//===- PeakMemory.cpp - the memory plan of a pipe model -------------------===//
//
// Each stage's figures are one tensor rank's share of its layers (TensorShare) under the
// variant's tensor degree and checkpointing; each rank's order keeps the ops that change what
// it holds, beside which the ops themselves are kept to point the peak back at. A tie's
// bytes, and an all-gather's, are the plan's own. A block with experts holds its routed
// tokens (the dispatched copies, the experts' hidden activations and outputs) at the busiest
// expert rank's load: the layer's activation bytes count them at the mean, and the rest of the
// stated imbalance is added here (job/TransformerCosts.h, moeRoutedActivationBytes).
//
//===----------------------------------------------------------------------===//

#include "passes/PeakMemory.h"

#include "passes/PassUtils.h"

#include "job/TransformerCosts.h"

using namespace conduit;
using namespace mlir;

namespace {

using Kind = MemoryEvent::Kind;

/// The event of `op` on rank `r`, if it changes what the rank holds.
std::optional<MemoryEvent> eventOf(Operation &op, int64_t r, double tieScale) {
  if (pipe::isCompute(&op)) {
    auto [stage, mb] = pipe::computeStageAndMicrobatch(&op);
    Kind kind = isa<pipe::ForwardOp>(op)         ? Kind::Forward
                : isa<pipe::BackwardOp>(op)      ? Kind::Backward
                : isa<pipe::BackwardInputOp>(op) ? Kind::BackwardInput
                                                 : Kind::BackwardWeight;
    return MemoryEvent{kind, stage, mb};
  }
  if (auto send = dyn_cast<pipe::SendOp>(op))
    return MemoryEvent{Kind::Send, send.getStage(), send.getMicrobatch(),
                       send.getKind() == pipe::TransferKind::Gradient};
  if (auto unshard = dyn_cast<pipe::UnshardOp>(op))
    return MemoryEvent{Kind::Gather, unshard.getStage()};
  if (auto reshard = dyn_cast<pipe::ReshardOp>(op))
    return MemoryEvent{Kind::Reshard, reshard.getStage()};
  if (auto reduce = dyn_cast<pipe::ReduceGradOp>(op))
    return MemoryEvent{Kind::Reduce, reduce.getStage()};
  if (auto tie = dyn_cast<pipe::TieGradsOp>(op)) {
    // Under the variant's tensor degree, each rank ties its slice of the table.
    const int64_t incoming =
        tie.getPeer() == r ? 0
                           : static_cast<int64_t>(static_cast<double>(tie.getBytes()) * tieScale);
    return MemoryEvent{Kind::Tie, tie.getStage(), 0, false, incoming};
  }
  return std::nullopt;
}

/// Per sample, what a block with experts holds beyond its activation bytes on one tensor rank:
/// its routed tokens' bytes at the mean load times (imbalance - 1), of its T-th of the tokens.
/// 0 without experts.
int64_t routedSurcharge(pipe::ModelOp model, pipe::ParallelismAttr par) {
  pipe::TransformerAttr t = model.getArchitectureAttr();
  pipe::MoeAttr moe = t ? t.getMoe() : pipe::MoeAttr();
  if (!moe || !(moe.getImbalance() > 1))
    return 0;
  TransformerSpec spec;
  spec.numLayers = t.getNumLayers();
  spec.hiddenSize = t.getHiddenSize();
  spec.numHeads = t.getNumHeads();
  spec.numKvHeads = t.getNumKvHeads();
  spec.ffnHiddenSize = t.getFfnHiddenSize();
  spec.seqLength = t.getSeqLength();
  spec.vocabSize = t.getVocabSize();
  spec.mlp = t.getMlp() == pipe::MlpKind::SwiGLU ? MlpKind::SwiGLU : MlpKind::Gelu;
  MoeSpec &m = spec.moe.emplace();
  m.numExperts = moe.getNumExperts();
  m.topK = moe.getTopK();
  m.expertFfnHiddenSize = moe.getExpertFfnHiddenSize();
  m.denseLayers = moe.getDenseLayers();
  const double routed =
      static_cast<double>(moeRoutedActivationBytes(spec, model.getTraining().getElementBytes()));
  return static_cast<int64_t>(routed * (moe.getImbalance() - 1) /
                              static_cast<double>(std::max<int64_t>(par.getTensor(), 1)));
}

} // namespace

StageActivations conduit::stageActivations(ArrayRef<LayerBytes> layers, pipe::Checkpointing mode) {
  return stageActivations(layers, static_cast<runtime::Checkpointing>(mode));
}

FailureOr<std::vector<RankMemory>> conduit::analyzeMemory(pipe::ModelOp model,
                                                          const MemoryVariant &variant) {
  const pipe::ParallelismAttr planned = model.getParallelism();
  const pipe::ParallelismAttr par = variant.tensor ? withTensor(planned, *variant.tensor) : planned;
  const double tieScale =
      static_cast<double>(planned.getTensor()) / static_cast<double>(par.getTensor());
  const pipe::Checkpointing mode = variant.checkpointing.value_or(par.getCheckpointing());

  MemoryProblem problem;
  llvm::SmallVector<pipe::LayerOp> layers = llvm::to_vector(model.getLayers());
  // Per rank of a tensor group: its share of each layer.
  std::vector<int64_t> params = rankStageParams(model, par);
  const int64_t surcharge = routedSurcharge(model, par);
  for (auto [s, stage] : llvm::enumerate(model.getStages())) {
    MemoryStage &b = problem.stages.emplace_back();
    b.rank = *stage.getRank();
    b.params = params[s];
    std::vector<LayerBytes> stageLayers;
    for (int64_t l = stage.getFirstLayer(); l < stage.getEndLayer(); ++l) {
      const TensorShare share = tensorShare(par, layers[l]);
      // The routed experts' state lies over their expert-data group where it is not the
      // replicas (runtime::Plan::expertsApart).
      if (par.getExpert() > 1 || par.getTensor() > 1)
        b.expertParams += share.expertParams;
      const bool experts = layers[l].getExpertParams().value_or(0) > 0;
      stageLayers.push_back({share.activationBytes + (experts ? surcharge : 0),
                             share.checkpointBytes, share.weightGradientBytes, share.selectiveBytes,
                             static_cast<runtime::LayerKind>(layers[l].getKind())});
    }
    b.activations = stageActivations(stageLayers, mode);
    b.outputBytes = tensorShare(par, layers[stage.getEndLayer() - 1]).outputBytes;
    ArrayRef<int64_t> samples = *stage.getSamples();
    b.samples.assign(samples.begin(), samples.end());
  }
  problem.elementBytes = model.getTraining().getElementBytes();
  problem.adam = model.getTraining().getOptimizer() == pipe::Optimizer::Adam;
  problem.momentBytes = model.getTraining().getMomentBytes();
  problem.parametersAreMaster =
      model.getTraining().getMasterWeights() == pipe::MasterWeights::Parameters;
  problem.replicas = par.getData();
  problem.expertReplicas = par.getData() * par.getTensor() / std::max<int64_t>(par.getExpert(), 1);
  problem.sharding = static_cast<runtime::Sharding>(par.getSharding());
  problem.sampleScale = variant.sampleScale;

  std::vector<std::vector<Operation *>> ops;
  for (pipe::RankOp rank : model.getRanks()) {
    FailureOr<std::vector<int64_t>> slots = receiveSlotBytes(model, rank);
    if (failed(slots))
      return failure();
    problem.receiveSlots.push_back(std::move(*slots));
    std::vector<MemoryEvent> &order = problem.orders.emplace_back();
    std::vector<Operation *> &at = ops.emplace_back();
    for (Operation &op : rank.getBody().front())
      if (std::optional<MemoryEvent> event = eventOf(op, rank.getRank(), tieScale)) {
        order.push_back(*event);
        at.push_back(&op);
      }
  }

  if (sched::Violation v = problem.check())
    return model.emitOpError() << "cannot plan memory: " << *v;
  llvm::Expected<std::vector<MemoryPeak>> peaks = peakMemory(problem);
  if (!peaks)
    return model.emitOpError() << llvm::toString(peaks.takeError());
  if (sched::Violation v = verifyPeakMemory(problem, *peaks))
    return model.emitOpError() << "internal error: the memory plan does not verify: " << *v;
  std::vector<RankMemory> ranks;
  for (auto [peak, at] : llvm::zip(*peaks, ops)) {
    RankMemory &m = ranks.emplace_back();
    m.peak = peak.peak;
    m.atPeak = peak.atPeak;
    m.peakOp = peak.event >= 0 ? at[peak.event] : nullptr;
    m.activationsInFlight = peak.activationsInFlight;
  }
  return ranks;
}
