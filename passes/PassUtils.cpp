//===- PassUtils.cpp - what Conduit's passes share ------------------------===//

#include "passes/PassUtils.h"

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

llvm::Expected<sched::Schedule> conduit::runScheduler(pipe::ScheduleKind kind,
                                                      const sched::ScheduleProblem &problem,
                                                      int64_t groupSize) {
  switch (kind) {
  case pipe::ScheduleKind::GPipe:
    return sched::scheduleGPipe(problem);
  case pipe::ScheduleKind::OneFOneB:
    return sched::scheduleOneFOneB(problem);
  case pipe::ScheduleKind::DepthFirst:
    return sched::scheduleDepthFirst(problem, groupSize);
  case pipe::ScheduleKind::BreadthFirst:
    return sched::scheduleBreadthFirst(problem);
  }
  llvm_unreachable("unknown schedule kind");
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

sched::Schedule conduit::readSchedule(pipe::ModelOp model) {
  sched::Schedule schedule;
  for (pipe::RankOp rank : model.getRanks()) {
    std::vector<sched::Action> &actions = schedule.ranks.emplace_back();
    for (mlir::Operation &op : rank.getBody().front()) {
      if (auto f = llvm::dyn_cast<pipe::ForwardOp>(op))
        actions.push_back({sched::ActionKind::Forward, f.getStage(), f.getMicrobatch()});
      else if (auto b = llvm::dyn_cast<pipe::BackwardOp>(op))
        actions.push_back({sched::ActionKind::Backward, b.getStage(), b.getMicrobatch()});
    }
  }
  return schedule;
}

sched::ActionTimes conduit::actionTimes(const CostModel &cost, pipe::ModelOp model,
                                        const sched::ScheduleProblem &problem) {
  sched::ActionTimes times;
  times.forward.resize(problem.numStages());
  times.backward.resize(problem.numStages());
  int64_t s = 0;
  for (pipe::StageOp stage : model.getStages()) {
    for (int64_t m = 0; m < problem.numMicrobatches(s); ++m) {
      int64_t samples = problem.end(s, m) - problem.begin(s, m);
      times.forward[s].push_back(
          cost.stageForwardTime(stage.getFirstLayer(), stage.getEndLayer(), samples));
      times.backward[s].push_back(
          cost.stageBackwardTime(stage.getFirstLayer(), stage.getEndLayer(), samples));
    }
    ++s;
  }
  return times;
}

std::vector<int64_t> conduit::stageOutputBytes(pipe::ModelOp model) {
  llvm::SmallVector<pipe::LayerOp> layers = llvm::to_vector(model.getLayers());
  std::vector<int64_t> bytes;
  for (pipe::StageOp stage : model.getStages())
    bytes.push_back(layers[stage.getEndLayer() - 1].getOutputBytes());
  return bytes;
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
