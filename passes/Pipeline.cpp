//===- Pipeline.cpp - the compilation pipeline ----------------------------===//

#include "passes/Pipeline.h"

#include "passes/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace conduit;

void conduit::buildConduitPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  auto reached = [&](pipe::Phase phase) { return options.stopAfter < phase; };
  // Stages first: everything after works on stages, and the partition needs only layer costs.
  pm.addPass(createConduitPartitionStages());
  if (reached(pipe::Phase::Placed))
    return;
  // Placement before micro-batches: a stage's rank decides nothing about its micro-batches,
  // but the schedules need both.
  pm.addPass(createConduitPlaceStages());
  if (reached(pipe::Phase::Split))
    return;
  pm.addPass(createConduitSplitMicrobatches());
  if (reached(pipe::Phase::Scheduled))
    return;
  // The order of compute on every rank; communication is placed around it afterwards.
  pm.addPass(createConduitSchedule());
}

namespace {
struct PipelineCLOptions : public mlir::PassPipelineOptions<PipelineCLOptions> {
  Option<pipe::Phase> stopAfter{
      *this, "stop-after", llvm::cl::desc("Last phase to reach (default: all)"),
      llvm::cl::init(PipelineOptions().stopAfter),
      llvm::cl::values(clEnumValN(pipe::Phase::Partitioned, "partitioned", ""),
                       clEnumValN(pipe::Phase::Placed, "placed", ""),
                       clEnumValN(pipe::Phase::Split, "split", ""),
                       clEnumValN(pipe::Phase::Scheduled, "scheduled", ""))};
};
} // namespace

void conduit::registerConduitPipeline() {
  mlir::PassPipelineRegistration<PipelineCLOptions>(
      "conduit-pipeline", "Compile a pipe.model from phase 'model' on",
      [](mlir::OpPassManager &pm, const PipelineCLOptions &cl) {
        PipelineOptions options;
        options.stopAfter = cl.stopAfter;
        buildConduitPipeline(pm, options);
      });
}
