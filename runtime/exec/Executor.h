//===- Executor.h - one interpreter of a rank's instruction streams -*- C++ -*-===//
//
// Runs this process's rank program once per step on a backend. Each stream advances in its
// own order and only plan events order streams against each other; a stream has at most one
// piece of work in flight (an instruction, or a batch of transfers posted together), which is
// the semantics the compiler's verifier proves deadlock-free. The one exception is a paired
// step on a backend that overlaps its halves: the partner starts while the forward is in
// flight (Partner below), as the plan says they run. The executor never blocks: it polls, and
// a watchdog turns a peer that stops answering into an error that names it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_EXECUTOR_H
#define CONDUIT_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/exec/Backend.h"
#include "runtime/exec/Transport.h"
#include "runtime/plan/Trace.h"

#include <chrono>
#include <functional>
#include <string>

namespace conduit::runtime {

/// Called when the executor first reaches instruction `index` of step `step` (1-based), before
/// it posts it. Fault-injection tests stop or stall a rank here; a non-OK status ends the step
/// with that status.
using InstructionHook = std::function<absl::Status(int64_t step, int64_t index)>;

/// How the executor waits while nothing can progress, at its `round`th idle round since the
/// last progress: it yields the core at first, then sleeps briefly (on an oversubscribed
/// machine the peer may be waiting for the core). A transfer that arrives meanwhile is seen
/// at the next round: what the profile's transport timing includes (Profile.h).
void idleWait(int round);
/// Polls `work` until it completes (true), or until `timeoutS` have passed without it (false),
/// waiting between polls as idleWait does: how a compute waits for a collective it issues
/// inside itself.
absl::StatusOr<bool> waitFor(Work &work, double timeoutS);
/// The members of `group` other than `self`, as messages list them: "1, 3".
std::string otherRanks(const std::vector<int64_t> &group, int64_t self);

/// The paired steps of the steps run so far: those whose plan hides an expert all-to-all
/// behind the other half (Executor::Partner), and of those, the ones whose two halves ran
/// together (the partner started while the forward was in flight).
struct PairedSteps {
  int64_t hiding = 0, together = 0;
};

struct ExecutorOptions {
  /// No progress for this long is an error naming what the rank waits for.
  double peerTimeoutS = 30;
  /// Called at every instruction when set.
  InstructionHook onInstruction;
  /// Keep the time of every instruction (for --trace).
  bool record = false;
  /// This process's tensor rank, for the global ranks messages name.
  int32_t tensorRank = 0;
  /// The origin of recorded times.
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
};

class Executor {
public:
  Executor(const Plan &plan, int32_t pipelineRank, int32_t replica, Backend &backend,
           ExecutorOptions options);

  /// Runs step `step` (1-based) of this rank's program.
  absl::StatusOr<StepOutcome> runStep(int64_t step);

  /// Recorded instruction times of every step so far (when options.record).
  const std::vector<TraceEvent> &events() const { return recorded; }
  /// The paired steps of every step so far.
  PairedSteps pairedSteps() const { return pairs; }

private:
  /// The second half of a paired step (Instruction::kPaired), started while the first, a
  /// forward, is in flight: where the backend overlaps pairs (Backend::overlapsPairs) and the
  /// plan hides the forward's all-to-alls behind its partner, the forward parks at each expert
  /// all-to-all it posts, and the stream looks past it for the next compute, its partner. The
  /// signals on the way fire when the forward ends, as without a partner; the waits must have
  /// fired before the partner starts. When the stream reaches the partner it takes it over:
  /// in flight, or done.
  struct Partner {
    bool looking = false; ///< the forward is in flight and the partner not started
    size_t at = 0;        ///< the list position the look-ahead reached
    bool started = false; ///< the partner [begin, end) is started
    size_t begin = 0, end = 0;
    Ticket ticket = kCompleted;
    bool done = false;
    double endTime = 0;
  };
  struct Stream {
    std::vector<int64_t> list; ///< instruction indices in order
    size_t next = 0;
    Ticket inFlight = kCompleted;
    size_t inFlightEnd = 0; ///< the list position after the work in flight
    bool busy = false;
    Partner partner;
  };

  /// Runs `stream` as far as events allow; without `startCompute`, only up to its next
  /// piece of local work (compute, optimizer step, free).
  absl::Status advance(Stream &stream, int s, int64_t step, bool startCompute, bool &progress);
  /// The list position after the work that starts at `at`: one instruction, every transfer
  /// of its batch, or a compute and the inner collectives its layers issue.
  size_t workEnd(const Stream &stream, size_t at) const;
  /// Whether the compute at list position `at` (its work ending at `end`) has an expert
  /// all-to-all that the plan hides behind the other half of its paired step (one that names
  /// a compute; compiled with --overlap-all-to-alls=false, none does, and the halves run one
  /// after the other).
  bool hidesAllToAlls(const Stream &stream, size_t at, size_t end) const;
  /// Looks past a paired forward in flight for its partner, and starts it once its waits
  /// have fired.
  absl::Status startPartner(Stream &stream, int s, int64_t step, bool &progress);
  /// Marks list positions [from, end) of `stream` started (and posted, if not yet) at `t`.
  void begin(const Stream &stream, size_t from, size_t end, double t);
  void finish(Stream &stream, double now);
  absl::Status stalled(double waitedS) const;
  double now() const;

  const Plan &plan;
  const int32_t rank, replica;
  Backend &backend;
  ExecutorOptions options;
  std::vector<Stream> streams;
  std::vector<uint8_t> fired;
  std::vector<TraceEvent> recorded;
  std::vector<InstructionTime> times; ///< this step
  int64_t currentStep = 0;
  PairedSteps pairs;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_EXECUTOR_H
