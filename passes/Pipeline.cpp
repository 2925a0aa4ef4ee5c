//===- Pipeline.cpp - the compilation pipeline ----------------------------===//

#include "passes/Pipeline.h"

#include "passes/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace conduit;

void conduit::buildConduitPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  auto done = [&](PipelineStop stop) { return options.stopAfter < stop; };
  if (done(PipelineStop::Partitioned))
    return;
  // Stages first: everything after works on stages, and the partition needs only layer costs.
  pm.addPass(createConduitPartitionStages());
  if (done(PipelineStop::Placed))
    return;
  if (!options.importSchedule.empty()) {
    // A user-defined schedule brings its own placement and order.
    pm.addPass(createConduitImportSchedule({options.importSchedule}));
  } else {
    // Placement before micro-batches: a stage's rank decides nothing about its
    // micro-batches, but the schedules need both.
    pm.addPass(createConduitPlaceStages());
    if (done(PipelineStop::Split))
      return;
    pm.addPass(createConduitSplitMicrobatches());
    if (done(PipelineStop::Scheduled))
      return;
    // The order of compute on every rank; communication is placed around it afterwards.
    pm.addPass(createConduitSchedule());
  }
  if (done(PipelineStop::Communicating))
    return;
  // Transfers before collectives: the collectives anchor on compute, and the memory plan needs
  // both (receive buffers, gathered parameters).
  pm.addPass(createConduitInsertP2P());
  pm.addPass(createConduitPlaceCollectives());
  // Memory last at the pipe level: a plan that cannot fit is refused before it is lowered.
  pm.addPass(createConduitPlanMemory());
  if (done(PipelineStop::Plan))
    return;
  // Streams, events and slots, then the proof that the result is correct.
  pm.addPass(createConduitLowerToPlan());
  pm.addPass(createConduitVerifyPlan());
}

namespace {
struct PipelineCLOptions : public mlir::PassPipelineOptions<PipelineCLOptions> {
  Option<PipelineStop> stopAfter{
      *this, "stop-after", llvm::cl::desc("Last step to run (default: all)"),
      llvm::cl::init(PipelineStop::Plan),
      llvm::cl::values(clEnumValN(PipelineStop::Partitioned, "partitioned", ""),
                       clEnumValN(PipelineStop::Placed, "placed", ""),
                       clEnumValN(PipelineStop::Split, "split", ""),
                       clEnumValN(PipelineStop::Scheduled, "scheduled", ""),
                       clEnumValN(PipelineStop::Communicating, "communicating", ""),
                       clEnumValN(PipelineStop::Plan, "plan", ""))};
};
} // namespace

void conduit::registerConduitPipeline() {
  mlir::PassPipelineRegistration<PipelineCLOptions>(
      "conduit-pipeline", "Compile a pipe.model from phase 'model' to a verified plan",
      [](mlir::OpPassManager &pm, const PipelineCLOptions &cl) {
        PipelineOptions options;
        options.stopAfter = cl.stopAfter;
        buildConduitPipeline(pm, options);
      });
}
