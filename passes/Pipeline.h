//===- Pipeline.h - the compilation pipeline --------------------*- C++ -*-===//
//
// The pass order of a compilation lives in one function, with the reason for each step.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PIPELINE_H
#define CONDUIT_PASSES_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace conduit {

/// Where a compilation stops: after the pass that reaches this point.
enum class PipelineStop {
  Model, ///< nothing runs: the imported model
  Partitioned,
  Placed,
  Split,
  Searched, ///< micro-batch partitions searched (when the job asks for it)
  Scheduled,
  Transfers,     ///< sends and receives inserted
  Collectives,   ///< data-parallel collectives placed
  Communicating, ///< transfers, collectives and the memory plan placed
  Lowered,       ///< lowered to plan.program, not yet verified
  Plan,          ///< lowered to a verified plan.program (everything)
};

/// A pass of the pipeline by its command-line name, and the stop right after it.
struct PipelinePass {
  llvm::StringLiteral argument;
  PipelineStop stopAfter;
};

/// Every pass the pipeline may run, in order (conduit-import-schedule replaces placement,
/// split and schedule when a schedule is imported).
llvm::ArrayRef<PipelinePass> pipelinePasses();

struct PipelineOptions {
  PipelineStop stopAfter = PipelineStop::Plan;
  /// A PyTorch compute-only CSV to take placement and schedule from (empty: the built-in ones).
  std::string importSchedule;
  /// Receives each verified plan and its simulated step (optional).
  VerifiedPlanSink onVerified;
  /// The micro-batch search for `microbatch_partitions: "auto"`: method, seed, time budget.
  std::string searchMethod = "descent";
  uint64_t searchSeed = 1;
  double searchBudgetS = 0;
  /// Receives the outcome of each micro-batch search (optional).
  SearchSink onSearch;
  /// Whether the expert all-to-alls of a paired step hide behind the other half's compute
  /// (conduit-lower-to-plan's overlap-all-to-alls), and whether the schedules order their
  /// steps to that end (conduit-schedule's overlap-all-to-alls).
  bool overlapAllToAlls = true;
  /// Whether the plan's instructions become ops of its plan.rank bodies. Without (for a
  /// compile that only writes the plan or reports on it), the lowering hands them to the
  /// verifier as data and the plan.rank ops of the verified program stay empty: a plan of a
  /// million instructions is then never a million ops.
  bool planOps = true;
  /// Whether the verified plan's simulated step keeps every instruction's times, which
  /// reports, traces and charts read (SimulationOptions::times); a compile that only writes
  /// the plan file needs its proof, not them.
  bool simulatedTimes = true;
};

/// Adds the passes that take a pipe.model from phase `model` to `options.stopAfter`.
void buildConduitPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers the pipeline as `conduit-pipeline` for conduit-opt.
void registerConduitPipeline();

} // namespace conduit

#endif // CONDUIT_PASSES_PIPELINE_H
