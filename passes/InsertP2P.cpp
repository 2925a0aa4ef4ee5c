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
//===----------------------------------------------------------------------===//

#include "compiler/CostModel.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <algorithm>
#include <tuple>

namespace conduit {
#define GEN_PASS_DEF_CONDUITINSERTP2P
#include "passes/Passes.h.inc"
} // namespace conduit

using namespace conduit;
using namespace mlir;

namespace {

struct Transfer {
  pipe::TransferKind kind;
  int32_t fromStage, fromMb, toStage, toMb;
  int32_t fromRank, toRank;
  int64_t begin, end, bytes;
  // Position of the producer and consumer in their rank's compute order.
  int64_t producerIndex, consumerIndex;
  // The ordering key.
  double time;
  int64_t sequence;
  int32_t sendBatch = -1, recvBatch = -1;

  auto key() const {
    return std::make_tuple(time, sequence, 1, static_cast<int>(kind), toStage, toMb, begin);
  }
};

/// One entry of a rank's new order: a compute op, or one side of a transfer.
struct Entry {
  std::tuple<double, int64_t, int, int, int32_t, int32_t, int64_t> key;
  Operation *compute = nullptr;
  int64_t transfer = -1;
  bool isSend = false;
};

class P2PInserter {
public:
  P2PInserter(pipe::ModelOp model, const CostModel &cost)
      : model(model), cost(cost), problem(buildScheduleProblem(model)),
        schedule(readSchedule(model)) {}

  void run() {
    timeline = sched::simulateCompute(problem, schedule,
                                      actionTimes(cost, model, problem));
    indexActions();
    collectTransfers();
    std::vector<std::vector<Entry>> orders = buildOrders();
    batchExchanges(orders);
    rewrite(orders);
  }

  int64_t numTransfers() const { return static_cast<int64_t>(transfers.size()); }

private:
  struct Place {
    int32_t rank;
    int64_t index;
  };

  /// Where each forward and backward sits in its rank's order.
  void indexActions() {
    forwardAt.resize(problem.numStages());
    backwardAt.resize(problem.numStages());
    for (int64_t s = 0; s < problem.numStages(); ++s) {
      forwardAt[s].resize(problem.numMicrobatches(s));
      backwardAt[s].resize(problem.numMicrobatches(s));
    }
    for (int32_t r = 0; r < static_cast<int32_t>(schedule.ranks.size()); ++r)
      for (int64_t i = 0; i < static_cast<int64_t>(schedule.ranks[r].size()); ++i) {
        const sched::Action &a = schedule.ranks[r][i];
        (a.kind == sched::ActionKind::Forward ? forwardAt : backwardAt)[a.stage][a.mb] = {r, i};
      }
  }

  void addTransfer(pipe::TransferKind kind, int32_t fromStage, int32_t fromMb, int32_t toStage,
                   int32_t toMb, Place producer, Place consumer, int64_t bytesPerSample) {
    int64_t begin = std::max(problem.begin(fromStage, fromMb), problem.begin(toStage, toMb));
    int64_t end = std::min(problem.end(fromStage, fromMb), problem.end(toStage, toMb));
    transfers.push_back({kind, fromStage, fromMb, toStage, toMb, producer.rank, consumer.rank,
                         begin, end, (end - begin) * bytesPerSample, producer.index,
                         consumer.index, timeline.finish[producer.rank][producer.index],
                         timeline.sequence[producer.rank][producer.index]});
  }

  void collectTransfers() {
    std::vector<int64_t> outputBytes = stageOutputBytes(model);
    for (int32_t s = 0; s + 1 < problem.numStages(); ++s) {
      if (problem.rankOfStage(s) == problem.rankOfStage(s + 1))
        continue; // stages on one rank share memory
      for (int32_t m = 0; m < problem.numMicrobatches(s + 1); ++m) {
        auto [first, last] = problem.overlapping(s + 1, m, s);
        for (int32_t i = static_cast<int32_t>(first); i < last; ++i)
          addTransfer(pipe::TransferKind::Activation, s, i, s + 1, m, forwardAt[s][i],
                      forwardAt[s + 1][m], outputBytes[s]);
      }
      for (int32_t i = 0; i < problem.numMicrobatches(s); ++i) {
        auto [first, last] = problem.overlapping(s, i, s + 1);
        for (int32_t m = static_cast<int32_t>(first); m < last; ++m)
          addTransfer(pipe::TransferKind::Gradient, s + 1, m, s, i, backwardAt[s + 1][m],
                      backwardAt[s][i], outputBytes[s]);
      }
    }
  }

  std::vector<std::vector<Entry>> buildOrders() {
    std::vector<std::vector<Entry>> orders(problem.numRanks());
    int32_t r = 0;
    for (pipe::RankOp rank : model.getRanks()) {
      int64_t i = 0;
      for (Operation &op : rank.getBody().front()) {
        orders[r].push_back({std::make_tuple(timeline.start[r][i], timeline.sequence[r][i], 0, 0,
                                             0, 0, int64_t(0)),
                             &op, -1, false});
        ++i;
      }
      ++r;
    }
    for (int64_t t = 0; t < numTransfers(); ++t) {
      const Transfer &x = transfers[t];
      orders[x.fromRank].push_back({x.key(), nullptr, t, true});
      orders[x.toRank].push_back({x.key(), nullptr, t, false});
    }
    for (std::vector<Entry> &order : orders)
      std::sort(order.begin(), order.end(),
                [](const Entry &a, const Entry &b) { return a.key < b.key; });
    return orders;
  }

  /// Marks an adjacent send and receive between the same two ranks as one batch on both sides
  /// when they would overlap in time and batching cannot delay a dependency: on each rank the
  /// send's producer must come before the receive's consumer.
  void batchExchanges(const std::vector<std::vector<Entry>> &orders) {
    const int64_t ranks = problem.numRanks();
    // Each rank's transfers in order, and where each transfer sits in that list.
    std::vector<std::vector<const Entry *>> p2p(ranks);
    std::vector<std::array<int64_t, 2>> position(transfers.size());
    for (int64_t r = 0; r < ranks; ++r)
      for (const Entry &e : orders[r])
        if (e.transfer >= 0) {
          position[e.transfer][e.isSend] = static_cast<int64_t>(p2p[r].size());
          p2p[r].push_back(&e);
        }
    std::vector<int32_t> nextBatch(ranks, 0);
    for (int64_t r = 0; r < ranks; ++r) {
      for (size_t k = 0; k + 1 < p2p[r].size(); ++k) {
        const Entry &a = *p2p[r][k], &b = *p2p[r][k + 1];
        if (a.isSend == b.isSend)
          continue;
        Transfer &x = transfers[a.transfer], &y = transfers[b.transfer];
        Transfer &sent = a.isSend ? x : y, &received = a.isSend ? y : x;
        int32_t peer = sent.toRank;
        if (received.fromRank != peer || peer < r || sent.sendBatch >= 0 ||
            received.recvBatch >= 0)
          continue;
        // Adjacent on the peer too, in the same order.
        int64_t pa = position[a.transfer][!a.isSend], pb = position[b.transfer][!b.isSend];
        if (pb != pa + 1)
          continue;
        // No dependency runs through the batch on either side.
        if (sent.producerIndex >= received.consumerIndex ||
            received.producerIndex >= sent.consumerIndex)
          continue;
        Link link = cost.pipelineLink(r, peer);
        double overlap = std::max(cost.transferTime(x.bytes, link), cost.transferTime(y.bytes, link));
        if (std::abs(x.time - y.time) >= overlap)
          continue;
        sent.sendBatch = nextBatch[r];
        received.recvBatch = nextBatch[r]++;
        sent.recvBatch = nextBatch[peer];
        received.sendBatch = nextBatch[peer]++;
      }
    }
  }

  void rewrite(const std::vector<std::vector<Entry>> &orders) {
    int32_t r = 0;
    for (pipe::RankOp rank : model.getRanks()) {
      Block &body = rank.getBody().front();
      OpBuilder builder = OpBuilder::atBlockEnd(&body);
      Location loc = rank.getLoc();
      for (const Entry &e : orders[r]) {
        if (e.compute) {
          e.compute->moveBefore(&body, body.end());
          continue;
        }
        const Transfer &x = transfers[e.transfer];
        if (e.isSend)
          pipe::SendOp::create(builder, loc, x.kind, x.fromStage, x.fromMb, x.toRank, x.toStage,
                               x.toMb, x.begin, x.end, x.bytes, x.sendBatch);
        else
          pipe::RecvOp::create(builder, loc, x.kind, x.toStage, x.toMb, x.fromRank, x.fromStage,
                               x.fromMb, x.begin, x.end, x.bytes, x.recvBatch);
      }
      ++r;
    }
  }

  pipe::ModelOp model;
  const CostModel &cost;
  sched::ScheduleProblem problem;
  sched::Schedule schedule;
  sched::Timeline timeline;
  std::vector<std::vector<Place>> forwardAt, backwardAt;
  std::vector<Transfer> transfers;
};

struct InsertP2P : conduit::impl::ConduitInsertP2PBase<InsertP2P> {
  void runOnOperation() override {
    for (pipe::ModelOp model : getOperation().getOps<pipe::ModelOp>()) {
      if (failed(requirePhase(model, pipe::Phase::Scheduled, "conduit-insert-p2p")))
        return signalPassFailure();
      llvm::Expected<CostModel> cost = CostModel::build(model);
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
