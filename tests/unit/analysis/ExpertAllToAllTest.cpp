//===- ExpertAllToAllTest.cpp - the expert all-to-alls priced and verified ===//
//
// Mixture-of-experts jobs with expert parallelism compiled to plans: each all-to-all priced
// on its expert group's link by hand, the report's counts and exposed time, DualPipeV's paired
// steps hiding part of the all-to-alls (a shorter step than the same plan without the
// overlap), and the simulator refusing a plan whose all-to-alls differ from what each compute
// issues, naming the instruction.
//
//===----------------------------------------------------------------------===//

#include "analysis/PlanCosts.h"
#include "analysis/Report.h"
#include "tests/unit/CompileToModule.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <gtest/gtest.h>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

namespace {

/// Four blocks, the first dense, three with 8 experts (2 per token, the busiest expert rank
/// stated at 1.25 x the mean); P = 2, D = 4, E = 4 on H100s whose links are set round.
constexpr const char *kJob = R"({
  "model": {
    "kind": "transformer", "num_layers": 4, "hidden_size": 512, "num_heads": 8,
    "ffn_hidden_size": 2048, "seq_length": 512, "vocab_size": 1024,
    "mlp": "swiglu", "norm": "rmsnorm", "position": "rotary", "bias": "none",
    "moe": { "num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 1024, "dense_layers": 1,
             "imbalance": 1.25 }
  },
  "parallelism": {
    "pipeline": 2, "data": 4, "expert": 4, "stages_per_device": 1, "schedule": "1f1b",
    "microbatches": 8, "microbatch_size": 2
  },
  "cluster": { "preset": "h100-80gb", "gpus_per_node": 8, "intra_node_bandwidth": 4e11,
               "inter_node_bandwidth": 5e10, "latency_s": 1e-5 },
  "training": { "dtype": "bf16", "optimizer": "adam" }
})";

std::optional<VerifiedPlan> compile(llvm::ArrayRef<std::string> overrides = {},
                                    bool overlap = true) {
  Diagnostics diag("moe.json");
  std::optional<Json> root = parseJsonText(kJob, diag);
  if (!root) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  for (const std::string &assignment : overrides)
    EXPECT_TRUE(applyOverride(*root, assignment, diag)) << assignment;
  std::optional<Job> job = parseJob(*root, "moe.json", diag);
  if (!job) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  CompileOptions options;
  options.overlapAllToAlls = overlap;
  CompiledModule compiled = compileToModule(*job, PipelineStop::Plan, options);
  if (!compiled.ok || !compiled.verified) {
    ADD_FAILURE() << "does not compile: " << compiled.errors;
    return std::nullopt;
  }
  return std::move(compiled.verified);
}

/// Bytes of one all-to-all: ceil(2 samples x 512 tokens x top-2 x 1.25) x 512 x 2 bytes.
constexpr int64_t kAllToAllBytes = 2560 * 512 * 2;

/// Compiles the job in nodes of `perNode` GPUs (and `more` overrides) and expects every
/// rank's all-to-alls to take `expected` seconds each, exposed whole in 1F1B.
void expectAllToAllTime(const std::string &perNode, double expected,
                        std::vector<std::string> more = {}) {
  more.push_back("cluster.gpus_per_node=" + perNode);
  std::optional<VerifiedPlan> v = compile(more);
  ASSERT_TRUE(v);
  const PlanReport report = analyzeStep(v->plan, v->simulation);
  for (const RankReport &r : report.ranks) {
    ASSERT_GT(r.allToAlls, 0);
    EXPECT_NEAR(r.allToAllS / static_cast<double>(r.allToAlls), expected, 1e-12)
        << perNode << " GPUs per node";
    // Nothing computes beside them in 1F1B: all of it is exposed, and counted as such.
    EXPECT_NEAR(r.idle.allToAll, r.allToAllS, 1e-12);
  }
}

TEST(ExpertAllToAlls, PricedOnTheLinksToEachMember) {
  // The expert group of 4 consecutive ranks lies in a node of 8: latency + the 3 other
  // members' shares (a quarter of the bytes each) over the node's links. In nodes of 2, a
  // member's share for its node's other member and those for the 2 members on the other node
  // go at the same time, the network's taking longer; in nodes of 1, all 3 cross the network.
  const double bytes = kAllToAllBytes;
  for (auto [perNode, expected] :
       {std::pair{"8", 1e-5 + bytes * 3 / 4 / 4e11}, std::pair{"2", 1e-5 + bytes * 2 / 4 / 5e10},
        std::pair{"1", 1e-5 + bytes * 3 / 4 / 5e10}})
    expectAllToAllTime(perNode, expected);
}

TEST(ExpertAllToAlls, PerNodeDispatchCrossesTheNetworkOncePerNode) {
  // A token's 2 of 8 experts, 4 experts a node in nodes of 2: a node holds neither with
  // chance C(4,2)/C(8,2) = 6/28, so the token reaches 2 - 2 x 6/28 nodes, half of them the
  // other node; it crosses the network that many times instead of once per expert there. The node's
  // links carry its own node's share and the copies it forwards (a member's 2 shares from the other
  // node, half of them for its neighbour): (1 + 1) / 4 of the bytes, the shorter part.
  const double bytes = kAllToAllBytes, perToken = bytes / 2;
  const double twoNodes = (2 - 2 * 6.0 / 28) / 2;
  // In nodes of 1, the 4 nodes: a node is missed with chance C(6,2)/C(8,2) = 15/28, and 3
  // of the 4 are other nodes.
  const double fourNodes = 4 * (1 - 15.0 / 28) * 3 / 4;
  for (auto [perNode, expected] : {std::pair{"8", 1e-5 + bytes * 3 / 4 / 4e11},
                                   std::pair{"2", 1e-5 + perToken * twoNodes / 5e10},
                                   std::pair{"1", 1e-5 + perToken * fourNodes / 5e10}})
    expectAllToAllTime(perNode, expected, {"model.moe.dispatch=per_node"});
}

TEST(PairedStepTime, SegmentsSlowWhileAnAllToAllTakesTheirSms) {
  // Chain 0: a segment of 1, an all-to-all of 1, a segment of 1; chain 1: one segment of 2.
  // Chain 0's first segment runs [0, 1], its all-to-all [1, 2] beside chain 1's segment
  // [1, 3]; its last segment waits for the stream: [3, 4].
  const std::vector<double> first{1, 1}, firstComm{1}, second{2}, secondComm{};
  const std::vector<double> *compute[2] = {&first, &second}, *comm[2] = {&firstComm, &secondComm};
  EXPECT_DOUBLE_EQ(pairedStepTime(compute, comm, 1.0), 4.0);
  // At half speed while the all-to-all runs, chain 1's segment does 0.5 by 2, the rest by
  // 3.5; the last segment ends at 4.5.
  EXPECT_DOUBLE_EQ(pairedStepTime(compute, comm, 0.5), 4.5);
  // Nothing overlaps: a chain alone takes its sum.
  const std::vector<double> none{}, empty{0};
  const std::vector<double> *alone[2] = {&first, &empty}, *aloneComm[2] = {&firstComm, &none};
  EXPECT_DOUBLE_EQ(pairedStepTime(alone, aloneComm, 0.5), 3.0);
}

TEST(CollectiveOverlapSurcharges, ChargeTheOverlapOnTheRanksOwnTimeline) {
  using Kind = OverlapItem::Kind;
  // Stage 0's all-gather runs [0, 2); stage 1's compute [0, 3) overlaps it for 2; stage 1's
  // reduction, issued at 3, runs [3, 7); stage 0's compute waits for its gather (done at 2)
  // and runs [3, 4), overlapping the reduction for 1; stage 1's optimizer step waits for its
  // reduction, [7, 8), and the last compute [8, 10) meets nothing.
  const std::vector<OverlapItem> items{{Kind::Gather, 0, 2},        {Kind::Compute, 1, 3},
                                       {Kind::Reduction, 1, 4},     {Kind::Compute, 0, 1},
                                       {Kind::OptimizerStep, 1, 1}, {Kind::Compute, 0, 2}};
  const std::vector<double> half = collectiveOverlapSurcharges(items, 2, 0.5);
  const std::vector<double> expected{0, 1.0, 0, 0.5, 0, 0};
  EXPECT_EQ(half, expected);
  EXPECT_EQ(collectiveOverlapSurcharges(items, 2, 0), std::vector<double>(6, 0.0));
  // A compute waits for its own stage's gather, so it never overlaps it; collectives queue
  // one after another, each from when it is issued.
  const std::vector<OverlapItem> own{{Kind::Gather, 0, 2}, {Kind::Compute, 0, 1}};
  EXPECT_EQ(collectiveOverlapSurcharges(own, 1, 0.5), std::vector<double>(2, 0.0));
  const std::vector<OverlapItem> queued{
      {Kind::Reduction, 0, 2}, {Kind::Reduction, 1, 2}, {Kind::Compute, 2, 5}};
  // Both reductions, [0, 2) and [2, 4), lie inside the compute's [0, 5).
  EXPECT_DOUBLE_EQ(collectiveOverlapSurcharges(queued, 3, kCollectiveOverlapSlowdown)[2],
                   4 * kCollectiveOverlapSlowdown);
}

TEST(ExpectedTokenNodes, CountsTheNodesATokensExpertsLieOn) {
  // 2 of 8 experts over 2 nodes: both on one node with chance 2 x C(4,2)/C(8,2) = 12/28.
  EXPECT_NEAR(expectedTokenNodes(8, 2, 1, 1, 2), 2 - 12.0 / 28, 1e-12);
  EXPECT_DOUBLE_EQ(expectedTokenNodes(8, 2, 1, 1, 1), 1.0);
  // 4 groups of 2, the best one only: both experts in one group, so on one node.
  EXPECT_NEAR(expectedTokenNodes(8, 2, 4, 1, 2), 1.0, 1e-12);
  // 2 groups of 4 spanning 2 nodes each (4 nodes): the chosen group's 2 nodes, both reached
  // unless the 2 experts share one (chance 2 x C(2,2)/C(4,2) = 1/3).
  EXPECT_NEAR(expectedTokenNodes(8, 2, 2, 1, 4), 2 - 1.0 / 3, 1e-12);
  // A limit that allows every group changes nothing.
  EXPECT_NEAR(expectedTokenNodes(8, 2, 4, 4, 2), expectedTokenNodes(8, 2, 1, 1, 2), 1e-12);
  // DeepSeek-V3: 8 of 256 experts from the best 4 of 8 groups, one group a node (EP 64 over 8
  // nodes): a node is a candidate with chance 1/2 and then missed with C(96,8)/C(128,8).
  double miss = 1;
  for (int i = 0; i < 8; ++i)
    miss *= (96.0 - i) / (128.0 - i);
  EXPECT_NEAR(expectedTokenNodes(256, 8, 8, 4, 8), 8 * 0.5 * (1 - miss), 1e-9);
  EXPECT_LT(expectedTokenNodes(256, 8, 8, 4, 8), expectedTokenNodes(256, 8, 1, 1, 8));
  // Groups and nodes that do not nest: the limit is left out.
  EXPECT_NEAR(expectedTokenNodes(24, 2, 3, 1, 2), expectedTokenNodes(24, 2, 1, 1, 2), 1e-12);
  // More experts per token reach more nodes, never more than there are.
  for (int64_t k = 1; k < 32; ++k) {
    EXPECT_LT(expectedTokenNodes(256, k, 1, 1, 8), expectedTokenNodes(256, k + 1, 1, 1, 8));
    EXPECT_LE(expectedTokenNodes(256, k, 1, 1, 8), 8.0);
  }
}

/// Checks each reduce-scatter's time in `v` against `expected(dense, experts)`: the bytes of
/// its dense gradients and of its stage's routed experts on one rank (E of them, fp32).
/// Returns how many it checked.
int64_t checkReduceScatters(const VerifiedPlan &v, int64_t e,
                            llvm::function_ref<double(double, double)> expected) {
  int64_t checked = 0;
  for (size_t r = 0; r < v.plan.ranks.size(); ++r) {
    const std::vector<Instruction> &program = v.plan.ranks[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].op != Op::ReduceScatter)
        continue;
      const runtime::Stage &stage = v.plan.stages[program[i].stage];
      int64_t experts = 0;
      for (int32_t l = stage.firstLayer; l < stage.endLayer; ++l)
        experts += v.plan.layers[l].expertParams / e * 4; // fp32 gradients
      const runtime::InstructionTime &t = v.simulation.times[r][i];
      EXPECT_NEAR(
          t.end - t.start,
          expected(static_cast<double>(program[i].bytes - experts), static_cast<double>(experts)),
          1e-12)
          << "stage " << stage.index;
      ++checked;
    }
  }
  return checked;
}

TEST(ExpertAllToAlls, ReductionsRunTheExpertsOverTheirExpertDataGroup) {
  // ZeRO-1, D = 4 in one node: a stage's reduce-scatter moves the dense gradients over the 4
  // replicas, then the routed experts' (a rank's E-th) over the 4 / E ranks holding the same
  // ones; with E = 4 those are one rank's, updated in place, and move nothing.
  auto ring = [](double bytes, double n) { return (n - 1) * (1e-5 + bytes / n / 4e11); };
  for (int64_t e : {2, 4}) {
    SCOPED_TRACE("E " + std::to_string(e));
    std::optional<VerifiedPlan> v =
        compile({"parallelism.sharding=optimizer", "parallelism.expert=" + std::to_string(e)});
    ASSERT_TRUE(v);
    EXPECT_EQ(checkReduceScatters(*v, e,
                                  [&](double dense, double experts) {
                                    return ring(dense, 4) + (e < 4 ? ring(experts, 4.0 / e) : 0);
                                  }),
              2); // one per stage
  }
}

TEST(ExpertAllToAlls, ReductionsAcrossNodesRunAtTheirMembersAdapters) {
  // Nodes of two GPUs: each pipeline rank's four replicas are two a node, so the dense ring
  // runs at two adapters' bandwidth (2 x 50 GB/s); the expert-data group with E = 2 (ranks 0
  // and 2, or 4 and 6) has one member a node, at one adapter's. In nodes of one GPU every ring
  // has one adapter.
  auto ring = [](double bytes, double n, double bandwidth) {
    return (n - 1) * (1e-5 + bytes / n / bandwidth);
  };
  for (int64_t perNode : {1, 2}) {
    SCOPED_TRACE(std::to_string(perNode) + " a node");
    std::optional<VerifiedPlan> v =
        compile({"parallelism.sharding=optimizer", "parallelism.expert=2",
                 "cluster.gpus_per_node=" + std::to_string(perNode)});
    ASSERT_TRUE(v);
    EXPECT_EQ(checkReduceScatters(*v, 2,
                                  [&](double dense, double experts) {
                                    return ring(dense, 4, perNode * 5e10) + ring(experts, 2, 5e10);
                                  }),
              2);
  }
}

TEST(ExpertAllToAlls, CountedPerRankAndPass) {
  std::optional<VerifiedPlan> v = compile();
  ASSERT_TRUE(v);
  const PlanReport report = analyzeStep(v->plan, v->simulation);
  // Rank 0 holds the embedding, the dense block and one block with experts, rank 1 two with
  // experts and the head: per micro-batch 2 all-to-alls in the forward, 2 in the backward.
  ASSERT_EQ(report.ranks.size(), 2u);
  EXPECT_EQ(report.ranks[0].allToAlls, 8 * 4 * 1);
  EXPECT_EQ(report.ranks[1].allToAlls, 8 * 4 * 2);
  for (const Instruction &x : v->plan.ranks[1].instructions)
    if (x.isExpertAllToAll()) {
      EXPECT_EQ(x.bytes, kAllToAllBytes);
      EXPECT_EQ(x.group, 1); // the plan group of pipeline rank 1
    }
  const llvm::json::Value json = reportToJson(report);
  const llvm::json::Object &rank1 = *json.getAsObject()->getArray("ranks")->back().getAsObject();
  EXPECT_EQ(rank1.getInteger("all_to_alls"), 64);
  EXPECT_NEAR(*rank1.getNumber("all_to_all_exposed_s"), report.ranks[1].idle.allToAll, 1e-15);
  EXPECT_NEAR(*json.getAsObject()->getNumber("all_to_all_s"),
              (report.ranks[0].allToAllS + report.ranks[1].allToAllS) / 2, 1e-15);
}

TEST(ExpertAllToAlls, PipelinedTensorCollectivesLeaveThemOut) {
  // T = 4 with sequence parallelism over slow links (1 GB/s), E = 4 over the same ranks: a
  // compute's tensor collectives, pipelined with it, add what they take beyond it, and its
  // all-to-alls (priced apart, after it) are not part of that.
  std::optional<VerifiedPlan> v =
      compile({"parallelism.data=1", "parallelism.tensor=4", "parallelism.sequence_parallel=true",
               "cluster.intra_node_bandwidth=1e9"});
  ASSERT_TRUE(v);
  // An all-gather or reduce-scatter over the 4 ranks; an all-reduce is both.
  auto ring = [](double bytes) { return 3 * (1e-5 + bytes / 4 / 1e9); };
  int64_t checked = 0;
  for (size_t r = 0; r < v->plan.ranks.size(); ++r) {
    const std::vector<Instruction> &program = v->plan.ranks[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (!program[i].isCompute())
        continue;
      double comm = 0, added = 0;
      bool allToAlls = false;
      for (size_t k = i + 1; k < program.size() && !program[k].isCompute(); ++k) {
        allToAlls = allToAlls || program[k].isExpertAllToAll();
        const double bytes = static_cast<double>(program[k].bytes);
        if (program[k].op == Op::TensorAllGather || program[k].op == Op::TensorReduceScatter)
          comm += ring(bytes);
        else if (program[k].op == Op::TensorAllReduce)
          comm += 2 * ring(bytes);
        else
          continue;
        added += v->simulation.times[r][k].end - v->simulation.times[r][k].start;
      }
      if (!allToAlls)
        continue;
      const runtime::InstructionTime &t = v->simulation.times[r][i];
      ASSERT_GT(comm, t.end - t.start) << "rank " << r << " instruction " << i;
      EXPECT_NEAR(added, comm - (t.end - t.start), 1e-12) << "rank " << r << " instruction " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

/// The schedules that pair a forward with the backward of another micro-batch: DualPipeV by
/// itself, interleaved 1F1B as Megatron-Core's combined 1F1B (passes/Schedule.cpp).
class PairedSteps : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(PairedSteps, HideTheAllToAllsBehindTheOtherHalf) {
  std::vector<std::string> overrides = GetParam();
  overrides.push_back("parallelism.microbatches=16");
  overrides.push_back("cluster.intra_node_bandwidth=1e11");
  std::optional<VerifiedPlan> paired = compile(overrides, true), apart = compile(overrides, false);
  ASSERT_TRUE(paired && apart);
  const PlanReport with = analyzeStep(paired->plan, paired->simulation),
                   without = analyzeStep(apart->plan, apart->simulation);
  // Every pair is a forward and the backward of another micro-batch after it.
  int64_t pairs = 0;
  for (const runtime::RankProgram &rank : paired->plan.ranks) {
    const Instruction *pairedForward = nullptr;
    for (const Instruction &x : rank.instructions) {
      if (!x.isCompute())
        continue;
      if (pairedForward) {
        EXPECT_TRUE(x.op == runtime::Op::Backward || x.op == runtime::Op::BackwardInput);
        EXPECT_NE(x.microbatch, pairedForward->microbatch);
        pairedForward = nullptr;
      }
      if (x.flags == Instruction::kPaired) {
        pairedForward = &x;
        ++pairs;
      }
    }
  }
  EXPECT_GT(pairs, 0);
  // The same plan but for where the all-to-alls hide: the same whole time, less of it exposed,
  // and a step no longer.
  int64_t hiding = 0;
  for (const runtime::RankProgram &rank : paired->plan.ranks)
    for (const Instruction &x : rank.instructions)
      hiding += x.isExpertAllToAll() && x.peerStage >= 0;
  EXPECT_GT(hiding, 0);
  for (const runtime::RankProgram &rank : apart->plan.ranks)
    for (const Instruction &x : rank.instructions)
      EXPECT_FALSE(x.isExpertAllToAll() && x.peerStage >= 0);
  EXPECT_NEAR(with.allToAllS, without.allToAllS, 1e-12);
  EXPECT_NEAR(without.exposedAllToAllS, without.allToAllS, 1e-12);
  EXPECT_LT(with.exposedAllToAllS, without.exposedAllToAllS);
  EXPECT_LE(with.stepTimeS, without.stepTimeS);
  // A pair hides at most the shorter of its two halves' compute and communication; what it
  // hides is never more than the all-to-alls' whole time.
  for (size_t r = 0; r < with.ranks.size(); ++r)
    EXPECT_LE(with.ranks[r].idle.allToAll, with.ranks[r].allToAllS);
}

const std::vector<std::vector<std::string>> kPairingSchedules = {
    {"parallelism.schedule=dualpipev", "parallelism.stages_per_device=2",
     "parallelism.placement=\"v\""},
    {"parallelism.schedule=depth-first", "parallelism.stages_per_device=2"}};

std::string pairingName(const ::testing::TestParamInfo<std::vector<std::string>> &info) {
  static const char *const names[] = {"DualPipeV", "InterleavedOneFOneB"};
  return names[info.index];
}

INSTANTIATE_TEST_SUITE_P(Schedules, PairedSteps, ::testing::ValuesIn(kPairingSchedules),
                         pairingName);

TEST(ExpertAllToAlls, PlainOneFOneBIsNotPaired) {
  std::optional<VerifiedPlan> v = compile();
  ASSERT_TRUE(v);
  for (const runtime::RankProgram &rank : v->plan.ranks)
    for (const Instruction &x : rank.instructions)
      EXPECT_EQ(x.flags, 0);
}

TEST(ExpertAllToAlls, CombinedOneFOneBShortensTheStep) {
  // Interleaved 1F1B on two ranks: its steady state's pairs hide enough to shorten the step.
  const std::vector<std::string> interleaved = {
      "parallelism.schedule=depth-first", "parallelism.stages_per_device=2",
      "parallelism.microbatches=16", "cluster.intra_node_bandwidth=1e11"};
  std::optional<VerifiedPlan> paired = compile(interleaved, true),
                              apart = compile(interleaved, false);
  ASSERT_TRUE(paired && apart);
  EXPECT_LT(analyzeStep(paired->plan, paired->simulation).stepTimeS,
            analyzeStep(apart->plan, apart->simulation).stepTimeS);
}

/// The input gradients, over the ranks, that precede their rank's last forward and are not
/// followed by their own weight gradient.
int64_t weightGradientsDeferredBeforeTheLastForward(const runtime::Plan &plan) {
  int64_t deferred = 0;
  for (const runtime::RankProgram &rank : plan.ranks) {
    std::vector<const Instruction *> compute;
    for (const Instruction &x : rank.instructions)
      if (x.isCompute())
        compute.push_back(&x);
    size_t lastForward = 0;
    for (size_t i = 0; i < compute.size(); ++i)
      if (compute[i]->op == Op::Forward)
        lastForward = i;
    for (size_t i = 0; i < lastForward; ++i) {
      const Instruction &x = *compute[i], &next = *compute[i + 1];
      deferred +=
          x.op == Op::BackwardInput && !(next.op == Op::BackwardWeight && next.stage == x.stage &&
                                         next.microbatch == x.microbatch);
    }
  }
  return deferred;
}

TEST(ExpertAllToAlls, DualPipeVKeepsBackwardsWholeWhereTheAllToAllsOverlap) {
  // DualPipe's own order: the pairs carry whole backwards until a rank's last forward. Without
  // the overlap there is nothing for them to hide, and the weight gradients wait where the
  // rank would (Zero Bubble's rule).
  std::vector<std::string> dualpipe = kPairingSchedules[0];
  dualpipe.push_back("parallelism.microbatches=16");
  std::optional<VerifiedPlan> paired = compile(dualpipe, true), apart = compile(dualpipe, false);
  ASSERT_TRUE(paired && apart);
  EXPECT_EQ(weightGradientsDeferredBeforeTheLastForward(paired->plan), 0);
  EXPECT_GT(weightGradientsDeferredBeforeTheLastForward(apart->plan), 0);
}

TEST(ExpertAllToAlls, MemoryHoldsTheRoutedTokensAtTheStatedImbalance) {
  // A block with experts holds its routed tokens at the busiest rank's load: per sample, the
  // routed activations at the mean (2 x 512 tokens x 512 dispatched, 3 x 1024 x 1024 expert
  // hidden elements, bf16; no outputs: the weights apply to the activations) times the
  // imbalance beyond 1.
  std::optional<VerifiedPlan> even = compile({"model.moe.imbalance=1"}),
                              uneven = compile({"model.moe.imbalance=1.5"});
  ASSERT_TRUE(even && uneven);
  const int64_t perSample = (2 * 512 * 512 + 2 * 3 * 512 * 1024) * 2 / 2;
  for (size_t r = 0; r < even->plan.ranks.size(); ++r) {
    const int64_t more =
        uneven->plan.ranks[r].peakMemoryBytes - even->plan.ranks[r].peakMemoryBytes;
    EXPECT_GT(more, 0) << "rank " << r;
    EXPECT_EQ(more % perSample, 0) << "rank " << r << ": " << more;
  }
}

//===----------------------------------------------------------------------===//
// The simulator's checks
//===----------------------------------------------------------------------===//

/// The simulator's verdict on `plan` (with unit costs): the instruction and the message.
std::pair<int64_t, std::string> simulated(const runtime::Plan &plan) {
  SimulationResult result = simulatePlan(plan, PlanCosts::unit(plan));
  if (!result.error)
    return {-1, "ok"};
  return {result.error->instruction, result.error->message};
}

/// The first forward of rank 1 with all-to-alls: its index.
size_t firstForward(const runtime::Plan &plan) {
  const std::vector<Instruction> &list = plan.ranks[1].instructions;
  for (size_t i = 0; i + 1 < list.size(); ++i)
    if (list[i].op == Op::Forward && list[i + 1].isExpertAllToAll())
      return i;
  ADD_FAILURE() << "no forward with all-to-alls";
  return 0;
}

TEST(ExpertAllToAllSimulation, RefusesWhatTheComputeDoesNotIssue) {
  std::optional<VerifiedPlan> v = compile();
  ASSERT_TRUE(v);
  EXPECT_EQ(simulated(v->plan).second, "ok");
  const size_t f = firstForward(v->plan);
  auto rank1 = [](runtime::Plan &plan) -> std::vector<Instruction> & {
    return plan.ranks[1].instructions;
  };
  // F issues dispatch, combine for each of its two blocks: four all-to-alls.
  {
    runtime::Plan plan = v->plan; // the last one missing
    rank1(plan).erase(rank1(plan).begin() + f + 4);
    // Named at the next instruction of the compute stream.
    size_t next = f + 4;
    while (rank1(plan)[next].stream != runtime::kComputeStream)
      ++next;
    auto [at, message] = simulated(plan);
    EXPECT_EQ(at, static_cast<int64_t>(next));
    EXPECT_NE(message.find("issues all-to-all 4 of 4, expert_combine of 2621440 bytes for layer "
                           "4; the plan lacks it"),
              std::string::npos)
        << message;
  }
  {
    runtime::Plan plan = v->plan; // one too many
    rank1(plan).insert(rank1(plan).begin() + f + 5, rank1(plan)[f + 4]);
    auto [at, message] = simulated(plan);
    EXPECT_EQ(at, static_cast<int64_t>(f + 5));
    EXPECT_NE(message.find("is an all-to-all that " + std::to_string(f) +
                           " (F s1 mb0) does not issue: it issues 4"),
              std::string::npos)
        << message;
  }
  {
    runtime::Plan plan = v->plan; // resized
    rank1(plan)[f + 2].bytes += 2;
    auto [at, message] = simulated(plan);
    EXPECT_EQ(at, static_cast<int64_t>(f + 2));
    EXPECT_NE(message.find("is all-to-all 2 of 4 of " + std::to_string(f) +
                           " (F s1 mb0), which issues expert_combine of 2621440 bytes for layer "
                           "3 there"),
              std::string::npos)
        << message;
  }
  {
    runtime::Plan plan = v->plan; // reordered
    std::swap(rank1(plan)[f + 1], rank1(plan)[f + 2]);
    auto [at, message] = simulated(plan);
    EXPECT_EQ(at, static_cast<int64_t>(f + 1));
    EXPECT_NE(message.find("is all-to-all 1 of 4 of " + std::to_string(f) +
                           " (F s1 mb0), which issues expert_dispatch"),
              std::string::npos)
        << message;
  }
  {
    runtime::Plan plan = v->plan; // hidden behind a compute that is not its pair's
    rank1(plan)[f + 1].peerStage = 1;
    rank1(plan)[f + 1].peerMicrobatch = 1;
    auto [at, message] = simulated(plan);
    EXPECT_EQ(at, static_cast<int64_t>(f + 1));
    EXPECT_NE(message.find("hides behind s1 mb1, which is not the other half of a paired step"),
              std::string::npos)
        << message;
  }
}

} // namespace
