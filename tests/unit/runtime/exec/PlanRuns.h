//===- PlanRuns.h - small plans trained on the real backends -----*- C++ -*-===//
//
// For the tests that train whole plans on a real backend (CPU, or CUDA where it is built),
// every rank a thread meeting the others in a loopback hub: a two-stage 1F1B plan of a tiny
// GPT with whole or split backwards, the same with a mixture of experts, and the runner that
// trains any plan and returns what each rank produced.
//
// Which backends a binary tests is its own choice (backendsUnderTest): runtime_tests the CPU,
// runtime_cuda_tests CUDA, so that only the binary that needs the CUDA libraries loads them.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TESTS_UNIT_RUNTIME_EXEC_PLANRUNS_H
#define CONDUIT_TESTS_UNIT_RUNTIME_EXEC_PLANRUNS_H

#include "runtime/exec/Backend.h"
#include "runtime/exec/LoopbackTransport.h"
#include "runtime/model/GptShape.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/Trace.h"

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace conduit::runtime::testing {

/// The tiny GPT the plans train: 2 blocks of width 8, sequences of 4 tokens.
model::GptShape pipelineShape();

constexpr int64_t kSamples = 2; ///< per micro-batch

/// A compute instruction of `stage` on the compute stream.
Instruction onStage(Op op, int32_t stage, int32_t mb = -1, int32_t slot = -1);

/// The tiny GPT in fp32, stage r on rank r with layers [stages[r].first, stages[r].second),
/// `microbatches` micro-batches of kSamples samples; the rank programs are left empty.
Plan tinyPlan(const std::vector<std::pair<int32_t, int32_t>> &stages, int64_t microbatches);

/// Two stages on two ranks, three micro-batches, 1F1B. With `split`, each backward is an I
/// where the backward was, and its W comes later: W0 after the next forward, the others at
/// the end in `lastWeights` order. Rank 0 reads every output gradient from one receive slot,
/// which the next receive overwrites before the deferred W runs.
Plan pipelinePlan(bool split, const std::vector<int32_t> &lastWeights = {1, 2});

/// pipelinePlan's two stages with a mixture of experts in the second block (the second
/// stage's first layer): 4 GELU experts, 2 per token, renormalised, a shared expert, the
/// auxiliary loss and the router z-loss. `lastWeights` as pipelinePlan's.
Plan moePlan(bool split, const std::vector<int32_t> &lastWeights = {2, 1});

/// What one rank's run produced.
struct RankRun {
  absl::Status status;
  std::vector<double> losses;
  std::vector<std::optional<double>> auxLosses, zLosses;
  std::vector<std::vector<float>> params;
  std::vector<StageState> state;
  std::vector<LayerTiming> timings;
  std::vector<TraceEvent> events;
};

/// Makes the backend of global rank `rank` of `ranks`, meeting the others in `hub`.
using MakeBackend = std::function<std::unique_ptr<Backend>(int64_t rank, int64_t ranks,
                                                           bool measure, LoopbackHub &hub)>;
/// A backend the plans run on, and whether this machine can run it.
struct BackendKind {
  std::string name;
  std::function<std::unique_ptr<LoopbackMemory>()> memory;
  MakeBackend make;
  /// Empty where the backend can run here; else why not.
  std::function<std::string()> unavailable;
};

void PrintTo(const BackendKind &kind, std::ostream *out);

/// The CPU backend.
BackendKind cpuBackend();
/// The backends this test binary runs the parameterised suites on (defined once per binary).
std::vector<BackendKind> backendsUnderTest();

/// Runs steps [first, first + steps) of `plan` with every rank a thread on `kind`, after
/// restoring `resume` (per rank) when given.
std::vector<RankRun> train(const BackendKind &kind, const Plan &plan, int64_t first, int64_t steps,
                           const std::vector<std::vector<StageState>> *resume = {},
                           bool measure = false);

/// The order in which pipelinePlan's last weight gradients run on `kind`. The CPU backend adds
/// each sample's weight gradients to double accumulators, so W may run in any order; a device
/// accumulates in float, whose sums follow their order, so there the W run in micro-batch
/// order, as the whole backwards do. Either way the bits are the same.
std::vector<int32_t> lastWeights(const BackendKind &kind);

} // namespace conduit::runtime::testing

#endif // CONDUIT_TESTS_UNIT_RUNTIME_EXEC_PLANRUNS_H
