//===- BackendCore.h - the stage bookkeeping every backend shares -*- C++ -*-===//
//
// What a backend does with a plan, written once: it builds the stages of its pipeline rank
// (layers, parameters, their data-parallel shard, optimizer state, gradient accumulators),
// dispatches the executor's instructions (forward, backward whole or as its input-gradient
// and weight-gradient halves, optimizer step, free, transfers and collectives through a
// Transport), keeps per micro-batch what a step needs (outputs, input gradients, activation
// caches or, with full activation checkpointing, each layer's input, and between the halves
// of a split backward the caches with what the first half stashed), refuses compute out of
// order, and saves and restores the training state. Every buffer comes from the backend's Ops,
// so the same code runs on host and device memory, and is counted by its MemoryCounter under
// the use the compiler's memory plan gives it (each phase below names its use with a
// MemoryScope).
// What a stage sends is released when its last send completes or its last local consumer has
// read it, as the memory plan assumes.
//
// BackendCore.cpp holds the set-up, the step and the saved state, BackendCompute.cpp the
// compute, BackendCommunication.cpp what goes through the transport; BackendStage.h the
// per-stage state they share.
//
// A backend derives from BackendCore and supplies only what differs: the transport and the
// device set-up (connect), memory that belongs to a device stream (gatherBuffer), zeroing
// gradients and the optimizer update (kernels), stream ordering (signal and wait), and waiting
// for the device (synchronizeAll, deviceStatus).
//
// The gradient element type `Grad` is the accumulation policy:
// - double (the CPU): micro-batches are computed one sample at a time and each sample's
//   parameter gradients are added to double accumulators on their own, and the loss is read
//   after every forward. Sums of a few float contributions in double are exact in practice,
//   so the gradient of a step depends neither on the order the schedule runs its
//   micro-batches nor on how replicas split the batch: every plan of a job computes the bits
//   of the single-process reference.
// - float (devices): whole micro-batches, gradients accumulated in float32 by the backward
//   kernels, the loss read once per step (reading it waits for the device).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_BACKENDCORE_H
#define CONDUIT_RUNTIME_EXEC_BACKENDCORE_H

#include "runtime/exec/Backend.h"
#include "runtime/exec/StageWork.h"
#include "runtime/exec/Transport.h"
#include "runtime/model/Optimizer.h"

#include "absl/types/span.h"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

namespace conduit::runtime {

template <typename Grad> class BackendCore : public Backend {
public:
  ~BackendCore() override;

  absl::Status initialise(const Plan &plan) override;
  absl::Status beginStep(int64_t step) override;
  absl::StatusOr<Ticket> start(const std::vector<int64_t> &indices) override;
  absl::StatusOr<bool> poll(Ticket ticket) override;
  /// With expert parallelism, outside --profile (whose layer times must be their own) and
  /// without tensor parallelism.
  bool overlapsPairs() const override;
  absl::StatusOr<Ticket> startPaired(const std::vector<int64_t> &indices) override;
  void setPeerTimeout(double seconds) override { peerTimeoutS = seconds; }
  absl::StatusOr<StepOutcome> endStep(int64_t step) override;
  absl::StatusOr<std::vector<StageState>> snapshot() override;
  absl::Status restore(const std::vector<StageState> &states) override;
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override;
  absl::StatusOr<double> pingPong(int64_t peer, int64_t bytes, int rounds, bool first,
                                  double pauseS) override;
  std::vector<LayerTiming> layerTimings() const override { return timer.timings(); }
  void clearLayerTimings() override { timer.clear(); }
  model::MemoryPeak memoryPeak() override { return ops().memory().peak(); }
  model::RoutedLoad routedLoad() override { return ops().routedLoad(); }
  void resetMemoryPeak() override { ops().memory().resetPeak(); }
  void abort() override;

  /// Where this process sits (valid after initialise).
  RankPosition position() const { return where; }

protected:
  /// Global rank `rank`; `measureLayers` times each layer and optimizer step (--profile).
  BackendCore(int64_t rank, bool measureLayers);

  // The hooks of a backend.

  /// Sets up the device (streams, Ops) and makes the transport; ops() is usable after it.
  /// Every rank calls it together, before any buffer exists.
  virtual absl::StatusOr<std::unique_ptr<Transport>> connect(const Plan &plan) = 0;
  /// The math and memory of this backend.
  virtual model::Ops<float> &ops() = 0;
  /// Called at the end of initialise, once every stage and slot exists.
  virtual absl::Status initialised() { return absl::OkStatus(); }
  /// The device stream of plan stream `stream` (null for host backends).
  virtual StreamHandle streamOf(int stream) const { return nullptr; }
  /// `n` zeroed floats that `allocateOn` writes first and `releaseOn` uses last.
  virtual absl::StatusOr<model::Buffer<float>> gatherBuffer(int64_t n, StreamHandle allocateOn,
                                                            StreamHandle releaseOn) {
    return ops().allocate(n);
  }
  /// Sets `n` gradient accumulators to zero, ordered on `stream`.
  virtual absl::Status zeroGradients(Grad *grads, int64_t n, StreamHandle stream) = 0;
  /// Update number `step` (1-based) of `n` parameters from their gradients; `state` holds
  /// the optimizer's stateWidth() × n floats.
  virtual absl::Status applyOptimizer(int64_t step, int64_t n, float *params, float *state,
                                      const Grad *grads) = 0;
  /// Before applyOptimizer on the same `params` and `grads`: moves each router bias at
  /// `offsets` (ascending) by the count of choices its gradient holds, against `mean`
  /// (model::balanceBias), and zeroes that count.
  virtual absl::Status balanceBiases(float *params, Grad *grads, absl::Span<const int64_t> offsets,
                                     double rate, double mean) {
    return absl::UnimplementedError("this backend does not move router biases by the load");
  }
  /// Where a half of a paired step posts the expert all-to-alls and tensor collectives of
  /// `pass` (startPaired): on a device, a stream of their own per pass, so that they run while
  /// the other half's kernels run on the compute stream; null (hosts): the compute stream,
  /// whose transport requests are in flight while the other half computes anyway.
  virtual StreamHandle passStream(GroupPass pass) { return nullptr; }
  /// Orders what is enqueued on `later` from now on after what is enqueued on `earlier` so far.
  virtual absl::Status order(StreamHandle earlier, StreamHandle later) { return absl::OkStatus(); }
  /// Work that completes once what is enqueued on `stream` so far has run (null: nothing is).
  virtual absl::StatusOr<std::unique_ptr<Work>> drained(StreamHandle stream) { return nullptr; }
  /// Waits for all work issued on every stream (before the host reads device memory).
  virtual absl::Status synchronizeAll() { return absl::OkStatus(); }
  /// The first asynchronous error of the device, if any.
  virtual absl::Status deviceStatus() { return absl::OkStatus(); }

  /// Samples of the largest micro-batch of this rank's stages.
  int64_t largestMicrobatch() const;
  /// Whether transfers or collectives are in flight.
  bool communicating() const { return !pending.empty(); }
  /// Releases every buffer, then the transport. A backend whose Ops or streams own that
  /// memory calls it before they go.
  void release();

  const Plan *plan = nullptr;
  const int64_t rank;
  const bool measureLayers;
  RankPosition where;
  std::optional<model::GptShape> shape;
  model::OptimizerConfig optimizer;

private:
  struct Stage;
  /// What a stage's compute produced for another: micro-batch `microbatch`'s output
  /// (`activation`) or input gradient of stage `stage`.
  struct Produced {
    int32_t stage = 0;
    int32_t microbatch = 0;
    bool activation = true;
    bool operator<(const Produced &o) const {
      return std::tie(stage, microbatch, activation) <
             std::tie(o.stage, o.microbatch, o.activation);
    }
  };
  /// A half of a paired step (startPaired), on its fiber.
  struct Half;
  struct Pending {
    std::unique_ptr<Work> work;
    Stage *gathered = nullptr; ///< an all-gather: the stage's parameters are whole after it
    Stage *reduced = nullptr;  ///< a reduce-scatter: the accumulators restart from zero
    StreamHandle stream = nullptr;
    /// A tie_grads with another rank: the other copy's gradient, added to `tied` after it.
    model::Buffer<Grad> incoming;
    Grad *tied = nullptr;
    /// The outputs and input gradients this batch of transfers sends.
    std::vector<Produced> sent;
    /// A half of a paired step, parked (startPaired).
    Half *half = nullptr;
  };
  using Cache = typename model::LayerChain<float>::Cache;

  absl::Status forward(const Instruction &inst);
  /// A whole backward, or its input-gradient half (I), which keeps the micro-batch's caches
  /// with their stash for the weight-gradient half.
  absl::Status backward(const Instruction &inst);
  /// The weight-gradient half (W) of an earlier I: parameter gradients only.
  absl::Status backwardWeight(const Instruction &inst);
  /// Where gradients are sharded, the stage's gradient accumulators exist from its first
  /// backward of a step to its reduce-scatter: allocates them (zeroed) if they do not.
  void needGradients(Stage &stage);
  /// At set-up, for a stage whose routed experts are kept apart (ShardSegment::apart): their
  /// gradients, and with `parameters` (full sharding) their parameters copied out of the
  /// initialised array, in buffers of their own for the whole run, placed in the chain.
  void keepApart(Stage &stage, bool parameters);
  /// Whether each replica keeps only its shard of the reduced gradients between steps
  /// (ZeRO-2 and full sharding).
  bool gradientsSharded() const { return sharded && shardsGradients(plan->config.sharding); }
  /// ZeRO-1: the gradients stay whole all step, so the reduce-scatter leaves each replica's
  /// shard in place in them (as Megatron-Core's distributed optimizer does), for the optimizer
  /// to read there; no shard buffer is kept beside them.
  bool reducesInPlace() const { return sharded && plan->config.sharding == Sharding::Optimizer; }
  /// gradient_reduction "run" (with ZeRO-2 or full sharding): a stage's gradients are reduced
  /// after each run of its backwards, each reduce-scatter in place in the whole gradients and
  /// then added into the shard, which the optimizer zeroes.
  bool addsReductions() const {
    return gradientsSharded() && plan->config.gradientReduction == GradientReduction::Run;
  }
  /// Takes compute instruction `inst` into its micro-batch's progress this step; refuses a
  /// forward, backward, I or W out of order (ComputeProgress's rules).
  absl::Status takeCompute(Stage &stage, const Instruction &inst);
  /// Refuses `inst` (a gradient reduction or the optimizer step) while an I of `stage` waits
  /// for its W: the gradients would be incomplete.
  absl::Status checkNoWeightPending(const Stage &stage, const Instruction &inst) const;
  /// `pass` (Backward, BackwardInput or BackwardWeight) on the pieces of one micro-batch,
  /// accumulating parameter gradients into the stage's by the policy.
  void backwardPieces(Stage &stage, std::vector<Cache> &caches, Op pass, const float *dy, float *dx,
                      std::vector<double> *seconds);
  absl::Status optimizerStep(Stage &stage, const Instruction &inst);
  absl::Status postTransfers(const std::vector<int64_t> &indices, Pending &pending);
  absl::Status postCollective(const Instruction &inst, Pending &pending);
  /// Where the tied weight's gradient lies in `stage`'s accumulators: the token table of the
  /// first stage (`head` false) or the last stage's copy of it (LayerChain::tableCopyAt).
  Grad *tiedGradient(Stage &stage, bool head);
  /// A tie_grads: sums in place when this rank holds both copies (and returns false), else
  /// posts the exchange with the peer into `pending` (and returns true).
  absl::StatusOr<bool> tieGradients(const Instruction &inst, Pending &pending);
  /// dst += src over n gradients (memory of this backend).
  void addGradients(int64_t n, const Grad *src, Grad *dst);
  /// The tied weight's gradients: this tensor rank's rows of the token table.
  int64_t tiedCount() const { return shape->localVocab() * shape->hidden; }
  /// Reducing each run: every segment's reduced block, left in place in the whole gradients
  /// by the reduce-scatter, added into the shard.
  void addReducedShards(Stage &stage);
  /// The input (forward) or output gradient (backward) of a micro-batch produced by a stage
  /// of this rank; `scratch` holds it when the two stages cut the batch differently.
  absl::StatusOr<const float *> localInput(const Stage &consumer, int64_t mb, bool forward,
                                           model::Buffer<float> &scratch);
  model::Tokens tokensOf(const Stage &stage, int64_t mb, std::vector<int32_t> &tokens,
                         std::vector<int32_t> &targets) const;
  /// The buffers of other stages that the compute `inst` reads here (none when it reads a
  /// receive slot).
  std::vector<Produced> localReads(const Instruction &inst) const;
  /// One reader of `what` is done with it; the last releases it.
  void readBy(const Produced &what);
  /// After the compute `inst`: releases what it was the last local reader of.
  void doneReading(const Instruction &inst);
  /// post(segment, group) for each segment of `stage`'s parameters with the group that shares
  /// it (ShardLayout): the stage's plan group for the dense one, its expert-data subgroup for the
  /// routed experts'. The joint work of both.
  template <typename Post>
  absl::StatusOr<std::unique_ptr<Work>> perSegment(const Stage &stage, Post post);
  /// Posts the all-gather of `stage`'s shards into `full` (`padded` long).
  absl::StatusOr<std::unique_ptr<Work>> gather(const Stage &stage, float *full,
                                               StreamHandle stream);
  /// The parameters of `stage`'s replicas gathered into `full` (outside a step).
  absl::Status gatherOutOfStep(Stage &stage, float *full, StreamHandle stream);
  /// Waits for `work` (outside a step: restore, stageParameters).
  absl::Status complete(std::unique_ptr<Work> work);
  /// After compute instruction indices[0]: refuses it unless its layers issued the tensor
  /// collectives the plan lists after it (indices[1...]), once per piece of the micro-batch.
  absl::Status checkTensorCalls(const std::vector<int64_t> &indices);
  /// Compute instruction indices[0] and the inner collectives after it, to its end.
  absl::Status compute(const std::vector<int64_t> &indices);

  /// The tensor group the layers call (TensorGroup.h), through the transport on the compute
  /// stream; it records what they issue and keeps the first failure, per compute (CallState).
  class TensorCalls;
  struct CallState;
  std::unique_ptr<TensorCalls> tensor;
  /// What a compute owns while the other half of a paired step runs: the memory counter's
  /// use, whether the loss counts, and its calls.
  struct ComputeContext {
    model::MemoryCounter::Context memory;
    bool countingLoss = true;
    CallState *calls = nullptr;
  };
  ComputeContext currentContext();
  void enterContext(const ComputeContext &context);
  /// The two halves of a paired step, made on first use.
  std::array<std::unique_ptr<Half>, 2> halves;
  /// Runs `half` on (or starts it with `body`) until it parks or ends, in its own context.
  void runHalf(Half &half, std::function<void()> body = nullptr);
  double peerTimeoutS = 300;

  std::unique_ptr<model::TokenSource> data;
  bool sharded = false;  ///< parameters or optimizer state split over replicas
  int64_t rowFloats = 0; ///< floats of one sample's activations
  std::unique_ptr<Transport> transport;
  std::vector<std::unique_ptr<Stage>> stages; ///< indexed by stage; null when not local
  std::vector<model::Buffer<float>> slots;
  std::map<Ticket, Pending> pending;
  /// Per produced buffer: its sends and local readers in this rank's program, and those left
  /// in this step.
  std::map<Produced, int64_t> readers, readersLeft;
  Ticket nextTicket = 0;
  int64_t step = 0;
  double lossSum = 0;
  double auxLossSum = 0; ///< a mixture of experts' auxiliary loss, as lossSum
  double zLossSum = 0;   ///< and its router z-loss
  double mtpLossSum = 0; ///< the multi-token prediction modules' loss, as lossSum
  /// Adds what the Ops's losses hold to the sums above, and empties them.
  void takeLosses() {
    lossSum += ops().takeLoss();
    auxLossSum += ops().takeAuxLoss();
    zLossSum += ops().takeZLoss();
    mtpLossSum += ops().takeMtpLoss();
  }
  LayerTimer timer;
};

extern template class BackendCore<float>;
extern template class BackendCore<double>;

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_BACKENDCORE_H
