//===- StageTable.cpp - checks of ops against the stage table -------------===//

#include "dialects/pipe/StageTable.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace conduit::pipe;

LogicalResult StageTable::checkStageOnRank(Operation *op, int64_t r, int64_t stage) const {
  if (stage >= static_cast<int64_t>(stages.size()))
    return op->emitOpError() << "names stage " << stage << " but the model has " << stages.size()
                             << " stages";
  if (stages[stage].rank != r)
    return op->emitOpError() << "runs on rank " << r << " but stage " << stage
                             << " is placed on rank " << stages[stage].rank;
  return success();
}

LogicalResult StageTable::checkMicrobatch(Operation *op, int64_t stage, int64_t mb) const {
  int64_t count = static_cast<int64_t>(stages[stage].samples.size()) - 1;
  if (mb >= count)
    return op->emitOpError() << "names micro-batch " << mb << " but stage " << stage << " has "
                             << count << " micro-batches";
  return success();
}

LogicalResult StageTable::checkSamples(Operation *op, int64_t stage, int64_t mb, int64_t begin,
                                       int64_t end) const {
  ArrayRef<int64_t> samples = stages[stage].samples;
  if (begin < samples[mb] || end > samples[mb + 1])
    return op->emitOpError() << "moves samples [" << begin << ", " << end
                             << ") outside micro-batch " << mb << " of stage " << stage << " ["
                             << samples[mb] << ", " << samples[mb + 1] << ")";
  return success();
}

LogicalResult StageTable::checkLocal(Operation *op, int64_t r, int64_t stage, int64_t mb) const {
  if (failed(checkStageOnRank(op, r, stage)))
    return failure();
  return checkMicrobatch(op, stage, mb);
}

LogicalResult StageTable::checkTransfer(Operation *op, int64_t r, int64_t stage, int64_t mb,
                                        int64_t peer, int64_t peerStage, int64_t peerMb,
                                        int64_t begin, int64_t end) const {
  if (failed(checkLocal(op, r, stage, mb)))
    return failure();
  if (peer >= numRanks)
    return op->emitOpError() << "names peer rank " << peer << " but the pipeline has " << numRanks
                             << " ranks";
  if (peer == r)
    return op->emitOpError() << "transfers to its own rank " << r
                             << "; stages on one rank share memory";
  if (peerStage >= static_cast<int64_t>(stages.size()))
    return op->emitOpError() << "names peer stage " << peerStage << " but the model has "
                             << stages.size() << " stages";
  if (stages[peerStage].rank != peer)
    return op->emitOpError() << "names peer stage " << peerStage << " on rank " << peer
                             << " but that stage is placed on rank " << stages[peerStage].rank;
  if (failed(checkMicrobatch(op, peerStage, peerMb)) ||
      failed(checkSamples(op, stage, mb, begin, end)) ||
      failed(checkSamples(op, peerStage, peerMb, begin, end)))
    return failure();
  return success();
}

LogicalResult conduit::pipe::verifySampleBoundaries(Operation *op, ArrayRef<int64_t> samples) {
  if (samples.size() < 2)
    return op->emitOpError("expects at least one micro-batch (two sample boundaries)");
  if (samples.front() != 0)
    return op->emitOpError() << "micro-batch boundaries must start at sample 0, got "
                             << samples.front();
  for (size_t j = 1; j < samples.size(); ++j)
    if (samples[j] <= samples[j - 1])
      return op->emitOpError() << "micro-batch boundaries must increase strictly, got "
                               << samples[j] << " after " << samples[j - 1];
  return success();
}

LogicalResult StageTable::checkTie(Operation *op, int64_t r, int64_t stage, int64_t peer,
                                   int64_t peerStage) const {
  if (failed(checkStageOnRank(op, r, stage)))
    return failure();
  if (rankOf(peerStage) != peer)
    return op->emitOpError() << "ties with stage " << peerStage << " on rank " << peer
                             << ", but the stage is placed on rank " << rankOf(peerStage);
  return success();
}
