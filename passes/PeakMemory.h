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
  bool checkpointing = false; ///< force full activation checkpointing
  double sampleScale = 1;     ///< scale of everything proportional to micro-batch samples
};

/// The memory of every rank of `model` (phase communicating, collectives placed); fails (with
/// a diagnostic) where a rank's order cannot be given receive slots.
mlir::FailureOr<std::vector<RankMemory>> analyzeMemory(pipe::ModelOp model,
                                                       const MemoryVariant &variant = {});

/// The bytes of each receive slot of `rank`, as conduit-lower-to-plan assigns them
/// (sched::assignReceiveSlots; defined in LowerToPlan.cpp, which owns the rule).
mlir::FailureOr<std::vector<int64_t>> receiveSlotBytes(pipe::ModelOp model, pipe::RankOp rank);

} // namespace conduit

#endif // CONDUIT_PASSES_PEAKMEMORY_H
