//===- PlaceCollectives.cpp - conduit-place-collectives -------------------===//
//
// Places the data-parallel collectives and the optimizer step of every stage. The algorithm
// (FSDP residencies by Belady's rule, reductions after each stage's last backward, optimizer
// steps and tied embeddings' exchange at the end) lives in scheduling/Collectives.h; this pass
// builds its problem from each rank's compute order, checks it, places, verifies the
// placement, and writes it back as pipe ops with their byte counts.
//
//===----------------------------------------------------------------------===//

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Collectives.h"

#include "mlir/IR/Builders.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITPLACECOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

using Kind = sched::Collective::Kind;

/// Whether the last stage keeps a copy of the first stage's token table, whose gradients the
/// two sum: the head's with tied embeddings, the multi-token prediction modules' otherwise
/// (TransformerSpec::sharesTokenTable).
bool sharesTokenTable(std::optional<pipe::TransformerAttr> t) {
  return t && (t->getTieEmbeddings() || t->getMtpLayers() > 0);
}

/// Writes one placed collective at `builder`'s insertion point, with the bytes it moves.
class CollectiveWriter {
public:
  explicit CollectiveWriter(pipe::ModelOp model) {
    int64_t elementBytes = model.getTraining().getElementBytes();
    for (int64_t params : rankStageParams(model)) {
      paramBytes.push_back(params * elementBytes);
      gradBytes.push_back(params * kGradientBytes);
    }
    // Vocabulary-parallel: each tensor rank ties its slice of the table.
    if (std::optional<pipe::TransformerAttr> t = model.getArchitecture(); sharesTokenTable(t))
      tiedBytes = t->getVocabSize() / model.getParallelism().getTensor() * t->getHiddenSize() *
                  kGradientBytes;
  }

  void write(OpBuilder &builder, Location loc, const sched::Collective &c) {
    const int32_t s = c.stage;
    switch (c.kind) {
    case Kind::Unshard:
      pipe::UnshardOp::create(builder, loc, s, paramBytes[s]);
      return;
    case Kind::Reshard:
      pipe::ReshardOp::create(builder, loc, s);
      return;
    case Kind::ReduceScatter:
    case Kind::AllReduce:
      pipe::ReduceGradOp::create(builder, loc, s, gradBytes[s],
                                 c.kind == Kind::AllReduce ? pipe::GradReduction::AllReduce
                                                           : pipe::GradReduction::ReduceScatter);
      return;
    case Kind::OptimizerStep:
      pipe::OptimizerStepOp::create(builder, loc, s);
      return;
    case Kind::GatherParams:
      pipe::GatherParamsOp::create(builder, loc, s, paramBytes[s]);
      return;
    case Kind::TieGradients:
      pipe::TieGradsOp::create(builder, loc, s, c.peerRank, c.peerStage, tiedBytes);
      return;
    }
  }

private:
  std::vector<int64_t> paramBytes, gradBytes;
  int64_t tiedBytes = 0;
};

struct PlaceCollectives : conduit::impl::ConduitPlaceCollectivesBase<PlaceCollectives> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>())
      if (failed(placeModel(model)))
        return signalPassFailure();
  }

  LogicalResult placeModel(pipe::ModelOp model) {
    if (failed(requirePhase(model, pipe::Phase::Communicating, "conduit-place-collectives")))
      return failure();
    pipe::ParallelismAttr par = model.getParallelism();
    std::optional<pipe::TransformerAttr> arch = model.getArchitecture();
    sched::CollectiveProblem problem;
    problem.replicas = par.getData();
    problem.sharding = static_cast<sched::Sharding>(par.getSharding());
    problem.window = par.getFsdpWindow();
    problem.reduceEachRun = par.getGradientReduction() == pipe::GradientReduction::Run;
    problem.tiedEmbeddings = sharesTokenTable(arch);
    for (pipe::StageOp stage : model.getStages())
      problem.stageRank.push_back(*stage.getRank());
    // Each rank's compute order, and the ops the placement refers to.
    std::vector<std::vector<Operation *>> computes;
    for (pipe::RankOp rank : model.getRanks()) {
      std::vector<sched::Action> &order = problem.orders.emplace_back();
      std::vector<Operation *> &ops = computes.emplace_back();
      for (Operation &op : rank.getBody().front()) {
        if (isa<pipe::UnshardOp, pipe::ReshardOp, pipe::ReduceGradOp, pipe::GatherParamsOp,
                pipe::OptimizerStepOp, pipe::TieGradsOp>(op))
          return op.emitOpError("conduit-place-collectives runs once; this rank already has "
                                "collectives");
        if (!pipe::isCompute(&op))
          continue;
        auto [stage, mb] = pipe::computeStageAndMicrobatch(&op);
        order.push_back({actionKind(&op), stage, mb});
        ops.push_back(&op);
      }
    }
    if (sched::Violation v = problem.check())
      return model.emitOpError() << "cannot place collectives: " << *v;
    llvm::Expected<sched::CollectivePlacement> placement = sched::placeCollectives(problem);
    if (!placement)
      return model.emitOpError() << llvm::toString(placement.takeError());
    if (sched::Violation v = sched::verifyCollectives(problem, *placement))
      return model.emitOpError() << "internal error: the collective placement does not verify: "
                                 << *v;

    CollectiveWriter writer(model);
    OpBuilder builder(model.getContext());
    Location loc = model.getLoc();
    auto writeAll = [&](const std::vector<sched::Collective> &list) {
      for (const sched::Collective &c : list) {
        writer.write(builder, loc, c);
        numAllGathers += c.kind == Kind::Unshard || c.kind == Kind::GatherParams;
        numReductions += c.kind == Kind::ReduceScatter || c.kind == Kind::AllReduce;
        numTies += c.kind == Kind::TieGradients;
      }
    };
    for (auto [rank, placed, ops] : llvm::zip(model.getRanks(), placement->ranks, computes)) {
      Block &body = rank.getBody().front();
      loc = rank.getLoc();
      builder.setInsertionPointToStart(&body);
      writeAll(placed.atStart);
      for (auto [op, list] : llvm::zip(ops, placed.after)) {
        builder.setInsertionPointAfter(op);
        writeAll(list);
      }
      builder.setInsertionPointToEnd(&body);
      writeAll(placed.atEnd);
    }
    return success();
  }
};

} // namespace
