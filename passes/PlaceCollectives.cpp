//===- PlaceCollectives.cpp - conduit-place-collectives -------------------===//
//
// Places the data-parallel collectives and the optimizer step of every stage:
//
// * full (FSDP / ZeRO-3): a stage's parameters are gathered for a "residency", a stretch of the
//   rank's order in which they stay resident. Residencies follow the runs of compute on one
//   stage; at most `fsdp_window` stages are resident at once, and when a run needs a stage
//   that is not resident, the resident stage used furthest in the future is evicted (Belady's
//   rule, optimal for the number of all-gathers). The evicted stage is resharded right after
//   its last use, and the new stage's all-gather is issued right then: as early as the window
//   allows, which hides it behind the compute in between whenever the cost model says it fits.
//   With breadth-first and a window of 2 this is exactly 2V-2 all-gathers per rank per step.
// * every sharded mode: one reduce-scatter per stage right after its last backward or weight
//   gradient (V per rank per step, independent of M); `none`: one all-reduce there instead.
// * optimizer and gradient sharding: after the optimizer step on the shard, an all-gather of
//   the updated parameters.
// * the optimizer steps run at the end of the rank's compute, in the order the reductions
//   finish. With one replica (D = 1) there are no collectives at all.
// * tied embeddings: the token table (first stage) and the LM head (last stage) are one
//   weight held twice; at the end of each rank's compute that holds either, a tie_grads adds
//   the other copy's gradient (exchanged with its rank, or in place when one rank holds both),
//   and those stages' reductions follow it. Every rank issues it after all its other
//   point-to-point transfers, so both sides meet it in the same order.
//
//===----------------------------------------------------------------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace conduit {
#define GEN_PASS_DEF_CONDUITPLACECOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

/// A stretch of one rank's compute on one stage.
struct Run {
  int32_t stage;
  Operation *first, *last;
};

class CollectivePlacer {
public:
  CollectivePlacer(pipe::ModelOp model) : model(model), par(model.getParallelism()) {
    int64_t elementBytes = model.getTraining().getElementBytes();
    for (int64_t params : rankStageParams(model)) {
      paramBytes.push_back(params * elementBytes);
      gradBytes.push_back(params * kGradientBytes);
    }
    if (std::optional<pipe::TransformerAttr> t = model.getArchitecture();
        t && t->getTieEmbeddings()) {
      for (pipe::StageOp stage : model.getStages())
        stageRanks.push_back(*stage.getRank());
      // Vocabulary-parallel: each tensor rank ties its slice of the table.
      tiedBytes = t->getVocabSize() / par.getTensor() * t->getHiddenSize() * kGradientBytes;
    }
  }

  void place(pipe::RankOp rank) {
    Block &body = rank.getBody().front();
    std::vector<Run> runs;
    std::map<int32_t, Operation *> lastBackward;
    std::vector<int32_t> reductionOrder;
    for (Operation &op : body) {
      if (!pipe::isCompute(&op))
        continue;
      int32_t stage = pipe::computeStageAndMicrobatch(&op).first;
      // The gradients are complete after the last whole backward or weight gradient. A weight
      // gradient reads no parameters here, but PyTorch's FSDP computes it on the unsharded
      // parameters: it is part of a residency, so that exported plans run there too.
      if (isa<pipe::BackwardOp, pipe::BackwardWeightOp>(op))
        lastBackward[stage] = &op;
      if (!runs.empty() && runs.back().stage == stage)
        runs.back().last = &op;
      else
        runs.push_back({stage, &op, &op});
    }
    for (auto &[stage, op] : lastBackward)
      (void)op, reductionOrder.push_back(stage);
    std::sort(reductionOrder.begin(), reductionOrder.end(), [&](int32_t a, int32_t b) {
      return lastBackward[a]->isBeforeInBlock(lastBackward[b]);
    });

    Location loc = rank.getLoc();
    OpBuilder builder(rank.getContext());
    const bool dataParallel = par.getData() > 1;
    const pipe::Sharding sharding = par.getSharding();

    if (dataParallel && sharding == pipe::Sharding::Full)
      placeResidencies(body, runs, loc);

    // The tied copies' gradients meet at the end of the rank's compute; their reductions and
    // optimizer steps come after.
    std::vector<int32_t> tied = placeTie(rank, body, loc);
    std::stable_partition(reductionOrder.begin(), reductionOrder.end(),
                          [&](int32_t stage) { return !llvm::is_contained(tied, stage); });

    // Gradient reductions right after each stage's last backward.
    if (dataParallel) {
      pipe::GradReduction reduction = sharding == pipe::Sharding::None
                                          ? pipe::GradReduction::AllReduce
                                          : pipe::GradReduction::ReduceScatter;
      for (int32_t stage : reductionOrder) {
        if (llvm::is_contained(tied, stage)) {
          builder.setInsertionPointToEnd(&body);
          pipe::ReduceGradOp::create(builder, loc, stage, gradBytes[stage], reduction);
          ++numReductions;
          continue;
        }
        Operation *anchor = lastBackward[stage];
        // After the reshard and all-gather placed at this backward, if any: a prefetch for the
        // next stage is more urgent than this reduction.
        while (Operation *next = anchor->getNextNode()) {
          if (!isa<pipe::ReshardOp, pipe::UnshardOp>(next))
            break;
          anchor = next;
        }
        builder.setInsertionPointAfter(anchor);
        pipe::ReduceGradOp::create(builder, loc, stage, gradBytes[stage], reduction);
        ++numReductions;
      }
    }

    // Optimizer steps at the end, in the order the reductions finish.
    builder.setInsertionPointToEnd(&body);
    for (int32_t stage : reductionOrder) {
      pipe::OptimizerStepOp::create(builder, loc, stage);
      if (dataParallel &&
          (sharding == pipe::Sharding::Optimizer || sharding == pipe::Sharding::Gradients)) {
        pipe::GatherParamsOp::create(builder, loc, stage, paramBytes[stage]);
        ++numAllGathers;
      }
    }
  }

  int64_t numAllGathers = 0, numReductions = 0, numTies = 0;

private:
  /// Appends the rank's tie_grads, if it holds a tied copy; returns the stages it ties.
  std::vector<int32_t> placeTie(pipe::RankOp rank, Block &body, Location loc) {
    if (stageRanks.empty())
      return {};
    const int32_t first = 0, last = static_cast<int32_t>(stageRanks.size()) - 1;
    const int64_t r = rank.getRank();
    const bool holdsFirst = stageRanks[first] == r, holdsLast = stageRanks[last] == r;
    if (!holdsFirst && !holdsLast)
      return {};
    OpBuilder builder = OpBuilder::atBlockEnd(&body);
    ++numTies;
    if (holdsFirst && holdsLast) {
      pipe::TieGradsOp::create(builder, loc, first, static_cast<int32_t>(r), last, tiedBytes);
      return first == last ? std::vector<int32_t>{first} : std::vector<int32_t>{first, last};
    }
    const int32_t mine = holdsFirst ? first : last, theirs = holdsFirst ? last : first;
    pipe::TieGradsOp::create(builder, loc, mine, static_cast<int32_t>(stageRanks[theirs]), theirs,
                             tiedBytes);
    return {mine};
  }

  /// Belady residencies over the runs, with reshards after a stage's last use before it is
  /// evicted and all-gathers right after the reshard that frees their place.
  void placeResidencies(Block &body, const std::vector<Run> &runs, Location loc) {
    const size_t window = static_cast<size_t>(par.getFsdpWindow());
    OpBuilder builder(model.getContext());
    // Stage -> index of the last run of its current residency.
    std::map<int32_t, size_t> resident;
    Operation *start = &body.front();
    auto nextUse = [&](int32_t stage, size_t from) {
      for (size_t k = from; k < runs.size(); ++k)
        if (runs[k].stage == stage)
          return k;
      return runs.size();
    };
    for (size_t k = 0; k < runs.size(); ++k) {
      const Run &run = runs[k];
      if (auto it = resident.find(run.stage); it != resident.end()) {
        it->second = k;
        continue;
      }
      if (resident.size() < window) {
        // Room from the start: gather before the rank's first instruction.
        builder.setInsertionPoint(start);
      } else {
        // Evict the resident stage used furthest in the future.
        auto victim = resident.begin();
        size_t furthest = 0;
        for (auto it = resident.begin(); it != resident.end(); ++it) {
          size_t use = nextUse(it->first, k);
          if (use >= furthest) {
            furthest = use;
            victim = it;
          }
        }
        Operation *lastUse = runs[victim->second].last;
        builder.setInsertionPointAfter(lastUse);
        pipe::ReshardOp::create(builder, loc, victim->first);
        resident.erase(victim);
      }
      pipe::UnshardOp::create(builder, loc, run.stage, paramBytes[run.stage]);
      ++numAllGathers;
      resident[run.stage] = k;
    }
    // Release what is still resident after its last use.
    for (auto &[stage, lastRun] : resident) {
      builder.setInsertionPointAfter(runs[lastRun].last);
      pipe::ReshardOp::create(builder, loc, stage);
    }
  }

  pipe::ModelOp model;
  pipe::ParallelismAttr par;
  std::vector<int64_t> paramBytes, gradBytes;
  /// Tied embeddings: the rank of every stage, and the bytes of the tied weight's gradient.
  std::vector<int64_t> stageRanks;
  int64_t tiedBytes = 0;
};

struct PlaceCollectives : conduit::impl::ConduitPlaceCollectivesBase<PlaceCollectives> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Communicating, "conduit-place-collectives")))
        return signalPassFailure();
      CollectivePlacer placer(model);
      for (pipe::RankOp rank : model.getRanks()) {
        for (Operation &op : rank.getBody().front())
          if (isa<pipe::UnshardOp, pipe::ReshardOp, pipe::ReduceGradOp, pipe::GatherParamsOp,
                  pipe::OptimizerStepOp, pipe::TieGradsOp>(op)) {
            op.emitOpError("conduit-place-collectives runs once; this rank already has "
                           "collectives");
            return signalPassFailure();
          }
        placer.place(rank);
      }
      numAllGathers += placer.numAllGathers;
      numReductions += placer.numReductions;
      numTies += placer.numTies;
    }
  }
};

} // namespace
