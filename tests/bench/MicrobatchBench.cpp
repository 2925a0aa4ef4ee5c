//===- MicrobatchBench.cpp - evaluating micro-batch partitions ------------===//
//
// The step-time evaluator of the micro-batch search on populations of 10,000 random candidates
// for an 8-stage pipeline whose stages differ in speed, with launch overheads and transfer
// costs. Two populations: the 32-micro-batch problem (a batch of 32 samples; every gap between
// samples is a cut with probability 1/2, about 16 micro-batches per stage), and a finer one (64
// samples in micro-batches of 1 to 3, about 32 per stage). Only the scheduling library is
// linked: no IR.
//
//===----------------------------------------------------------------------===//

#include "scheduling/MicrobatchSearch.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace conduit::sched;

namespace {

constexpr int64_t kStages = 8;

StepTimeEvaluator makeEvaluator(PipelineSchedule schedule, int64_t batch) {
  PipelineCosts costs;
  const double perSample[kStages] = {1.0, 1.3, 0.8, 1.1, 1.0, 0.7, 1.2, 1.5}; // ms
  for (int64_t s = 0; s < kStages; ++s) {
    std::vector<double> f(batch + 1), b(batch + 1);
    for (int64_t n = 0; n <= batch; ++n) {
      f[n] = 2e-4 + 1e-3 * perSample[s] * static_cast<double>(n);
      b[n] = 2 * f[n];
    }
    costs.forward.push_back(f);
    costs.backward.push_back(b);
    costs.outputBytes.push_back(8 << 20);
  }
  costs.transfer = [](int64_t bytes, int32_t, int32_t) { return 1e-5 + bytes / 25e9; };
  costs.startGather = costs.reduce = costs.optimizer = std::vector<double>(kStages, 0.0);
  return StepTimeEvaluator(kStages, batch, schedule, std::move(costs));
}

std::vector<Partitions> population(size_t count, int64_t batch) {
  std::mt19937_64 random(3);
  std::vector<Partitions> out(count, Partitions(kStages));
  for (Partitions &p : out)
    for (std::vector<int64_t> &cut : p) {
      int64_t size = 1;
      for (int64_t sample = 1; sample < batch; ++sample) {
        // The 32-sample problem cuts each gap with probability 1/2; the finer one keeps
        // micro-batches of 1 to 3 samples.
        const bool split = batch == 32 ? random() % 2 == 0 : size >= 1 + int64_t(random() % 3);
        if (split) {
          cut.push_back(size);
          size = 0;
        }
        ++size;
      }
      cut.push_back(size);
    }
  return out;
}

void BM_Evaluate(benchmark::State &state, PipelineSchedule schedule) {
  const int64_t batch = state.range(1);
  StepTimeEvaluator evaluator = makeEvaluator(schedule, batch);
  const std::vector<Partitions> candidates = population(static_cast<size_t>(state.range(0)), batch);
  int64_t microbatches = 0;
  for (const Partitions &p : candidates)
    for (const std::vector<int64_t> &cut : p)
      microbatches += static_cast<int64_t>(cut.size());
  std::vector<double> times;
  for (auto _ : state) {
    evaluator.stepTimes(candidates, times);
    benchmark::DoNotOptimize(times.data());
  }
  state.counters["microbatches_per_stage"] =
      static_cast<double>(microbatches) / static_cast<double>(candidates.size() * kStages);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(candidates.size()));
}

} // namespace

// Arguments: candidates, samples per batch.
BENCHMARK_CAPTURE(BM_Evaluate, gpipe, PipelineSchedule::GPipe)
    ->Args({10000, 32})
    ->Args({10000, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Evaluate, one_f_one_b, PipelineSchedule::OneFOneB)
    ->Args({10000, 32})
    ->Args({10000, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
