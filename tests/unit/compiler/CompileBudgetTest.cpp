//===- CompileBudgetTest.cpp - what a compile costs, in counts -----------===//
//
// The compile of the two reference jobs of docs/performance.md, measured in quantities that are
// the same on every machine: heap bytes allocated and the most bytes live, per pass and for
// writing the plan file (AllocationCounter.h), the operations each pass leaves, the plan's
// instructions and (stage, micro-batch) pairs, and the simulator's events. Each is checked
// against a budget a little above what the compiler needs today, so a change that copies the
// plan once more, keeps a second copy of it alive or makes a pass quadratic fails here on any
// machine, however fast. When a change makes a figure legitimately larger or smaller, the
// test prints every figure: update the budget with the reason in the commit message.
//
//===----------------------------------------------------------------------===//

#include "AllocationCounter.h"

#include "compiler/CompileModule.h"
#include "compiler/Registration.h"
#include "job/JobFile.h"
#include "runtime/plan/PlanFile.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <memory>
#include <string>

using namespace conduit;
using conduit::counting::AllocationCounts;

namespace {

/// What one phase of the compile cost.
struct PhaseCost {
  int64_t allocatedBytes = 0;
  int64_t peakLiveBytes = 0; ///< the most bytes live at once during the phase
  int64_t operations = 0;    ///< in the module after the phase (passes only)
};

/// Records a PhaseCost per pass.
class CountingInstrumentation : public mlir::PassInstrumentation {
public:
  explicit CountingInstrumentation(std::map<std::string, PhaseCost> &phases) : phases(phases) {}

  void runBeforePass(mlir::Pass *, mlir::Operation *) override {
    before = counting::allocationCounts();
    counting::resetPeakLiveBytes();
  }

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    const AllocationCounts after = counting::allocationCounts();
    PhaseCost &phase = phases[pass->getArgument().str()];
    phase.allocatedBytes = after.bytes - before.bytes;
    phase.peakLiveBytes = after.peakLiveBytes;
    op->walk([&](mlir::Operation *) { ++phase.operations; });
  }

private:
  std::map<std::string, PhaseCost> &phases;
  AllocationCounts before;
};

/// A compile of a job file, as conduit-compile -o does it, with its costs.
struct CompileCosts {
  std::map<std::string, PhaseCost> phases; ///< per pass, and "write" for the plan file
  int64_t allocatedBytes = 0;              ///< from the job file to the plan file's bytes
  int64_t peakLiveBytes = 0;
  int64_t instructions = 0;
  int64_t pairs = 0; ///< (stage, micro-batch) pairs
  int64_t simulatorEvents = 0;
  int64_t planFileBytes = 0;
};

CompileCosts compileAndCount(const std::string &name) {
  CompileCosts costs;
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + name;
  Diagnostics diag(path);
  std::optional<Job> job = readJobFile(path, diag, {});
  EXPECT_TRUE(job) << (diag.failed() ? diag.getError()->str() : "");
  if (!job)
    return costs;
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();

  counting::resetPeakLiveBytes();
  const AllocationCounts start = counting::allocationCounts();
  ModuleOptions module;
  // As conduit-compile -o builds it: no plan ops, no simulated times.
  module.planOps = false;
  module.simulatedTimes = false;
  module.instrument = [&] { return std::make_unique<CountingInstrumentation>(costs.phases); };
  ModuleCompilation compiled = compileModule(*job, context, CompileOptions{}, module);
  EXPECT_TRUE(compiled.succeeded && compiled.verified);
  if (!compiled.succeeded || !compiled.verified)
    return costs;
  costs.simulatorEvents = compiled.verified->simulation.events;
  for (const runtime::RankProgram &rank : compiled.verified->plan.ranks)
    costs.instructions += static_cast<int64_t>(rank.instructions.size());
  for (const runtime::Stage &stage : compiled.verified->plan.stages)
    costs.pairs += stage.numMicrobatches();
  // As conduit-compile -o does: the plan's instructions go as they are written.
  const AllocationCounts compiledCounts = counting::allocationCounts();
  counting::resetPeakLiveBytes();
  {
    flatbuffers::DetachedBuffer bytes = runtime::planBytes(std::move(compiled.verified->plan));
    costs.planFileBytes = static_cast<int64_t>(bytes.size());
    const AllocationCounts written = counting::allocationCounts();
    costs.phases["write"] = {written.bytes - compiledCounts.bytes, written.peakLiveBytes, 0};
  }
  const AllocationCounts end = counting::allocationCounts();
  costs.allocatedBytes = end.bytes - start.bytes;
  for (const auto &[name, phase] : costs.phases)
    costs.peakLiveBytes = std::max(costs.peakLiveBytes, phase.peakLiveBytes);
  return costs;
}

void print(const std::string &job, const CompileCosts &costs) {
  std::cout << job << ": instructions " << costs.instructions << ", pairs " << costs.pairs
            << ", simulator events " << costs.simulatorEvents << ", plan file "
            << costs.planFileBytes << " bytes, allocated " << costs.allocatedBytes
            << " bytes, peak live " << costs.peakLiveBytes << " bytes\n";
  for (const auto &[name, phase] : costs.phases)
    std::cout << "  " << name << ": allocated " << phase.allocatedBytes << ", peak live "
              << phase.peakLiveBytes << ", operations " << phase.operations << "\n";
}

/// What a job may cost: today's figures and a little room.
struct Budget {
  const char *job;
  int64_t instructions, pairs, simulatorEvents;
  int64_t allocatedBytes, peakLiveBytes;
  /// The passes that allocate the most: a budget each for its bytes and its peak.
  std::map<std::string, std::pair<int64_t, int64_t>> phases;
};

void PrintTo(const Budget &budget, std::ostream *os) { *os << budget.job; }

class CompileBudget : public ::testing::TestWithParam<Budget> {};

TEST_P(CompileBudget, StaysWithinItsCounts) {
  const Budget &budget = GetParam();
#if defined(__SANITIZE_ADDRESS__)
  if (std::string(budget.job) != "gpt-52b-bfs-512gpu.json")
    GTEST_SKIP() << "the large job takes minutes under the sanitizers";
#endif
  const CompileCosts costs = compileAndCount(budget.job);
  print(budget.job, costs);
  EXPECT_LE(costs.instructions, budget.instructions);
  EXPECT_EQ(costs.pairs, budget.pairs);
  EXPECT_LE(costs.simulatorEvents, budget.simulatorEvents);
  if (!counting::allocationCountingAvailable())
    return; // the sanitizers count their own way
  EXPECT_LE(costs.allocatedBytes, budget.allocatedBytes);
  EXPECT_LE(costs.peakLiveBytes, budget.peakLiveBytes);
  for (const auto &[name, limits] : budget.phases) {
    auto it = costs.phases.find(name);
    ASSERT_NE(it, costs.phases.end()) << name;
    EXPECT_LE(it->second.allocatedBytes, limits.first) << name << " allocates more";
    EXPECT_LE(it->second.peakLiveBytes, limits.second) << name << " holds more at once";
  }
}

// Today's figures (the test prints them) and about 10% of room.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Jobs, CompileBudget,
    ::testing::Values(
        Budget{"gpt-52b-bfs-512gpu.json", 63'400, 4096, 19'200, 40'000'000, 8'600'000,
               {
                {"conduit-insert-p2p", {8'780'000, 5'620'000}},
                {"conduit-plan-memory", {7'860'000, 4'650'000}},
                {"conduit-lower-to-plan", {12'800'000, 5'400'000}},
                {"conduit-verify-plan", {3'600'000, 6'130'000}},
                {"write", {4'120'000, 8'500'000}}}},
        Budget{"bench-p64-v4-m256.json", 1'020'000, 65536, 307'000, 662'000'000, 131'000'000,
               {
                {"conduit-insert-p2p", {139'000'000, 84'900'000}},
                {"conduit-plan-memory", {163'000'000, 66'700'000}},
                {"conduit-lower-to-plan", {204'000'000, 67'700'000}},
                {"conduit-verify-plan", {53'500'000, 92'200'000}},
                {"write", {65'400'000, 131'000'000}}}}),
    [](const ::testing::TestParamInfo<Budget> &info) {
      return std::string(info.param.job).substr(0, 3) == "gpt" ? std::string("Gpt52b")
                                                                : std::string("P64V4M256");
    });
// clang-format on

} // namespace
