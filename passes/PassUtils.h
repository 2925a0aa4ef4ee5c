//===- PassUtils.h - what Conduit's passes share ----------------*- C++ -*-===//
//
// Phase gating, and the translation between pipe IR and the scheduling library's problems.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_PASSES_PASSUTILS_H
#define CONDUIT_PASSES_PASSUTILS_H

#include "analysis/TensorShare.h"
#include "dialects/pipe/PipeOps.h"
#include "passes/CostModelBuilder.h"
#include "runtime/plan/MemoryKinds.h"
#include "runtime/plan/TensorCollectives.h"
#include "scheduling/MicrobatchSearch.h"
#include "scheduling/Schedulers.h"

namespace conduit {

/// Bytes of a gradient element: gradients accumulate and are reduced in fp32.
using runtime::kGradientBytes;

/// Emits "<pass> expects phase '<p>', found '<q>'" on `model` unless its phase is `phase`.
mlir::LogicalResult requirePhase(pipe::ModelOp model, pipe::Phase phase, llvm::StringRef pass);

/// `par` with its schedule, group size, placement and split_backward replaced.
pipe::ParallelismAttr withSchedule(pipe::ParallelismAttr par, pipe::ScheduleKind schedule,
                                   int64_t groupSize, pipe::Placement placement,
                                   bool splitBackward);
/// `par` with `tensor` tensor-parallel ranks.
pipe::ParallelismAttr withTensor(pipe::ParallelismAttr par, int64_t tensor);
/// The stage graph of a model in phase `split` or later.
sched::ScheduleProblem buildScheduleProblem(pipe::ModelOp model);

/// sched::runScheduler for the dialect's schedule `kind`.
llvm::Expected<sched::Schedule>
runScheduler(pipe::ScheduleKind kind, const sched::ScheduleProblem &problem, int64_t groupSize,
             bool splitBackward = false, const sched::ActionTimes *times = nullptr,
             std::optional<int64_t> deferLimit = std::nullopt,
             sched::Deferral deferral = sched::Deferral::Throughout);

/// The stages of a model, in order.
llvm::SmallVector<pipe::StageOp> getStageList(pipe::ModelOp model);

/// Writes `schedule` as one pipe.rank per rank at the end of the model's body.
void writeSchedule(pipe::ModelOp model, const sched::Schedule &schedule);
/// The scheduling action a compute op (pipe::isCompute) stands for.
sched::ActionKind actionKind(mlir::Operation *op);
/// The compute order (and overlapped pairs) of every rank of a model in phase `scheduled` or
/// later.
sched::Schedule readSchedule(pipe::ModelOp model);

/// Forward, backward, input-gradient and weight-gradient times of every (stage, micro-batch)
/// from the cost model.
sched::ActionTimes actionTimes(const CostModel &cost, pipe::ModelOp model,
                               const sched::ScheduleProblem &problem);

/// Parameters of each stage (the sum over its layers).
std::vector<int64_t> stageParams(pipe::ModelOp model);

/// One layer's figures (per sample) on one rank of its tensor group (analysis/TensorShare.h).
TensorShare tensorShare(pipe::ParallelismAttr par, pipe::LayerOp layer);
TensorShare tensorShare(pipe::ParallelismAttr par, plan::LayerOp layer);

/// A model's layers and configuration as runtime/plan/TensorCollectives.h reads them, to ask
/// which tensor collectives a compute issues.
class TensorLayout {
public:
  explicit TensorLayout(pipe::ModelOp model);
  /// The collectives compute `op` (Forward, Backward, BackwardInput, BackwardWeight) of
  /// (`stage`, `microbatch`) issues, expert all-to-alls included; empty without tensor or
  /// expert parallelism. Each list is computed once per stage, pass and micro-batch size and
  /// lives as long as the layout.
  const std::vector<runtime::TensorCollective> &of(int64_t stage, int64_t microbatch,
                                                   runtime::Op op);
  bool active() const { return config.tensor > 1 || transformer; }

private:
  runtime::Config config;
  /// The transformer whose collectives the computes issue (TensorCollectives.h), with T > 1 or
  /// experts over E > 1; absent otherwise.
  std::optional<runtime::Transformer> transformer;
  std::vector<runtime::Layer> layers;
  std::vector<std::pair<int32_t, int32_t>> stageLayers; // [first, end) per stage
  std::vector<std::vector<int64_t>> samples;            // micro-batch boundaries per stage
  /// Refers to the members above: a layout is neither copied nor moved.
  std::optional<runtime::TensorCollectiveCache> issued;
};

/// Parameters of each stage that every rank of its tensor group holds (stageParams when T is
/// 1): what its data-parallel collectives, optimizer and memory plan work on.
/// `par` in place of the model's, when given.
std::vector<int64_t> rankStageParams(pipe::ModelOp model,
                                     std::optional<pipe::ParallelismAttr> par = std::nullopt);
/// The same for a plan.program's stage table (whose stages state the whole stage's params).
std::vector<int64_t> rankStageParams(plan::ProgramOp program);

/// The micro-batch search's step-time evaluator for a model in phase `split` or later, with
/// the durations the plan simulator will use (OptimizeMicrobatches.cpp). Fails, with a
/// diagnostic, for jobs the search does not cover.
mlir::FailureOr<sched::StepTimeEvaluator> buildStepTimeEvaluator(pipe::ModelOp model);

/// Bytes per sample that leave each stage (its last layer's output): the size of the
/// activations it sends forward and of the gradients it receives back, per rank of the
/// stage's tensor group (sequence parallelism sends each rank's part of the sequence).
std::vector<int64_t> stageOutputBytes(pipe::ModelOp model);

} // namespace conduit

#endif // CONDUIT_PASSES_PASSUTILS_H
