//===- CompileJobTest.cpp - the one compile of a job ----------------------===//
//
// compileJob() gives the verified plan with the figures of its step, says how much memory a
// plan that does not fit would need, and reports the compiler's first error without MLIR's op
// prefix; compileModule() stops where it is told.
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileJob.h"

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
