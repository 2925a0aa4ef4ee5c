//===- OpChecks.h - field checks shared by pipe and plan ops ----*- C++ -*-===//
//
// The pipe and plan dialects have ops with the same fields (stage, micro-batch, transfers with
// peers and sample ranges). These templates check those fields alike in both, by accessor name.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_OPCHECKS_H
#define CONDUIT_DIALECTS_PIPE_OPCHECKS_H

#include "dialects/pipe/PipeAttrs.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>

namespace conduit::pipe {

inline mlir::LogicalResult verifyStageAndMicrobatch(mlir::Operation *op, int64_t stage,
                                                    int64_t mb) {
  if (stage < 0 || mb < 0)
    return op->emitOpError() << "expects a non-negative stage and micro-batch, got stage " << stage
                             << " mb " << mb;
  return mlir::success();
}

inline mlir::LogicalResult verifyStageAndBytes(mlir::Operation *op, int64_t stage, int64_t bytes) {
  if (stage < 0)
    return op->emitOpError() << "expects a non-negative stage, got " << stage;
  if (bytes < 0)
    return op->emitOpError() << "expects non-negative bytes, got " << bytes;
  return mlir::success();
}

/// Checks the fields of a layer (pipe.layer, plan.layer).
template <typename LayerOp> mlir::LogicalResult verifyLayer(LayerOp op) {
  if (op.getName().empty())
    return op.emitOpError("expects a non-empty name");
  auto nonNegative = [&](llvm::StringRef what, double value) -> mlir::LogicalResult {
    if (std::isfinite(value) && value >= 0)
      return mlir::success();
    return op.emitOpError() << "expects a finite, non-negative " << what << ", got " << value;
  };
  if (mlir::failed(nonNegative("params", static_cast<double>(op.getParams()))) ||
      mlir::failed(nonNegative("fwd_flops", op.getFwdFlops())) ||
      mlir::failed(nonNegative("bwd_flops", op.getBwdFlops())) ||
      mlir::failed(nonNegative("bwd_weight_flops", op.getBwdWeightFlops())) ||
      mlir::failed(nonNegative("activation_bytes", static_cast<double>(op.getActivationBytes()))) ||
      mlir::failed(nonNegative("checkpoint_bytes", static_cast<double>(op.getCheckpointBytes()))) ||
      mlir::failed(nonNegative("output_bytes", static_cast<double>(op.getOutputBytes()))) ||
      mlir::failed(nonNegative("weight_gradient_bytes",
                               static_cast<double>(op.getWeightGradientBytes().value_or(0)))))
    return mlir::failure();
  if (op.getBwdWeightFlops() > op.getBwdFlops())
    return op.emitOpError() << "expects bwd_weight_flops (" << op.getBwdWeightFlops()
                            << ") no larger than bwd_flops (" << op.getBwdFlops() << ")";
  // What tensor parallelism leaves whole is a part of the whole.
  auto part = [&](llvm::StringRef what, std::optional<int64_t> value, llvm::StringRef of,
                  int64_t whole) -> mlir::LogicalResult {
    if (!value || (*value >= 0 && *value <= whole))
      return mlir::success();
    return op.emitOpError() << "expects " << what << " between 0 and " << of << " (" << whole
                            << "), got " << *value;
  };
  if (mlir::failed(part("replicated_params", op.getReplicatedParams(), "params", op.getParams())) ||
      mlir::failed(part("replicated_activation_bytes", op.getReplicatedActivationBytes(),
                        "activation_bytes", op.getActivationBytes())) ||
      mlir::failed(part("selective_bytes", op.getSelectiveBytes(), "activation_bytes",
                        op.getActivationBytes())) ||
      mlir::failed(part("expert_params", op.getExpertParams(), "params", op.getParams())))
    return mlir::failure();
  return mlir::success();
}

/// Checks the fields of a send or receive. Activations flow to the next stage and gradients to
/// the previous one, so the peer stage follows from the kind and the direction.
template <typename TransferOp> mlir::LogicalResult verifyTransfer(TransferOp op, bool isSend) {
  if (mlir::failed(verifyStageAndMicrobatch(op, op.getStage(), op.getMicrobatch())))
    return mlir::failure();
  if (op.getPeer() < 0 || op.getPeerStage() < 0 || op.getPeerMicrobatch() < 0)
    return op.emitOpError("expects a non-negative peer rank, stage and micro-batch");
  if (op.getBegin() < 0 || op.getEnd() <= op.getBegin())
    return op.emitOpError() << "expects a non-empty sample range, got [" << op.getBegin() << ", "
                            << op.getEnd() << ")";
  if (op.getBytes() < 0)
    return op.emitOpError() << "expects non-negative bytes, got " << op.getBytes();
  if (op.getBatch() < -1)
    return op.emitOpError() << "expects batch -1 (none) or a batch id, got " << op.getBatch();
  bool downstream = (op.getKind() == TransferKind::Activation) == isSend;
  int64_t expected = op.getStage() + (downstream ? 1 : -1);
  if (op.getPeerStage() != expected)
    return op.emitOpError() << "moves " << stringifyTransferKind(op.getKind()) << "s between stage "
                            << op.getStage() << " and stage " << expected << ", got peer stage "
                            << op.getPeerStage();
  return mlir::success();
}

/// Checks that `stage` can be the `i`-th link of a chain of stages covering the layers in
/// order: its index is `i`, it starts where the stages before it end (`previousEnd`), and it
/// ends within the `numLayers` layers of the `container` ("model", "program").
template <typename StageOp>
mlir::LogicalResult verifyStageInChain(StageOp stage, int64_t i, int64_t previousEnd,
                                       int64_t numLayers, llvm::StringRef container) {
  if (stage.getIndex() != i)
    return stage.emitOpError() << "has index " << stage.getIndex() << " at position " << i;
  if (stage.getFirstLayer() != previousEnd)
    return stage.emitOpError() << "starts at layer " << stage.getFirstLayer()
                               << " but the previous stages end at layer " << previousEnd;
  if (stage.getEndLayer() > numLayers)
    return stage.emitOpError() << "ends at layer " << stage.getEndLayer() << " but the "
                               << container << " has " << numLayers << " layers";
  return mlir::success();
}

/// The body of a pipe.model or a plan.program: its layers, then its stages, then its ranks.
template <typename LayerOp, typename StageOp, typename RankOp> struct BodySections {
  llvm::SmallVector<LayerOp> layers;
  llvm::SmallVector<StageOp> stages;
  llvm::SmallVector<RankOp> ranks;
};

/// Sorts the ops of `body` into their sections; an op of another kind, or one out of the
/// sections' order, fails with a message naming the container (`opName`, e.g. "pipe.model") and
/// what its body is called (`bodyName`, e.g. "model").
template <typename LayerOp, typename StageOp, typename RankOp>
mlir::FailureOr<BodySections<LayerOp, StageOp, RankOp>>
collectBodySections(mlir::Block &body, llvm::StringRef opName, llvm::StringRef bodyName) {
  BodySections<LayerOp, StageOp, RankOp> sections;
  int section = 0;
  for (mlir::Operation &op : body) {
    int kind;
    if (auto layer = llvm::dyn_cast<LayerOp>(op)) {
      kind = 0;
      sections.layers.push_back(layer);
    } else if (auto stage = llvm::dyn_cast<StageOp>(op)) {
      kind = 1;
      sections.stages.push_back(stage);
    } else if (auto rank = llvm::dyn_cast<RankOp>(op)) {
      kind = 2;
      sections.ranks.push_back(rank);
    } else {
      return op.emitOpError() << "is not allowed in the body of '" << opName << "'";
    }
    if (kind < section)
      return op.emitOpError() << "is out of order: the " << bodyName
                              << " body holds layers, then stages, then ranks";
    section = kind;
  }
  return sections;
}

} // namespace conduit::pipe

#endif // CONDUIT_DIALECTS_PIPE_OPCHECKS_H
