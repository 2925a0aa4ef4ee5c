//===- MicrobatchSearchTest.cpp - UMPIPE's evaluator and searches ---------===//
//
// The step-time evaluator against the full plan simulator on compiled plans (exact equality,
// for random partitions, both schedules, with transfers, collectives and optimizer steps),
// and the searches: each returns a valid partition no worse than the equal one, is
// deterministic, honours its time budget, and ours is at least as good as the genetic
// algorithm.
//
//===----------------------------------------------------------------------===//

#include "dialects/pipe/PipeOps.h"
#include "passes/PassUtils.h"
#include "passes/Pipeline.h"
#include "tests/unit/CompileToModule.h"

#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

using namespace conduit;

namespace {

/// A 6-layer model with stages of different costs, on 3 ranks, with a launch overhead and a
/// network slow enough for transfers to matter.
std::string jobText(const std::string &schedule, int64_t data, const std::string &sharding) {
  return R"({
    "model": {"kind": "layers", "layers": [
      {"name": "a", "params": 1000, "fwd_flops": 2e9, "bwd_flops": 4e9, "activation_bytes": 1e6, "output_bytes": 4e6},
      {"name": "b", "params": 3000, "fwd_flops": 6e9, "bwd_flops": 1.2e10, "activation_bytes": 1e6, "output_bytes": 2e6},
      {"name": "c", "params": 2000, "fwd_flops": 1e9, "bwd_flops": 2e9, "activation_bytes": 1e6, "output_bytes": 8e6},
      {"name": "d", "params": 1000, "fwd_flops": 3e9, "bwd_flops": 6e9, "activation_bytes": 1e6, "output_bytes": 1e6},
      {"name": "e", "params": 5000, "fwd_flops": 4e9, "bwd_flops": 8e9, "activation_bytes": 1e6, "output_bytes": 1e6},
      {"name": "f", "params": 500, "fwd_flops": 1e9, "bwd_flops": 2e9, "activation_bytes": 1e6, "output_bytes": 4}
    ]},
    "parallelism": {"pipeline": 3, "data": )" +
         std::to_string(data) + R"(, "schedule": ")" + schedule +
         R"(", "microbatches": 4, "microbatch_size": 3, "sharding": ")" + sharding + R"(",
                    "stage_layers": [2, 2, 2]},
    "cluster": {"preset": "a100-80gb", "launch_overhead_s": 2e-5, "inter_node_bandwidth": 2e9,
                "gpus_per_node": 1},
    "training": {"dtype": "bf16", "optimizer": "adam"}
  })";
}

/// Compiles the job (with explicit partitions, if any) up to `stop`.
CompiledModule compile(const std::string &text, const sched::Partitions &partitions,
                       PipelineStop stop) {
  Diagnostics diag("test.json");
  std::optional<Json> root = parseJsonText(text, diag);
  EXPECT_TRUE(root) << diag.getError()->str();
  if (!partitions.empty())
    (*root)["parallelism"]["microbatch_partitions"] = partitions;
  std::optional<Job> job = parseJob(*root, "test.json", diag);
  EXPECT_TRUE(job) << diag.getError()->str();
  CompiledModule c = compileToModule(*job, stop);
  EXPECT_TRUE(c.ok) << c.errors;
  return c;
}

sched::StepTimeEvaluator evaluatorFor(const std::string &text) {
  CompiledModule c = compile(text, {}, PipelineStop::Split);
  pipe::ModelOp model = *c.module->getOps<pipe::ModelOp>().begin();
  mlir::FailureOr<sched::StepTimeEvaluator> evaluator = buildStepTimeEvaluator(model);
  EXPECT_TRUE(mlir::succeeded(evaluator));
  return *evaluator;
}

sched::Partitions randomPartitions(std::mt19937_64 &random, int64_t stages, int64_t batch) {
  sched::Partitions p(stages);
  for (std::vector<int64_t> &cut : p) {
    int64_t left = batch;
    while (left > 0) {
      int64_t n = 1 + static_cast<int64_t>(random() % std::min<int64_t>(left, 5));
      cut.push_back(n);
      left -= n;
    }
  }
  return p;
}

TEST(MicrobatchSearch, EvaluatorEqualsThePlanSimulatorExactly) {
  std::mt19937_64 random(11);
  int checked = 0;
  for (const char *schedule : {"gpipe", "1f1b"})
    for (auto [data, sharding] : {std::pair<int64_t, const char *>{1, "none"},
                                  {2, "none"},
                                  {2, "full"},
                                  {2, "optimizer"}}) {
      const std::string text = jobText(schedule, data, sharding);
      sched::StepTimeEvaluator evaluator = evaluatorFor(text);
      for (int trial = 0; trial < 12; ++trial) {
        sched::Partitions p = randomPartitions(random, 3, 12);
        CompiledModule c = compile(text, p, PipelineStop::Plan);
        ASSERT_TRUE(c.verified);
        EXPECT_EQ(evaluator.stepTime(p), c.verified->simulation.makespan)
            << schedule << " D=" << data << " " << sharding << " trial " << trial;
        ++checked;
      }
    }
  EXPECT_EQ(checked, 96);
}

TEST(MicrobatchSearch, MalformedPartitionsAreInfinitelySlow) {
  sched::StepTimeEvaluator evaluator = evaluatorFor(jobText("gpipe", 1, "none"));
  EXPECT_TRUE(std::isinf(evaluator.stepTime({{12}, {12}})));          // a stage missing
  EXPECT_TRUE(std::isinf(evaluator.stepTime({{12}, {6, 5}, {12}})));  // 11 samples
  EXPECT_TRUE(std::isinf(evaluator.stepTime({{12}, {12, 0}, {12}}))); // an empty micro-batch
  EXPECT_TRUE(std::isfinite(evaluator.stepTime({{12}, {6, 6}, {12}})));
}

TEST(MicrobatchSearch, EverySearchReturnsAValidPartitionNoWorseThanEqual) {
  for (const char *schedule : {"gpipe", "1f1b"}) {
    sched::StepTimeEvaluator evaluator = evaluatorFor(jobText(schedule, 2, "full"));
    const double equal = evaluator.stepTime(sched::Partitions(3, {3, 3, 3, 3}));
    double descent = 0;
    for (sched::SearchMethod method :
         {sched::SearchMethod::Greedy, sched::SearchMethod::DP, sched::SearchMethod::Genetic,
          sched::SearchMethod::Descent}) {
      sched::SearchOptions options;
      options.method = method;
      options.baseline = {3, 3, 3, 3};
      options.maxMicrobatches = 8;
      sched::SearchResult result = sched::searchPartitions(evaluator, options);
      const std::string where = std::string(schedule) + " " + sched::searchMethodName(method);
      ASSERT_EQ(result.best.size(), 3u) << where;
      for (const std::vector<int64_t> &cut : result.best) {
        EXPECT_EQ(std::accumulate(cut.begin(), cut.end(), int64_t(0)), 12) << where;
        EXPECT_LE(static_cast<int64_t>(cut.size()), 8) << where;
      }
      EXPECT_EQ(result.baselineStepTime, equal) << where;
      EXPECT_LE(result.stepTime, equal) << where;
      EXPECT_EQ(evaluator.stepTime(result.best), result.stepTime) << where;
      EXPECT_GT(result.evaluated, 0) << where;
      if (method == sched::SearchMethod::Descent)
        descent = result.stepTime;
    }
    EXPECT_LT(descent, equal) << schedule << ": unequal cuts should help this job";
  }
}

// The committed jobs shaped like UMPIPE's cases: our search's partitions beat equal ones under
// GPipe and 1F1B, on 4 and 8 ranks, and are at least as good as the genetic algorithm's, which
// is never worse than equal (docs/results.md has the figures and search times; under GPipe on
// 4 ranks the genetic algorithm finds 0.0% on GPT-1, where ours finds 7.6%). One case finds
// nothing better, and rightly: GPT-1's GEMMs (h 768, 512 tokens a sample) fill a fraction of a
// wave at these micro-batch sizes, so a 1-sample micro-batch takes 54% of a 4-sample one's
// time rather than a quarter, and under 1F1B on 4 ranks the smaller first micro-batches cost
// more than the shorter fill saves.
TEST(MicrobatchSearch, PaperCases) {
  for (const char *name : {"umpipe-gpt1-14", "umpipe-vgg16"}) {
    Diagnostics diag(name);
    std::optional<Json> root =
        loadJsonFile(std::string(CONDUIT_TESTDATA "/jobs/") + name + ".json", diag);
    ASSERT_TRUE(root) << diag.getError()->str();
    for (const char *schedule : {"gpipe", "1f1b"})
      for (int pipeline : {4, 8}) {
        Json job = *root;
        Json &par = job["parallelism"];
        par["schedule"] = schedule;
        par["pipeline"] = pipeline;
        sched::StepTimeEvaluator evaluator = evaluatorFor(writeJson(job));
        const int64_t m = par["microbatches"].get<int64_t>(),
                      b = par["microbatch_size"].get<int64_t>();
        std::map<sched::SearchMethod, double> found;
        for (sched::SearchMethod method :
             {sched::SearchMethod::Genetic, sched::SearchMethod::Descent}) {
          sched::SearchOptions options;
          options.method = method;
          options.baseline.assign(m, b);
          options.maxMicrobatches = 2 * m;
          sched::SearchResult result = sched::searchPartitions(evaluator, options);
          found[method] = result.stepTime;
          const bool noGain = std::string(name) == "umpipe-gpt1-14" &&
                              std::string(schedule) == "1f1b" && pipeline == 4;
          if (noGain || method == sched::SearchMethod::Genetic)
            EXPECT_LE(result.stepTime, result.baselineStepTime)
                << name << " " << schedule << " P=" << pipeline << " "
                << sched::searchMethodName(method);
          else
            EXPECT_LT(result.stepTime, result.baselineStepTime)
                << name << " " << schedule << " P=" << pipeline << " "
                << sched::searchMethodName(method);
        }
        EXPECT_LE(found[sched::SearchMethod::Descent], found[sched::SearchMethod::Genetic])
            << name << " " << schedule << " P=" << pipeline;
      }
  }
}

TEST(MicrobatchSearch, SearchesAreDeterministic) {
  sched::StepTimeEvaluator evaluator = evaluatorFor(jobText("1f1b", 1, "none"));
  for (sched::SearchMethod method : {sched::SearchMethod::Genetic, sched::SearchMethod::Descent}) {
    sched::SearchOptions options;
    options.method = method;
    options.baseline = {3, 3, 3, 3};
    options.seed = 7;
    sched::SearchResult a = sched::searchPartitions(evaluator, options);
    sched::SearchResult b = sched::searchPartitions(evaluator, options);
    EXPECT_EQ(a.best, b.best);
    EXPECT_EQ(a.evaluated, b.evaluated);
  }
}

TEST(MicrobatchSearch, TheTimeBudgetIsHonoured) {
  sched::StepTimeEvaluator evaluator = evaluatorFor(jobText("gpipe", 1, "none"));
  sched::SearchOptions options;
  options.method = sched::SearchMethod::Genetic;
  options.baseline = {3, 3, 3, 3};
  options.timeBudgetS = 0.01;
  sched::SearchResult result = sched::searchPartitions(evaluator, options);
  // One generation may finish after the deadline; never many.
  EXPECT_LT(result.seconds, 0.5);
  EXPECT_TRUE(std::isfinite(result.stepTime));
}

} // namespace
