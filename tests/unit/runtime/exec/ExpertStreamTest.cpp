//===- ExpertStreamTest.cpp - a paired half's all-to-alls on a stream of its own --===//
//
// On a device, a half of a paired step posts its expert all-to-alls on a stream per pass
// (BackendCore::passStream): it orders that stream after the compute stream (whose kernels
// wrote the send buffer), posts the all-to-all there, takes Work that completes once the stream
// has run it (drained), and orders the compute stream after that stream. No GPU runs here, so a
// CPU backend that names two pretend streams records the calls on a paired DualPipeV plan with
// expert parallelism (moe-tiny, E = 2): on each stream they come as that triple, the two passes
// use their own streams, and the run computes the plain CPU backend's bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/BackendCore.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/LoopbackTransport.h"
#include "runtime/model/Optimizer.h"
#include "runtime/plan/PlanFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <thread>

using namespace conduit::runtime;

namespace {

/// The CPU backend's math, with a stream per expert pass that exists only by name: the calls
/// that order and drain streams are recorded, in the order the rank's fibers make them.
class SideStreamBackend final : public BackendCore<double> {
public:
  struct Call {
    enum Kind { Order, Drained } kind;
    StreamHandle first, second; ///< Order: earlier, later; Drained: the stream, null
  };

  SideStreamBackend(int64_t rank, LoopbackHub &hub) : BackendCore(rank, false), hub(hub) {}
  ~SideStreamBackend() override { release(); }

  std::string name() const override { return "cpu with pretend expert streams"; }
  absl::Status validate(const Plan &) override { return absl::OkStatus(); }

  std::vector<Call> calls;
  /// The pretend stream of each pass.
  static StreamHandle sideOf(GroupPass pass) { return &streams[static_cast<int>(pass)]; }

private:
  absl::StatusOr<std::unique_ptr<Transport>> connect(const Plan &) override {
    return hub.transport(rank);
  }
  conduit::model::Ops<float> &ops() override { return math; }
  absl::Status zeroGradients(double *grads, int64_t n, StreamHandle) override {
    std::fill(grads, grads + n, 0.0);
    return absl::OkStatus();
  }
  absl::Status applyOptimizer(int64_t step, int64_t n, float *params, float *state,
                              const double *grads) override {
    conduit::model::optimizerStep(optimizer, step, n, params, state, grads);
    return absl::OkStatus();
  }
  StreamHandle passStream(GroupPass pass) override { return sideOf(pass); }
  absl::Status order(StreamHandle earlier, StreamHandle later) override {
    calls.push_back({Call::Order, earlier, later});
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Work>> drained(StreamHandle stream) override {
    calls.push_back({Call::Drained, stream, nullptr});
    return std::unique_ptr<Work>();
  }

  static inline char streams[kGroupPasses];
  LoopbackHub &hub;
  conduit::model::CpuOps<float> math;
};

struct RankRun {
  absl::Status status;
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
  std::vector<SideStreamBackend::Call> calls;
};

/// Two steps of `plan` with every rank a thread on the backend `make` gives.
std::vector<RankRun>
train(const Plan &plan,
      const std::function<std::unique_ptr<BackendCore<double>>(int64_t, LoopbackHub &)> &make) {
  const int64_t ranks = plan.config.worldSize();
  LoopbackHub hub(plan, /*timeoutS=*/30, std::make_unique<HostLoopbackMemory>());
  std::vector<RankRun> runs(ranks);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < ranks; ++rank)
    threads.emplace_back([&, rank] {
      RankRun &run = runs[rank];
      std::unique_ptr<BackendCore<double>> backend = make(rank, hub);
      run.status = [&]() -> absl::Status {
        CONDUIT_RETURN_IF_ERROR(backend->validate(plan));
        CONDUIT_RETURN_IF_ERROR(backend->initialise(plan));
        ExecutorOptions options;
        options.peerTimeoutS = 30;
        const RankPosition where = RankPosition::of(plan.config, rank);
        Executor executor(plan, where.pipelineRank, where.replica, *backend, options);
        for (int64_t step = 1; step <= 2; ++step) {
          CONDUIT_ASSIGN_OR_RETURN(StepOutcome outcome, executor.runStep(step));
          run.losses.push_back(outcome.loss);
        }
        CONDUIT_ASSIGN_OR_RETURN(run.params, backend->stageParameters());
        return absl::OkStatus();
      }();
      if (!run.status.ok())
        backend->abort();
      if (auto *side = dynamic_cast<SideStreamBackend *>(backend.get()))
        run.calls = side->calls;
    });
  for (std::thread &t : threads)
    t.join();
  return runs;
}

/// Trains the plan at `path` on the plain CPU backend and on the pretend-stream one, checks
/// the calls on each pretend stream, and returns how many collectives the halves posted on
/// each (triples), per rank.
std::map<StreamHandle, double> checkPassStreams(const char *path) {
  std::map<StreamHandle, double> triples;
  absl::StatusOr<Plan> plan = readPlanFile(path);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok())
    return triples;
  EXPECT_GT(plan->config.expert, 1);
  EXPECT_TRUE(std::any_of(plan->ranks.begin(), plan->ranks.end(), [](const RankProgram &p) {
    return std::any_of(p.instructions.begin(), p.instructions.end(), [](const Instruction &x) {
      return x.isExpertAllToAll() && x.peerStage >= 0;
    });
  })) << "the plan hides all-to-alls in paired steps";

  const int64_t world = plan->config.worldSize();
  const std::vector<RankRun> plain = train(*plan, [world](int64_t rank, LoopbackHub &hub) {
    return std::make_unique<CpuBackend>(rank, world, false,
                                        [&hub, rank](const Plan &) { return hub.transport(rank); });
  });
  const std::vector<RankRun> sided = train(*plan, [](int64_t rank, LoopbackHub &hub) {
    return std::make_unique<SideStreamBackend>(rank, hub);
  });

  for (size_t r = 0; r < sided.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(plain[r].status.ok()) << plain[r].status;
    EXPECT_TRUE(sided[r].status.ok()) << sided[r].status;
    EXPECT_EQ(sided[r].losses, plain[r].losses);
    EXPECT_EQ(sided[r].params, plain[r].params);
    // Per pretend stream: order(compute, side), drained(side), order(side, compute), again and
    // again (the other half's calls may come between, on its own stream). A host backend's
    // compute stream is null.
    for (GroupPass pass : {GroupPass::Forward, GroupPass::Backward}) {
      const StreamHandle side = SideStreamBackend::sideOf(pass);
      std::vector<SideStreamBackend::Call> mine;
      for (const SideStreamBackend::Call &call : sided[r].calls)
        if (call.first == side || call.second == side)
          mine.push_back(call);
      EXPECT_EQ(mine.size() % 3, 0u);
      for (size_t i = 0; i + 2 < mine.size(); i += 3) {
        SCOPED_TRACE("triple " + std::to_string(i / 3) + " of pass " +
                     std::to_string(static_cast<int>(pass)));
        EXPECT_EQ(mine[i].kind, SideStreamBackend::Call::Order);
        EXPECT_EQ(mine[i].first, nullptr);
        EXPECT_EQ(mine[i].second, side);
        EXPECT_EQ(mine[i + 1].kind, SideStreamBackend::Call::Drained);
        EXPECT_EQ(mine[i + 1].first, side);
        EXPECT_EQ(mine[i + 2].kind, SideStreamBackend::Call::Order);
        EXPECT_EQ(mine[i + 2].first, side);
        EXPECT_EQ(mine[i + 2].second, nullptr);
      }
      triples[side] += static_cast<double>(mine.size() / 3) / static_cast<double>(world);
    }
    // Nothing else is ordered or drained: unpaired computes keep the compute stream.
    int64_t onSides = 0;
    for (const SideStreamBackend::Call &call : sided[r].calls)
      onSides += call.first != nullptr || call.second != nullptr;
    EXPECT_EQ(onSides, static_cast<int64_t>(sided[r].calls.size()));
  }
  return triples;
}

TEST(ExpertStreams, APairedHalfPostsItsAllToAllsOnItsPassStreamAndJoinsItBack) {
  std::map<StreamHandle, double> triples = checkPassStreams(CONDUIT_PAIRED_MOE_PLAN);
  // Both passes' halves posted on their streams somewhere.
  EXPECT_GT(triples[SideStreamBackend::sideOf(GroupPass::Forward)], 0);
  EXPECT_GT(triples[SideStreamBackend::sideOf(GroupPass::Backward)], 0);
}

TEST(ExpertStreams, APairedHalfPostsItsTensorCollectivesOnItsPassStreamToo) {
  // The same schedule with T = 2: each rank's halves post the same all-to-alls and, on the
  // same streams, their tensor collectives.
  std::map<StreamHandle, double> alone = checkPassStreams(CONDUIT_PAIRED_MOE_PLAN);
  std::map<StreamHandle, double> tensor = checkPassStreams(CONDUIT_PAIRED_MOE_TP_PLAN);
  for (GroupPass pass : {GroupPass::Forward, GroupPass::Backward}) {
    const StreamHandle side = SideStreamBackend::sideOf(pass);
    EXPECT_GT(tensor[side], alone[side]) << "pass " << static_cast<int>(pass);
  }
}

} // namespace
