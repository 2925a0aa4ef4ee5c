//===- TiedEmbeddingsTest.cpp - tie_grads placed, lowered and verified ----===//
//
// A Llama-style model with tied embeddings over every schedule family, P, V, D and sharding:
// each rank that holds the first or the last stage sums the tied copies once, after all its
// other point-to-point transfers and before those stages' reductions and optimizer steps,
// with the rank of the other copy or in place. So does an untied one with multi-token
// prediction modules, whose stage (the head's) keeps a copy of the token table. Plans broken by
// hand (a tie left out, moved before the pipeline's transfers, with the wrong peer) are refused
// naming the instruction.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/CompileToModule.h"
#include "tests/unit/passes/PlanVerdict.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

namespace {

struct Case {
  const char *schedule;
  int64_t p, v, d;
  const char *sharding;
};

/// llama-tiny (tied embeddings) laid out as `c` says, with `extra` overrides after.
std::optional<runtime::Plan> compileTied(const Case &c, std::string *errors = nullptr,
                                         const std::vector<std::string> &extra = {}) {
  Diagnostics diag("llama-tiny.json");
  std::vector<std::string> overrides = {"parallelism.schedule=" + std::string(c.schedule),
                                        "parallelism.pipeline=" + std::to_string(c.p),
                                        "parallelism.stages_per_device=" + std::to_string(c.v),
                                        "parallelism.data=" + std::to_string(c.d),
                                        "parallelism.sharding=" + std::string(c.sharding),
                                        "parallelism.microbatches=" + std::to_string(2 * c.p),
                                        "model.num_layers=8"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  std::optional<Job> job =
      readJobFile(std::string(CONDUIT_TESTDATA) + "/jobs/llama-tiny.json", diag, overrides);
  if (!job) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  CompiledModule compiled = compileToModule(*job);
  if (errors)
    *errors = compiled.errors;
  if (!compiled.ok || !compiled.verified)
    return std::nullopt;
  return compiled.verified->plan;
}

const Case kCases[] = {
    {"1f1b", 2, 1, 1, "none"},          {"1f1b", 4, 1, 2, "full"},
    {"gpipe", 2, 1, 2, "optimizer"},    {"breadth-first", 2, 2, 2, "full"},
    {"breadth-first", 4, 2, 1, "none"}, {"depth-first", 2, 2, 2, "gradients"},
    {"zb-h1", 2, 1, 2, "full"},         {"interleaved-zb", 2, 2, 1, "none"},
    {"zbv", 2, 2, 2, "full"},           {"dualpipev", 4, 2, 2, "none"},
    {"1f1b", 1, 1, 2, "full"},          {"breadth-first", 1, 2, 1, "none"},
};

/// Each rank that holds the first or the last stage sums the two copies of the token table
/// once, at the end of its step, before those stages' reductions and updates.
void expectTiesAtTheEnd(const std::vector<std::string> &extra) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(std::string(c.schedule) + " P" + std::to_string(c.p) + " V" + std::to_string(c.v) +
                 " D" + std::to_string(c.d) + " " + c.sharding);
    std::string errors;
    std::optional<runtime::Plan> plan = compileTied(c, &errors, extra);
    ASSERT_TRUE(plan) << errors;
    const int32_t last = static_cast<int32_t>(plan->stages.size()) - 1;
    const int32_t first = plan->stages.front().rank, lastRank = plan->stages.back().rank;
    for (const runtime::RankProgram &program : plan->ranks) {
      std::vector<size_t> ties;
      for (size_t k = 0; k < program.instructions.size(); ++k)
        if (program.instructions[k].op == Op::TieGrads)
          ties.push_back(k);
      const bool holds = program.rank == first || program.rank == lastRank;
      ASSERT_EQ(ties.size(), holds ? 1u : 0u) << "rank " << program.rank;
      if (!holds)
        continue;
      const Instruction &tie = program.instructions[ties[0]];
      // With the other copy's rank, or in place; over the first and the last stage.
      EXPECT_EQ(tie.peer, program.rank == first ? lastRank : first);
      EXPECT_EQ(std::min(tie.stage, tie.peerStage), 0);
      EXPECT_EQ(std::max(tie.stage, tie.peerStage), last);
      EXPECT_EQ(tie.bytes, 128 * 64 * 4); // vocabulary x hidden, 4-byte gradients
      for (size_t k = ties[0] + 1; k < program.instructions.size(); ++k) {
        const Instruction &after = program.instructions[k];
        EXPECT_FALSE(after.isTransfer()) << "a transfer after the tie: " << k;
        EXPECT_FALSE(after.isCompute()) << "compute after the tie: " << k;
      }
      // The tied stages are reduced and updated after it, never before.
      for (size_t k = 0; k < ties[0]; ++k) {
        const Instruction &before = program.instructions[k];
        bool tiedStage = before.stage == 0 || before.stage == last;
        EXPECT_FALSE(tiedStage && (before.op == Op::ReduceScatter || before.op == Op::AllReduce ||
                                   before.op == Op::OptimizerStep))
            << "instruction " << k << " reduces or updates a tied stage before the tie";
      }
    }
  }
}

TEST(TiedEmbeddings, EveryRankWithACopySumsItOnceAtTheEnd) { expectTiesAtTheEnd({}); }

// Untied, a multi-token prediction module keeps a copy of the token table on the last stage
// (Megatron-Core's embedding group): the same tie, over the same stages, of the same bytes.
TEST(TiedEmbeddings, MultiTokenPredictionTiesItsCopyOfTheTable) {
  expectTiesAtTheEnd({"model.tie_embeddings=false", "model.mtp_layers=1"});
  // With tied embeddings the head's matrix is the modules' table too: one tie, as without them.
  expectTiesAtTheEnd({"model.mtp_layers=2"});
}

TEST(TiedEmbeddings, MultiTokenPredictionStaysWithTheHead) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(std::string(c.schedule) + " P" + std::to_string(c.p) + " V" + std::to_string(c.v));
    std::string errors;
    std::optional<runtime::Plan> plan =
        compileTied(c, &errors, {"model.tie_embeddings=false", "model.mtp_layers=2"});
    ASSERT_TRUE(plan) << errors;
    // Layers: the embedding, 8 blocks, mtp.0 and mtp.1, the head.
    EXPECT_LE(plan->stages.back().firstLayer, 9);
    // The first module holds the table's copy: 128 x 64 beyond the second's.
    EXPECT_EQ(plan->layers[9].params - plan->layers[10].params, 128 * 64);
  }
}

TEST(TiedEmbeddings, UntiedModelsHaveNoTie) {
  Diagnostics diag("llama-tiny.json");
  std::optional<Job> job = readJobFile(std::string(CONDUIT_TESTDATA) + "/jobs/llama-tiny.json",
                                       diag, {"model.tie_embeddings=false"});
  ASSERT_TRUE(job);
  CompiledModule compiled = compileToModule(*job);
  ASSERT_TRUE(compiled.ok && compiled.verified) << compiled.errors;
  for (const runtime::RankProgram &program : compiled.verified->plan.ranks)
    for (const Instruction &i : program.instructions)
      EXPECT_NE(i.op, Op::TieGrads);
}

/// The index of rank r's tie_grads.
size_t tieOf(const runtime::Plan &plan, int32_t r) {
  const std::vector<Instruction> &list = plan.ranks[r].instructions;
  return static_cast<size_t>(
      std::find_if(list.begin(), list.end(),
                   [](const Instruction &i) { return i.op == Op::TieGrads; }) -
      list.begin());
}

TEST(TiedEmbeddings, ModulesApartFromTheHeadAreRefused) {
  std::optional<runtime::Plan> good = compileTied(
      {"1f1b", 2, 1, 1, "none"}, nullptr, {"model.tie_embeddings=false", "model.mtp_layers=1"});
  ASSERT_TRUE(good);
  ASSERT_EQ(verdict(*good), "");
  // The last stage holds the head alone, its module on the stage before.
  runtime::Plan apart = *good;
  while (apart.stages[1].firstLayer < 10) {
    const int64_t moved = apart.layers[apart.stages[1].firstLayer++].params;
    apart.stages[0].endLayer += 1;
    apart.stages[0].params += moved;
    apart.stages[1].params -= moved;
  }
  EXPECT_NE(verdict(apart).find("the multi-token prediction modules (from layer 9) stay on it with "
                                "the head"),
            std::string::npos)
      << verdict(apart);
}

TEST(TiedEmbeddings, HandBrokenPlansAreRefusedNamingTheInstruction) {
  std::optional<runtime::Plan> good = compileTied({"breadth-first", 2, 2, 2, "full"});
  ASSERT_TRUE(good);
  ASSERT_EQ(verdict(*good), "");

  // Rank 1 never sums its copy.
  runtime::Plan missing = *good;
  std::vector<Instruction> &list1 = missing.ranks[1].instructions;
  list1.erase(list1.begin() + static_cast<std::ptrdiff_t>(tieOf(missing, 1)));
  EXPECT_NE(verdict(missing).find("rank 0 instruction"), std::string::npos) << verdict(missing);
  EXPECT_NE(verdict(missing).find("never ties its copy with it"), std::string::npos);

  // Rank 1 exchanges with itself instead of rank 0.
  runtime::Plan wrongPeer = *good;
  wrongPeer.ranks[1].instructions[tieOf(wrongPeer, 1)].peer = 1;
  EXPECT_NE(verdict(wrongPeer).find("the peer stage not on the peer rank"), std::string::npos)
      << verdict(wrongPeer);

  // Rank 1 exchanges before its first transfer: before the head's gradients exist.
  runtime::Plan early = *good;
  std::vector<Instruction> &list = early.ranks[1].instructions;
  const size_t tie = tieOf(early, 1);
  size_t firstTransfer = 0;
  while (!list[firstTransfer].isTransfer())
    ++firstTransfer;
  Instruction moved = list[tie];
  list.erase(list.begin() + static_cast<std::ptrdiff_t>(tie));
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(firstTransfer), moved);
  std::string message = verdict(early);
  EXPECT_NE(message.find("may sum the tied gradients before the backward of stage 3"),
            std::string::npos)
      << message;

  // A reduction of the head's stage before its copies are summed.
  runtime::Plan reduceFirst = *good;
  std::vector<Instruction> &ranks1 = reduceFirst.ranks[1].instructions;
  const int32_t lastStage = static_cast<int32_t>(reduceFirst.stages.size()) - 1;
  auto reduction = std::find_if(ranks1.begin(), ranks1.end(), [&](const Instruction &i) {
    return i.op == Op::ReduceScatter && i.stage == lastStage;
  });
  ASSERT_NE(reduction, ranks1.end());
  Instruction reduce = *reduction;
  ranks1.erase(reduction);
  ranks1.insert(ranks1.begin() + static_cast<std::ptrdiff_t>(tieOf(reduceFirst, 1)), reduce);
  message = verdict(reduceFirst);
  EXPECT_NE(message.find("before its tied copies' gradients are summed"), std::string::npos)
      << message;
}

} // namespace
