//===- ReportTest.cpp - the simulator's predictions and their analysis ----===//
//
// The simulator against figures computed by hand: the bubble formulas with unit costs over a
// sweep, three small plans with communication costs, and the exposed reduce-scatter of
// breadth-first against depth-first. The idle attribution must always add up.
//
//===----------------------------------------------------------------------===//

#include "analysis/Report.h"
#include "tests/unit/CompileToModule.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace conduit;

namespace {

/// Compiles a job given as JSON text to a verified plan (and its simulated step).
std::optional<VerifiedPlan> compileJob(const std::string &json,
                                       llvm::ArrayRef<std::string> overrides = {}) {
  Diagnostics diag("test.json");
  std::optional<Json> root = parseJsonText(json, diag);
  if (!root) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  for (const std::string &assignment : overrides)
    EXPECT_TRUE(applyOverride(*root, assignment, diag)) << assignment;
  std::optional<Job> job = parseJob(*root, "test.json", diag);
  if (!job) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  CompiledModule compiled = compileToModule(*job);
  if (!compiled.ok || !compiled.verified) {
    ADD_FAILURE() << "does not compile: " << compiled.errors;
    return std::nullopt;
  }
  return std::move(compiled.verified);
}

/// A chain of `layers` equal layers with costs chosen to give round numbers: one forward of
/// one sample takes 1 s, a backward 2 s, and each byte moves in 1 s on every link.
/// Replaces each "@KEY@" of `text`.
std::string fill(std::string text,
                 std::initializer_list<std::pair<std::string, std::string>> with) {
  for (const auto &[key, value] : with)
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

/// A chain of `layers` equal layers: with `flopScale` 1, one forward of one sample takes 1 s
/// and a backward 2 s; every byte moves in 1 s on every link.
std::string layersJob(int layers, int64_t params, int64_t outputBytes,
                      const std::string &parallelism, double flopScale = 1) {
  std::string list;
  for (int l = 0; l < layers; ++l)
    list += fill(R"(@SEP@{"name": "l@L@", "params": @P@, "fwd_flops": @F@, "bwd_flops": @B@,
                    "activation_bytes": 1, "output_bytes": @O@})",
                 {{"@SEP@", l ? "," : ""},
                  {"@L@", std::to_string(l)},
                  {"@P@", std::to_string(params)},
                  {"@F@", llvm::formatv("{0}", flopScale).str()},
                  {"@B@", llvm::formatv("{0}", 2 * flopScale).str()},
                  {"@O@", std::to_string(outputBytes)}});
  return fill(R"({
    "model": {"kind": "layers", "layers": [@LAYERS@]},
    "parallelism": {@PARALLELISM@},
    "cluster": {"preset": "a100-80gb", "peak_flops": @PEAK@, "efficiency": 1, "latency_s": 0,
                "intra_node_bandwidth": 1, "inter_node_bandwidth": 1, "gpus_per_node": 8},
    "training": {"dtype": "bf16", "optimizer": "sgd"}
  })",
              {{"@LAYERS@", list},
               {"@PARALLELISM@", parallelism},
               {"@PEAK@", llvm::formatv("{0}", flopScale).str()}});
}

void expectAttributionAddsUp(const PlanReport &report, const std::string &where) {
  for (const RankReport &rank : report.ranks) {
    const IdleAttribution &idle = rank.idle;
    EXPECT_NEAR(idle.fillDrain + idle.p2pTotal() + idle.allGather + idle.reductionTail +
                    idle.tiedGradients + idle.other,
                rank.idleS, 1e-9 * std::max(1.0, report.stepTimeS))
        << where << " rank " << rank.rank;
    EXPECT_NEAR(rank.busyS + rank.idleS, report.stepTimeS, 1e-9 * report.stepTimeS)
        << where << " rank " << rank.rank;
    EXPECT_EQ(idle.other, 0) << where << " rank " << rank.rank;
  }
}

//===----------------------------------------------------------------------===//
// Unit costs: the textbook bubbles
//===----------------------------------------------------------------------===//

TEST(Report, UnitCostsReproduceTheBubbleFormulas) {
  int checked = 0;
  for (const char *schedule : {"gpipe", "1f1b", "depth-first", "breadth-first"})
    for (int p = 1; p <= 6; ++p)
      for (int v = 1; v <= 3; ++v)
        for (int m = 1; m <= 12; ++m) {
          const std::string kind = schedule;
          if ((kind == "gpipe" || kind == "1f1b") && v > 1)
            continue;
          if (kind == "depth-first" && (v == 1 || m < p || m % p != 0))
            continue;
          std::string parallelism = llvm::formatv(
              R"("pipeline": {0}, "stages_per_device": {1}, "schedule": "{2}",
                 "microbatches": {3})",
              p, v, schedule, m);
          std::optional<VerifiedPlan> verified = compileJob(layersJob(p * v, 1, 1, parallelism));
          ASSERT_TRUE(verified);
          SimulationResult unit = simulatePlan(verified->plan, PlanCosts::unit(verified->plan));
          ASSERT_FALSE(unit.error) << unit.error->message;
          PlanReport report = analyzeStep(verified->plan, unit);
          // Busy time per rank is v*m*(1 + 2); the step is that plus the idle slots.
          const double busy = 3.0 * v * m;
          double slots = p - 1; // idle (t_f + t_b) slots per rank
          if (kind == "breadth-first" && m < p)
            slots = v * p + m - 1 - v * m;
          const std::string where = llvm::formatv("{0} P={1} V={2} M={3}", schedule, p, v, m);
          EXPECT_DOUBLE_EQ(report.stepTimeS, busy + 3 * slots) << where;
          EXPECT_NEAR(report.bubbleFraction, 3 * slots / (busy + 3 * slots), 1e-12) << where;
          expectAttributionAddsUp(report, where);
          ++checked;
        }
  EXPECT_GT(checked, 150);
}

//===----------------------------------------------------------------------===//
// Small plans with communication, computed by hand
//===----------------------------------------------------------------------===//

// GPipe on 2 ranks, 2 micro-batches, one layer of 1 parameter each; every transfer takes
// 1 s, the SGD step 2 s (2 FLOP per parameter).
//   rank 0: F0 [0,1] F1 [1,2] ........... B1 [7,9] B0 [9,11] opt [11,13]
//   rank 1: ...... F0 [2,3] F1 [3,4] B1 [4,6] B0 [6,8] opt [8,10] ......
//   transfers: F0 [1,2], F1 [2,3], gradient of B1 [6,7], of B0 [8,9]
TEST(Report, HandComputedGPipeWithTransfers) {
  std::optional<VerifiedPlan> v =
      compileJob(layersJob(2, 1, 1, R"("pipeline": 2, "schedule": "gpipe", "microbatches": 2)"));
  ASSERT_TRUE(v);
  PlanReport report = analyzeStep(v->plan, v->simulation);
  EXPECT_DOUBLE_EQ(report.stepTimeS, 13);
  ASSERT_EQ(report.ranks.size(), 2u);
  // Rank 0 waits [2,7] for the gradient of B1: rank 1 reaches the send at 6, the transfer
  // takes 1 s.
  EXPECT_DOUBLE_EQ(report.ranks[0].busyS, 8);
  EXPECT_DOUBLE_EQ(report.ranks[0].idle.fillDrain, 4);
  EXPECT_DOUBLE_EQ(report.ranks[0].idle.p2p[1], 1);
  // Rank 1 waits [0,2] for F0 (1 s for rank 0 to compute it, 1 s in flight), then from its
  // optimizer step's end at 10 for rank 0 to finish.
  EXPECT_DOUBLE_EQ(report.ranks[1].idle.fillDrain, 1 + 3);
  EXPECT_DOUBLE_EQ(report.ranks[1].idle.p2p[0], 1);
  EXPECT_EQ(report.ranks[0].sends, 2);
  EXPECT_EQ(report.ranks[0].recvs, 2);
  // 2 samples (2 micro-batches, 1 replica), 1 token per sample.
  EXPECT_DOUBLE_EQ(report.tokensPerS, 2.0 / 13);
  // 3 FLOP per sample per layer, 2 layers, 2 samples, over 13 s and 2 GPUs.
  EXPECT_DOUBLE_EQ(report.tflopsPerGpu * 1e12, 3.0 * 2 * 2 / 13 / 2);
  EXPECT_DOUBLE_EQ(report.bubbleFraction, 10.0 / 26);
  expectAttributionAddsUp(report, "gpipe");
}

// Data parallelism without sharding, D = 2: one all-reduce of the fp32 gradients, 4 bytes,
// in 2(n-1) steps of (bytes/n)/bandwidth = 2 s each; then the SGD step, 2 FLOP per parameter.
//   F0 [0,1] F1 [1,2] B1 [2,4] B0 [4,6] | all-reduce [6,10] | optimizer [10,12]
TEST(Report, HandComputedAllReduce) {
  std::optional<VerifiedPlan> v = compileJob(layersJob(
      1, 1, 1,
      R"("pipeline": 1, "data": 2, "schedule": "gpipe", "microbatches": 2, "sharding": "none")"));
  ASSERT_TRUE(v);
  PlanReport report = analyzeStep(v->plan, v->simulation);
  EXPECT_DOUBLE_EQ(report.stepTimeS, 12);
  EXPECT_DOUBLE_EQ(report.ranks[0].busyS, 8);
  EXPECT_DOUBLE_EQ(report.ranks[0].idle.reductionTail, 4);
  EXPECT_EQ(report.ranks[0].allReduces, 1);
  EXPECT_DOUBLE_EQ(report.exposedCommS, 4);
  expectAttributionAddsUp(report, "all-reduce");
}

// Full sharding, D = 2, 4 parameters: the all-gather moves 8 bf16 bytes in one step of
// 8/2 = 4 s; the reduce-scatter 16 fp32 bytes in 8 s; the optimizer updates the 2-parameter
// shard in 4 s.
//   all-gather [0,4] | F0 [4,5] B0 [5,7] | reduce-scatter [7,15] | optimizer [15,19]
TEST(Report, HandComputedFullySharded) {
  std::optional<VerifiedPlan> v = compileJob(layersJob(
      1, 4, 1,
      R"("pipeline": 1, "data": 2, "schedule": "gpipe", "microbatches": 1, "sharding": "full")"));
  ASSERT_TRUE(v);
  PlanReport report = analyzeStep(v->plan, v->simulation);
  EXPECT_DOUBLE_EQ(report.stepTimeS, 19);
  EXPECT_DOUBLE_EQ(report.ranks[0].busyS, 7);
  EXPECT_DOUBLE_EQ(report.ranks[0].idle.allGather, 4);
  EXPECT_DOUBLE_EQ(report.ranks[0].idle.reductionTail, 8);
  EXPECT_EQ(report.ranks[0].allGathers, 1);
  EXPECT_EQ(report.ranks[0].reduceScatters, 1);
  expectAttributionAddsUp(report, "full");
}

// The same plan with a measured profile: forward 3 s, backward 5 s, and an Adam step of
// 10 s per parameter; the job's SGD does 2 FLOP per parameter where Adam does 10, so its step
// on the 2-parameter shard takes 2 * 10 * 2 / 10 = 4 s.
//   all-gather [0,4] | F0 [4,7] B0 [7,12] | reduce-scatter [12,20] | optimizer [20,24]
TEST(Report, HandComputedWithAProfile) {
  const std::string profile = testing::TempDir() + "/report-test-profile.json";
  {
    std::ofstream out(profile);
    out << R"({"conduit_profile": 1, "optimizer": "adam", "optimizer_s_per_param": 10,
               "layers": [{"name": "l0", "samples": [1], "forward_s": [3], "backward_s": [5]}]})";
  }
  for (const char *optimizer : {"sgd", "adam"}) {
    std::optional<VerifiedPlan> v =
        compileJob(layersJob(1, 4, 1,
                             R"("pipeline": 1, "data": 2, "schedule": "gpipe", "microbatches": 1,
                     "sharding": "full")"),
                   {"cluster.profile=" + profile, std::string("training.optimizer=") + optimizer});
    ASSERT_TRUE(v);
    PlanReport report = analyzeStep(v->plan, v->simulation);
    const double step = std::string(optimizer) == "sgd" ? 4 : 20;
    EXPECT_DOUBLE_EQ(report.stepTimeS, 20 + step) << optimizer;
    EXPECT_DOUBLE_EQ(report.ranks[0].busyS, 8 + step) << optimizer;
    expectAttributionAddsUp(report, optimizer);
  }
}

//===----------------------------------------------------------------------===//
// Exposed reduce-scatter: breadth-first against depth-first
//===----------------------------------------------------------------------===//

// P = 4, V = 2, M = 8 with one reduce-scatter taking R = M * t_b = 16 s and everything else
// free (FLOP costs in units of 1e6 for a negligible optimizer step). Breadth-first finishes
// its loop-1 stage early, so only the loop-0 reduce-scatter is exposed: 16 s. Depth-first
// finishes both stages in the cool-down, 8 s apart: the second waits for the first, 24 s.
TEST(Report, BreadthFirstExposesLessReduceScatterThanDepthFirst) {
  std::string job = layersJob(8, 8, 0,
                              R"("pipeline": 4, "data": 2, "stages_per_device": 2,
                                 "schedule": "breadth-first", "microbatches": 8,
                                 "sharding": "gradients")",
                              /*flopScale=*/1e6);
  std::optional<VerifiedPlan> bfs = compileJob(job);
  std::optional<VerifiedPlan> dfs = compileJob(job, {"parallelism.schedule=depth-first"});
  ASSERT_TRUE(bfs && dfs);
  PlanReport b = analyzeStep(bfs->plan, bfs->simulation);
  PlanReport d = analyzeStep(dfs->plan, dfs->simulation);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(b.ranks[r].idle.reductionTail, 16, 1e-3) << "rank " << r;
    EXPECT_NEAR(d.ranks[r].idle.reductionTail, 24, 1e-3) << "rank " << r;
  }
  expectAttributionAddsUp(b, "breadth-first");
  expectAttributionAddsUp(d, "depth-first");
}

// The same comparison on the 52B job (pipeline ranks inside a node, replicas across nodes)
// with a data-parallel network of 2.5 GB/s per GPU: one stage's reduce-scatter (2.3 s)
// outlasts the P backwards between two local stages' last micro-batches under depth-first
// (1.1 s) but fits in the M backwards of one stage under breadth-first (M > P). Breadth-first's
// tail is 0.60 of depth-first's: the computes beside the reduce-scatters run slower (GPU
// presets: collectiveOverlapSurcharges), which shortens depth-first's tail a little.
TEST(Report, BreadthFirstExposesLessReduceScatterOn52B) {
  Diagnostics diag("gpt-52b-bfs.json");
  std::optional<Json> root = loadJsonFile(CONDUIT_TESTDATA "/jobs/gpt-52b-bfs.json", diag);
  ASSERT_TRUE(root);
  std::string json = writeJson(*root);
  for (const char *m : {"32", "64"}) {
    std::vector<std::string> common = {std::string("parallelism.microbatches=") + m,
                                       "parallelism.stages_per_device=4",
                                       "cluster.inter_node_bandwidth=2.5e9",
                                       // The compute-to-network ratio this was written for.
                                       "cluster.efficiency=0.5"};
    std::vector<std::string> bfsSet = common, dfsSet = common;
    bfsSet.push_back("parallelism.schedule=breadth-first");
    dfsSet.push_back("parallelism.schedule=depth-first");
    std::optional<VerifiedPlan> bfs = compileJob(json, bfsSet);
    std::optional<VerifiedPlan> dfs = compileJob(json, dfsSet);
    ASSERT_TRUE(bfs && dfs);
    PlanReport b = analyzeStep(bfs->plan, bfs->simulation);
    PlanReport d = analyzeStep(dfs->plan, dfs->simulation);
    double bSum = 0, dSum = 0;
    for (size_t r = 0; r < b.ranks.size(); ++r) {
      EXPECT_LE(b.ranks[r].idle.reductionTail, d.ranks[r].idle.reductionTail)
          << "M=" << m << " rank " << r;
      bSum += b.ranks[r].idle.reductionTail;
      dSum += d.ranks[r].idle.reductionTail;
    }
    EXPECT_LT(b.ranks[0].idle.reductionTail, 0.65 * d.ranks[0].idle.reductionTail) << "M=" << m;
    EXPECT_LT(bSum, dSum) << "M=" << m;
  }
}

TEST(Report, TiedEmbeddingsWaitForTheOtherCopy) {
  // Both ranks wait for the exchange before their tied stage's reduction; the head's rank,
  // whose last backward comes first, also waits for rank 0 to reach it.
  Diagnostics diag("llama-tiny.json");
  std::optional<Json> root = loadJsonFile(CONDUIT_TESTDATA "/jobs/llama-tiny.json", diag);
  ASSERT_TRUE(root);
  std::string json = writeJson(*root);
  std::optional<VerifiedPlan> tied =
      compileJob(json, {"parallelism.schedule=1f1b", "parallelism.stages_per_device=1"});
  ASSERT_TRUE(tied);
  PlanReport report = analyzeStep(tied->plan, tied->simulation);
  expectAttributionAddsUp(report, "tied 1f1b");
  ASSERT_EQ(report.ranks.size(), 2u);
  EXPECT_EQ(report.ranks[0].ties, 1);
  EXPECT_EQ(report.ranks[1].ties, 1);
  EXPECT_GT(report.ranks[0].idle.tiedGradients, 0);
  EXPECT_GT(report.ranks[1].idle.tiedGradients, report.ranks[0].idle.tiedGradients);
}

} // namespace
