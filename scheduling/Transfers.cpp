//===- Transfers.cpp - point-to-point transfers and receive slots --------===//

#include "scheduling/Transfers.h"

#include <algorithm>
#include <array>
#include <limits>

using namespace conduit::sched;

namespace {

/// The global ordering key of a rank's entries: compute at its predicted start, a transfer when
/// its data exists; then a dependency order; then compute before the transfers of its moment.
/// Transfers with the same producer differ only in their consumer micro-batch, whose order is
/// also the order of their samples.
struct Key {
  double time;
  int64_t sequence;
  uint64_t tie; ///< (is a transfer) << 63 | consumer micro-batch

  bool operator<(const Key &other) const {
    if (time != other.time)
      return time < other.time;
    if (sequence != other.sequence)
      return sequence < other.sequence;
    return tie < other.tie;
  }
};

using Place = std::pair<int32_t, int64_t>; ///< (rank, index in its schedule list)

class Planner {
public:
  Planner(const ScheduleProblem &problem, const Schedule &schedule, const Timeline &predicted,
          const std::vector<int64_t> &outputBytes, const TransferTime &transferTime,
          TransferPlan &plan, TransferPlanner::Scratch &scratch)
      : problem(problem), schedule(schedule), predicted(predicted), outputBytes(outputBytes),
        transferTime(transferTime), plan(plan), forwardAt(scratch.forwardAt),
        backwardAt(scratch.backwardAt), outgoing(scratch.outgoing),
        outgoingIndices(scratch.outgoingIndices), incoming(scratch.incoming), p2p(scratch.p2p),
        position(scratch.position), nextBatch(scratch.nextBatch) {}

  void run() {
    indexActions();
    collect();
    order();
    batchExchanges();
    batchPairs();
  }

private:
  void indexActions() {
    forwardAt.resize(problem.numStages());
    backwardAt.resize(problem.numStages());
    for (int64_t s = 0; s < problem.numStages(); ++s) {
      forwardAt[s].resize(problem.numMicrobatches(s));
      backwardAt[s].resize(problem.numMicrobatches(s));
    }
    for (int32_t r = 0; r < static_cast<int32_t>(schedule.ranks.size()); ++r)
      for (int64_t i = 0; i < static_cast<int64_t>(schedule.ranks[r].size()); ++i) {
        const Action &a = schedule.ranks[r][i];
        if (a.kind == ActionKind::Forward)
          forwardAt[a.stage][a.mb] = {r, i};
        else if (producesInputGradient(a.kind))
          backwardAt[a.stage][a.mb] = {r, i};
      }
  }

  void add(bool gradient, int32_t fromStage, int32_t fromMb, int32_t toStage, int32_t toMb,
           Place producer, Place consumer, int64_t bytesPerSample) {
    Transfer x;
    x.gradient = gradient;
    x.fromStage = fromStage;
    x.fromMb = fromMb;
    x.toStage = toStage;
    x.toMb = toMb;
    x.fromRank = producer.first;
    x.toRank = consumer.first;
    x.begin = std::max(problem.begin(fromStage, fromMb), problem.begin(toStage, toMb));
    x.end = std::min(problem.end(fromStage, fromMb), problem.end(toStage, toMb));
    x.bytes = (x.end - x.begin) * bytesPerSample;
    x.seconds = transferTime(x.bytes, x.fromRank, x.toRank);
    x.producerIndex = producer.second;
    x.consumerIndex = consumer.second;
    x.time = predicted.available[producer.first][producer.second];
    x.sequence = predicted.sequence[producer.first][producer.second];
    plan.transfers.push_back(x);
  }

  /// Every rank's outgoing transfers in the order of its actions (the order of their keys),
  /// each action's in consumer order.
  void collect() {
    plan.transfers.clear();
    const int64_t ranks = problem.numRanks();
    outgoing.assign(ranks + 1, 0);
    for (int32_t r = 0; r < ranks; ++r) {
      outgoing[r] = static_cast<int64_t>(plan.transfers.size());
      for (int64_t i = 0; i < static_cast<int64_t>(schedule.ranks[r].size()); ++i) {
        const Action &a = schedule.ranks[r][i];
        if (a.kind == ActionKind::BackwardWeight)
          continue; // weight gradients stay on their rank
        const bool forward = a.kind == ActionKind::Forward;
        const int64_t to = a.stage + (forward ? 1 : -1);
        if (to < 0 || to >= problem.numStages() || problem.rankOfStage(to) == r)
          continue; // the data, or the loss; or stages on one rank, which share memory
        const int64_t boundary = forward ? a.stage : to; // the stage whose output moves
        auto [first, last] = problem.overlapping(a.stage, a.mb, to);
        for (int32_t m = static_cast<int32_t>(first); m < last; ++m)
          add(!forward, a.stage, a.mb, static_cast<int32_t>(to), m, {r, i},
              (forward ? forwardAt : backwardAt)[to][m], outputBytes[boundary]);
      }
    }
    outgoing[ranks] = static_cast<int64_t>(plan.transfers.size());
  }

  /// Each rank's entries by key: a merge of its actions, its outgoing transfers and, per
  /// sender, its incoming ones, each already in key order.
  void order() {
    const int64_t ranks = problem.numRanks();
    incoming.resize(ranks);
    for (std::vector<std::vector<int64_t>> &bySender : incoming)
      for (std::vector<int64_t> &list : bySender)
        list.clear();
    for (int64_t t = 0; t < static_cast<int64_t>(plan.transfers.size()); ++t) {
      const Transfer &x = plan.transfers[t];
      std::vector<std::vector<int64_t>> &bySender = incoming[x.toRank];
      if (bySender.size() <= static_cast<size_t>(x.fromRank))
        bySender.resize(x.fromRank + 1);
      bySender[x.fromRank].push_back(t);
    }
    plan.orders.resize(ranks);
    struct Head {
      const int64_t *next, *end;
      bool isSend;
      Key key; ///< of *next
    };
    std::vector<Head> heads;
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<OrderEntry> &out = plan.orders[r];
      out.clear();
      heads.clear();
      // Outgoing transfers are the contiguous range [outgoing[r], outgoing[r + 1]).
      outgoingIndices.resize(outgoing[r + 1] - outgoing[r]);
      for (int64_t t = outgoing[r]; t < outgoing[r + 1]; ++t)
        outgoingIndices[t - outgoing[r]] = t;
      auto addHead = [&](const std::vector<int64_t> &list, bool isSend) {
        if (!list.empty())
          heads.push_back({list.data(), list.data() + list.size(), isSend, transferKey(list[0])});
      };
      addHead(outgoingIndices, true);
      for (const std::vector<int64_t> &list : incoming[r])
        addHead(list, false);
      const std::vector<Action> &actions = schedule.ranks[r];
      out.reserve(actions.size() + outgoingIndices.size() + 16);
      size_t i = 0;
      while (true) {
        // The smallest head: the next action, or the next transfer of some list.
        int best = -1;
        Key bestKey{};
        if (i < actions.size()) {
          bestKey = Key{predicted.start[r][i], predicted.sequence[r][i], 0};
          best = static_cast<int>(heads.size());
        }
        for (size_t h = 0; h < heads.size(); ++h)
          if (heads[h].next != heads[h].end && (best < 0 || heads[h].key < bestKey)) {
            bestKey = heads[h].key;
            best = static_cast<int>(h);
          }
        if (best < 0)
          break;
        if (best == static_cast<int>(heads.size())) {
          out.push_back(OrderEntry{static_cast<int64_t>(i++), -1, false});
          continue;
        }
        Head &head = heads[best];
        out.push_back(OrderEntry{-1, *head.next, head.isSend});
        if (++head.next != head.end)
          head.key = transferKey(*head.next);
      }
    }
  }

  Key transferKey(int64_t t) const {
    const Transfer &x = plan.transfers[t];
    return Key{x.time, x.sequence, (uint64_t(1) << 63) | static_cast<uint64_t>(x.toMb)};
  }

  void batchExchanges() {
    const int64_t ranks = problem.numRanks();
    // Each rank's transfers in order, and where each transfer sits in that list.
    p2p.resize(ranks);
    for (std::vector<const OrderEntry *> &list : p2p)
      list.clear();
    position.resize(plan.transfers.size());
    for (int64_t r = 0; r < ranks; ++r)
      for (const OrderEntry &e : plan.orders[r])
        if (e.transfer >= 0) {
          position[e.transfer][e.isSend] = static_cast<int64_t>(p2p[r].size());
          p2p[r].push_back(&e);
        }
    nextBatch.assign(ranks, 0);
    for (int64_t r = 0; r < ranks; ++r) {
      for (size_t k = 0; k + 1 < p2p[r].size(); ++k) {
        const OrderEntry &a = *p2p[r][k], &b = *p2p[r][k + 1];
        if (a.isSend == b.isSend)
          continue;
        Transfer &x = plan.transfers[a.transfer], &y = plan.transfers[b.transfer];
        Transfer &sent = a.isSend ? x : y, &received = a.isSend ? y : x;
        const int32_t peer = sent.toRank;
        if (received.fromRank != peer || peer < r || sent.sendBatch >= 0 || received.recvBatch >= 0)
          continue;
        // Adjacent on the peer too, in the same order.
        const int64_t pa = position[a.transfer][!a.isSend], pb = position[b.transfer][!b.isSend];
        if (pb != pa + 1)
          continue;
        // No dependency runs through the batch on either side.
        if (sent.producerIndex >= received.consumerIndex ||
            received.producerIndex >= sent.consumerIndex)
          continue;
        const double overlap = std::max(x.seconds, y.seconds);
        if (std::abs(x.time - y.time) >= overlap)
          continue;
        sent.sendBatch = nextBatch[r];
        received.recvBatch = nextBatch[r]++;
        sent.recvBatch = nextBatch[peer];
        received.sendBatch = nextBatch[peer]++;
      }
    }
  }

  /// An overlapped pair issues the receives that feed it together, right before it, and the
  /// sends it produces together, right after it: the runs of such transfers adjacent to the
  /// pair in the rank's order (and not in a batch already) become one batch each.
  void batchPairs() {
    for (int32_t r = 0; r < static_cast<int32_t>(schedule.pairs.size()); ++r) {
      const std::vector<OrderEntry> &order = plan.orders[r];
      for (int32_t first : schedule.pairs[r]) {
        auto member = [&](int64_t action) { return action == first || action == first + 1; };
        auto at = [&](int64_t action) {
          return std::find_if(order.begin(), order.end(),
                              [&](const OrderEntry &e) { return e.action == action; }) -
                 order.begin();
        };
        // Receives feeding the pair, just before its first computation.
        std::vector<int64_t> run;
        for (int64_t k = at(first) - 1; k >= 0; --k) {
          const OrderEntry &e = order[k];
          if (e.transfer < 0 || e.isSend || plan.transfers[e.transfer].recvBatch >= 0 ||
              !member(plan.transfers[e.transfer].consumerIndex))
            break;
          run.push_back(e.transfer);
        }
        if (run.size() >= 2) {
          for (int64_t t : run)
            plan.transfers[t].recvBatch = nextBatch[r];
          ++nextBatch[r];
        }
        // Sends the pair produced, just after its second.
        run.clear();
        for (size_t k = at(first + 1) + 1; k < order.size(); ++k) {
          const OrderEntry &e = order[k];
          if (e.transfer < 0 || !e.isSend || plan.transfers[e.transfer].sendBatch >= 0 ||
              !member(plan.transfers[e.transfer].producerIndex))
            break;
          run.push_back(e.transfer);
        }
        if (run.size() >= 2) {
          for (int64_t t : run)
            plan.transfers[t].sendBatch = nextBatch[r];
          ++nextBatch[r];
        }
      }
    }
  }

  const ScheduleProblem &problem;
  const Schedule &schedule;
  const Timeline &predicted;
  const std::vector<int64_t> &outputBytes;
  const TransferTime &transferTime;
  TransferPlan &plan;
  std::vector<std::vector<Place>> &forwardAt, &backwardAt;
  std::vector<int64_t> &outgoing; ///< per rank: its first outgoing transfer
  std::vector<int64_t> &outgoingIndices;
  std::vector<std::vector<std::vector<int64_t>>> &incoming; ///< per rank, per sender
  std::vector<std::vector<const OrderEntry *>> &p2p;        ///< per rank
  std::vector<std::array<int64_t, 2>> &position;            ///< per transfer
  std::vector<int32_t> &nextBatch;                          ///< per rank
};

} // namespace

const TransferPlan &TransferPlanner::plan(const ScheduleProblem &problem, const Schedule &schedule,
                                          const Timeline &predicted,
                                          const std::vector<int64_t> &outputBytes,
                                          const TransferTime &transferTime) {
  Planner(problem, schedule, predicted, outputBytes, transferTime, result, scratch).run();
  return result;
}

TransferPlan conduit::sched::planTransfers(const ScheduleProblem &problem, const Schedule &schedule,
                                           const Timeline &predicted,
                                           const std::vector<int64_t> &outputBytes,
                                           const TransferTime &transferTime) {
  TransferPlan plan;
  TransferPlanner::Scratch scratch;
  Planner(problem, schedule, predicted, outputBytes, transferTime, plan, scratch).run();
  return plan;
}

ReceiveSlots conduit::sched::assignReceiveSlots(const std::vector<SlotItem> &items,
                                                int64_t numKeys) {
  return ReceiveSlotAssigner().assign(items, numKeys);
}

const ReceiveSlots &ReceiveSlotAssigner::assign(const std::vector<SlotItem> &items,
                                                int64_t numKeys) {
  using Kind = SlotItem::Kind;
  const int64_t n = static_cast<int64_t>(items.size());
  result.slotOf.assign(n, -1);
  result.previousConsumer.assign(n, -1);
  result.slotBytes.clear();
  result.error.reset();
  // For each item: the last compute before the first transfer of its batch.
  runningAt.resize(n);
  for (int64_t i = 0, first = -1, lastCompute = -1, computeBeforeFirst = -1; i < n; ++i) {
    const SlotItem &x = items[i];
    if (x.kind == Kind::Compute)
      lastCompute = i;
    runningAt[i] = lastCompute;
    if (x.kind != Kind::Receive && x.kind != Kind::OtherTransfer)
      continue;
    if (first < 0 || x.batch < 0 || x.batch != items[first].batch) {
      first = i;
      computeBeforeFirst = lastCompute;
    }
    runningAt[i] = computeBeforeFirst;
  }
  need.assign(numKeys, 0);
  consumerAt.assign(numKeys, -1);
  slotFor.assign(numKeys, -1);
  for (int64_t i = 0; i < n; ++i) {
    const SlotItem &x = items[i];
    if (x.kind == Kind::Receive)
      need[x.key] += x.bytes;
    else if (x.kind == Kind::Compute && x.key >= 0)
      consumerAt[x.key] = i;
  }
  lastConsumer.clear(); // per slot
  std::vector<int64_t> &slots = result.slotBytes;
  for (int64_t i = 0; i < n; ++i) {
    const SlotItem &x = items[i];
    if (x.kind == Kind::Compute) {
      if (x.key >= 0)
        result.slotOf[i] = static_cast<int32_t>(slotFor[x.key]);
      continue;
    }
    if (x.kind != Kind::Receive)
      continue;
    if (slotFor[x.key] < 0) {
      const int64_t consumer = consumerAt[x.key];
      if (consumer < 0) {
        result.error = {i, "receives data that no compute on this rank consumes"};
        return result;
      }
      if (consumer < i) {
        result.error = {i, "receives data for a compute that runs before it"};
        return result;
      }
      // A free slot (its last reader comes before the compute running now): the smallest
      // that fits, else the largest (which grows); the first of equals.
      const int64_t bytes = need[x.key];
      int64_t best = -1;
      for (int64_t k = 0; k < static_cast<int64_t>(slots.size()); ++k) {
        if (lastConsumer[k] >= runningAt[i])
          continue;
        if (best < 0) {
          best = k;
          continue;
        }
        const bool fits = slots[k] >= bytes, bestFits = slots[best] >= bytes;
        if (fits != bestFits ? fits : (fits ? slots[k] < slots[best] : slots[k] > slots[best]))
          best = k;
      }
      if (best < 0) {
        best = static_cast<int64_t>(slots.size());
        slots.push_back(0);
        lastConsumer.push_back(-1);
      }
      slots[best] = std::max(slots[best], bytes);
      result.previousConsumer[i] = lastConsumer[best];
      lastConsumer[best] = consumer;
      slotFor[x.key] = best;
    }
    result.slotOf[i] = static_cast<int32_t>(slotFor[x.key]);
  }
  return result;
}
