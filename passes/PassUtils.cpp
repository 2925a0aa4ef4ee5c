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
