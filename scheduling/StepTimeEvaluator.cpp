//===- StepTimeEvaluator.cpp - step time of per-stage micro-batch cuts ----===//

#include "scheduling/StepTimeEvaluator.h"

#include <algorithm>
#include <limits>
#include <thread>

using namespace conduit::sched;

namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
} // namespace

namespace {

/// One rank of the step being simulated: its compute stream and its point-to-point stream,
/// with the dependencies conduit-lower-to-plan would give them.
struct RankRun {
  std::vector<int64_t> recvDep;  ///< per action: the last receive of its input, or -1
  std::vector<int64_t> p2p;      ///< transfer indices in stream order
  std::vector<uint8_t> isSend;   ///< per p2p entry
  std::vector<int64_t> waitsFor; ///< per p2p entry: the action it waits for, or -1
  std::vector<int32_t> batch;    ///< per p2p entry
  std::vector<double> actionEnd;
  size_t computeNext = 0, p2pNext = 0, batchEnd = 0;
  double computeTime = 0, p2pTime = 0, posted = -1;
  double lastBackwardEnd = 0;
};

} // namespace

struct StepTimeEvaluator::Workspace {
  TransferPlanner planner;
  const TransferPlan *plan = nullptr;
  std::vector<RankRun> runs;
  std::vector<SlotItem> items;
  ReceiveSlotAssigner slots;
  std::vector<int64_t> lastRecv, work;
  std::vector<double> sendPosted, recvPosted, done, recvReady;
  std::vector<uint8_t> queued;
};

StepTimeEvaluator::StepTimeEvaluator(int64_t numStages, int64_t batch, PipelineSchedule schedule,
                                     PipelineCosts costs)
    : stages(numStages), batch(batch), kind(schedule), costs(std::move(costs)),
      work(std::make_shared<Workspace>()) {}

double StepTimeEvaluator::stepTime(const Partitions &sizes) {
  ++count;
  if (static_cast<int64_t>(sizes.size()) != stages)
    return kInfinity;
  std::vector<std::vector<int64_t>> bounds;
  bounds.reserve(stages);
  for (const std::vector<int64_t> &cut : sizes) {
    if (cut.empty() || std::any_of(cut.begin(), cut.end(), [](int64_t n) { return n < 1; }) ||
        std::accumulate(cut.begin(), cut.end(), int64_t(0)) != batch)
      return kInfinity;
    bounds.push_back(boundariesFromSizes(cut));
  }
  std::vector<int64_t> rankOf(stages);
  std::iota(rankOf.begin(), rankOf.end(), 0);
  ScheduleProblem problem(stages, rankOf, std::move(bounds));
  llvm::Expected<Schedule> schedule =
      kind == PipelineSchedule::GPipe ? scheduleGPipe(problem) : scheduleOneFOneB(problem);
  if (!schedule) {
    llvm::consumeError(schedule.takeError());
    return kInfinity;
  }
  ActionTimes times;
  times.forward.resize(stages);
  times.backward.resize(stages);
  for (int64_t s = 0; s < stages; ++s)
    for (int64_t n : sizes[s]) {
      times.forward[s].push_back(costs.forward[s][n]);
      times.backward[s].push_back(costs.backward[s][n]);
    }
  Timeline predicted = simulateCompute(problem, *schedule, times);
  work->plan =
      &work->planner.plan(problem, *schedule, predicted, costs.outputBytes, costs.transfer);
  return simulate(problem, *schedule, times);
}

void StepTimeEvaluator::stepTimes(const std::vector<Partitions> &candidates,
                                  std::vector<double> &out) {
  const size_t n = candidates.size();
  out.resize(n);
  // Candidates are independent: a population is split over the machine's cores, each with its
  // own evaluator (working memory is per evaluator). The figures do not depend on the split.
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n / 16);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i)
      out[i] = stepTime(candidates[i]);
    return;
  }
  std::vector<StepTimeEvaluator> helpers;
  for (size_t t = 1; t < threads; ++t)
    helpers.emplace_back(stages, batch, kind, costs);
  auto range = [&](size_t t, StepTimeEvaluator &evaluator) {
    for (size_t i = t * n / threads; i < (t + 1) * n / threads; ++i)
      out[i] = evaluator.stepTime(candidates[i]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(range, t, std::ref(helpers[t - 1]));
  range(0, *this);
  for (std::thread &thread : pool)
    thread.join();
  for (const StepTimeEvaluator &helper : helpers)
    count += helper.evaluations();
}

double StepTimeEvaluator::simulate(const ScheduleProblem &problem, const Schedule &schedule,
                                   const ActionTimes &times) {
  const TransferPlan &plan = *work->plan;
  const int64_t ranks = problem.numRanks();
  const size_t numTransfers = plan.transfers.size();
  std::vector<double> &sendPosted = work->sendPosted, &recvPosted = work->recvPosted,
                      &done = work->done, &recvReady = work->recvReady;
  sendPosted.assign(numTransfers, -1);
  recvPosted.assign(numTransfers, -1);
  done.assign(numTransfers, -1);
  recvReady.assign(numTransfers, -1);

  std::vector<RankRun> &runs = work->runs;
  runs.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    RankRun &run = runs[r];
    const std::vector<Action> &actions = schedule.ranks[r];
    // Consumers are keyed by (micro-batch, direction) of the rank's one stage.
    const int64_t stage = problem.localStages(r).front();
    const int64_t numKeys = 2 * problem.numMicrobatches(stage);
    run.actionEnd.assign(actions.size(), -1);
    run.recvDep.assign(actions.size(), -1);
    run.p2p.clear();
    run.isSend.clear();
    run.waitsFor.clear();
    run.batch.clear();
    const size_t transfers = plan.orders[r].size() - actions.size();
    run.p2p.reserve(transfers);
    run.isSend.reserve(transfers);
    run.waitsFor.reserve(transfers);
    run.batch.reserve(transfers);
    run.computeNext = run.p2pNext = run.batchEnd = 0;
    run.computeTime = run.p2pTime = run.lastBackwardEnd = 0;
    run.posted = -1;
    const std::vector<OrderEntry> &order = plan.orders[r];
    std::vector<SlotItem> &items = work->items;
    items.resize(order.size());
    std::vector<int64_t> &lastRecv = work->lastRecv;
    lastRecv.assign(numKeys, -1);
    for (size_t k = 0; k < order.size(); ++k) {
      const OrderEntry &e = order[k];
      if (e.action >= 0) {
        const Action &a = actions[e.action];
        const int64_t id = 2 * a.mb + (a.kind == ActionKind::Backward ? 1 : 0);
        items[k] = {SlotItem::Kind::Compute, id, 0, -1};
        run.recvDep[e.action] = lastRecv[id];
        continue;
      }
      const Transfer &x = plan.transfers[e.transfer];
      if (e.isSend) {
        items[k] = {SlotItem::Kind::OtherTransfer, -1, 0, x.sendBatch};
      } else {
        const int64_t id = 2 * x.toMb + (x.gradient ? 1 : 0);
        items[k] = {SlotItem::Kind::Receive, id, x.bytes, x.recvBatch};
        lastRecv[id] = e.transfer;
      }
    }
    const ReceiveSlots &slots = work->slots.assign(items, numKeys);
    if (slots.error)
      return kInfinity;
    for (size_t k = 0; k < order.size(); ++k) {
      const OrderEntry &e = order[k];
      if (e.transfer < 0)
        continue;
      const Transfer &x = plan.transfers[e.transfer];
      run.p2p.push_back(e.transfer);
      run.isSend.push_back(e.isSend);
      run.batch.push_back(e.isSend ? x.sendBatch : x.recvBatch);
      // A send waits for its producer; a receive into a reused slot for the slot's reader.
      const int64_t previous = slots.previousConsumer[k];
      run.waitsFor.push_back(e.isSend ? x.producerIndex
                                      : (previous >= 0 ? order[previous].action : -1));
    }
  }

  // A queue of ranks to advance: every rank once, then each rank a transfer wakes.
  std::vector<int64_t> &queue = work->work;
  std::vector<uint8_t> &queued = work->queued;
  queue.assign(ranks, 0);
  for (int64_t r = 0; r < ranks; ++r)
    queue[r] = r;
  queued.assign(ranks, 1);
  size_t head = 0;
  auto wake = [&](int64_t r) {
    if (!queued[r]) {
      queued[r] = 1;
      queue.push_back(r);
    }
  };

  while (head < queue.size()) {
    const int64_t r = queue[head++];
    queued[r] = 0;
    RankRun &run = runs[r];
    const std::vector<Action> &actions = schedule.ranks[r];
    bool moved = true;
    while (moved) {
      moved = false;
      // Compute: each action after its input's receive and its parameters' all-gather.
      while (run.computeNext < actions.size()) {
        const size_t i = run.computeNext;
        const int64_t dep = run.recvDep[i];
        if (dep >= 0 && recvReady[dep] < 0)
          break;
        const Action &a = actions[i];
        double start = run.computeTime;
        if (dep >= 0)
          start = std::max(start, recvReady[dep]);
        if (costs.dataParallel)
          start = std::max(start, costs.startGather[a.stage]);
        const bool backward = a.kind == ActionKind::Backward;
        const double end =
            start + (backward ? times.backward[a.stage][a.mb] : times.forward[a.stage][a.mb]);
        run.actionEnd[i] = run.computeTime = end;
        if (backward)
          run.lastBackwardEnd = end;
        ++run.computeNext;
        moved = true;
      }
      if (run.p2pNext >= run.p2p.size())
        continue;
      // Point-to-point: the transfers of a batch are posted together once every member's
      // dependency is met, and the batch ends when all of them have.
      if (run.posted < 0) {
        size_t last = run.p2pNext + 1;
        if (run.batch[run.p2pNext] >= 0)
          while (last < run.p2p.size() && run.batch[last] == run.batch[run.p2pNext])
            ++last;
        double post = run.p2pTime;
        bool ready = true;
        for (size_t k = run.p2pNext; k < last && ready; ++k) {
          const int64_t dep = run.waitsFor[k];
          if (dep < 0)
            continue;
          if (run.actionEnd[dep] < 0)
            ready = false;
          else
            post = std::max(post, run.actionEnd[dep]);
        }
        if (!ready)
          continue;
        run.posted = post;
        run.batchEnd = last;
        moved = true;
        for (size_t k = run.p2pNext; k < last; ++k) {
          const int64_t t = run.p2p[k];
          const Transfer &x = plan.transfers[t];
          (run.isSend[k] ? sendPosted : recvPosted)[t] = post;
          const double other = run.isSend[k] ? recvPosted[t] : sendPosted[t];
          if (other >= 0) {
            done[t] = std::max(post, other) + x.seconds;
            wake(run.isSend[k] ? x.toRank : x.fromRank);
          }
        }
      }
      double end = run.posted;
      bool complete = true;
      for (size_t k = run.p2pNext; k < run.batchEnd; ++k) {
        const int64_t t = run.p2p[k];
        if (done[t] < 0) {
          complete = false;
          break;
        }
        end = std::max(end, done[t]);
      }
      if (!complete)
        continue;
      for (size_t k = run.p2pNext; k < run.batchEnd; ++k)
        if (!run.isSend[k])
          recvReady[run.p2p[k]] = end; // the batch's signal comes after its last member
      run.p2pTime = end;
      run.p2pNext = run.batchEnd;
      run.posted = -1;
      moved = true;
    }
  }

  double makespan = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    const RankRun &run = runs[r];
    if (run.computeNext < schedule.ranks[r].size() || run.p2pNext < run.p2p.size())
      return kInfinity; // cannot happen for a schedule that verifies
    const int64_t s = problem.localStages(r).front();
    double rankEnd = std::max(run.computeTime, run.p2pTime);
    double optimizerStart = run.computeTime;
    if (costs.dataParallel) {
      const double reduced = std::max(costs.startGather[s], run.lastBackwardEnd) + costs.reduce[s];
      optimizerStart = std::max(optimizerStart, reduced);
      const double updated = optimizerStart + costs.optimizer[s];
      rankEnd = std::max({rankEnd, reduced, updated});
    } else {
      rankEnd = std::max(rankEnd, optimizerStart + costs.optimizer[s]);
    }
    makespan = std::max(makespan, rankEnd);
  }
  return makespan;
}
