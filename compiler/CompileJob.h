//===- CompileJob.h - a job through the compiler, no IR in sight -*- C++ -*-===//
//
// The one way a job is compiled: imported into pipe IR, taken through the pass pipeline to a
// verified plan, its step simulated and summed up in the figures configurations are compared
// by, with what the compiler said on the way. No MLIR type appears here: the tuner (tune/)
// reaches the IR only through compileJob(), and conduit-compile's sweep uses it too. The
// driver's single compile, which also prints the IR, is compileModule() (CompileModule.h),
// which this is built on.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_COMPILEJOB_H
#define CONDUIT_COMPILER_COMPILEJOB_H

#include "analysis/Report.h"
#include "analysis/Simulator.h"
#include "job/JobSpec.h"
#include "runtime/plan/Plan.h"
#include "scheduling/MicrobatchSearch.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace conduit {

/// How to compile: the options of conduit-compile that are not about what it writes.
struct CompileOptions {
  /// The micro-batch search for `microbatch_partitions: "auto"`: method, seed, time budget
  /// (0: no limit).
  sched::SearchMethod searchMethod = sched::SearchMethod::Descent;
  uint64_t searchSeed = 1;
  double searchBudgetS = 0;
  /// A PyTorch compute-only CSV to take placement and schedule from (empty: the built-in ones).
  std::string importSchedule;
  /// Whether the expert all-to-alls of a paired step hide behind the other half's compute.
  bool overlapAllToAlls = true;
  /// Whether a split schedule whose plan does not fit the device is scheduled again deferring
  /// fewer weight gradients, where the job leaves `max_deferred_weight_gradients` open
  /// (CompileModule.h). conduit-tune does without: its bounds price each schedule's own order.
  bool deferFewerToFit = true;
  /// Verify the whole IR after every pass, as conduit-opt does: slow on large plans, where
  /// conduit-verify-plan's proof of the result is what counts, but it points a test at the
  /// pass that broke the IR.
  bool verifyEachPass = false;
};

/// What compiling one job gave.
struct CompiledJob {
  /// The verified plan, its simulated step and the report of that step: set together, when
  /// the job compiled.
  std::optional<runtime::Plan> plan;
  SimulationResult simulation;
  std::optional<PlanReport> report;
  /// When the plan was refused only because it does not fit the device: the fullest rank's
  /// peak as the memory plan measured it.
  std::optional<int64_t> refusedPeakBytes;
  /// The compiler's first error (without MLIR's op prefix) when it did not compile, and its
  /// warnings.
  std::string error;
  std::vector<std::string> warnings;
  /// The micro-batch search, when the job asked for one.
  std::optional<std::pair<sched::SearchMethod, sched::SearchResult>> search;

  bool ok() const { return plan.has_value(); }
};

/// Compiles `job` through conduit-compile's pipeline in an MLIR context of the calling thread
/// (renewed now and then: a context keeps every attribute it ever made). Safe to call from
/// several threads at once.
CompiledJob compileJob(const Job &job, const CompileOptions &options = {});

} // namespace conduit

#endif // CONDUIT_COMPILER_COMPILEJOB_H
