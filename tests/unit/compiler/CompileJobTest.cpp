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
#include "passes/PlanExport.h"
#include "runtime/plan/PlanFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

using namespace conduit;

namespace {

Job readJob(const std::string &name, const std::vector<std::string> &overrides = {}) {
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + name;
  Diagnostics diag(path);
  std::optional<Job> job = readJobFile(path, diag, overrides);
  EXPECT_TRUE(job) << (diag.failed() ? diag.getError()->str() : "");
  return *job;
}

Job demoJob(const std::vector<std::string> &overrides = {}) {
  return readJob("demo.json", overrides);
}

/// The plan.rank ops of the module's program, in order.
std::vector<plan::RankOp> rankOps(mlir::ModuleOp module) {
  std::vector<plan::RankOp> ranks;
  for (plan::ProgramOp program : module.getOps<plan::ProgramOp>())
    for (plan::RankOp rank : program.getRanks())
      ranks.push_back(rank);
  return ranks;
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

TEST(CompileJob, DefersFewerWeightGradientsWhereThePlanWouldNotFit) {
  // The demo on DualPipeV over four ranks: with its own limit (P = 4 deferred weight gradients
  // a rank) and with none deferred.
  auto dualPipeV = [](std::vector<std::string> more) {
    std::vector<std::string> overrides = {"parallelism.schedule=dualpipev",
                                          "parallelism.pipeline=4", "parallelism.data=1",
                                          "model.num_layers=8", "parallelism.microbatches=16"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return demoJob(overrides);
  };
  const CompiledJob own = compileJob(dualPipeV({}));
  const CompiledJob none = compileJob(dualPipeV({"parallelism.max_deferred_weight_gradients=0"}));
  ASSERT_TRUE(own.ok() && none.ok()) << own.error << none.error;
  const int64_t ownPeak = own.report->peakMemoryBytes, nonePeak = none.report->peakMemoryBytes;
  ASSERT_LT(nonePeak, ownPeak);

  // A device between the two: the compiler limits the deferral, says so, and the plan fits.
  const std::string between = "cluster.memory_bytes=" + std::to_string((nonePeak + ownPeak) / 2);
  const CompiledJob fitted = compileJob(dualPipeV({between}));
  ASSERT_TRUE(fitted.ok()) << fitted.error;
  EXPECT_LE(fitted.report->peakMemoryBytes, (nonePeak + ownPeak) / 2);
  ASSERT_EQ(fitted.warnings.size(), 1u);
  const std::string &warning = fitted.warnings[0];
  EXPECT_EQ(
      warning.rfind("parallelism.max_deferred_weight_gradients: dualpipev defers at most ", 0), 0u)
      << warning;
  // The limit it names is the plan's: stated in the job, it gives the same step.
  const std::string limit = warning.substr(warning.find("at most ") + 8, 1);
  ASSERT_LT(std::stoi(limit), 4);
  const CompiledJob stated =
      compileJob(dualPipeV({between, "parallelism.max_deferred_weight_gradients=" + limit}));
  ASSERT_TRUE(stated.ok()) << stated.error;
  EXPECT_TRUE(stated.warnings.empty());
  EXPECT_EQ(stated.report->stepTimeS, fitted.report->stepTimeS);
  EXPECT_EQ(stated.report->peakMemoryBytes, fitted.report->peakMemoryBytes);

  // A limit the job states is kept: the schedule's own is refused as before.
  const CompiledJob kept =
      compileJob(dualPipeV({between, "parallelism.max_deferred_weight_gradients=4"}));
  EXPECT_FALSE(kept.ok());
  EXPECT_EQ(kept.refusedPeakBytes, ownPeak);
  // Where even none deferred does not fit, the refusal is the one of the schedule's own order.
  const CompiledJob tight =
      compileJob(dualPipeV({"cluster.memory_bytes=" + std::to_string(nonePeak - 1)}));
  EXPECT_FALSE(tight.ok());
  EXPECT_EQ(tight.refusedPeakBytes, ownPeak);
  EXPECT_NE(tight.error.find("needs"), std::string::npos) << tight.error;
}

TEST(CompileJob, TheOptimizersKernelsPriceItsStepAndChangeNothingElse) {
  // The demo job's optimizer step as separate operations moves 72 (foreach) and 80 (per tensor)
  // bytes a parameter where the fused kernel moves 30: each step is longer, by more per tensor;
  // the memory plan is the same (the lit test bad/optimizer-kernels.test compares the plan
  // files).
  const CompiledJob fused = compileJob(demoJob());
  const CompiledJob foreach = compileJob(demoJob({"training.optimizer_kernels=foreach"}));
  const CompiledJob perTensor = compileJob(demoJob({"training.optimizer_kernels=per_tensor"}));
  ASSERT_TRUE(fused.ok() && foreach.ok() && perTensor.ok());
  EXPECT_GT(foreach.report->stepTimeS, fused.report->stepTimeS);
  EXPECT_GT(perTensor.report->stepTimeS, foreach.report->stepTimeS);
  EXPECT_EQ(foreach.report->peakMemoryBytes, fused.report->peakMemoryBytes);
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
  // Every schedule, checkpointing, sharding and tensor degree of the demo job that compiles (and
  // under full sharding, both places of the master weights; with T = 2, Adam's moments in bf16):
  // the bound the compiler refuses by is at most what the memory plan finds.
  int compiled = 0;
  for (const char *schedule :
       {"gpipe", "1f1b", "depth-first", "breadth-first", "zb-h1", "interleaved-zb", "zbv"})
    for (const char *checkpointing : {"none", "selective", "full"})
      for (const char *sharding : {"none", "optimizer", "gradients", "full", "full-fp32-master"})
        for (int tensor : {1, 2}) {
          const bool fsdp = std::string(sharding) == "full-fp32-master";
          std::vector<std::string> overrides = {
              std::string("parallelism.schedule=") + schedule,
              std::string("parallelism.activation_checkpointing=") + checkpointing,
              std::string("parallelism.sharding=") + (fsdp ? "full" : sharding),
              "parallelism.tensor=" + std::to_string(tensor), "training.dtype=bf16"};
          if (fsdp)
            overrides.push_back("training.master_weights=parameters");
          if (tensor == 2)
            overrides.push_back("training.adam_moments=bf16");
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
  EXPECT_GE(compiled, 110);
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

/// Jobs whose plans cover every kind of instruction: schedules with split backwards and paired
/// steps, tensor collectives, expert all-to-alls, tied embeddings across ranks, sharding.
const std::vector<std::pair<std::string, std::vector<std::string>>> &variedJobs() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> jobs = {
      {"demo.json", {}},
      {"demo.json", {"parallelism.schedule=zbv"}},
      {"demo.json", {"parallelism.schedule=breadth-first", "parallelism.stages_per_device=2"}},
      {"tp-gpt-tiny.json", {}},
      {"moe-tiny.json", {}},
      {"moe-tiny.json", {"parallelism.schedule=dualpipev", "parallelism.stages_per_device=2"}},
      {"gpt2-small.json", {"parallelism.sharding=full"}},
  };
  return jobs;
}

TEST(CompileModule, ThePlanIsTheSameWithOrWithoutPlanOps) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  for (const auto &[name, overrides] : variedJobs()) {
    SCOPED_TRACE(name + (overrides.empty() ? "" : " " + overrides.front()));
    const Job job = readJob(name, overrides);
    std::string bytes[2];
    for (bool planOps : {true, false}) {
      mlir::MLIRContext context(registry);
      ModuleOptions module;
      module.planOps = planOps;
      ModuleCompilation compiled = compileModule(job, context, {}, module);
      ASSERT_TRUE(compiled.succeeded && compiled.verified);
      const runtime::Plan &plan = compiled.verified->plan;
      std::vector<plan::RankOp> ranks = rankOps(*compiled.module);
      ASSERT_EQ(ranks.size(), plan.ranks.size());
      for (auto [op, rank] : llvm::zip(ranks, plan.ranks)) {
        const size_t ops = op.getBody().front().getOperations().size();
        EXPECT_EQ(ops, planOps ? rank.instructions.size() : 0);
        EXPECT_GT(rank.instructions.size(), 0u);
      }
      bytes[planOps] = runtime::writePlan(plan);
    }
    EXPECT_EQ(bytes[0], bytes[1]);
  }
}

TEST(CompileModule, TheStepIsTheSameWithOrWithoutSimulatedTimes) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  for (const auto &[name, overrides] : variedJobs()) {
    SCOPED_TRACE(name + (overrides.empty() ? "" : " " + overrides.front()));
    const Job job = readJob(name, overrides);
    SimulationResult steps[2];
    for (bool times : {true, false}) {
      mlir::MLIRContext context(registry);
      ModuleOptions module;
      module.planOps = false;
      module.simulatedTimes = times;
      ModuleCompilation compiled = compileModule(job, context, {}, module);
      ASSERT_TRUE(compiled.succeeded && compiled.verified);
      steps[times] = std::move(compiled.verified->simulation);
      const size_t ranks = compiled.verified->plan.ranks.size();
      EXPECT_EQ(steps[times].times.size(), times ? ranks : 0);
      EXPECT_EQ(steps[times].matched.size(), times ? ranks : 0);
    }
    EXPECT_GT(steps[0].makespan, 0);
    EXPECT_EQ(steps[0].makespan, steps[1].makespan);
    EXPECT_EQ(steps[0].events, steps[1].events);
    EXPECT_EQ(steps[0].allToAllS, steps[1].allToAllS);
  }
}

TEST(VerifyProgram, NamesAnInstructionKeptAsDataThatIsWrong) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    errors += diag.str() + "\n";
    return mlir::success();
  });
  ModuleOptions module;
  module.until = PipelineStop::Lowered;
  ModuleCompilation compiled = compileModule(demoJob(), context, {}, module);
  ASSERT_TRUE(compiled.succeeded);
  plan::ProgramOp program = *compiled.module->getOps<plan::ProgramOp>().begin();
  // The instructions as data, the plan.rank ops emptied, as conduit-lower-to-plan leaves them
  // without plan ops; then one wait on an event its rank never signals.
  std::vector<std::vector<runtime::Instruction>> instructions;
  for (runtime::RankProgram &rank : exportPlan(program).ranks)
    instructions.push_back(std::move(rank.instructions));
  for (plan::RankOp rank : program.getRanks())
    rank.getBody().front().clear();
  auto wait = llvm::find_if(
      instructions[1], [](const runtime::Instruction &i) { return i.op == runtime::Op::Wait; });
  ASSERT_NE(wait, instructions[1].end());
  wait->event = 1000;
  const int64_t index = wait - instructions[1].begin();
  EXPECT_TRUE(mlir::failed(verifyProgram(program, &instructions)));
  EXPECT_NE(errors.find("instruction " + std::to_string(index) + " (wait)"), std::string::npos)
      << errors;
}

} // namespace
