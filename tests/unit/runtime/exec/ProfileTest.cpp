//===- ProfileTest.cpp - what --profile measures beside the layers --------===//
//
// The compute instructions' time beyond their layers' and the transport's latency and
// bandwidth: the line through a ping-pong's times, the keys the profile writes them under,
// and a ping-pong between two ranks through the loopback transport.
//
//===----------------------------------------------------------------------===//

#include "runtime/session/Profile.h"
#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/exec/LoopbackTransport.h"
#include "runtime/plan/ProfileKeys.h"
#include "tests/unit/runtime/GptPlan.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

using namespace conduit;
using namespace conduit::runtime;

namespace {

/// The tiny GPT in two stages on two ranks, micro-batches of 2; one activation of
/// `sendBytes` from rank 0 to rank 1 when not 0 (the ping-pong's sizes come from the sends).
Plan twoRankPlan(int64_t sendBytes = 0) {
  Plan plan = model::planFor(model::tinyShape());
  plan.name = "profile";
  Config &c = plan.config;
  c.pipeline = 2;
  c.microbatches = 1;
  c.microbatchSize = 2;
  c.tokensPerSample = model::tinyShape().seq;
  c.dtype = DType::FP32;
  const int32_t cut = static_cast<int32_t>(plan.layers.size()) / 2;
  for (int32_t r = 0; r < 2; ++r) {
    Stage stage{r, r,     r == 0 ? 0 : cut, r == 0 ? cut : static_cast<int32_t>(plan.layers.size()),
                0, {0, 2}};
    for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
      stage.params += plan.layers[l].params;
    plan.stages.push_back(stage);
    plan.groups.push_back({{r}});
    plan.ranks.push_back({r, 0, {}, {}});
  }
  if (sendBytes > 0) {
    Instruction send;
    send.op = Op::Send;
    send.peer = 1;
    send.bytes = sendBytes;
    plan.ranks[0].instructions.push_back(send);
  }
  return plan;
}

TEST(TransportFitTest, TheLineThroughThePoints) {
  // 100 us plus 1 us per 100 bytes: 100 MB/s.
  const TransportFit fit = fitTransport({{4, 16384, 65536}, {100.04e-6, 263.84e-6, 755.36e-6}});
  EXPECT_NEAR(fit.latencyS, 100e-6, 1e-9);
  EXPECT_NEAR(fit.bandwidth, 1e8, 1e3);
}

TEST(TransportFitTest, NoiseThatTiltsTheLineKeepsWhatWasMeasured) {
  // The larger message measured faster: the mean time, and the bandwidth the spread bounds.
  const TransportFit fit = fitTransport({{4, 16384}, {50e-6, 40e-6}});
  EXPECT_DOUBLE_EQ(fit.latencyS, 45e-6);
  EXPECT_DOUBLE_EQ(fit.bandwidth, 16384 / 10e-6);
  EXPECT_EQ(fitTransport({}).bandwidth, 0);
}

TEST(TypicalTimingsTest, ADisturbedStepMovesNothing) {
  // Layer 1 at 2 samples: two forwards a step at 1 ms, one backward at 3 ms; the optimizer
  // (layer kOptimizerTiming) once a step at 0.5 ms. Step 3 was disturbed: everything took
  // ten times as long.
  auto step = [](double scale) {
    LayerTiming layer{1, 2, 2 * 1e-3 * scale, 3e-3 * scale, 2, 1};
    LayerTiming optimizer{kOptimizerTiming, 1000, 0.5e-3 * scale, 0, 1, 0};
    return std::vector<LayerTiming>{layer, optimizer};
  };
  std::vector<std::vector<LayerTiming>> steps = {step(1), step(1), step(10), step(1), step(1)};
  std::vector<LayerTiming> typical = typicalTimings(steps);
  ASSERT_EQ(typical.size(), 2u);
  EXPECT_EQ(typical[0].layer, 1);
  EXPECT_EQ(typical[0].samples, 2);
  // The run's counts, each at the typical step's mean time.
  EXPECT_EQ(typical[0].forwardCount, 10);
  EXPECT_EQ(typical[0].backwardCount, 5);
  EXPECT_DOUBLE_EQ(typical[0].forwardS, 10 * 1e-3);
  EXPECT_DOUBLE_EQ(typical[0].backwardS, 5 * 3e-3);
  EXPECT_EQ(typical[0].inputCount, 0);
  EXPECT_EQ(typical[0].inputS, 0);
  EXPECT_EQ(typical[1].layer, kOptimizerTiming);
  EXPECT_DOUBLE_EQ(typical[1].forwardS, 5 * 0.5e-3);
  // A mean over the run would have said 2.8 ms a forward.
}

TEST(TypicalTimingsTest, TheMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({4, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(ProfileWriterTest, WritesOverheadsAndTheTransport) {
  const Plan plan = twoRankPlan();
  std::vector<LayerTiming> timings;
  for (int64_t l = 0; l < static_cast<int64_t>(plan.layers.size()); ++l)
    timings.push_back({l, 2, 1e-3, 2e-3, 1, 1});
  // Two forwards 1 and 3 us beyond their layers, one backward 4 us, one slightly under (the
  // clock's noise: written as 0).
  timings.push_back({kOverheadTiming, static_cast<int64_t>(Op::Forward), 4e-6, 0, 2, 0});
  timings.push_back({kOverheadTiming, static_cast<int64_t>(Op::Backward), 4e-6, 0, 1, 0});
  timings.push_back({kOverheadTiming, static_cast<int64_t>(Op::BackwardWeight), -1e-7, 0, 1, 0});
  std::ostringstream os;
  // 10 us and 100 MB/s.
  ASSERT_TRUE(
      writeProfile(plan, "cpu", timings, {{}, TransportTiming{{0, 1000}, {1e-5, 2e-5}}, {}}, os)
          .ok());
  const std::string text = os.str();
  EXPECT_NE(text.find(R"("instruction_overhead_s": {"forward": 2e-06, "backward": 4e-06, )"
                      R"("backward_weight": 0})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("transport": {"latency_s": 1e-05, "bandwidth_bytes_per_s": 100000000})"),
            std::string::npos)
      << text;

  // Without them (an old run, or one rank): neither key.
  std::ostringstream old;
  timings.resize(plan.layers.size());
  ASSERT_TRUE(writeProfile(plan, "cpu", timings, {}, old).ok());
  EXPECT_EQ(old.str().find(kProfileInstructionOverhead), std::string::npos) << old.str();
  EXPECT_EQ(old.str().find(kProfileTransport), std::string::npos) << old.str();
}

TEST(ProfileWriterTest, WritesTheRoutedLoadOfAnExpertParallelRun) {
  Plan plan = twoRankPlan();
  std::vector<LayerTiming> timings;
  for (int64_t l = 0; l < static_cast<int64_t>(plan.layers.size()); ++l)
    timings.push_back({l, 2, 1e-3, 2e-3, 1, 1});
  const model::RoutedLoad load{1.5, 12.0, 10};
  std::ostringstream none;
  ASSERT_TRUE(writeProfile(plan, "cpu", timings, {{}, std::nullopt, load}, none).ok());
  EXPECT_EQ(none.str().find(kProfileRoutedLoad), std::string::npos) << "E = 1: " << none.str();
  plan.config.expert = 2;
  std::ostringstream os;
  ASSERT_TRUE(writeProfile(plan, "cpu", timings, {{}, std::nullopt, load}, os).ok());
  EXPECT_NE(os.str().find(R"("routed_load": {"expert": 2, "peak": 1.5, "pieces": 10})"),
            std::string::npos)
      << os.str();
}

TEST(TimeTransportTest, TwoRanksPingPongThePlansSizes) {
  const Plan plan = twoRankPlan(/*sendBytes=*/640);
  LoopbackHub hub(plan, /*timeoutS=*/30, std::make_unique<HostLoopbackMemory>());
  std::vector<absl::StatusOr<TransportTiming>> timed(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      CpuBackend backend(rank, 2, /*measureLayers=*/true,
                         [&hub, rank](const Plan &) { return hub.transport(rank); });
      absl::Status ready = backend.validate(plan);
      if (ready.ok())
        ready = backend.initialise(plan);
      timed[rank] = ready.ok() ? timeTransport(plan, backend, rank) : ready;
    });
  for (std::thread &t : threads)
    t.join();
  for (const absl::StatusOr<TransportTiming> &t : timed) {
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->bytes, (std::vector<int64_t>{4, 640, 1 << 20}));
    ASSERT_EQ(t->oneWayS.size(), 3u);
    for (double s : t->oneWayS) {
      EXPECT_GE(s, 0);
      EXPECT_LT(s, 1); // the pauses are not counted
    }
  }
}

} // namespace
