//===- MeasuredProfileTest.cpp - a profile's overheads and transport ------===//
//
// What a profile adds beside its layers' times: each compute instruction kind's time beyond its
// layers' (added once per stage and micro-batch) and the transport's measured latency and
// bandwidth (replacing the cluster's inside a node), and an expert-parallel run's measured
// routing imbalance (which a job with the same expert size plans with). A profile without them
// prices as before; a malformed one names the key. A profile of the CPU backend also says that
// its transfers move only between computes, which the simulator then respects.
//
//===----------------------------------------------------------------------===//

#include "analysis/CostModel.h"
#include "analysis/JobCosts.h"
#include "analysis/Simulator.h"
#include "job/JobFile.h"
#include "runtime/plan/PlanFile.h"
#include "tests/unit/CompileToModule.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace conduit;

namespace {

/// Two layers of 1 and 2 s forward, 3 and 4 s backward, at micro-batches of 1, and `extra`
/// (top-level keys, each followed by a comma).
std::string profileText(const std::string &extra) {
  return R"({"conduit_profile": 1, "backend": "cpu", "job": "t", )" + extra +
         R"( "layers": [
    {"name": "a", "samples": [1], "forward_s": [1], "backward_s": [3]},
    {"name": "b", "samples": [1], "forward_s": [2], "backward_s": [4]}]})";
}

std::string writeProfileFile(const std::string &name, const std::string &text) {
  const std::string path = testing::TempDir() + "/" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

/// Two layers on an 8-GPU node with 10 us latency, 100 GB/s inside and 10 GB/s across nodes.
CostInputs inputs(const std::string &profile) {
  CostInputs in;
  in.cluster.peakFlops = 1e12;
  in.cluster.efficiency = 1;
  in.cluster.gpusPerNode = 8;
  in.cluster.intraNodeBandwidth = 100e9;
  in.cluster.interNodeBandwidth = 10e9;
  in.cluster.latencyS = 10e-6;
  in.cluster.profile = profile;
  in.names = {"a", "b"};
  in.fwdFlops = {1, 1};
  in.bwdFlops = {2, 2};
  return in;
}

llvm::Expected<MeasuredProfile> parse(const std::string &text) {
  return parseProfile(Json::parse(text), "p.json");
}

TEST(MeasuredProfileTest, NewKeysAreRead) {
  llvm::Expected<MeasuredProfile> p =
      parse(profileText(R"("instruction_overhead_s": {"forward": 0.5, "backward_weight": 0.25},
                           "transport": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 2e8},)"));
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->instructionOverheadS[0], 0.5);
  EXPECT_FALSE(p->instructionOverheadS[1]);
  EXPECT_FALSE(p->instructionOverheadS[2]);
  EXPECT_EQ(p->instructionOverheadS[3], 0.25);
  EXPECT_EQ(p->transportLatencyS, 1e-4);
  EXPECT_EQ(p->transportBandwidth, 2e8);
}

TEST(MeasuredProfileTest, AnOldProfileHasNeither) {
  llvm::Expected<MeasuredProfile> p = parse(profileText(""));
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  for (const std::optional<double> &overhead : p->instructionOverheadS)
    EXPECT_FALSE(overhead);
  EXPECT_FALSE(p->transportLatencyS);
  EXPECT_FALSE(p->transportBandwidth);
}

TEST(MeasuredProfileTest, TheRoutedLoadIsRead) {
  llvm::Expected<MeasuredProfile> p =
      parse(profileText(R"("routed_load": {"expert": 2, "peak": 1.72, "pieces": 192},)"));
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  ASSERT_TRUE(p->routedLoad);
  EXPECT_EQ(p->routedLoad->expert, 2);
  EXPECT_EQ(p->routedLoad->peak, 1.72);
  EXPECT_EQ(p->routedLoad->pieces, 192);
  p = parse(profileText(""));
  ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
  EXPECT_FALSE(p->routedLoad);
}

/// moe-tiny.json (E = 2) with `overrides`.
Job moeTiny(std::vector<std::string> overrides) {
  Diagnostics diag("moe-tiny.json");
  std::optional<Job> job =
      readJobFile(std::string(CONDUIT_TESTDATA) + "/jobs/moe-tiny.json", diag, overrides);
  EXPECT_TRUE(job) << (diag.failed() ? diag.getError()->str() : "");
  return job ? *job : Job();
}

TEST(MeasuredProfileTest, AJobWithTheSameExpertSizePlansWithTheMeasuredImbalance) {
  using Source = MoeImbalance::Source;
  const std::string measured = writeProfileFile(
      "routed-load", profileText(R"("routed_load": {"expert": 2, "peak": 1.72, "pieces": 192},)"));
  const MoeImbalance uniform = moeImbalance(moeTiny({}));
  EXPECT_EQ(uniform.source, Source::Default);
  EXPECT_LT(uniform.value, 1.1);
  const MoeImbalance fromProfile = moeImbalance(moeTiny({"cluster.profile=\"" + measured + "\""}));
  EXPECT_EQ(fromProfile.source, Source::Measured);
  EXPECT_EQ(fromProfile.value, 1.72);
  // The job's own figure wins; a run with another expert size says nothing of this one's.
  const MoeImbalance stated =
      moeImbalance(moeTiny({"cluster.profile=\"" + measured + "\"", "model.moe.imbalance=1.3"}));
  EXPECT_EQ(stated.source, Source::Stated);
  EXPECT_EQ(stated.value, 1.3);
  const MoeImbalance other = moeImbalance(moeTiny(
      {"cluster.profile=\"" + measured + "\"", "parallelism.expert=1", "parallelism.data=2"}));
  EXPECT_EQ(other.source, Source::Default);
  // What the cost model is given for the job's shape is the same figure.
  EXPECT_EQ(jobCostInputs(moeTiny({"cluster.profile=\"" + measured + "\""})).transformer->imbalance,
            1.72);
}

TEST(MeasuredProfileTest, MalformedKeysAreNamed) {
  const std::pair<const char *, const char *> cases[] = {
      {R"("transport": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 0},)",
       "transport.bandwidth_bytes_per_s"},
      {R"("transport": {"latency_s": -1, "bandwidth_bytes_per_s": 1e9},)", "transport.latency_s"},
      {R"("transport": {"latency_s": 1e-4},)", "bandwidth_bytes_per_s"},
      {R"("transport": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 1e9, "hops": 2},)",
       "transport.hops"},
      {R"("transport": 3,)", "transport"},
      {R"("instruction_overhead_s": {"forward": "fast"},)", "instruction_overhead_s.forward"},
      {R"("instruction_overhead_s": {"optimizer_step": 1e-6},)",
       "instruction_overhead_s.optimizer_step"},
      {R"("routed_load": {"expert": 2, "peak": 0.5, "pieces": 1},)", "routed_load.peak"},
      {R"("routed_load": {"expert": 2, "peak": 2.5, "pieces": 1},)", "routed_load.peak"},
      {R"("routed_load": {"expert": 1, "peak": 1, "pieces": 1},)", "routed_load.expert"},
      {R"("routed_load": {"expert": 2, "peak": 1.5},)", "pieces"},
      {R"("routed_load": {"expert": 2, "peak": 1.5, "pieces": 1, "mean": 1},)", "routed_load.mean"},
  };
  for (const auto &[extra, key] : cases) {
    llvm::Expected<MeasuredProfile> p = parse(profileText(extra));
    ASSERT_FALSE(static_cast<bool>(p)) << extra;
    const std::string message = llvm::toString(p.takeError());
    EXPECT_NE(message.find(key), std::string::npos) << message;
    EXPECT_NE(message.find("p.json"), std::string::npos) << message;
  }
}

TEST(MeasuredProfileTest, TransfersUseTheMeasuredTransportInsideANode) {
  const std::string measured = writeProfileFile(
      "measured-transport",
      profileText(R"("transport": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 2e8},)"));
  CostModel cost = llvm::cantFail(CostModel::build(inputs(measured)));
  // 100 us + 16 KiB at 200 MB/s.
  EXPECT_DOUBLE_EQ(cost.transferTime(16384, Link::IntraNode), 1e-4 + 16384 / 2e8);
  EXPECT_DOUBLE_EQ(cost.latency(Link::IntraNode), 1e-4);
  EXPECT_DOUBLE_EQ(cost.bandwidth(Link::IntraNode), 2e8);
  // A ring of 4 inside the node: 3 steps of the measured latency and a quarter of the bytes.
  EXPECT_DOUBLE_EQ(cost.collectiveTime(Collective::AllGather, 4000, 4, Ring{}),
                   3 * (1e-4 + 1000 / 2e8));
  // Across nodes the cluster's figures stay: the profile measured two ranks of one node.
  EXPECT_DOUBLE_EQ(cost.transferTime(16384, Link::InterNode), 10e-6 + 16384 / 10e9);
}

TEST(MeasuredProfileTest, AnOldProfilePricesTransfersAtTheCluster) {
  const std::string old = writeProfileFile("old-profile", profileText(""));
  for (const std::string &profile : {old, std::string()}) {
    CostModel cost = llvm::cantFail(CostModel::build(inputs(profile)));
    EXPECT_DOUBLE_EQ(cost.transferTime(16384, Link::IntraNode), 10e-6 + 16384 / 100e9);
    EXPECT_DOUBLE_EQ(cost.latency(Link::IntraNode), 10e-6);
  }
  CostModel cost = llvm::cantFail(CostModel::build(inputs(old)));
  // The layers' measured times alone, whatever the stage.
  EXPECT_DOUBLE_EQ(cost.stageForwardTime(0, 2, 1), 3);
  EXPECT_DOUBLE_EQ(cost.stageBackwardTime(0, 2, 1), 7);
}

TEST(MeasuredProfileTest, OverheadIsPaidOncePerStageInstruction) {
  const std::string path = writeProfileFile(
      "overhead", profileText(R"("instruction_overhead_s": {"forward": 0.5, "backward": 0.75,
                                                "backward_weight": 0.25},)"));
  CostModel cost = llvm::cantFail(CostModel::build(inputs(path)));
  // Per layer: its measured time alone; per stage (one instruction): once more the overhead.
  EXPECT_DOUBLE_EQ(cost.forwardTime(0, 1), 1);
  EXPECT_DOUBLE_EQ(cost.stageForwardTime(0, 2, 1), 3.5);
  EXPECT_DOUBLE_EQ(cost.stageForwardTime(1, 2, 1), 2.5);
  EXPECT_DOUBLE_EQ(cost.stageBackwardTime(0, 2, 1), 7.75);
  // Unmeasured kinds pay none: the input half is its share of the backward (half, by FLOPs).
  EXPECT_DOUBLE_EQ(cost.stageInputGradientTime(0, 2, 1), 3.5);
  EXPECT_DOUBLE_EQ(cost.stageWeightGradientTime(0, 2, 1), 3.75);
  CostModel::MicrobatchTimes times = cost.stageMicrobatchTimes(0, 2, {0, 1, 2});
  EXPECT_EQ(times.forward, (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(times.backward, (std::vector<double>{7.75, 7.75}));
}

TEST(MeasuredProfileTest, ACpuProfileMovesMessagesBetweenComputes) {
  const std::string cpu = writeProfileFile("cpu-backend", profileText(""));
  std::string text = profileText("");
  text.replace(text.find("\"cpu\""), 5, "\"cuda\"");
  const std::string cuda = writeProfileFile("cuda-backend", text);
  EXPECT_TRUE(llvm::cantFail(CostModel::build(inputs(cpu))).progressBetweenComputes());
  EXPECT_FALSE(llvm::cantFail(CostModel::build(inputs(cuda))).progressBetweenComputes());
  EXPECT_FALSE(llvm::cantFail(CostModel::build(inputs(""))).progressBetweenComputes());
}

/// demo.json at D = 1 under `schedule`, priced with the measured profile of its fuzz seed as the
/// backend `backend` wrote it.
std::optional<VerifiedPlan> profiledDemo(const std::string &schedule, const std::string &backend) {
  std::ifstream in(std::string(CONDUIT_TESTDATA) + "/fuzz/profile/demo-measured.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("\"cpu\""), 5, "\"" + backend + "\"");
  const std::string profile = writeProfileFile("demo-" + backend, text);
  Diagnostics diag("demo.json");
  std::optional<Job> job =
      readJobFile(std::string(CONDUIT_TESTDATA) + "/jobs/demo.json", diag,
                  {"parallelism.data=1", "parallelism.schedule=" + schedule,
                   std::string("parallelism.stages_per_device=") + (schedule == "1f1b" ? "1" : "2"),
                   "cluster.profile=\"" + profile + "\""});
  EXPECT_TRUE(job) << diag.getError()->str();
  if (!job)
    return std::nullopt;
  CompiledModule compiled = compileToModule(*job);
  EXPECT_TRUE(compiled.ok && compiled.verified) << compiled.errors;
  return compiled.ok ? std::move(compiled.verified) : std::nullopt;
}

TEST(MeasuredProfileTest, TransfersOfACpuRunWaitForTheirReceiversComputes) {
  for (const std::string schedule : {"1f1b", "breadth-first"}) {
    SCOPED_TRACE(schedule);
    std::optional<VerifiedPlan> free = profiledDemo(schedule, "cuda");
    std::optional<VerifiedPlan> held = profiledDemo(schedule, "cpu");
    ASSERT_TRUE(free && held);
    const runtime::Plan &plan = held->plan;
    // The same plan and the same compute times; only the transfers wait.
    EXPECT_EQ(runtime::writePlan(plan), runtime::writePlan(free->plan));
    EXPECT_GE(held->simulation.makespan, free->simulation.makespan);
    int64_t longer = 0;
    for (size_t r = 0; r < plan.ranks.size(); ++r)
      for (size_t i = 0; i < plan.ranks[r].instructions.size(); ++i) {
        const runtime::InstructionTime &a = free->simulation.times[r][i];
        const runtime::InstructionTime &b = held->simulation.times[r][i];
        if (plan.ranks[r].instructions[i].isCompute()) {
          EXPECT_NEAR(b.end - b.start, a.end - a.start, 1e-12) << "compute " << i;
        } else if (plan.ranks[r].instructions[i].isTransfer()) {
          // Held until its receiver's compute ended, never shorter.
          EXPECT_GE(b.end - b.start, a.end - a.start - 1e-12) << "transfer " << i;
          longer += b.end - b.start > a.end - a.start + 1e-9;
        }
      }
    EXPECT_GT(longer, 0);
  }
}

} // namespace
