//===- PeakMemory.h - peak memory of every rank over a step -----*- C++ -*-===//
//
// Walks each rank's ordered program in the communicating phase and tracks what is allocated
// when: parameters (shards, replicated copies, gathered FSDP buffers), gradients (shards and
// full accumulation buffers), optimizer state, stored activations, the transient activations
// of the operation running, receive buffers, outputs waiting to be sent, and what a deferred
// weight gradient holds after its input gradient. The result is each
// rank's peak and what made it up at that moment.
//
// Receive buffers are the rank's receive slots, as conduit-lower-to-plan will assign them,
// held for the whole step: the runtime allocates them so, and its point-to-point stream may
// post receives long before the compute that the rank's order places before them. An output
// for another rank exists from the compute that writes it until the compute after its last
// send, beside which the transfer runs.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PEAKMEMORY_H
#define CONDUIT_PASSES_PEAKMEMORY_H

#include "dialects/pipe/PipeOps.h"
#include "runtime/plan/MemoryKinds.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// The categories of the memory plan, shared with the runtime's count.
using runtime::kNumMemoryKinds;
using runtime::MemoryKind;
using runtime::memoryKindName;

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

/// A layer's bytes per sample, as its pipe.layer states them.
struct LayerBytes {
  int64_t activation = 0, checkpoint = 0, weightGradient = 0;
  int64_t attentionCore = 0; ///< of `activation`, what selective checkpointing recomputes
};

/// What a micro-batch of a stage holds, per sample, under a checkpointing mode. `stored` lives
/// from its forward to its backward (or input gradient), `weightGradient` from an input
/// gradient to its weight gradient. The working figures are the most a forward, a backward and
/// an input gradient hold beyond what was live before them (for a backward or an input
/// gradient, `stored` included); at that moment of a forward, `forwardKept` of what it stores
/// exists already.
///
/// Full checkpointing keeps each layer's input, and a backward recomputes one layer at a time
/// from the last: layer k's activations live while the inputs of layers k and before are
/// still kept (the later ones released with their layers) and, in an input gradient, what the
/// weight gradients of the later layers need is already held. A forward likewise holds one
/// layer's activations at a time, beside the inputs kept so far and its output (the next
/// layer's input).
///
/// Selective checkpointing (Korthikanti et al., arXiv 2205.05198) stores the activations less
/// the blocks' attention cores; a forward, a backward and an input gradient each compute one
/// block's core at a time beside them.
struct StageActivations {
  int64_t stored = 0, weightGradient = 0;
  int64_t forwardKept = 0, forwardWorking = 0, backwardWorking = 0, inputWorking = 0;
};

/// The figures of a stage of `layers` (in model order) under `mode`.
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
