//===- PeakMemory.h - peak memory of every rank over a step -----*- C++ -*-===//
//
// The memory plan, independent of any IR: walks each rank's order of instructions and tracks
// what is allocated when: parameters (shards, replicated copies, gathered FSDP buffers),
// gradients (shards and full accumulation buffers), optimizer state, stored activations, the
// transient activations of the compute running, receive buffers, outputs waiting to be sent,
// and what a deferred weight gradient holds after its input gradient. The result is each
// rank's peak and what made it up at that moment. conduit-plan-memory builds the problem from
// pipe IR (passes/PeakMemory.h), records the peaks and refuses plans that do not fit.
//
// Receive buffers are the rank's receive slots, as conduit-lower-to-plan assigns them, held
// for the whole step: the runtime allocates them so, and its point-to-point stream may post
// receives long before the compute that the rank's order places before them. An output for
// another rank exists from the compute that writes it until the compute after its last send,
// beside which the transfer runs.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_PEAKMEMORY_H
#define CONDUIT_ANALYSIS_PEAKMEMORY_H

#include "runtime/plan/MemoryKinds.h"
#include "runtime/plan/Plan.h"
#include "scheduling/Problems.h"

#include "llvm/ADT/ArrayRef.h"

#include <array>
#include <cstdint>
#include <vector>

namespace conduit {

/// The categories of the memory plan, shared with the runtime's count.
using runtime::kNumMemoryKinds;
using runtime::MemoryKind;
using runtime::memoryKindName;

/// A layer's bytes per sample, as its pipe.layer (or the job's layer) states them.
struct LayerBytes {
  int64_t activation = 0, checkpoint = 0, weightGradient = 0;
  int64_t selective = 0; ///< of `activation`, what selective checkpointing recomputes
  /// Which layers checkpointing recomputes whole (runtime::recomputesWhole).
  runtime::LayerKind kind = runtime::LayerKind::Custom;
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
/// layer's input). With `blocks` the embedding and the head keep their activations from the
/// forward to the backward instead, as without checkpointing, and the others are as above.
///
/// Selective checkpointing (Korthikanti et al., arXiv 2205.05198) stores the activations less
/// the blocks' attention cores; a forward, a backward and an input gradient each compute one
/// block's core at a time beside them.
struct StageActivations {
  int64_t stored = 0, weightGradient = 0;
  int64_t forwardKept = 0, forwardWorking = 0, backwardWorking = 0, inputWorking = 0;
};

/// The figures of a stage of `layers` (in model order) under `mode`.
StageActivations stageActivations(llvm::ArrayRef<LayerBytes> layers, runtime::Checkpointing mode);

/// A stage as one rank of its tensor group holds it.
struct MemoryStage {
  int64_t rank = 0;   ///< its pipeline rank
  int64_t params = 0; ///< parameters (a rank's)
  /// Of params, the rank's routed experts (expert parallelism): their sharded state is split
  /// over the problem's expertReplicas instead of its replicas.
  int64_t expertParams = 0;
  /// Bytes per sample of its output: the activations it sends forward, and the gradients the
  /// next stage sends back to it.
  int64_t outputBytes = 0;
  StageActivations activations; ///< per sample
  std::vector<int64_t> samples; ///< micro-batch boundaries, from 0
};

/// One instruction of a rank's order that changes what the rank holds. Instructions that do
/// not (receives, optimizer steps, all-gathers of updated parameters) need no event: the
/// receive slots are held all step, and the optimizer updates state that exists all step.
struct MemoryEvent {
  enum class Kind : uint8_t {
    Forward,
    Backward,
    BackwardInput,
    BackwardWeight,
    Send,    ///< the output of (stage, mb) leaves, the activation or the input gradient
    Gather,  ///< full sharding: the stage's parameters gathered
    Reshard, ///< full sharding: the stage's gathered parameters freed
    Reduce,  ///< the stage's gradients reduced: a full gradient buffer freed (after the next
             ///< backward or weight gradient, beside which the reduction runs)
    Tie,     ///< the tied copy's gradient arrives in `bytes` of its own while it is added
  };
  Kind kind;
  int32_t stage = 0;     ///< every kind but Tie
  int32_t mb = 0;        ///< compute and Send
  bool gradient = false; ///< Send: the input gradient (to the stage before), not the activation
  int64_t bytes = 0;     ///< Tie
};

/// The memory a pipeline's ranks hold over one step.
struct MemoryProblem {
  std::vector<MemoryStage> stages;
  int64_t elementBytes = 2; ///< parameters and activations (gradients are fp32)
  bool adam = true;         ///< Adam's two moments per parameter (SGD: none)
  int64_t momentBytes = 4;  ///< bytes of each moment (2: training.adam_moments "bf16")
  /// The stored parameters (or their shards) are fp32 and are what the optimizer updates,
  /// cast to `elementBytes` for each use (training.master_weights "parameters": PyTorch FSDP's
  /// mixed precision): no master copy beside them, and every parameter of a stage, the routed
  /// experts kept whole included, gathered (cast) for its residencies.
  bool parametersAreMaster = false;
  int64_t replicas = 1; ///< D; the sharded state is split evenly over them (rounded up)
  /// The ranks holding the same routed experts (the expert-data group, D x T / E), over which
  /// the stages' expertParams are sharded; 0: the replicas.
  int64_t expertReplicas = 0;
  runtime::Sharding sharding = runtime::Sharding::None; ///< applies with D > 1 only
  /// Scale of everything proportional to micro-batch samples (activations, receive slots,
  /// outputs), to evaluate a smaller micro-batch on the same plan.
  double sampleScale = 1;
  /// Per pipeline rank: the bytes of its receive slots, and its order.
  std::vector<std::vector<int64_t>> receiveSlots;
  std::vector<std::vector<MemoryEvent>> orders;

  /// At least one stage, on a rank in range; one list of receive slots per rank; sizes
  /// non-negative; micro-batch boundaries from 0, increasing strictly; a positive element
  /// size, replica count and finite sample scale; every event on a stage of its rank and, for
  /// compute and sends, a micro-batch of that stage; no input gradient sent from stage 0.
  sched::Violation check() const;
};

/// A rank's peak.
struct MemoryPeak {
  int64_t peak = 0;
  /// Bytes of each kind at the peak.
  std::array<int64_t, kNumMemoryKinds> atPeak{};
  /// The index in the rank's order of the event at which the peak is reached; -1 before the
  /// first (the rank holds only what it holds all step).
  int64_t event = -1;
  /// Stored (stage, micro-batch) activations at the peak.
  int64_t activationsInFlight = 0;
};

/// Every rank's peak: the first moment of its highest total over the step (during each
/// compute, with its working activations, and after every event). Conventions
/// (docs/cost-model.md): parameters and activations in `elementBytes`; gradients accumulate
/// in fp32; Adam keeps fp32 moments plus an fp32 master copy when the parameters are 16-bit;
/// sharded state is split evenly over the D replicas (rounded up), a stage's routed experts'
/// over their expert-data group. With sharded optimizer state but replicated parameters
/// (ZeRO-1 and 2) the optimizer updates an fp32 copy of its shard (the master, at any
/// precision; none under ZeRO-1 over one rank, whose fp32 parameters are updated where they
/// lie); ZeRO-1 reduce-scatters in place in the whole gradient buffer, ZeRO-2 into a shard
/// buffer of its own, as conduit-run does. Fails only if `problem.check()` does.
llvm::Expected<std::vector<MemoryPeak>> peakMemory(const MemoryProblem &problem);

/// Whether `peaks` can be the problem's: one per rank, the parts add up to the peak, none is
/// negative, parameters and optimizer state are what the rank holds all step, the event is
/// one of the rank's, and the peak is no lower than what the rank holds all step beside the
/// activations of any one of its forwards.
sched::Violation verifyPeakMemory(const MemoryProblem &problem,
                                  const std::vector<MemoryPeak> &peaks);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_PEAKMEMORY_H
