//===- ImportSchedule.cpp - conduit-import-schedule -----------------------===//
//
// Takes the placement and the order of every rank from a PyTorch compute-only CSV instead of
// the built-in schedules, then checks it like any other schedule before writing it.
//
//===----------------------------------------------------------------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Schedulers.h"
#include "scheduling/TorchCsvReader.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MemoryBuffer.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITIMPORTSCHEDULE
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct ImportSchedule : conduit::impl::ConduitImportScheduleBase<ImportSchedule> {
  using Base::Base;

  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>())
      if (failed(importInto(model)))
        return signalPassFailure();
  }

  LogicalResult importInto(pipe::ModelOp model) {
    if (failed(requirePhase(model, pipe::Phase::Partitioned, "conduit-import-schedule")))
      return failure();
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(file, /*IsText=*/true);
    if (!buffer)
      return model.emitOpError() << "cannot read schedule file '" << file
                                 << "': " << buffer.getError().message();
    pipe::ParallelismAttr par = model.getParallelism();
    llvm::Expected<ImportedSchedule> imported =
        readTorchCsv((*buffer)->getBuffer(), par.getNumStages());
    if (!imported)
      return model.emitOpError() << file << ": " << llvm::toString(imported.takeError());
    if (static_cast<int64_t>(imported->schedule.ranks.size()) != par.getPipeline())
      return model.emitOpError() << file << ": " << imported->schedule.ranks.size()
                                 << " rows but the pipeline has " << par.getPipeline() << " ranks";
    if (imported->numMicrobatches != par.getMicrobatches())
      return model.emitOpError() << file << ": the schedule has " << imported->numMicrobatches
                                 << " micro-batches but the job has " << par.getMicrobatches();

    std::vector<int64_t> bounds =
        sched::equalBoundaries(par.getMicrobatches(), par.getMicrobatchSize());
    sched::ScheduleProblem problem(par.getPipeline(), imported->stageRank,
                                   std::vector<std::vector<int64_t>>(par.getNumStages(), bounds));
    if (sched::Violation v = problem.check())
      return model.emitOpError() << file << ": " << *v;
    if (sched::Violation v = sched::verifySchedule(problem, imported->schedule))
      return model.emitOpError() << file << ": " << *v;

    Builder builder(model.getContext());
    for (auto [stage, rank] : llvm::zip(model.getStages(), imported->stageRank)) {
      stage.setRankAttr(builder.getI64IntegerAttr(rank));
      stage.setSamplesAttr(builder.getDenseI64ArrayAttr(bounds));
    }
    writeSchedule(model, imported->schedule);
    // A schedule with input and weight gradients splits its backwards.
    bool split = llvm::any_of(imported->schedule.ranks, [](const std::vector<sched::Action> &l) {
      return llvm::any_of(
          l, [](const sched::Action &a) { return a.kind == sched::ActionKind::BackwardInput; });
    });
    if (split != par.getSplitBackward())
      model.setParallelismAttr(
          withSchedule(par, par.getSchedule(), par.getGroupSize(), par.getPlacement(), split));
    model.setPhase(pipe::Phase::Scheduled);
    return success();
  }
};

} // namespace
