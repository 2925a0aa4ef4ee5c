//===- ExecutorBench.cpp - the executor's own cost per instruction --------===//
//
// Runs real rank programs with a backend whose compute and communication do nothing (work
// completes on its first poll), so that what is timed is the executor: stream bookkeeping,
// events, batches and polling. Plans come from the real pipeline: the 52B breadth-first job
// (P = 8, D = 64, V = 8, M = 64) and the same job with depth-first.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"
#include "tests/unit/CompileToModule.h"

#include <benchmark/benchmark.h>

#include <map>

using namespace conduit;
using namespace conduit::runtime;

namespace {

const Plan &planOf(const std::string &schedule) {
  static std::map<std::string, Plan> plans;
  if (auto it = plans.find(schedule); it != plans.end())
    return it->second;
  Diagnostics diag("gpt-52b-bfs-512gpu.json");
  std::optional<Job> job = readJobFile(CONDUIT_TESTDATA "/jobs/gpt-52b-bfs-512gpu.json", diag,
                                       {"parallelism.schedule=" + schedule});
  if (!job)
    llvm::report_fatal_error(llvm::StringRef(diag.getError()->str()));
  CompiledModule compiled = compileToModule(*job);
  if (!compiled.ok || !compiled.verified)
    llvm::report_fatal_error(
        llvm::StringRef("the benchmark job does not compile: " + compiled.errors));
  return plans.emplace(schedule, std::move(compiled.verified->plan)).first->second;
}

/// Everything completes: compute inside start(), communication on its first poll.
class NullBackend final : public Backend {
public:
  std::string name() const override { return "null"; }
  absl::Status validate(const Plan &) override { return absl::OkStatus(); }
  absl::Status initialise(const Plan &) override { return absl::OkStatus(); }
  absl::Status beginStep(int64_t) override { return absl::OkStatus(); }
  absl::StatusOr<Ticket> start(const std::vector<int64_t> &indices) override {
    return static_cast<Ticket>(indices[0]);
  }
  absl::StatusOr<bool> poll(Ticket) override { return true; }
  absl::StatusOr<StepOutcome> endStep(int64_t) override { return StepOutcome{}; }
  absl::StatusOr<std::vector<StageState>> snapshot() override { return std::vector<StageState>(); }
  absl::Status restore(const std::vector<StageState> &) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::vector<float>>> stageParameters() override {
    return std::vector<std::vector<float>>();
  }
};

void BM_ExecutorStep(benchmark::State &state, const std::string &schedule, bool record) {
  const Plan &plan = planOf(schedule);
  NullBackend backend;
  ExecutorOptions options;
  options.record = record;
  Executor executor(plan, 0, 0, backend, options);
  int64_t step = 0;
  for (auto _ : state) {
    absl::StatusOr<StepOutcome> outcome = executor.runStep(++step);
    if (!outcome.ok())
      state.SkipWithError(std::string(outcome.status().message()).c_str());
  }
  const auto n = static_cast<double>(plan.ranks[0].instructions.size());
  state.counters["instructions"] = n;
  state.counters["ns_per_instruction"] =
      benchmark::Counter(n * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

} // namespace

BENCHMARK_CAPTURE(BM_ExecutorStep, breadth_first, std::string("breadth-first"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ExecutorStep, depth_first, std::string("depth-first"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ExecutorStep, breadth_first_traced, std::string("breadth-first"), true)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
