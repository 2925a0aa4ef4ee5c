//===- PlanOps.cpp - plan operations --------------------------------------===//
//
// Verifiers of the plan operations. Instruction verifiers check their own fields; the program's
// region verifier checks the stage table and that every instruction names streams, events,
// slots and stages that exist on its rank. Cross-rank properties (matching, ordering, deadlock
// freedom) are the job of the conduit-verify-plan pass.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanOps.h"

#include "dialects/pipe/OpChecks.h"
#include "dialects/pipe/StageTable.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace conduit::plan;
using conduit::pipe::parseWeightFlops;
using conduit::pipe::printWeightFlops;
using conduit::pipe::StageTable;

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"

namespace {

/// Streams a rank may use. Three are used today (compute, point-to-point, collectives); the
/// bound leaves room without letting a corrupt id size a runtime table.
constexpr int64_t kMaxStreams = 8;

/// The fields every instruction may carry, read uniformly for the rank-level checks.
struct InstFields {
  int64_t stream = 0;
  int64_t event = -1;
  int64_t slot = -1;
};

InstFields fieldsOf(Operation &op) {
  InstFields f;
  llvm::TypeSwitch<Operation *>(&op)
      .Case<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp, SendOp, RecvOp>(
          [&](auto inst) {
            f.stream = inst.getStream();
            f.slot = inst.getSlot();
          })
      .Case<SignalOp, WaitOp>([&](auto inst) {
        f.stream = inst.getStream();
        f.event = inst.getEvent();
      })
      .Case<AllGatherOp, ReduceScatterOp, AllReduceOp, FreeOp, OptimizerStepOp, TieGradsOp,
            TensorAllReduceOp, TensorAllGatherOp, TensorReduceScatterOp, ExpertDispatchOp,
            ExpertCombineOp>([&](auto inst) { f.stream = inst.getStream(); });
  return f;
}

/// Checks an instruction of rank `rank` against the rank's declarations, the stage table and
/// the collective groups.
LogicalResult checkInstruction(Operation &op, RankOp rank, const StageTable &table,
                               ArrayAttr groups) {
  const int64_t r = rank.getRank();
  InstFields f = fieldsOf(op);
  if (f.stream >= kMaxStreams)
    return op.emitOpError() << "uses stream " << f.stream << "; streams are numbered below "
                            << kMaxStreams;
  if (f.event >= rank.getEvents())
    return op.emitOpError() << "uses event " << f.event << " but rank " << r << " declares "
                            << rank.getEvents() << " events";
  if (f.slot >= static_cast<int64_t>(rank.getSlots().size()))
    return op.emitOpError() << "uses slot " << f.slot << " but rank " << r << " declares "
                            << rank.getSlots().size() << " slots";
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp>([&](auto inst) {
        return table.checkLocal(&op, r, inst.getStage(), inst.getMicrobatch());
      })
      .Case<SendOp, RecvOp>([&](auto inst) -> LogicalResult {
        if (failed(table.checkTransfer(&op, r, inst.getStage(), inst.getMicrobatch(),
                                       inst.getPeer(), inst.getPeerStage(),
                                       inst.getPeerMicrobatch(), inst.getBegin(), inst.getEnd())))
          return failure();
        if (inst.getSlot() >= 0 && inst.getBytes() > rank.getSlots()[inst.getSlot()])
          return inst.emitOpError()
                 << "moves " << inst.getBytes() << " bytes through slot " << inst.getSlot()
                 << " of " << rank.getSlots()[inst.getSlot()] << " bytes";
        return success();
      })
      .Case<AllGatherOp, ReduceScatterOp, AllReduceOp>([&](auto inst) -> LogicalResult {
        if (failed(table.checkStageOnRank(&op, r, inst.getStage())))
          return failure();
        int64_t g = inst.getGroup();
        if (g < 0 || g >= static_cast<int64_t>(groups.size()))
          return inst.emitOpError()
                 << "names group " << g << " but the program has " << groups.size() << " groups";
        if (!llvm::is_contained(llvm::cast<DenseI64ArrayAttr>(groups[g]).asArrayRef(), r))
          return inst.emitOpError()
                 << "runs on rank " << r << ", which is not a member of group " << g;
        return success();
      })
      .Case<FreeOp, OptimizerStepOp>(
          [&](auto inst) { return table.checkStageOnRank(&op, r, inst.getStage()); })
      .Case<TensorAllReduceOp, TensorAllGatherOp, TensorReduceScatterOp>([&](auto inst) {
        return table.checkLocal(&op, r, inst.getStage(), inst.getMicrobatch());
      })
      .Case<ExpertDispatchOp, ExpertCombineOp>([&](auto inst) -> LogicalResult {
        if (failed(table.checkLocal(&op, r, inst.getStage(), inst.getMicrobatch())))
          return failure();
        int64_t g = inst.getGroup();
        if (g < 0 || g >= static_cast<int64_t>(groups.size()))
          return inst.emitOpError()
                 << "names group " << g << " but the program has " << groups.size() << " groups";
        if (inst.getPeerStage() >= 0 &&
            failed(table.checkLocal(&op, r, inst.getPeerStage(), inst.getPeerMicrobatch())))
          return failure();
        return success();
      })
      .Case<TieGradsOp>([&](TieGradsOp inst) {
        return table.checkTie(&op, r, inst.getStage(), inst.getPeer(), inst.getPeerStage());
      })
      .Default([](Operation *) { return success(); });
}

} // namespace

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

LogicalResult ProgramOp::verifyRegions() {
  conduit::pipe::ParallelismAttr par = getParallelism();
  auto body = conduit::pipe::collectBodySections<LayerOp, StageOp, RankOp>(
      getBody().front(), "plan.program", "program");
  if (failed(body))
    return failure();
  auto &[layers, stages, ranks] = *body;
  if (layers.empty())
    return emitOpError("must contain at least one plan.layer");
  if (getTokensPerSample() < 1)
    return emitOpError() << "expects a positive tokens_per_sample, got " << getTokensPerSample();
  for (auto [g, attr] : llvm::enumerate(getGroups())) {
    ArrayRef<int64_t> members = llvm::cast<DenseI64ArrayAttr>(attr).asArrayRef();
    if (members.empty())
      return emitOpError() << "group " << g << " has no member";
    for (auto [i, r] : llvm::enumerate(members))
      if (r < 0 || r >= par.getPipeline() || (i > 0 && r <= members[i - 1]))
        return emitOpError() << "group " << g
                             << " must list distinct pipeline ranks in increasing order";
  }

  if (static_cast<int64_t>(stages.size()) != par.getNumStages())
    return emitOpError() << "expects " << par.getNumStages() << " stages (pipeline "
                         << par.getPipeline() << " x stages_per_device " << par.getStagesPerDevice()
                         << "), found " << stages.size();
  StageTable table(par.getPipeline());
  int64_t previousEnd = 0;
  for (auto [i, stage] : llvm::enumerate(stages)) {
    if (failed(conduit::pipe::verifyStageInChain(stage, static_cast<int64_t>(i), previousEnd,
                                                 static_cast<int64_t>(layers.size()), "program")))
      return failure();
    int64_t params = 0;
    for (int64_t l = stage.getFirstLayer(); l < stage.getEndLayer(); ++l)
      params += layers[l].getParams();
    if (stage.getParams() != params)
      return stage.emitOpError() << "has " << stage.getParams() << " params but its layers have "
                                 << params;
    if (stage.getRank() >= par.getPipeline())
      return stage.emitOpError() << "is placed on rank " << stage.getRank()
                                 << " but the pipeline has " << par.getPipeline() << " ranks";
    if (stage.getSamples().back() != par.getBatchSamples())
      return stage.emitOpError() << "micro-batches end at sample " << stage.getSamples().back()
                                 << " but the replica's batch has " << par.getBatchSamples()
                                 << " samples";
    previousEnd = stage.getEndLayer();
    table.add(stage.getRank(), stage.getSamples());
  }
  if (previousEnd != static_cast<int64_t>(layers.size()))
    return emitOpError() << "stages cover layers [0, " << previousEnd << ") but the program has "
                         << layers.size() << " layers";

  if (static_cast<int64_t>(ranks.size()) != par.getPipeline())
    return emitOpError() << "expects one plan.rank per pipeline rank (" << par.getPipeline()
                         << "), found " << ranks.size();
  for (auto [i, rank] : llvm::enumerate(ranks)) {
    if (rank.getRank() != static_cast<int64_t>(i))
      return rank.emitOpError() << "has rank " << rank.getRank() << " at position " << i;
    for (Operation &op : rank.getBody().front())
      if (failed(checkInstruction(op, rank, table, getGroups())))
        return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp, StageOp and RankOp
//===----------------------------------------------------------------------===//

LogicalResult LayerOp::verify() { return conduit::pipe::verifyLayer(*this); }

LogicalResult StageOp::verify() {
  if (getIndex() < 0 || getRank() < 0)
    return emitOpError() << "expects a non-negative index and rank, got index " << getIndex()
                         << " rank " << getRank();
  if (getFirstLayer() < 0 || getEndLayer() <= getFirstLayer())
    return emitOpError() << "expects a non-empty layer range, got [" << getFirstLayer() << ", "
                         << getEndLayer() << ")";
  if (getParams() < 0)
    return emitOpError() << "expects non-negative params, got " << getParams();
  return conduit::pipe::verifySampleBoundaries(*this, getSamples());
}

LogicalResult RankOp::verifyRegions() {
  if (getRank() < 0 || getEvents() < 0)
    return emitOpError() << "expects a non-negative rank and event count, got rank " << getRank()
                         << " events " << getEvents();
  for (auto [i, bytes] : llvm::enumerate(getSlots()))
    if (bytes < 0)
      return emitOpError() << "declares slot " << i << " with negative size " << bytes;
  for (Operation &op : getBody().front())
    if (!isa<ForwardOp, BackwardOp, BackwardInputOp, BackwardWeightOp, SendOp, RecvOp, AllGatherOp,
             ReduceScatterOp, AllReduceOp, FreeOp, OptimizerStepOp, SignalOp, WaitOp, TieGradsOp,
             TensorAllReduceOp, TensorAllGatherOp, TensorReduceScatterOp, ExpertDispatchOp,
             ExpertCombineOp>(op))
      return op.emitOpError("is not allowed in the body of 'plan.rank'");
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

namespace {
LogicalResult verifyStream(Operation *op, int64_t stream) {
  if (stream < 0)
    return op->emitOpError() << "expects a non-negative stream, got " << stream;
  return success();
}

template <typename ComputeOp> LogicalResult verifyCompute(ComputeOp op) {
  if (failed(verifyStream(op, op.getStream())) ||
      failed(conduit::pipe::verifyStageAndMicrobatch(op, op.getStage(), op.getMicrobatch())))
    return failure();
  if (op.getSlot() < -1)
    return op.emitOpError() << "expects slot -1 (none) or a slot id, got " << op.getSlot();
  return success();
}

template <typename TransferOp> LogicalResult verifyPlanTransfer(TransferOp op, bool isSend) {
  if (failed(verifyStream(op, op.getStream())) || failed(conduit::pipe::verifyTransfer(op, isSend)))
    return failure();
  if (op.getSlot() < -1)
    return op.emitOpError() << "expects slot -1 (none) or a slot id, got " << op.getSlot();
  if (!isSend && op.getSlot() < 0)
    return op.emitOpError("expects a slot to receive into");
  return success();
}

template <typename CollectiveOp> LogicalResult verifyCollective(CollectiveOp op) {
  if (failed(verifyStream(op, op.getStream())))
    return failure();
  return conduit::pipe::verifyStageAndBytes(op, op.getStage(), op.getBytes());
}

template <typename StageInstOp> LogicalResult verifyStageInst(StageInstOp op) {
  if (failed(verifyStream(op, op.getStream())))
    return failure();
  return conduit::pipe::verifyStageAndBytes(op, op.getStage(), 0);
}

template <typename EventOp> LogicalResult verifyEvent(EventOp op) {
  if (failed(verifyStream(op, op.getStream())))
    return failure();
  if (op.getEvent() < 0)
    return op.emitOpError() << "expects a non-negative event, got " << op.getEvent();
  return success();
}
} // namespace

LogicalResult ForwardOp::verify() { return verifyCompute(*this); }
LogicalResult BackwardOp::verify() { return verifyCompute(*this); }
LogicalResult BackwardInputOp::verify() { return verifyCompute(*this); }
LogicalResult BackwardWeightOp::verify() {
  if (getSlot() != -1)
    return emitOpError() << "receives nothing; its slot must be -1, got " << getSlot();
  return verifyCompute(*this);
}
LogicalResult SendOp::verify() { return verifyPlanTransfer(*this, /*isSend=*/true); }
LogicalResult RecvOp::verify() { return verifyPlanTransfer(*this, /*isSend=*/false); }
LogicalResult AllGatherOp::verify() { return verifyCollective(*this); }
LogicalResult ReduceScatterOp::verify() { return verifyCollective(*this); }
LogicalResult AllReduceOp::verify() { return verifyCollective(*this); }
LogicalResult FreeOp::verify() { return verifyStageInst(*this); }
LogicalResult OptimizerStepOp::verify() { return verifyStageInst(*this); }
LogicalResult TieGradsOp::verify() {
  if (failed(verifyStream(*this, getStream())))
    return failure();
  if (getPeer() < 0)
    return emitOpError() << "expects a non-negative peer rank, got " << getPeer();
  if (failed(conduit::pipe::verifyStageAndBytes(*this, getPeerStage(), getBytes())))
    return failure();
  return conduit::pipe::verifyStageAndBytes(*this, getStage(), getBytes());
}
template <typename TensorOp> LogicalResult verifyTensorCollective(TensorOp op) {
  if (failed(verifyStream(op, op.getStream())))
    return failure();
  if (op.getMicrobatch() < 0)
    return op.emitOpError() << "expects a non-negative micro-batch, got " << op.getMicrobatch();
  return conduit::pipe::verifyStageAndBytes(op, op.getStage(), op.getBytes());
}
LogicalResult TensorAllReduceOp::verify() { return verifyTensorCollective(*this); }
LogicalResult TensorAllGatherOp::verify() { return verifyTensorCollective(*this); }
LogicalResult TensorReduceScatterOp::verify() { return verifyTensorCollective(*this); }
template <typename AllToAllOp> LogicalResult verifyExpertAllToAll(AllToAllOp op) {
  if (failed(verifyTensorCollective(op)))
    return failure();
  if ((op.getPeerStage() < 0) != (op.getPeerMicrobatch() < 0) || op.getPeerStage() < -1 ||
      op.getPeerMicrobatch() < -1)
    return op.emitOpError() << "hides behind stage " << op.getPeerStage() << " micro-batch "
                            << op.getPeerMicrobatch()
                            << "; expected a stage and a micro-batch, or -1 -1 for none";
  return success();
}
LogicalResult ExpertDispatchOp::verify() { return verifyExpertAllToAll(*this); }
LogicalResult ExpertCombineOp::verify() { return verifyExpertAllToAll(*this); }
LogicalResult SignalOp::verify() { return verifyEvent(*this); }
LogicalResult WaitOp::verify() { return verifyEvent(*this); }
