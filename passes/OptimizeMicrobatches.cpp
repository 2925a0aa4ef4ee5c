//===- OptimizeMicrobatches.cpp - conduit-optimize-microbatches -----------===//
//
// When the job says `microbatch_partitions: "auto"`, builds the step-time evaluator of the
// scheduling library from the model and its cost model (the same durations the plan simulator
// will use), runs the chosen search and writes the best cut of every stage back.
//
//===----------------------------------------------------------------------===//

#include "analysis/Simulator.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/MicrobatchSearch.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITOPTIMIZEMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

std::optional<sched::SearchMethod> parseMethod(llvm::StringRef name) {
  if (name == "best") // whichever method does best on the committed cases
    return sched::SearchMethod::Descent;
  for (sched::SearchMethod m : {sched::SearchMethod::Greedy, sched::SearchMethod::DP,
                                sched::SearchMethod::Genetic, sched::SearchMethod::Descent})
    if (name == sched::searchMethodName(m))
      return m;
  return std::nullopt;
}

} // namespace

/// The evaluator's view of a model: durations from the cost model exactly as PlanCosts
/// computes them for the compiled plan.
FailureOr<sched::StepTimeEvaluator> conduit::buildStepTimeEvaluator(pipe::ModelOp model) {
  pipe::ParallelismAttr par = model.getParallelism();
  llvm::SmallVector<pipe::StageOp> stages = getStageList(model);
  const int64_t numStages = static_cast<int64_t>(stages.size());
  if (numStages != par.getPipeline())
    return model.emitOpError() << "microbatch_partitions \"auto\" searches pipelines with one "
                                  "stage per rank; this job has "
                               << par.getStagesPerDevice() << " per rank";
  sched::PipelineSchedule kind;
  switch (par.getSchedule()) {
  case pipe::ScheduleKind::GPipe:
    kind = sched::PipelineSchedule::GPipe;
    break;
  case pipe::ScheduleKind::OneFOneB:
    kind = sched::PipelineSchedule::OneFOneB;
    break;
  default:
    return model.emitOpError() << "microbatch_partitions \"auto\" searches gpipe and 1f1b "
                                  "schedules; this job uses "
                               << stringifyScheduleKind(par.getSchedule());
  }
  llvm::Expected<CostModel> built = buildCostModel(model);
  if (!built)
    return model.emitOpError() << llvm::toString(built.takeError());
  auto cost = std::make_shared<CostModel>(std::move(*built));

  const int64_t batch = par.getBatchSamples();
  sched::PipelineCosts costs;
  costs.forward.assign(numStages, std::vector<double>(batch + 1));
  costs.backward.assign(numStages, std::vector<double>(batch + 1));
  for (int64_t s = 0; s < numStages; ++s)
    for (int64_t n = 0; n <= batch; ++n) {
      costs.forward[s][n] =
          cost->stageForwardTime(stages[s].getFirstLayer(), stages[s].getEndLayer(), n);
      costs.backward[s][n] =
          cost->stageBackwardTime(stages[s].getFirstLayer(), stages[s].getEndLayer(), n);
    }
  costs.outputBytes = stageOutputBytes(model);
  costs.transfer = [cost](int64_t bytes, int32_t from, int32_t to) {
    return cost->transferTime(bytes, cost->pipelineLink(from, to));
  };
  const int64_t data = par.getData();
  costs.dataParallel = data > 1;
  costs.startGather.assign(numStages, 0);
  costs.reduce.assign(numStages, 0);
  costs.optimizer.assign(numStages, 0);
  const pipe::Sharding sharding = par.getSharding();
  const bool sharded = data > 1 && sharding != pipe::Sharding::None;
  const int64_t elementBytes = model.getTraining().getElementBytes();
  const bool adam = model.getTraining().getOptimizer() == pipe::Optimizer::Adam;
  std::vector<int64_t> params = rankStageParams(model);
  for (int64_t s = 0; s < numStages; ++s) {
    costs.optimizer[s] = cost->replicaOptimizerStepTime(adam, params[s], data, sharded);
    if (data == 1)
      continue;
    const Ring ring = cost->dataParallelRing(*stages[s].getRank());
    auto collective = [&](Collective c, int64_t bytes) {
      return cost->collectiveTime(c, bytes, data, ring);
    };
    if (sharding == pipe::Sharding::None) {
      costs.reduce[s] = collective(Collective::AllReduce, params[s] * kGradientBytes);
      continue;
    }
    costs.reduce[s] = collective(Collective::ReduceScatter, params[s] * kGradientBytes);
    costs.startGather[s] = collective(Collective::AllGather, params[s] * elementBytes);
  }
  return sched::StepTimeEvaluator(numStages, batch, kind, std::move(costs));
}

namespace {

struct OptimizeMicrobatches : conduit::impl::ConduitOptimizeMicrobatchesBase<OptimizeMicrobatches> {
  using ConduitOptimizeMicrobatchesBase::ConduitOptimizeMicrobatchesBase;
  OptimizeMicrobatches(ConduitOptimizeMicrobatchesOptions options, SearchSink sink)
      : ConduitOptimizeMicrobatchesBase(std::move(options)), sink(std::move(sink)) {}

  void runOnOperation() override {
    std::optional<sched::SearchMethod> searchMethod = parseMethod(method);
    if (!searchMethod) {
      getOperation().emitError() << "conduit-optimize-microbatches: unknown method '" << method
                                 << "'; use greedy, dp, genetic, descent or best";
      return signalPassFailure();
    }
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Split, "conduit-optimize-microbatches")))
        return signalPassFailure();
      if (model.getMicrobatchPartitionsAttr() != StringAttr::get(&getContext(), "auto"))
        continue;
      FailureOr<sched::StepTimeEvaluator> evaluator = buildStepTimeEvaluator(model);
      if (failed(evaluator))
        return signalPassFailure();
      pipe::ParallelismAttr par = model.getParallelism();
      sched::SearchOptions options;
      options.method = *searchMethod;
      options.seed = seed;
      options.timeBudgetS = timeBudget;
      options.maxMicrobatches = maxMicrobatches > 0 ? maxMicrobatches : 2 * par.getMicrobatches();
      options.baseline.assign(par.getMicrobatches(), par.getMicrobatchSize());
      options.progress = [](int64_t evaluated, double best) {
        llvm::errs() << "conduit-optimize-microbatches: " << evaluated << " candidates, best step "
                     << best << " s\n";
      };
      sched::SearchResult result = sched::searchPartitions(*evaluator, options);
      numCandidates += result.evaluated;
      if (!std::isfinite(result.stepTime)) {
        model.emitOpError("the micro-batch search found no partition the schedule can run");
        return signalPassFailure();
      }
      writeBack(model, result.best);
      if (sink)
        sink(*searchMethod, result);
    }
  }

  void writeBack(pipe::ModelOp model, const sched::Partitions &best) {
    Builder builder(&getContext());
    SmallVector<Attribute> perStage;
    for (auto [stage, sizes] : llvm::zip(getStageList(model), best)) {
      stage.setSamplesAttr(builder.getDenseI64ArrayAttr(sched::boundariesFromSizes(sizes)));
      perStage.push_back(builder.getDenseI64ArrayAttr(sizes));
    }
    model.setMicrobatchPartitionsAttr(builder.getArrayAttr(perStage));
  }

  SearchSink sink;
};

} // namespace

std::unique_ptr<Pass>
conduit::createConduitOptimizeMicrobatches(ConduitOptimizeMicrobatchesOptions options,
                                           SearchSink sink) {
  return std::make_unique<OptimizeMicrobatches>(std::move(options), std::move(sink));
}
