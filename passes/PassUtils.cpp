//===- PassUtils.cpp - what Conduit's passes share ------------------------===//

#include "passes/PassUtils.h"
#include "passes/PlanExport.h"

#include "mlir/IR/Builders.h"

using namespace conduit;

mlir::LogicalResult conduit::requirePhase(pipe::ModelOp model, pipe::Phase phase,
                                          llvm::StringRef pass) {
  if (model.getPhase() == phase)
    return mlir::success();
  return model.emitOpError() << pass << " expects phase '" << pipe::stringifyPhase(phase)
                             << "', found '" << pipe::stringifyPhase(model.getPhase()) << "'";
}

llvm::SmallVector<pipe::StageOp> conduit::getStageList(pipe::ModelOp model) {
  return llvm::to_vector(model.getStages());
}

llvm::Expected<sched::Schedule>
conduit::runScheduler(pipe::ScheduleKind kind, const sched::ScheduleProblem &problem,
                      int64_t groupSize, bool splitBackward, const sched::ActionTimes *times,
                      std::optional<int64_t> deferLimit, sched::Deferral deferral) {
  // The plan numbers its schedules as the dialect does (passes/PlanExport.cpp asserts it).
  return sched::runScheduler(static_cast<runtime::Schedule>(kind), problem, groupSize,
                             splitBackward, times, deferLimit, deferral);
}

pipe::ParallelismAttr conduit::withSchedule(pipe::ParallelismAttr par, pipe::ScheduleKind schedule,
                                            int64_t groupSize, pipe::Placement placement,
                                            bool splitBackward) {
  return pipe::ParallelismAttr::get(
      par.getContext(), par.getPipeline(), par.getData(), par.getStagesPerDevice(), schedule,
      groupSize, par.getMicrobatches(), par.getMicrobatchSize(), par.getSharding(),
      par.getCheckpointing(), par.getFsdpWindow(), par.getRankOrder(), placement, splitBackward,
      par.getTensor(), par.getSequenceParallel(), par.getExpert(), par.getTensorCommOverlap(),
      par.getGradientReduction(), par.getRecomputeModules(), par.getMaxDeferredWeightGradients());
}

pipe::ParallelismAttr conduit::withTensor(pipe::ParallelismAttr par, int64_t tensor) {
  return pipe::ParallelismAttr::get(
      par.getContext(), par.getPipeline(), par.getData(), par.getStagesPerDevice(),
      par.getSchedule(), par.getGroupSize(), par.getMicrobatches(), par.getMicrobatchSize(),
      par.getSharding(), par.getCheckpointing(), par.getFsdpWindow(), par.getRankOrder(),
      par.getPlacement(), par.getSplitBackward(), tensor, par.getSequenceParallel(),
      par.getExpert(), par.getTensorCommOverlap(), par.getGradientReduction(),
      par.getRecomputeModules(), par.getMaxDeferredWeightGradients());
}

sched::ScheduleProblem conduit::buildScheduleProblem(pipe::ModelOp model) {
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> boundaries;
  for (pipe::StageOp stage : model.getStages()) {
    ranks.push_back(*stage.getRank());
    llvm::ArrayRef<int64_t> samples = *stage.getSamples();
    boundaries.emplace_back(samples.begin(), samples.end());
  }
  return sched::ScheduleProblem(model.getParallelism().getPipeline(), std::move(ranks),
                                std::move(boundaries));
}

void conduit::writeSchedule(pipe::ModelOp model, const sched::Schedule &schedule) {
  mlir::OpBuilder builder = mlir::OpBuilder::atBlockEnd(&model.getBody().front());
  mlir::Location loc = model.getLoc();
  for (auto [r, actions] : llvm::enumerate(schedule.ranks)) {
    auto rank = pipe::RankOp::create(builder, loc, static_cast<int64_t>(r), mlir::IntegerAttr());
    mlir::OpBuilder body = mlir::OpBuilder::atBlockEnd(builder.createBlock(&rank.getBody()));
    for (auto [i, a] : llvm::enumerate(actions)) {
      switch (a.kind) {
      case sched::ActionKind::Forward:
        pipe::ForwardOp::create(body, loc, a.stage, a.mb, schedule.startsPair(r, i));
        break;
      case sched::ActionKind::Backward:
        pipe::BackwardOp::create(body, loc, a.stage, a.mb);
        break;
      case sched::ActionKind::BackwardInput:
        pipe::BackwardInputOp::create(body, loc, a.stage, a.mb);
        break;
      case sched::ActionKind::BackwardWeight:
        pipe::BackwardWeightOp::create(body, loc, a.stage, a.mb);
        break;
      }
    }
    builder.setInsertionPointAfter(rank);
  }
}

sched::ActionKind conduit::actionKind(mlir::Operation *op) {
  if (mlir::isa<pipe::ForwardOp>(op))
    return sched::ActionKind::Forward;
  if (mlir::isa<pipe::BackwardInputOp>(op))
    return sched::ActionKind::BackwardInput;
  if (mlir::isa<pipe::BackwardWeightOp>(op))
    return sched::ActionKind::BackwardWeight;
  return sched::ActionKind::Backward;
}

sched::Schedule conduit::readSchedule(pipe::ModelOp model) {
  sched::Schedule schedule;
  for (pipe::RankOp rank : model.getRanks()) {
    std::vector<sched::Action> &actions = schedule.ranks.emplace_back();
    std::vector<int32_t> &pairs = schedule.pairs.emplace_back();
    for (mlir::Operation &op : rank.getBody().front()) {
      if (!pipe::isCompute(&op))
        continue;
      auto [stage, mb] = pipe::computeStageAndMicrobatch(&op);
      if (auto f = llvm::dyn_cast<pipe::ForwardOp>(op); f && f.getPaired())
        pairs.push_back(static_cast<int32_t>(actions.size()));
      actions.push_back({actionKind(&op), stage, mb});
    }
  }
  return schedule;
}

sched::ActionTimes conduit::actionTimes(const CostModel &cost, pipe::ModelOp model,
                                        const sched::ScheduleProblem &problem) {
  sched::ActionTimes times;
  int64_t s = 0;
  for (pipe::StageOp stage : model.getStages()) {
    CostModel::MicrobatchTimes stageTimes = cost.stageMicrobatchTimes(
        stage.getFirstLayer(), stage.getEndLayer(), problem.boundaries(s++));
    times.forward.push_back(std::move(stageTimes.forward));
    times.backward.push_back(std::move(stageTimes.backward));
    times.input.push_back(std::move(stageTimes.input));
    times.weight.push_back(std::move(stageTimes.weight));
  }
  return times;
}

std::vector<int64_t> conduit::stageOutputBytes(pipe::ModelOp model) {
  llvm::SmallVector<pipe::LayerOp> layers = llvm::to_vector(model.getLayers());
  std::vector<int64_t> bytes;
  for (pipe::StageOp stage : model.getStages())
    bytes.push_back(
        tensorShare(model.getParallelism(), layers[stage.getEndLayer() - 1]).outputBytes);
  return bytes;
}

namespace {

/// pipe.layer and plan.layer have the same fields.
template <typename Layer> TensorShare shareOf(pipe::ParallelismAttr par, Layer layer) {
  SplitLayer figures;
  figures.embedding = layer.getKind() == pipe::LayerKind::Embedding;
  figures.params = layer.getParams();
  figures.replicatedParams = layer.getReplicatedParams().value_or(0);
  figures.expertParams = layer.getExpertParams().value_or(0);
  figures.activationBytes = layer.getActivationBytes();
  figures.replicatedActivationBytes = layer.getReplicatedActivationBytes().value_or(0);
  figures.weightGradientBytes = layer.getWeightGradientBytes();
  figures.checkpointBytes = layer.getCheckpointBytes();
  figures.outputBytes = layer.getOutputBytes();
  figures.selectiveBytes = layer.getSelectiveBytes().value_or(0);
  return conduit::tensorShare(figures, par.getTensor(), par.getSequenceParallel(), par.getExpert());
}

/// The parameters of each of `stages` on one rank of its tensor group.
template <typename Layers, typename Stages>
std::vector<int64_t> rankParams(pipe::ParallelismAttr par, Layers layers, Stages stages) {
  std::vector<int64_t> prefix = {0};
  for (auto layer : layers)
    prefix.push_back(prefix.back() + shareOf(par, layer).params);
  std::vector<int64_t> params;
  for (auto stage : stages)
    params.push_back(prefix[stage.getEndLayer()] - prefix[stage.getFirstLayer()]);
  return params;
}

} // namespace

TensorShare conduit::tensorShare(pipe::ParallelismAttr par, pipe::LayerOp layer) {
  return shareOf(par, layer);
}

TensorShare conduit::tensorShare(pipe::ParallelismAttr par, plan::LayerOp layer) {
  return shareOf(par, layer);
}

TensorLayout::TensorLayout(pipe::ModelOp model) {
  pipe::ParallelismAttr par = model.getParallelism();
  config.tensor = static_cast<int32_t>(par.getTensor());
  config.sequenceParallel = par.getSequenceParallel();
  config.checkpointing = static_cast<runtime::Checkpointing>(par.getCheckpointing());
  // A recomputed MLP gathers its input again under sequence parallelism (read with selective
  // checkpointing only).
  config.recomputeModules = static_cast<uint32_t>(par.getRecomputeModules());
  config.tokensPerSample = model.getTokensPerSample();
  config.dtype = static_cast<runtime::DType>(model.getTraining().getDtype());
  config.expert = static_cast<int32_t>(par.getExpert());
  // What the collectives read of the transformer (TensorCollectives.h): with T > 1 its blocks'
  // variants, with E > 1 its experts.
  pipe::TransformerAttr t = model.getArchitectureAttr();
  if (t && (config.tensor > 1 || (t.getMoe() && config.expert > 1)))
    transformer = exportTransformer(t);
  if (!active())
    return;
  for (pipe::LayerOp layer : model.getLayers()) {
    runtime::Layer l;
    l.kind = static_cast<runtime::LayerKind>(layer.getKind());
    l.checkpointBytes = layer.getCheckpointBytes();
    l.outputBytes = layer.getOutputBytes();
    layers.push_back(l);
  }
  for (pipe::StageOp stage : model.getStages()) {
    stageLayers.emplace_back(stage.getFirstLayer(), stage.getEndLayer());
    if (std::optional<llvm::ArrayRef<int64_t>> bounds = stage.getSamples())
      samples.emplace_back(bounds->begin(), bounds->end());
    else
      samples.emplace_back();
  }
  issued.emplace(config, layers, transformer ? &*transformer : nullptr);
}

const std::vector<runtime::TensorCollective> &TensorLayout::of(int64_t stage, int64_t microbatch,
                                                               runtime::Op op) {
  static const std::vector<runtime::TensorCollective> none;
  if (!active())
    return none;
  const std::vector<int64_t> &bounds = samples[stage];
  return issued->of(stageLayers[stage].first, stageLayers[stage].second, op,
                    bounds[microbatch + 1] - bounds[microbatch]);
}

std::vector<int64_t> conduit::rankStageParams(pipe::ModelOp model,
                                              std::optional<pipe::ParallelismAttr> par) {
  return rankParams(par.value_or(model.getParallelism()), model.getLayers(), model.getStages());
}

std::vector<int64_t> conduit::rankStageParams(plan::ProgramOp program) {
  return rankParams(program.getParallelism(), program.getLayers(), program.getStages());
}

std::vector<int64_t> conduit::stageParams(pipe::ModelOp model) {
  std::vector<int64_t> prefix = {0};
  for (pipe::LayerOp layer : model.getLayers())
    prefix.push_back(prefix.back() + layer.getParams());
  std::vector<int64_t> params;
  for (pipe::StageOp stage : model.getStages())
    params.push_back(prefix[stage.getEndLayer()] - prefix[stage.getFirstLayer()]);
  return params;
}
