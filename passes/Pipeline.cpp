//===- Pipeline.cpp - the compilation pipeline ----------------------------===//

#include "passes/Pipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "passes/Passes.h"

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
    if (done(PipelineStop::Searched))
      return;
    // A job asking for searched micro-batches gets them before anything depends on the cut.
    ConduitOptimizeMicrobatchesOptions search;
    search.method = options.searchMethod;
    search.seed = options.searchSeed;
    search.timeBudget = options.searchBudgetS;
    pm.addPass(createConduitOptimizeMicrobatches(search, options.onSearch));
    if (done(PipelineStop::Scheduled))
      return;
    // The order of compute on every rank; communication is placed around it afterwards.
    ConduitScheduleOptions scheduling;
    // Without the overlap, the orders have no reason to pair steps or keep backwards whole.
    scheduling.overlapAllToAlls = options.overlapAllToAlls;
    pm.addPass(createConduitSchedule(scheduling));
  }
  if (done(PipelineStop::Transfers))
    return;
  // Transfers before collectives: the collectives anchor on compute, and the memory plan needs
  // both (receive buffers, gathered parameters).
  pm.addPass(createConduitInsertP2P());
  if (done(PipelineStop::Collectives))
    return;
  pm.addPass(createConduitPlaceCollectives());
  if (done(PipelineStop::Communicating))
    return;
  // Memory last at the pipe level: a plan that cannot fit is refused before it is lowered.
  pm.addPass(createConduitPlanMemory());
  if (done(PipelineStop::Lowered))
    return;
  // Streams, events and slots, then the proof that the result is correct.
  ConduitLowerToPlanOptions lowering;
  lowering.overlapAllToAlls = options.overlapAllToAlls;
  // Without plan ops, the instructions go from the lowering to the verifier as data.
  std::shared_ptr<LoweredInstructions> kept;
  if (!options.planOps && options.stopAfter == PipelineStop::Plan)
    kept = std::make_shared<LoweredInstructions>();
  pm.addPass(createConduitLowerToPlan(lowering, kept));
  if (done(PipelineStop::Plan))
    return;
  pm.addPass(createConduitVerifyPlan(options.onVerified, kept, options.simulatedTimes));
}

llvm::ArrayRef<PipelinePass> conduit::pipelinePasses() {
  static const PipelinePass passes[] = {
      {"conduit-partition-stages", PipelineStop::Partitioned},
      {"conduit-place-stages", PipelineStop::Placed},
      {"conduit-split-microbatches", PipelineStop::Split},
      {"conduit-optimize-microbatches", PipelineStop::Searched},
      {"conduit-schedule", PipelineStop::Scheduled},
      {"conduit-import-schedule", PipelineStop::Scheduled},
      {"conduit-insert-p2p", PipelineStop::Transfers},
      {"conduit-place-collectives", PipelineStop::Collectives},
      {"conduit-plan-memory", PipelineStop::Communicating},
      {"conduit-lower-to-plan", PipelineStop::Lowered},
      {"conduit-verify-plan", PipelineStop::Plan},
  };
  return passes;
}

namespace {
struct PipelineCLOptions : public mlir::PassPipelineOptions<PipelineCLOptions> {
  Option<PipelineStop> stopAfter{
      *this, "stop-after", llvm::cl::desc("Last step to run (default: all)"),
      llvm::cl::init(PipelineStop::Plan),
      llvm::cl::values(clEnumValN(PipelineStop::Partitioned, "partitioned", ""),
                       clEnumValN(PipelineStop::Placed, "placed", ""),
                       clEnumValN(PipelineStop::Split, "split", ""),
                       clEnumValN(PipelineStop::Searched, "searched", ""),
                       clEnumValN(PipelineStop::Scheduled, "scheduled", ""),
                       clEnumValN(PipelineStop::Transfers, "transfers", ""),
                       clEnumValN(PipelineStop::Collectives, "collectives", ""),
                       clEnumValN(PipelineStop::Communicating, "communicating", ""),
                       clEnumValN(PipelineStop::Lowered, "lowered", ""),
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
