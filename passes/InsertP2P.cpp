//===- InsertP2P.cpp - conduit-insert-p2p ---------------------------------===//
//
// Adds a send and a receive for every cross-rank dependency and orders them so that no
// execution can deadlock under NCCL semantics (a send may block until its receive is posted,
// a stream runs its operations in order).
//
// Every transfer gets one key: the predicted time its data is produced (the end of its
// producer in the compute-only timeline), then the producer's position in a dependency-
// respecting order of all compute, then the consumer. Both sides of a transfer sit at that key
// in their rank's list, so all ranks see their transfers in one global order. A transfer that
// a producer depends on (through any chain of compute and transfers) has a smaller key, so a
// rank never waits on a peer for something that peer cannot do until later in the order: the
// order is deadlock-free for any actual timing, not only the predicted one. Receives are posted
// when their data is produced, not at the start of the step (PyTorch's eager receives leave a
// stream blocked on data that is far away), and sends leave as soon as their data exists.
//
// A send and a receive that two neighbours exchange at nearly the same moment (the 1F1B
// steady state) are marked as one batch on both sides, so the runtime issues them together.
//
// The decisions live in the scheduling library (passes/Scheduling/Transfers.h), which the
// micro-batch search's step-time evaluator shares; this pass writes them as IR.
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "scheduling/Transfers.h"

#include "mlir/IR/Builders.h"

namespace conduit {
#define GEN_PASS_DEF_CONDUITINSERTP2P
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

class P2PInserter {
public:
  P2PInserter(pipe::ModelOp model, const CostModel &cost)
      : model(model), cost(cost), problem(buildScheduleProblem(model)),
        schedule(readSchedule(model)) {}

  void run() {
    sched::Timeline timeline =
        sched::simulateCompute(problem, schedule, actionTimes(cost, model, problem));
    plan = sched::planTransfers(problem, schedule, timeline, stageOutputBytes(model),
                                [&](int64_t bytes, int32_t from, int32_t to) {
                                  return cost.transferTime(bytes, cost.pipelineLink(from, to));
                                });
    rewrite();
  }

  int64_t numTransfers() const { return static_cast<int64_t>(plan.transfers.size()); }

private:
  void rewrite() {
    int32_t r = 0;
    for (pipe::RankOp rank : model.getRanks()) {
      Block &body = rank.getBody().front();
      std::vector<Operation *> compute;
      for (Operation &op : body)
        compute.push_back(&op);
      OpBuilder builder = OpBuilder::atBlockEnd(&body);
      Location loc = rank.getLoc();
      for (const sched::OrderEntry &e : plan.orders[r]) {
        if (e.action >= 0) {
          compute[e.action]->moveBefore(&body, body.end());
          continue;
        }
        const sched::Transfer &x = plan.transfers[e.transfer];
        const pipe::TransferKind kind =
            x.gradient ? pipe::TransferKind::Gradient : pipe::TransferKind::Activation;
        if (e.isSend)
          pipe::SendOp::create(builder, loc, kind, x.fromStage, x.fromMb, x.toRank, x.toStage,
                               x.toMb, x.begin, x.end, x.bytes, x.sendBatch);
        else
          pipe::RecvOp::create(builder, loc, kind, x.toStage, x.toMb, x.fromRank, x.fromStage,
                               x.fromMb, x.begin, x.end, x.bytes, x.recvBatch);
      }
      ++r;
    }
  }

  pipe::ModelOp model;
  const CostModel &cost;
  sched::ScheduleProblem problem;
  sched::Schedule schedule;
  sched::TransferPlan plan;
};

struct InsertP2P : conduit::impl::ConduitInsertP2PBase<InsertP2P> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Scheduled, "conduit-insert-p2p")))
        return signalPassFailure();
      llvm::Expected<CostModel> cost = buildCostModel(model);
      if (!cost) {
        model.emitOpError() << llvm::toString(cost.takeError());
        return signalPassFailure();
      }
      P2PInserter inserter(model, *cost);
      inserter.run();
      numTransfers += inserter.numTransfers();
      model.setPhase(pipe::Phase::Communicating);
    }
  }
};

} // namespace
