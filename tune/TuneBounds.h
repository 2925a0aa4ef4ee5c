//===- TuneBounds.h - lower bounds of a configuration's figures -*- C++ -*-===//
//
// What conduit-tune knows about a configuration before compiling it: a step time and a peak
// memory that the compiled plan cannot beat. Both come from the job alone, without IR, in two
// tiers:
//
// * the static tier: parameters, gradients and optimizer state of the fullest rank plus one
//   micro-batch's activations, with no schedule built. It refuses most configurations that
//   cannot fit.
// * the schedule tier: the partition and the schedule the compiler would build (the same
//   scheduling library calls), executed with compute only: every action as early as its rank
//   and its dependencies allow. Communication only delays actions in the compiled plan, so
//   the compute-only finish, plus the optimizer steps that follow the rank's compute, plus
//   the reduction and optimizer step that follow each stage's last backward, bounds the step
//   from below. Activations held along the rank's order bound its memory from below. Split
//   backwards are placed by the compiler from their durations, so for them the tier keeps
//   what holds for any order: each rank's total work after the pipeline's fill, and one
//   micro-batch held.
//
// The search compiles configurations in the order of their bounds and stops where no bound
// can beat what it has found (Tune.h); every compiled configuration is checked against its
// bounds, and a bound above the compiled figure is an error, not a silent loss of exactness.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNEBOUNDS_H
#define CONDUIT_TUNE_TUNEBOUNDS_H

#include "analysis/CostModel.h"
#include "analysis/PeakMemory.h"
#include "job/JobSpec.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace conduit {

/// Lower bounds of the figures the compiled plan predicts.
struct Bounds {
  double stepTimeS = 0;
  /// Of the fullest rank.
  int64_t peakMemoryBytes = 0;
};

/// Computes bounds, reusing partitions and schedules across configurations that share them.
/// Not thread-safe: one per thread.
class BoundCalculator {
public:
  /// The static tier's memory bound (no schedule built) of `job` run as `par`: the static part
  /// of memoryLowerBound() (MemoryBound.h); only the model, the training section and P, D, T and
  /// the sharding of `par` matter.
  static int64_t staticMemoryBound(const Job &job, const ParallelismSpec &par);
  static int64_t staticMemoryBound(const Job &job) {
    return staticMemoryBound(job, job.parallelism);
  }
  /// Both tiers. Fails with the scheduler's message when the compiler would refuse the shape.
  /// `context` names what the job's model, cluster and training sections were made of (the
  /// values of dimensions outside `parallelism`): results are reused only within one context.
  llvm::Expected<Bounds> bounds(const Job &job, const std::string &context);
  /// The bounds without the schedule tier (no schedule built, only the partition): each rank's
  /// compute one action at a time, the optimizer and data-parallel steps after it, and the
  /// static state of each rank's stages. Never above bounds(); the search orders by it and
  /// builds the schedule only for the configurations it cannot rule out this way.
  llvm::Expected<Bounds> quickBounds(const Job &job, const std::string &context);

private:
  /// A stage's layers and sizes.
  struct Stage {
    int64_t first = 0, end = 0, params = 0;
    /// Of params, the routed experts' (one expert rank's share).
    int64_t expertParams = 0;
    int64_t denseParams() const { return params - expertParams; }
    StageActivations activations; ///< per sample, under the job's checkpointing
    /// One micro-batch's forward and whole backward with the tensor collectives they issue
    /// on the compute stream.
    double forwardS = 0, backwardS = 0;
  };
  /// What a schedule's compute-only execution gives, per rank and stage.
  struct ScheduleFacts {
    std::vector<int64_t> rankOf;         ///< per stage
    std::vector<double> computeEnd;      ///< per rank
    std::vector<double> lastBackwardEnd; ///< per stage
    /// Per stage, the most activation bytes its rank holds at one of its forwards, and at one
    /// of its backwards; and the same with the full gradient buffers that gradient and full
    /// sharding keep live between a stage's first and last backward.
    std::vector<int64_t> forwardHeld, backwardHeld;
    std::vector<int64_t> forwardHeldWithGradients, backwardHeldWithGradients;
  };

  llvm::Expected<const CostModel *> costModel(const Job &job);
  llvm::Expected<const std::vector<Stage> *> stages(const Job &job);
  llvm::Expected<const ScheduleFacts *> schedule(const Job &job);
  /// The bounds that `facts` (a schedule's, or quickBounds()' without one) give.
  llvm::Expected<Bounds> boundsFrom(const Job &job, const ScheduleFacts &facts);
  /// Drops the caches when the context changes.
  void useContext(const std::string &context);

  /// The context the caches below hold results for.
  std::string context;
  std::map<std::tuple<int, int64_t, int64_t, bool, int64_t, bool, int64_t>,
           std::unique_ptr<CostModel>>
      costModels;
  std::map<std::tuple<int64_t, int64_t, int, int64_t, bool, int64_t>, std::vector<Stage>>
      partitions;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int, int64_t, int, int, bool, int64_t,
                      bool, int64_t>,
           std::unique_ptr<ScheduleFacts>>
      schedules;
};

} // namespace conduit

#endif // CONDUIT_TUNE_TUNEBOUNDS_H
