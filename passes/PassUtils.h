//===- PassUtils.h - what Conduit's passes share ----------------*- C++ -*-===//
//
// Phase gating, and the translation between pipe IR and the scheduling library's problems.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PASSUTILS_H
#define CONDUIT_PASSES_PASSUTILS_H

#include "dialects/pipe/PipeOps.h"
#include "passes/CostModelBuilder.h"
#include "scheduling/MicrobatchSearch.h"
#include "scheduling/Schedulers.h"

namespace conduit {

/// Bytes of a gradient element: gradients accumulate and are reduced in fp32.
constexpr int64_t kGradientBytes = 4;

/// Emits "<pass> expects phase '<p>', found '<q>'" on `model` unless its phase is `phase`.
mlir::LogicalResult requirePhase(pipe::ModelOp model, pipe::Phase phase, llvm::StringRef pass);

/// The stage graph of a model in phase `split` or later.
sched::ScheduleProblem buildScheduleProblem(pipe::ModelOp model);

/// The scheduling library's scheduler of `kind` on `problem` (`groupSize`: depth-first's).
llvm::Expected<sched::Schedule>
runScheduler(pipe::ScheduleKind kind, const sched::ScheduleProblem &problem, int64_t groupSize);

/// The stages of a model, in order.
llvm::SmallVector<pipe::StageOp> getStageList(pipe::ModelOp model);

/// The compute order of every rank of a model in phase `scheduled` or later.
sched::Schedule readSchedule(pipe::ModelOp model);

/// Forward and backward times of every (stage, micro-batch) from the cost model.
sched::ActionTimes actionTimes(const CostModel &cost, pipe::ModelOp model,
                               const sched::ScheduleProblem &problem);

/// Parameters of each stage (the sum over its layers).
std::vector<int64_t> stageParams(pipe::ModelOp model);

/// The micro-batch search's step-time evaluator for a model in phase `split` or later, with
/// the durations the plan simulator will use (OptimizeMicrobatches.cpp). Fails, with a
/// diagnostic, for jobs the search does not cover.
mlir::FailureOr<sched::StepTimeEvaluator> buildStepTimeEvaluator(pipe::ModelOp model);

/// Bytes per sample that leave each stage (its last layer's output): the size of the
/// activations it sends forward and of the gradients it receives back.
std::vector<int64_t> stageOutputBytes(pipe::ModelOp model);

} // namespace conduit

#endif // CONDUIT_PASSES_PASSUTILS_H
