//===- PipeOps.cpp - pipe operations --------------------------------------===//
//
// Verifiers of the pipe operations. Op verifiers check what an op can check alone; the model's
// region verifier checks the body against the model's phase (which ops may appear, stage
// coverage, placement, micro-batch ranges, and that every scheduled op names a stage placed on
// its rank).
//
//===----------------------------------------------------------------------===//

#include "dialects/pipe/PipeOps.h"

#include "dialects/pipe/OpChecks.h"
#include "dialects/pipe/StageTable.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace conduit::pipe;

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

namespace {

/// Checks one op of the body of rank `r` against the stage table.
LogicalResult checkRankBodyOp(Operation &op, int64_t r, const StageTable &table, Phase phase) {
  if (isa<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp>(op)) {
    auto [stage, mb] = computeStageAndMicrobatch(&op);
    return table.checkLocal(&op, r, stage, mb);
  }
  if (phase < Phase::Communicating)
    return op.emitOpError("is not allowed before phase 'communicating' (the model is in phase '")
           << stringifyPhase(phase) << "')";
  if (auto send = dyn_cast<SendOp>(op))
    return table.checkTransfer(&op, r, send.getStage(), send.getMicrobatch(), send.getPeer(),
                               send.getPeerStage(), send.getPeerMicrobatch(), send.getBegin(),
                               send.getEnd());
  if (auto recv = dyn_cast<RecvOp>(op))
    return table.checkTransfer(&op, r, recv.getStage(), recv.getMicrobatch(), recv.getPeer(),
                               recv.getPeerStage(), recv.getPeerMicrobatch(), recv.getBegin(),
                               recv.getEnd());
  int64_t stage =
      llvm::TypeSwitch<Operation *, int64_t>(&op)
          .Case<UnshardOp, ReshardOp, ReduceGradOp, GatherParamsOp, OptimizerStepOp, TieGradsOp>(
              [](auto collective) { return collective.getStage(); });
  if (auto tie = dyn_cast<TieGradsOp>(op))
    return table.checkTie(&op, r, stage, tie.getPeer(), tie.getPeerStage());
  return table.checkStageOnRank(&op, r, stage);
}

} // namespace

LogicalResult ModelOp::verifyRegions() {
  ParallelismAttr par = getParallelism();
  Phase phase = getPhase();
  auto phaseName = [](Phase p) { return "'" + stringifyPhase(p).str() + "'"; };

  auto body =
      collectBodySections<LayerOp, StageOp, RankOp>(getBody().front(), "pipe.model", "model");
  if (failed(body))
    return failure();
  auto &[layers, stages, ranks] = *body;
  if (layers.empty())
    return emitOpError("must contain at least one pipe.layer");
  const int64_t numLayers = static_cast<int64_t>(layers.size());
  if (TransformerAttr arch = getArchitectureAttr())
    if (MoeAttr moe = arch.getMoe();
        moe && moe.getFp8Dispatch() && getTraining().getDtype() != DType::FP8)
      return emitOpError("has fp8_dispatch experts, which needs training dtype \"fp8\", got \"")
             << stringifyDType(getTraining().getDtype()) << "\"";

  // Stages: present exactly from 'partitioned' on, covering the layer chain in order.
  if (phase < Phase::Partitioned) {
    if (!stages.empty())
      return stages.front().emitOpError("is not allowed before phase 'partitioned' (the model "
                                        "is in phase ")
             << phaseName(phase) << ")";
  } else {
    const int64_t expected = par.getNumStages();
    if (static_cast<int64_t>(stages.size()) != expected)
      return emitOpError() << "expects " << expected << " stages (pipeline " << par.getPipeline()
                           << " x stages_per_device " << par.getStagesPerDevice() << ") in phase "
                           << phaseName(phase) << ", found " << stages.size();
    int64_t previousEnd = 0;
    for (auto [i, stage] : llvm::enumerate(stages)) {
      if (failed(
              verifyStageInChain(stage, static_cast<int64_t>(i), previousEnd, numLayers, "model")))
        return failure();
      previousEnd = stage.getEndLayer();
    }
    if (previousEnd != numLayers)
      return emitOpError() << "stages cover layers [0, " << previousEnd << ") but the model has "
                           << numLayers << " layers";
  }

  // Placement and micro-batches, each from its phase on and never before.
  const int64_t batch = par.getBatchSamples();
  for (StageOp stage : stages) {
    std::optional<int64_t> rank = stage.getRank();
    if (phase < Phase::Placed && rank)
      return stage.emitOpError("has a rank before phase 'placed'");
    if (phase >= Phase::Placed && !rank)
      return stage.emitOpError() << "has no rank in phase " << phaseName(phase);
    if (rank && *rank >= par.getPipeline())
      return stage.emitOpError() << "is placed on rank " << *rank << " but the pipeline has "
                                 << par.getPipeline() << " ranks";
    std::optional<ArrayRef<int64_t>> samples = stage.getSamples();
    if (phase < Phase::Split && samples)
      return stage.emitOpError("has micro-batches before phase 'split'");
    if (phase >= Phase::Split && !samples)
      return stage.emitOpError() << "has no micro-batches in phase " << phaseName(phase);
    if (samples && samples->back() != batch)
      return stage.emitOpError() << "micro-batches end at sample " << samples->back()
                                 << " but the replica's batch has " << batch << " samples";
  }

  // Ranks: one per pipeline rank from 'scheduled' on.
  if (phase < Phase::Scheduled) {
    if (!ranks.empty())
      return ranks.front().emitOpError("is not allowed before phase 'scheduled' (the model is "
                                       "in phase ")
             << phaseName(phase) << ")";
    return success();
  }
  if (static_cast<int64_t>(ranks.size()) != par.getPipeline())
    return emitOpError() << "expects one pipe.rank per pipeline rank (" << par.getPipeline()
                         << ") in phase " << phaseName(phase) << ", found " << ranks.size();

  StageTable table(par.getPipeline());
  for (StageOp stage : stages)
    table.add(*stage.getRank(), *stage.getSamples());
  for (auto [i, rank] : llvm::enumerate(ranks)) {
    if (rank.getRank() != static_cast<int64_t>(i))
      return rank.emitOpError() << "has rank " << rank.getRank() << " at position " << i;
    for (Operation &op : rank.getBody().front())
      if (failed(checkRankBodyOp(op, rank.getRank(), table, phase)))
        return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

LogicalResult LayerOp::verify() { return verifyLayer(*this); }

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verify() {
  if (getIndex() < 0)
    return emitOpError() << "expects a non-negative index, got " << getIndex();
  if (getFirstLayer() < 0 || getEndLayer() <= getFirstLayer())
    return emitOpError() << "expects a non-empty layer range, got [" << getFirstLayer() << ", "
                         << getEndLayer() << ")";
  if (std::optional<int64_t> rank = getRank(); rank && *rank < 0)
    return emitOpError() << "expects a non-negative rank, got " << *rank;
  if (std::optional<ArrayRef<int64_t>> samples = getSamples())
    return verifySampleBoundaries(*this, *samples);
  return success();
}

//===----------------------------------------------------------------------===//
// RankOp and the ops of its body
//===----------------------------------------------------------------------===//

LogicalResult RankOp::verifyRegions() {
  if (getRank() < 0)
    return emitOpError() << "expects a non-negative rank, got " << getRank();
  if (std::optional<int64_t> peak = getPeakMemory(); peak && *peak < 0)
    return emitOpError() << "expects a non-negative peak_memory, got " << *peak;
  for (Operation &op : getBody().front())
    if (!isa<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp, SendOp, RecvOp, UnshardOp,
             ReshardOp, ReduceGradOp, GatherParamsOp, OptimizerStepOp, TieGradsOp>(op))
      return op.emitOpError("is not allowed in the body of 'pipe.rank'");
  return success();
}

std::pair<int32_t, int32_t> conduit::pipe::computeStageAndMicrobatch(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::pair<int32_t, int32_t>>(op)
      .Case<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp>(
          [](auto compute) { return std::make_pair(compute.getStage(), compute.getMicrobatch()); });
}

LogicalResult ForwardOp::verify() {
  if (failed(verifyStageAndMicrobatch(*this, getStage(), getMicrobatch())))
    return failure();
  if (!getPaired())
    return success();
  // The pair's second is the next computation of the rank (transfers may sit between).
  for (Operation *op = getOperation()->getNextNode(); op; op = op->getNextNode()) {
    if (isa<BackwardOp, BackwardInputOp>(op))
      return success();
    if (isa<ForwardOp, BackwardWeightOp>(op))
      break;
  }
  return emitOpError() << "is paired but the next computation of the rank is not a backward or "
                          "input gradient";
}

LogicalResult BackwardOp::verify() {
  return verifyStageAndMicrobatch(*this, getStage(), getMicrobatch());
}

LogicalResult BackwardInputOp::verify() {
  return verifyStageAndMicrobatch(*this, getStage(), getMicrobatch());
}

LogicalResult BackwardWeightOp::verify() {
  return verifyStageAndMicrobatch(*this, getStage(), getMicrobatch());
}

LogicalResult SendOp::verify() { return verifyTransfer(*this, /*isSend=*/true); }
LogicalResult RecvOp::verify() { return verifyTransfer(*this, /*isSend=*/false); }

LogicalResult UnshardOp::verify() { return verifyStageAndBytes(*this, getStage(), getBytes()); }
LogicalResult ReshardOp::verify() { return verifyStageAndBytes(*this, getStage(), 0); }
LogicalResult ReduceGradOp::verify() { return verifyStageAndBytes(*this, getStage(), getBytes()); }
LogicalResult GatherParamsOp::verify() {
  return verifyStageAndBytes(*this, getStage(), getBytes());
}
LogicalResult OptimizerStepOp::verify() { return verifyStageAndBytes(*this, getStage(), 0); }
LogicalResult TieGradsOp::verify() {
  if (getPeer() < 0)
    return emitOpError() << "expects a non-negative peer rank, got " << getPeer();
  if (failed(verifyStageAndBytes(*this, getPeerStage(), getBytes())))
    return failure();
  return verifyStageAndBytes(*this, getStage(), getBytes());
}
