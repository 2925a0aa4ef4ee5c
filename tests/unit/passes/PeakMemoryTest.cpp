//===- PeakMemoryTest.cpp - what activation checkpointing holds -----------===//
//
// The memory plan's activations under each checkpointing mode for the 1.7B GPT of issue 15
// (24 blocks in one stage, micro-batch 8), through the whole pipeline and the pass side's
// analyzeMemory: full checkpointing holds one layer's activations beside every layer's input,
// selective all activations but the attention cores', one core at a time. The algorithm's own
// cases, by hand, are in tests/unit/analysis/PeakMemoryTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/PeakMemory.h"
#include "job/TransformerCosts.h"
#include "tests/unit/CompileToModule.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace conduit;

namespace {

Job gpt17b(pipe::Checkpointing checkpointing) {
  Diagnostics diag("gpt2-small.json");
  std::optional<Job> job = readJobFile(
      std::string(CONDUIT_TESTDATA) + "/jobs/gpt2-small.json", diag,
      {"model.attention=eager", // the issue's model: the probabilities kept
       "model.num_layers=24", "model.hidden_size=2304", "model.num_heads=24",
       "model.seq_length=2048", "model.vocab_size=51200", "parallelism.pipeline=1",
       "parallelism.data=1", "parallelism.microbatch_size=8", "cluster.memory_bytes=1e12",
       "parallelism.activation_checkpointing=" +
           pipe::stringifyCheckpointing(checkpointing).str()});
  EXPECT_TRUE(job.has_value()) << (diag.getError() ? diag.getError()->str() : "");
  return *job;
}

RankMemory memoryOf(const Job &job) {
  CompiledModule compiled = compileToModule(job, PipelineStop::Communicating);
  EXPECT_TRUE(compiled.ok) << compiled.errors;
  pipe::ModelOp model = *compiled.module->getOps<pipe::ModelOp>().begin();
  mlir::FailureOr<std::vector<RankMemory>> ranks = analyzeMemory(model);
  EXPECT_TRUE(mlir::succeeded(ranks));
  return ranks->front();
}

TEST(PeakMemory, CheckpointingHoldsOneLayerOfTheIssuesGpt) {
  const Job none = gpt17b(pipe::Checkpointing::None);
  const int64_t b = 8;
  int64_t largest = 0, inputs = 0, cores = 0;
  for (const LayerSpec &layer : none.model.layers) {
    largest = std::max(largest, layer.activationBytes);
    inputs += layer.checkpointBytes;
    cores += selectiveBytesOf(layer, runtime::kRecomputeCoreAttention).value_or(0);
  }
  const RankMemory full = memoryOf(gpt17b(pipe::Checkpointing::Full));
  const auto at = [](const RankMemory &m, MemoryKind kind) {
    return m.atPeak[static_cast<int>(kind)];
  };
  // The largest layer is the head (its fp32 logits), 3.3 GiB for 8 samples, not the stage's
  // 66.3 GiB; beside it every layer's input.
  EXPECT_EQ(at(full, MemoryKind::Working), b * largest);
  EXPECT_EQ(at(full, MemoryKind::Activations), b * inputs);
  EXPECT_LT(at(full, MemoryKind::Working), int64_t(4) << 30);

  const RankMemory selective = memoryOf(gpt17b(pipe::Checkpointing::Selective));
  const RankMemory kept = memoryOf(none);
  EXPECT_GT(cores, 0);
  EXPECT_EQ(at(kept, MemoryKind::Activations) - at(selective, MemoryKind::Activations), b * cores);
  EXPECT_LT(full.peak, selective.peak);
  EXPECT_LT(selective.peak, kept.peak);
}

} // namespace
