//===- Backend.h - what the executor asks of a device -----------*- C++ -*-===//
//
// A backend executes instructions; the executor decides when. The life of a backend follows
// STYLE.md: validate (can this plan run here, as this process?), initialise (buffers and
// parameters), then run: per step, start instructions and poll them until they complete.
// Compute may complete inside start(); communication returns a ticket that completes later.
// Device backends whose work is ordered on the device also see every signal and wait, so that
// they can record and wait on device events; host-ordered backends ignore them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_BACKEND_H
#define CONDUIT_RUNTIME_EXEC_BACKEND_H

#include "runtime/Status.h"
#include "runtime/model/MemoryCounter.h"
#include "runtime/model/TensorGroup.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conduit::runtime {

/// Work a backend started and the executor polls. kCompleted: nothing to wait for.
using Ticket = int64_t;
constexpr Ticket kCompleted = -1;

/// What one step produced, as seen by this process.
struct StepOutcome {
  /// The mean loss over the global batch (the same on every process): the language model's
  /// cross-entropy.
  double loss = 0;
  /// A mixture of experts' auxiliary load-balancing loss (layers/Moe.h): the mean over the
  /// global batch's samples, summed over the blocks with experts, which training adds to the
  /// loss; unset for dense models.
  std::optional<double> auxLoss;
  /// The router z-loss, the same way (layers/Moe.h); unset without a z-loss coefficient.
  std::optional<double> zLoss;
  /// The multi-token prediction modules' cross-entropy (layers/Mtp.h): the mean over the
  /// modules of their counted rows' sum over the global batch's tokens, which training adds
  /// to the loss times model.mtp_loss_coefficient; unset without modules.
  std::optional<double> mtpLoss;
};

/// The training state a process owns for one stage: the parameters it updates (the whole
/// stage, or its data-parallel shard) and their optimizer state. What a checkpoint saves.
struct StageState {
  int32_t stage = 0;
  int64_t optimizerSteps = 0;
  std::vector<float> params, optimizer;
};

/// Measured time of one layer for micro-batches of `samples` samples (for --profile).
struct LayerTiming {
  int64_t layer = 0, samples = 0;
  double forwardS = 0, backwardS = 0; ///< sums; backward: whole backwards only
  int64_t forwardCount = 0, backwardCount = 0;
  /// Split backwards: the input-gradient (I) and weight-gradient (W) halves, timed apart.
  double inputS = 0, weightS = 0;
  int64_t inputCount = 0, weightCount = 0;
};
/// The `layer` of optimizer step timings: `samples` holds the parameters one step updates,
/// forwardS and forwardCount the seconds and the steps.
constexpr int64_t kOptimizerTiming = -1;
/// The `layer` of a compute instruction's time beyond its layers': `samples` holds its Op,
/// forwardS and forwardCount the seconds and the instructions.
constexpr int64_t kOverheadTiming = -2;

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "cuda".
  virtual std::string name() const = 0;
  /// Refuses plans this backend cannot run as this process: world size, model, groups.
  virtual absl::Status validate(const Plan &plan) = 0;
  /// Allocates this process's buffers and initialises its parameters.
  virtual absl::Status initialise(const Plan &plan) = 0;

  virtual absl::Status beginStep(int64_t step) = 0;
  /// Starts the instructions at `indices` of this rank's program: one instruction, or the
  /// transfers of one batch, which must be issued together.
  virtual absl::StatusOr<Ticket> start(const std::vector<int64_t> &indices) = 0;
  /// Whether the work of `ticket` completed.
  virtual absl::StatusOr<bool> poll(Ticket ticket) = 0;
  /// Whether startPaired() may return before its compute ends, so that the compute paired
  /// with it (Instruction::kPaired) can start while its all-to-alls are in flight.
  virtual bool overlapsPairs() const { return false; }
  /// Starts compute `indices` (a compute and the inner collectives after it) as one half of a
  /// paired step: it stops at each expert all-to-all it posts, until it arrives, and polling
  /// the ticket (or starting the other half) runs it on; the two halves interleave, and
  /// compute what they compute one after the other. Where !overlapsPairs(), start().
  virtual absl::StatusOr<Ticket> startPaired(const std::vector<int64_t> &indices) {
    return start(indices);
  }
  /// How long a wait for peers inside a compute may last (an expert group's all-to-all).
  virtual void setPeerTimeout(double seconds) {}
  /// The executor passed signal `event` on `stream` (all earlier work of the stream started,
  /// and for host-ordered backends, completed).
  virtual absl::Status signal(int stream, int32_t event) { return absl::OkStatus(); }
  /// The executor passed wait `event` on `stream` (the event was signalled).
  virtual absl::Status wait(int stream, int32_t event) { return absl::OkStatus(); }
  /// Completes the step: every instruction has completed.
  virtual absl::StatusOr<StepOutcome> endStep(int64_t step) = 0;

  /// The state this process owns, between steps.
  virtual absl::StatusOr<std::vector<StageState>> snapshot() = 0;
  /// Replaces the state this process owns (all processes call it together).
  virtual absl::Status restore(const std::vector<StageState> &states) = 0;
  /// The current parameters of every stage of this process's pipeline rank, whole (all
  /// processes call it together: sharded stages gather).
  virtual absl::StatusOr<std::vector<std::vector<float>>> stageParameters() = 0;
  /// The mean one-way seconds of `bytes` between this rank and global rank `peer` through
  /// this backend's transport, as the executor sees a transfer it waits for: the median of
  /// `rounds` round trips after one unmeasured, halved, the rank with `first` sending first,
  /// each side busy for `pauseS` before it sends (as a compute would be) and waiting as the
  /// executor waits (idleWait); the pauses are not counted. Both ranks call it together,
  /// outside a step.
  virtual absl::StatusOr<double> pingPong(int64_t peer, int64_t bytes, int rounds, bool first,
                                          double pauseS) {
    return absl::UnimplementedError("this backend cannot time its transport");
  }
  /// Per-layer timings so far (empty when the backend does not measure them).
  virtual std::vector<LayerTiming> layerTimings() const { return {}; }
  /// This process's memory at its peak since the last resetMemoryPeak (MemoryCounter.h).
  virtual model::MemoryPeak memoryPeak() { return {}; }
  /// A mixture of experts' routed tokens per piece over the expert group's balanced share,
  /// since the start (Ops::routedLoad; nothing without expert parallelism).
  virtual model::RoutedLoad routedLoad() { return {}; }
  virtual void resetMemoryPeak() {}
  /// Forgets the timings so far (those of a first step, which pays for set-up).
  virtual void clearLayerTimings() {}
  /// Stops communication without waiting for peers, after an error, so that the process can
  /// exit (NCCL communicators must be aborted, not destroyed, when a peer is gone).
  virtual void abort() {}
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_BACKEND_H
