//===- SchedulingBench.cpp - the scheduling library without IR ------------===//
//
// Partition + placement + schedule for large pipelines, and the same with the verification
// the conduit-schedule pass runs. The headline case is P = 64, V = 8, M = 512 (524,288 compute
// entries); the other sizes show how the cost grows with P·V·M.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <benchmark/benchmark.h>

using namespace conduit::sched;

namespace {

enum Kind { BreadthFirst, DepthFirst };

/// One layer per stage plus embedding and head, with GPT-like relative costs.
PartitionProblem layerChain(int64_t stages) {
  PartitionProblem problem;
  problem.numStages = stages;
  problem.layerCosts.push_back(0.01);
  for (int64_t i = 0; i < stages; ++i)
    problem.layerCosts.push_back(1.0);
  problem.layerCosts.push_back(0.5);
  return problem;
}

void run(benchmark::State &state, bool verify) {
  const int64_t p = state.range(0), v = state.range(1), m = state.range(2);
  const Kind kind = static_cast<Kind>(state.range(3));
  int64_t entries = 0;
  for (auto _ : state) {
    Partition partition = llvm::cantFail(partitionMinMax(layerChain(p * v)));
    std::vector<int64_t> ranks = llvm::cantFail(placeStages(p * v, p, Placement::Loop));
    ScheduleProblem problem(p, std::move(ranks),
                            std::vector<std::vector<int64_t>>(p * v, equalBoundaries(m, 1)));
    Schedule schedule = llvm::cantFail(kind == BreadthFirst ? scheduleBreadthFirst(problem)
                                                            : scheduleDepthFirst(problem, 0));
    if (verify && verifySchedule(problem, schedule))
      state.SkipWithError("schedule does not verify");
    benchmark::DoNotOptimize(partition);
    entries = 0;
    for (const std::vector<Action> &rank : schedule.ranks)
      entries += static_cast<int64_t>(rank.size());
  }
  state.counters["entries"] = static_cast<double>(entries);
  state.counters["ns_per_entry"] = benchmark::Counter(
      static_cast<double>(entries),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void partitionAndSchedule(benchmark::State &state) { run(state, false); }
void partitionScheduleVerify(benchmark::State &state) { run(state, true); }

void sizes(benchmark::internal::Benchmark *b) {
  for (Kind kind : {BreadthFirst, DepthFirst}) {
    b->Args({64, 8, 512, kind}); // the headline case
    b->Args({64, 4, 256, kind}); // PyTorch's planner: about 56 ms for its compute order
    b->Args({32, 8, 256, kind});
    b->Args({16, 8, 128, kind});
    b->Args({8, 8, 64, kind});
  }
  b->ArgNames({"P", "V", "M", "dfs"})->Unit(benchmark::kMillisecond);
}

BENCHMARK(partitionAndSchedule)->Apply(sizes);
BENCHMARK(partitionScheduleVerify)->Apply(sizes);

/// The split-backward schedules at P = 64, V = 2, M = 512 (196,608 compute entries; the issue's
/// bound is 20 ms each), scheduled with per-sample costs as the pass does, then verified.
enum SplitKind { ZeroBubbleH1, InterleavedZeroBubble, ZeroBubbleV, DualPipeV, BreadthFirstSplit };

void zeroBubble(benchmark::State &state) {
  const int64_t p = state.range(0), v = state.range(1), m = state.range(2);
  const auto kind = static_cast<SplitKind>(state.range(3));
  const Placement placement =
      kind == ZeroBubbleV || kind == DualPipeV ? Placement::V : Placement::Loop;
  ScheduleProblem problem(p, llvm::cantFail(placeStages(p * v, p, placement)),
                          std::vector<std::vector<int64_t>>(p * v, equalBoundaries(m, 1)));
  ActionTimes times = ActionTimes::perSample(problem, 1, 1, 1);
  int64_t entries = 0;
  for (auto _ : state) {
    llvm::Expected<Schedule> schedule = [&]() -> llvm::Expected<Schedule> {
      switch (kind) {
      case ZeroBubbleH1:
        return scheduleZeroBubbleH1(problem, times);
      case InterleavedZeroBubble:
        return scheduleInterleavedZeroBubble(problem, 0, times);
      case ZeroBubbleV:
        return scheduleZeroBubbleV(problem, times);
      case DualPipeV:
        return scheduleDualPipeV(problem, times);
      case BreadthFirstSplit:
        return splitBackward(problem, llvm::cantFail(scheduleBreadthFirst(problem)), times);
      }
      return llvm::createStringError("unknown kind");
    }();
    if (!schedule) {
      state.SkipWithError(llvm::toString(schedule.takeError()).c_str());
      return;
    }
    if (state.range(4) && verifySchedule(problem, *schedule))
      state.SkipWithError("schedule does not verify");
    entries = 0;
    for (const std::vector<Action> &rank : schedule->ranks)
      entries += static_cast<int64_t>(rank.size());
    benchmark::DoNotOptimize(entries);
  }
  state.counters["entries"] = static_cast<double>(entries);
}

void splitSizes(benchmark::internal::Benchmark *b) {
  for (int64_t verify : {0, 1}) {
    b->Args({64, 1, 512, ZeroBubbleH1, verify});
    for (SplitKind kind : {InterleavedZeroBubble, ZeroBubbleV, DualPipeV, BreadthFirstSplit})
      b->Args({64, 2, 512, kind, verify});
  }
  b->ArgNames({"P", "V", "M", "kind", "verify"})->Unit(benchmark::kMillisecond);
}

BENCHMARK(zeroBubble)->Apply(splitSizes);

} // namespace

BENCHMARK_MAIN();
