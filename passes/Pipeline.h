//===- Pipeline.h - the compilation pipeline --------------------*- C++ -*-===//
//
// The pass order of a compilation lives in one function, with the reason for each step.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PIPELINE_H
#define CONDUIT_PASSES_PIPELINE_H

#include "dialects/pipe/PipeAttrs.h"
#include "mlir/Pass/PassManager.h"

namespace conduit {

struct PipelineOptions {
  /// Stop once the model reaches this phase (the last phase: run everything).
  pipe::Phase stopAfter = pipe::Phase::Scheduled;
};

/// Adds the passes that take a pipe.model from phase `model` to `options.stopAfter`.
void buildConduitPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers the pipeline as `conduit-pipeline` for conduit-opt.
void registerConduitPipeline();

} // namespace conduit

#endif // CONDUIT_PASSES_PIPELINE_H
