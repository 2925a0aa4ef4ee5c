//===- GradientReductionTest.cpp - reducing sharded gradients each run ---===//
//
// gradient_reduction "run" on a depth-first plan: each run of a stage's backwards is
// reduce-scattered once, every backward waits for its stage's previous reduction, and the
// memory plan holds at most two stages' whole gradients where "step" holds every local
// stage's. Plans broken by hand (a reduction repeated, one left out, a backward no longer
// ordered after the reduction reading its stage's gradients) are refused by the verifier's
// simulation, naming the instruction.
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

/// llama-tiny depth-first over 2 pipeline ranks of 2 stages, 2 replicas, full sharding, 8
/// micro-batches in groups of 2, reduced once per step or after each run; embeddings tied or
/// not.
std::optional<runtime::Plan> compileDepthFirst(const std::string &reduction, bool tied = true) {
  Diagnostics diag("llama-tiny.json");
  std::optional<Job> job = readJobFile(
      std::string(CONDUIT_TESTDATA) + "/jobs/llama-tiny.json", diag,
      {"parallelism.schedule=depth-first", "parallelism.microbatches=8", "parallelism.group_size=2",
       "parallelism.gradient_reduction=" + reduction, "model.num_layers=8",
       std::string("model.tie_embeddings=") + (tied ? "true" : "false")});
  if (!job) {
    ADD_FAILURE() << diag.getError()->str();
    return std::nullopt;
  }
  CompiledModule compiled = compileToModule(*job);
  if (!compiled.ok || !compiled.verified) {
    ADD_FAILURE() << compiled.errors;
    return std::nullopt;
  }
  return compiled.verified->plan;
}

int64_t count(const std::vector<Instruction> &program, Op op) {
  return std::count_if(program.begin(), program.end(),
                       [&](const Instruction &i) { return i.op == op; });
}

TEST(GradientReduction, EachRunIsReducedAndBoundsTheWholeGradients) {
  std::optional<runtime::Plan> once = compileDepthFirst("step"), eachRun = compileDepthFirst("run");
  ASSERT_TRUE(once && eachRun);
  EXPECT_EQ(verdict(*eachRun), "");
  for (size_t r = 0; r < eachRun->ranks.size(); ++r) {
    // Two local stages: the tied one (stage 0 or 3) reduced once, after its copies are
    // summed; the other after each of its 4 groups of 2 micro-batches.
    EXPECT_EQ(count(once->ranks[r].instructions, Op::ReduceScatter), 2) << "rank " << r;
    EXPECT_EQ(count(eachRun->ranks[r].instructions, Op::ReduceScatter), 1 + 4) << "rank " << r;
  }
  // Untied, both local stages are reduced after each run, and a stage's whole gradients no
  // longer wait for the end of the step beside the other's: no rank needs more memory, and
  // the worst (rank 0, whose peak is in its backwards) less.
  once = compileDepthFirst("step", /*tied=*/false);
  eachRun = compileDepthFirst("run", /*tied=*/false);
  ASSERT_TRUE(once && eachRun);
  for (size_t r = 0; r < eachRun->ranks.size(); ++r) {
    EXPECT_EQ(count(eachRun->ranks[r].instructions, Op::ReduceScatter), 2 * 4) << "rank " << r;
    EXPECT_LE(eachRun->ranks[r].peakMemoryBytes, once->ranks[r].peakMemoryBytes) << "rank " << r;
  }
  EXPECT_LT(eachRun->ranks[0].peakMemoryBytes, once->ranks[0].peakMemoryBytes);
}

TEST(GradientReduction, BrokenReductionsAreRefused) {
  std::optional<runtime::Plan> good = compileDepthFirst("run");
  ASSERT_TRUE(good);
  // Rank 0 holds stages 0 (tied) and 2; stage 2 is reduced after each run.
  std::vector<Instruction> &program = good->ranks[0].instructions;
  std::vector<size_t> reductions;
  for (size_t i = 0; i < program.size(); ++i)
    if (program[i].op == Op::ReduceScatter && program[i].stage == 2)
      reductions.push_back(i);
  ASSERT_EQ(reductions.size(), 4u);

  // A reduction repeated: nothing new to reduce.
  runtime::Plan twice = *good;
  std::vector<Instruction> &again = twice.ranks[0].instructions;
  again.insert(again.begin() + static_cast<std::ptrdiff_t>(reductions[0]) + 1,
               again[reductions[0]]);
  std::string message = verdict(twice);
  EXPECT_NE(message.find("reduces the gradients of stage 2 with no backward or weight gradient "
                         "since its previous reduction"),
            std::string::npos)
      << message;

  // The last reduction left out: the last group's gradients are never reduced.
  runtime::Plan lost = *good;
  lost.ranks[0].instructions.erase(lost.ranks[0].instructions.begin() +
                                   static_cast<std::ptrdiff_t>(reductions.back()));
  message = verdict(lost);
  EXPECT_NE(message.find("updates stage 2 before the weight gradients of all its micro-batches "
                         "are reduced"),
            std::string::npos)
      << message;

  // The wait that orders the next backward of stage 2 after the first reduction removed: it
  // would add to the gradients that reduction reads.
  runtime::Plan racing = *good;
  std::vector<Instruction> &list = racing.ranks[0].instructions;
  int32_t event = -1;
  for (size_t i = reductions[0] + 1; i < list.size() && event < 0; ++i)
    if (list[i].op == Op::Signal && list[i].stream == list[reductions[0]].stream)
      event = list[i].event;
  ASSERT_GE(event, 0);
  auto wait = std::find_if(list.begin(), list.end(), [&](const Instruction &i) {
    return i.op == Op::Wait && i.event == event && i.stream == runtime::kComputeStream;
  });
  ASSERT_NE(wait, list.end());
  list.erase(wait);
  message = verdict(racing);
  EXPECT_NE(message.find("may add to the gradients of stage 2 while its reduction"),
            std::string::npos)
      << message;
}

} // namespace
