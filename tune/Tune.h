//===- Tune.h - the search of conduit-tune ----------------------*- C++ -*-===//
//
// Finds the best configurations of a job for a GPU count and a global batch, exactly: every
// figure reported for a configuration is the one conduit-compile predicts for it, because it
// comes from the same compileJob() (compiler/CompileJob.h), in-process on every worker thread.
// What makes the search fast is what it does not compile:
//
// 1. the space (TuneSpace.h) holds only what can differ: no sharding without replicas, no
//    group size outside depth-first, no FSDP window without full sharding;
// 2. the job-file reader and the compiler's own schedulers refuse what cannot compile;
// 3. memory bounds (TuneBounds.h) refuse what cannot fit, before and after the schedule;
// 4. the rest is compiled in the order of its step-time bound (memory bound for the memory
//    objective) and skipped where the bound proves it can neither enter the top K, nor beat
//    the best of its schedule, nor (when asked for) reach the Pareto front of throughput
//    against memory.
//
// A compiled figure below its bound is an error: the search would not be exact. The top K
// are compiled a second time from their written job objects (the text --best-job writes) and
// must reproduce their figures to the last bit.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNE_H
#define CONDUIT_TUNE_TUNE_H

#include "analysis/Report.h"
#include "job/JobSpec.h"
#include "job/JsonReader.h"
#include "runtime/plan/Plan.h"
#include "tune/TuneBounds.h"
#include "tune/TuneSpace.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace conduit {

enum class TuneObjective { Throughput, Memory };

struct TuneOptions {
  int64_t gpus = 1;
  int64_t globalBatch = 1;
  std::vector<Restriction> restrictions;
  int64_t top = 10;
  TuneObjective objective = TuneObjective::Throughput;
  /// Seconds the search may take (0: no limit). A search cut short says so.
  double budgetS = 0;
  /// Refine the best configuration the UMPIPE search covers with unequal micro-batches.
  bool microbatchSearch = false;
  /// Find the Pareto front of throughput against peak memory too. It costs compiles: a
  /// configuration can be ruled out of it only by a compiled one at least as fast and as small
  /// as its bounds, and the memory bounds are far below most peaks.
  bool pareto = false;
  /// Worker threads (0: one per core).
  unsigned threads = 0;
  /// Receives a progress line about once a second once the search has run for a second.
  std::function<void(const std::string &)> progress;
};

/// A compiled configuration and what the compiler predicts for it.
struct TunedConfiguration {
  Configuration config;
  /// The complete job object (the starting job with the configuration applied).
  Json job;
  /// The schedule's name: configurations are compared by family in the chart.
  std::string family;
  Bounds bounds;
  /// What its compile predicts (the step's report, less the per-rank detail).
  StepFigures figures;
  /// Of figures.exposedCommS, the tensor group's collectives (mean over ranks, as it is).
  double tensorCommS = 0;
  /// Position in the enumeration (the last tie-break, so that results are deterministic).
  size_t index = 0;
};

struct TuneCounts {
  int64_t configurations = 0; ///< in the space, as listed
  /// Shapes (T, sequence parallelism, P, D) left out before listing: their static state alone
  /// exceeds the device under every sharding.
  int64_t shapesTooLarge = 0;
  int64_t invalid = 0; ///< refused by the job-file reader or the scheduler
  int64_t infeasibleByBound = 0;
  int64_t infeasibleCompiled = 0;
  int64_t pruned = 0;    ///< skipped: their bounds prove they cannot matter
  int64_t evaluated = 0; ///< compiled and fitting
  int64_t failed = 0;    ///< compiled with an error other than memory
  int64_t undecided = 0; ///< left when the budget ran out
  double boundSeconds = 0;
  double seconds = 0;
  /// False when the budget ran out before every candidate was decided.
  bool complete = true;
};

/// The UMPIPE refinement of one configuration.
struct Refinement {
  /// The configuration refined, and the refined one (explicit micro-batch partitions).
  TunedConfiguration from, refined;
  /// Why no refinement was made, when none was.
  std::string skipped;
  /// Whether the refined configuration beats the best of the search.
  bool better = false;
};

struct TuneResult {
  TuneObjective objective = TuneObjective::Throughput;
  int64_t gpus = 0, globalBatch = 0;
  /// The table the space was built from (for the columns of a report).
  std::vector<Dimension> dimensions;
  /// Best first, at most `top`.
  std::vector<TunedConfiguration> top;
  /// The best configuration of each schedule, best first.
  std::vector<TunedConfiguration> bestPerFamily;
  /// Throughput against peak memory: no other configuration is both faster and smaller.
  /// Fastest first. Only when TuneOptions::pareto asked for it.
  std::vector<TunedConfiguration> pareto;
  bool paretoSearched = false;
  TuneCounts counts;
  /// One reason a configuration was refused, and one a compile failed, as examples.
  std::string exampleInvalid, exampleFailure;
  /// The smallest peak-memory bound among configurations that do not fit (0 if none).
  int64_t smallestInfeasibleBytes = 0;
  int64_t deviceMemoryBytes = 0;
  std::optional<Refinement> refinement;
  /// The verified plan of the best configuration (from the re-check).
  std::optional<runtime::Plan> bestPlan;

  /// The best configuration: the refined one when the refinement beats the search's best.
  const TunedConfiguration &best() const {
    return refinement && refinement->better ? refinement->refined : top.front();
  }
};

/// The model, cluster and training of the job at `path` (job/JobFile.h's reader without the
/// parallelism section), or the job-file error (without the file, as tune()'s).
llvm::Expected<Job> parseModel(const Json &root, const std::string &path);

/// The space tune() searches for `model` (parseModel's job) under `options`. `root`, the job
/// file's JSON: a placement it names changes which schedules run, and the reader alone then
/// decides (SpaceRequest::scheduleRules).
SpaceRequest spaceRequest(const Job &model, const TuneOptions &options, const Json *root = nullptr);

/// What listSpace() left out.
struct Unlisted {
  /// Shapes (T, sequence parallelism, P, D) whose static state (MemoryBound.h) exceeds the
  /// device under every sharding the space may give them, and the smallest of those bounds.
  int64_t shapes = 0;
  int64_t smallestBytes = 0;
};

/// The configurations tune() searches, in its order (their positions are
/// TunedConfiguration::index): listConfigurations() without the shapes that cannot fit.
ConfigurationList listSpace(const Job &model, const SpaceRequest &request,
                            llvm::ArrayRef<Dimension> dimensions, std::string &why,
                            Unlisted &unlisted);

/// Runs the search on `root`, the job file's JSON read from `path`. Fails with a message that
/// names the option or key to change when nothing can be ranked, and with an internal error
/// when a bound or a re-check disagrees with the compiler; the caller names the file.
llvm::Expected<TuneResult> tune(const Json &root, const std::string &path,
                                const TuneOptions &options);

/// The job object a configuration describes: `root` without the keys the space owns or that
/// depend on the shape, then the configuration's assignments.
Json applyConfiguration(const Json &root, llvm::ArrayRef<Dimension> dimensions,
                        const Configuration &config);

} // namespace conduit

#endif // CONDUIT_TUNE_TUNE_H
