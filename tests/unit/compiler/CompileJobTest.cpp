//===- CompileJobTest.cpp - the one compile of a job ----------------------===//
//
// compileJob() gives the verified plan with the figures of its step, says how much memory a
// plan that does not fit would need, and reports the compiler's first error without MLIR's op
// prefix; compileModule() stops where it is told.
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileJob.h"

#include "analysis/MemoryBound.h"
#include "compiler/CompileModule.h"
#include "compiler/Registration.h"
#include "job/JobFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

using namespace conduit;

namespace {

Job demoJob(const std::vector<std::string> &overrides = {}) {
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
  Diagnostics diag(path);
  std::optional<Job> job = readJobFile(path, diag, overrides);
  EXPECT_TRUE(job) << (diag.failed() ? diag.getError()->str() : "");
  return *job;
}

TEST(CompileJob, FiguresAreTheReportsOfTheVerifiedPlan) {
  CompiledJob compiled = compileJob(demoJob());
  ASSERT_TRUE(compiled.ok()) << compiled.error;
  ASSERT_TRUE(compiled.report);
  EXPECT_TRUE(compiled.error.empty());
  EXPECT_FALSE(compiled.refusedPeakBytes);
  const PlanReport again = analyzeStep(*compiled.plan, compiled.simulation);
  EXPECT_EQ(compiled.report->stepTimeS, again.stepTimeS);
  EXPECT_GT(compiled.report->stepTimeS, 0);
  int64_t peak = 0;
  for (const runtime::RankProgram &rank : compiled.plan->ranks)
    peak = std::max(peak, rank.peakMemoryBytes);
  EXPECT_EQ(compiled.report->peakMemoryBytes, peak);
}

TEST(CompileJob, APlanThatDoesNotFitSaysWhatItNeeds) {
  CompiledJob compiled = compileJob(demoJob({"cluster.memory_bytes=1000"}));
  EXPECT_FALSE(compiled.ok());
  ASSERT_TRUE(compiled.refusedPeakBytes);
  EXPECT_GT(*compiled.refusedPeakBytes, 1000);
  EXPECT_FALSE(compiled.error.empty());
  EXPECT_NE(compiled.error.rfind("'", 0), 0u) << compiled.error; // no "'pipe.model' op "
}

TEST(CompileJob, ThreadsCompileAtOnce) {
  const Job job = demoJob();
  const CompiledJob alone = compileJob(job);
  ASSERT_TRUE(alone.ok());
  std::vector<double> steps(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < steps.size(); ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 3; ++k) {
        CompiledJob compiled = compileJob(job);
        steps[t] = compiled.report ? compiled.report->stepTimeS : -1;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (double step : steps)
    EXPECT_EQ(step, alone.report->stepTimeS);
}

TEST(CompileJob, AJobThatCannotFitIsRefusedBeforeItIsScheduled) {
  // A breadth-first step keeps every micro-batch before its backwards: a million of them need
  // terabytes, which the memory lower bound says before anything is scheduled.
  CompiledJob compiled = compileJob(demoJob({"parallelism.microbatches=1000000"}));
  EXPECT_FALSE(compiled.ok());
  ASSERT_TRUE(compiled.refusedPeakBytes);
  EXPECT_GT(*compiled.refusedPeakBytes, int64_t(80) << 30);
  EXPECT_NE(compiled.error.find("before their backwards"), std::string::npos) << compiled.error;
  EXPECT_NE(compiled.error.find("cluster.memory_bytes"), std::string::npos) << compiled.error;
  EXPECT_NE(compiled.error.find("parallelism.microbatches"), std::string::npos) << compiled.error;
}

TEST(CompileJob, TheMemoryLowerBoundNeverExceedsACompiledPeak) {
  // Every schedule, checkpointing, sharding and tensor degree of the demo job that compiles: the
  // bound the compiler refuses by is at most what the memory plan finds.
  int compiled = 0;
  for (const char *schedule :
       {"gpipe", "1f1b", "depth-first", "breadth-first", "zb-h1", "interleaved-zb", "zbv"})
    for (const char *checkpointing : {"none", "selective", "full"})
      for (const char *sharding : {"none", "optimizer", "gradients", "full"})
        for (int tensor : {1, 2}) {
          const std::vector<std::string> overrides = {
              std::string("parallelism.schedule=") + schedule,
              std::string("parallelism.activation_checkpointing=") + checkpointing,
              std::string("parallelism.sharding=") + sharding,
              "parallelism.tensor=" + std::to_string(tensor), "training.dtype=bf16"};
          const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
          Diagnostics diag(path);
          std::optional<Job> job = readJobFile(path, diag, overrides);
          if (!job)
            continue; // a combination the job reader refuses (e.g. a schedule's V)
          CompiledJob result = compileJob(*job);
          if (!result.ok())
            continue;
          ++compiled;
          const MemoryBound bound = memoryLowerBound(*job);
          EXPECT_LE(bound.total(), result.report->peakMemoryBytes)
              << schedule << ", " << checkpointing << ", " << sharding << ", T " << tensor
              << ": static " << bound.staticBytes << ", activations " << bound.activationBytes;
        }
  EXPECT_GE(compiled, 90);
}

TEST(CompileModule, StopsWhereItIsTold) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  ModuleOptions module;
  module.until = PipelineStop::Scheduled;
  ModuleCompilation compiled = compileModule(demoJob(), context, {}, module);
  EXPECT_TRUE(compiled.succeeded);
  EXPECT_TRUE(compiled.module);
  EXPECT_FALSE(compiled.verified);
}

} // namespace
