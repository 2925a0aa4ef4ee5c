//===- PeakMemory.h - the memory plan of a pipe model -----------*- C++ -*-===//
//
// The pass side of the memory plan (analysis/PeakMemory.h, which walks plain problems): builds
// the problem from a model in the communicating phase, each layer's figures as one rank of its
// tensor group holds them, under a variant of the job's configuration when asked; checks it,
// computes every rank's peak, verifies the result and points the peak back at its op.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PEAKMEMORY_H
#define CONDUIT_PASSES_PEAKMEMORY_H

#include "analysis/PeakMemory.h"
#include "dialects/pipe/PipeOps.h"

#include <optional>
#include <vector>

namespace conduit {

struct RankMemory {
  int64_t peak = 0;
  /// Bytes of each kind at the peak.
  std::array<int64_t, kNumMemoryKinds> atPeak{};
  /// The op at which the peak is reached (null if the rank holds only static memory).
  mlir::Operation *peakOp = nullptr;
  /// Stored (stage, micro-batch) activations at the peak.
  int64_t activationsInFlight = 0;
};

/// Changes to evaluate what would fit.
struct MemoryVariant {
  /// A checkpointing mode in place of the job's.
  std::optional<pipe::Checkpointing> checkpointing;
  double sampleScale = 1; ///< scale of everything proportional to micro-batch samples
  /// A tensor-parallel degree in place of the job's: every layer's share as that many ranks
  /// would hold it (the plan's transfers and receive slots stay as they are).
  std::optional<int64_t> tensor;
};

/// stageActivations with the dialect's checkpointing mode.
StageActivations stageActivations(llvm::ArrayRef<LayerBytes> layers, pipe::Checkpointing mode);

/// The memory of every rank of `model` (phase communicating, collectives placed); fails (with
/// a diagnostic) where a rank's order cannot be given receive slots.
mlir::FailureOr<std::vector<RankMemory>> analyzeMemory(pipe::ModelOp model,
                                                       const MemoryVariant &variant = {});

/// The bytes of each receive slot of `rank`, as conduit-lower-to-plan assigns them
/// (sched::assignReceiveSlots; defined in LowerToPlan.cpp, which owns the rule).
mlir::FailureOr<std::vector<int64_t>> receiveSlotBytes(pipe::ModelOp model, pipe::RankOp rank);

} // namespace conduit

#endif // CONDUIT_PASSES_PEAKMEMORY_H
