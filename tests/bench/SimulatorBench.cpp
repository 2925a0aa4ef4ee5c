//===- SimulatorBench.cpp - simulating and analysing a large plan ---------===//
//
// The discrete-event simulator (with its verification) and the report analysis on plans from
// the real pipeline, up to about a million instructions: the 256-layer job of
// testdata/jobs/bench-p64-v4-m256.json (P = 64, V = 4, D = 2, breadth-first, full sharding)
// with M set per case. Plans are compiled once, outside the timed loop.
//
//===----------------------------------------------------------------------===//

#include "analysis/Report.h"
#include "passes/CostModelBuilder.h"
#include "passes/PassUtils.h"
#include "passes/PlanExport.h"
#include "tests/unit/CompileToModule.h"

#include <benchmark/benchmark.h>

#include <map>

using namespace conduit;

namespace {

/// A compiled benchmark plan and the cost model its simulation uses.
struct Case {
  VerifiedPlan verified;
  std::unique_ptr<CostModel> cost;
  std::vector<int64_t> rankParams; ///< each stage's parameters on one tensor rank
};

/// The case of the benchmark job with M micro-batches (compiled once per M).
const Case &planWith(int64_t m) {
  static std::map<int64_t, Case> plans;
  if (auto it = plans.find(m); it != plans.end())
    return it->second;
  Diagnostics diag("bench-p64-v4-m256.json");
  std::optional<Job> job = readJobFile(
      CONDUIT_TESTDATA "/jobs/bench-p64-v4-m256.json", diag,
      {"parallelism.microbatches=" + std::to_string(m), "cluster.memory_bytes=1125899906842624"});
  if (!job)
    llvm::report_fatal_error(llvm::StringRef(diag.getError()->str()));
  CompiledModule compiled = compileToModule(*job);
  if (!compiled.ok || !compiled.verified)
    llvm::report_fatal_error(
        llvm::StringRef("the benchmark job does not compile: " + compiled.errors));
  plan::ProgramOp program = *compiled.module->getOps<plan::ProgramOp>().begin();
  auto cost = std::make_unique<CostModel>(llvm::cantFail(buildCostModel(program)));
  return plans
      .emplace(m, Case{std::move(*compiled.verified), std::move(cost), rankStageParams(program)})
      .first->second;
}

int64_t instructions(const runtime::Plan &plan) {
  int64_t n = 0;
  for (const runtime::RankProgram &rank : plan.ranks)
    n += static_cast<int64_t>(rank.instructions.size());
  return n;
}

void BM_Simulate(benchmark::State &state) {
  const Case &c = planWith(state.range(0));
  const VerifiedPlan &verified = c.verified;
  PlanCosts costs = PlanCosts::fromCostModel(verified.plan, *c.cost, c.rankParams);
  for (auto _ : state) {
    SimulationResult result = simulatePlan(verified.plan, costs);
    if (result.error)
      state.SkipWithError(result.error->message.c_str());
    benchmark::DoNotOptimize(result.makespan);
  }
  state.counters["instructions"] = static_cast<double>(instructions(verified.plan));
  state.SetItemsProcessed(state.iterations() * instructions(verified.plan));
}

void BM_Report(benchmark::State &state) {
  const VerifiedPlan &verified = planWith(state.range(0)).verified;
  for (auto _ : state) {
    PlanReport report = analyzeStep(verified.plan, verified.simulation);
    benchmark::DoNotOptimize(report.stepTimeS);
  }
  state.counters["instructions"] = static_cast<double>(instructions(verified.plan));
  state.SetItemsProcessed(state.iterations() * instructions(verified.plan));
}

} // namespace

// M = 284 gives 1,018,941 instructions; the smaller cases show the growth.
BENCHMARK(BM_Simulate)->Arg(32)->Arg(71)->Arg(142)->Arg(284)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Report)->Arg(32)->Arg(284)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
