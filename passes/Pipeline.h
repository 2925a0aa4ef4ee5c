//===- Pipeline.h - the compilation pipeline --------------------*- C++ -*-===//
//
// The pass order of a compilation lives in one function, with the reason for each step.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PIPELINE_H
#define CONDUIT_PASSES_PIPELINE_H

#include "mlir/Pass/PassManager.h"

namespace conduit {

/// Where a compilation stops: after the pass that reaches this point.
enum class PipelineStop {
  Model,         ///< nothing runs: the imported model
  Partitioned,
  Placed,
  Split,
  Scheduled,
  Communicating, ///< transfers, collectives and the memory plan placed
  Plan,          ///< lowered to a verified plan.program (everything)
};

struct PipelineOptions {
  PipelineStop stopAfter = PipelineStop::Plan;
  /// A PyTorch compute-only CSV to take placement and schedule from (empty: the built-in ones).
  std::string importSchedule;
};

/// Adds the passes that take a pipe.model from phase `model` to `options.stopAfter`.
void buildConduitPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers the pipeline as `conduit-pipeline` for conduit-opt.
void registerConduitPipeline();

} // namespace conduit

#endif // CONDUIT_PASSES_PIPELINE_H
