//===- StageTable.h - checks of ops against the stage table -----*- C++ -*-===//
//
// Both dialects verify that an op running on a rank names a stage placed there, a micro-batch
// the stage has, and (for transfers) a peer stage and sample range that exist. The stage table
// holds what those checks need and emits the diagnostics, so that pipe and plan say the same
// thing in the same words.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_DIALECTS_PIPE_STAGETABLE_H
#define CONDUIT_DIALECTS_PIPE_STAGETABLE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace conduit::pipe {

class StageTable {
public:
  struct Stage {
    int64_t rank = -1;
    llvm::ArrayRef<int64_t> samples; // micro-batch boundaries
  };

  StageTable(int64_t numRanks) : numRanks(numRanks) {}
  void add(int64_t rank, llvm::ArrayRef<int64_t> samples) { stages.push_back({rank, samples}); }
  /// The rank `stage` is placed on, or -1 when the model has no such stage.
  int64_t rankOf(int64_t stage) const {
    return stage >= 0 && stage < static_cast<int64_t>(stages.size()) ? stages[stage].rank : -1;
  }
  /// A tie_grads of rank `r` between `stage` (here) and `peerStage` on rank `peer`.
  mlir::LogicalResult checkTie(mlir::Operation *op, int64_t r, int64_t stage, int64_t peer,
                               int64_t peerStage) const;

  /// `op` runs on rank `r` and works on (`stage`, `mb`).
  mlir::LogicalResult checkLocal(mlir::Operation *op, int64_t r, int64_t stage, int64_t mb) const;
  /// `op` runs on rank `r` and works on `stage` as a whole.
  mlir::LogicalResult checkStageOnRank(mlir::Operation *op, int64_t r, int64_t stage) const;
  /// `op` on rank `r` moves samples [begin, end) between local (`stage`, `mb`) and
  /// (`peerStage`, `peerMb`) on rank `peer`.
  mlir::LogicalResult checkTransfer(mlir::Operation *op, int64_t r, int64_t stage, int64_t mb,
                                    int64_t peer, int64_t peerStage, int64_t peerMb, int64_t begin,
                                    int64_t end) const;

private:
  mlir::LogicalResult checkMicrobatch(mlir::Operation *op, int64_t stage, int64_t mb) const;
  mlir::LogicalResult checkSamples(mlir::Operation *op, int64_t stage, int64_t mb, int64_t begin,
                                   int64_t end) const;

  int64_t numRanks;
  llvm::SmallVector<Stage> stages;
};

/// Checks micro-batch boundaries: at least one micro-batch, starting at 0, strictly increasing.
mlir::LogicalResult verifySampleBoundaries(mlir::Operation *op, llvm::ArrayRef<int64_t> samples);

} // namespace conduit::pipe

#endif // CONDUIT_DIALECTS_PIPE_STAGETABLE_H
