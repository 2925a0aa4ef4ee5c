//===- TuneBruteForceTest.cpp - conduit-tune's search against brute force -===//
//
// On spaces small enough to compile every configuration, the tuner's ranking, the best of
// each schedule and the Pareto front must equal what compiling all of them with the compiler
// gives, figure for figure; configurations that do not fit are never ranked; and the bounds
// the search prunes by are never above what a configuration compiles to.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/tune/BruteForce.h"

using namespace conduit;
using namespace conduit::test;

namespace {

struct Case {
  const char *job;
  int64_t gpus, batch;
};

class TuneBruteForce : public ::testing::TestWithParam<Case> {};

TEST_P(TuneBruteForce, SearchEqualsCompilingEverything) {
  const Case &c = GetParam();
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + c.job;
  Json root = loadJob(path);
  TuneOptions options;
  options.gpus = c.gpus;
  options.globalBatch = c.batch;
  options.top = 5;
  options.pareto = true;
  std::vector<Compiled> all = bruteForce(root, path, options);
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  expectSame(*result, all, options.top, INT64_MAX);
  // The search is worth having only if it compiles less than everything.
  EXPECT_LT(result->counts.evaluated, static_cast<int64_t>(all.size()));
  // Without the Pareto front the same ranking and best of each schedule, from fewer compiles.
  options.pareto = false;
  llvm::Expected<TuneResult> ranked = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(ranked)) << llvm::toString(ranked.takeError());
  expectSame(*ranked, all, options.top, INT64_MAX);
  EXPECT_LE(ranked->counts.evaluated, result->counts.evaluated);
}

TEST_P(TuneBruteForce, OnOnePipelineRankTheStepBoundIsTheCompiledStep) {
  // With one pipeline rank nothing is sent between ranks, and the schedule tier models all
  // the rest: the compute, the tensor collectives it issues, and the data-parallel collectives
  // and optimizer steps on their streams. Its bound is then the compiled step (to a few
  // nanoseconds), so that the search compiles little more than what can enter the ranking:
  // DualPipeV's overlapped pairs as well, whose halves the plan runs one after the other.
  const Case &c = GetParam();
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + c.job;
  TuneOptions options;
  options.gpus = c.gpus;
  options.globalBatch = c.batch;
  int64_t checked = 0;
  for (const Compiled &x : bruteForce(loadJob(path), path, options))
    if (x.fits && x.pipeline == 1) {
      EXPECT_NEAR(x.boundStepS, x.stepTimeS, 1e-5 * x.stepTimeS) << x.parallelism;
      ++checked;
    }
  EXPECT_GT(checked, 0);
}

TEST_P(TuneBruteForce, ConfigurationsThatDoNotFitAreNeverRanked) {
  const Case &c = GetParam();
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + c.job;
  Json root = loadJob(path);
  TuneOptions options;
  options.gpus = c.gpus;
  options.globalBatch = c.batch;
  options.top = 5;
  options.pareto = true;
  // A device that holds the smaller half of the configurations, the fastest among them
  // included or not.
  std::vector<Compiled> all = bruteForce(root, path, options);
  std::vector<int64_t> peaks;
  for (const Compiled &x : all)
    peaks.push_back(x.peakMemoryBytes);
  std::sort(peaks.begin(), peaks.end());
  const int64_t device = peaks[peaks.size() / 2];
  setMemory(root, device);
  all = bruteForce(root, path, options);
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_GT(result->counts.infeasibleByBound + result->counts.infeasibleCompiled, 0);
  expectSame(*result, all, options.top, device);
}

INSTANTIATE_TEST_SUITE_P(Jobs, TuneBruteForce,
                         ::testing::Values(Case{"demo.json", 4, 4},
                                           Case{"gpt2-small.json", 8, 16}));

TEST(TuneBruteForceExperts, SearchEqualsCompilingEverything) {
  // A mixture of experts on 4 GPUs, its whole space: E (the divisors of the 4 experts that
  // divide D x T), every schedule and sharding. The search over it is the brute force's, and
  // every compiled configuration is above its bounds, the memory bounds counting each rank's
  // routed tokens at the busiest expert rank's load and its experts' state over the
  // expert-data group.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/moe-tiny.json";
  Json root = loadJob(path);
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  options.top = 5;
  std::string error;
  std::vector<Compiled> all = bruteForce(root, path, options);
  // The schedule tier bounds each rank, activations included, above the static mean.
  const auto tighter = std::count_if(all.begin(), all.end(), [](const Compiled &c) {
    return c.boundPeakBytes > c.staticBoundBytes;
  });
  EXPECT_EQ(tighter, static_cast<std::ptrdiff_t>(all.size()));
  // On one pipeline rank the step bound is the compiled step: the routed experts' reductions,
  // gathers and optimizer step over their expert-data group included (E below D x T, or E = 1
  // beside a tensor group), and the paired steps of combined 1F1B (depth-first with E > 1) and
  // DualPipeV timed as the plan times them.
  int64_t onOneRank = 0, expertData = 0, paired = 0;
  for (const Compiled &c : all)
    if (c.fits && c.pipeline == 1) {
      ++onOneRank;
      expertData += c.expert < c.data * c.tensor && (c.expert > 1 || c.tensor > 1);
      paired += c.family == "depth-first" && c.expert > 1;
      EXPECT_NEAR(c.boundStepS, c.stepTimeS, 1e-5 * c.stepTimeS) << c.parallelism;
    }
  EXPECT_GT(expertData, 0) << "of " << onOneRank;
  EXPECT_GT(paired, 0) << "of " << onOneRank;
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  expectSame(*result, all, options.top, INT64_MAX);
  // Every entry says its E.
  for (const TunedConfiguration &c : result->top)
    EXPECT_TRUE(lookup(c.config, "parallelism.expert")) << "E is not in the configuration";
  // E takes 1, 2 and 4 somewhere in the space.
  llvm::Expected<Job> model = parseModel(root, path);
  ASSERT_TRUE(static_cast<bool>(model));
  SpaceRequest request = spaceRequest(*model, options, &root);
  std::set<int64_t> listed;
  int64_t oneReplica = 0;
  const std::vector<Dimension> dimensions = dimensionsFor(request);
  for (const Configuration &c : enumerateSpace(request, dimensions, error)) {
    const int64_t e = integerOf(c, "parallelism.expert", 0);
    listed.insert(e);
    // One replica reduces no gradients: each expert on one rank of the tensor group, which the
    // reader refuses otherwise.
    if (integerOf(c, "parallelism.data", 1) == 1) {
      ++oneReplica;
      EXPECT_EQ(e, integerOf(c, "parallelism.tensor", 1))
          << writeJson(applyConfiguration(root, dimensions, c)["parallelism"], -1);
    }
  }
  EXPECT_EQ(listed, (std::set<int64_t>{1, 2, 4}));
  EXPECT_GT(oneReplica, 0);
}

TEST(TuneBruteForceExperts, LatentAttentionOverATensorGroup) {
  // deepseek-tiny (latent attention beside experts) on 4 GPUs: over a tensor group each weight
  // pass sums the down projections' gradients, which the bounds price from the list the plan
  // holds. On one pipeline rank the step bound is then the compiled step, one replica's paired
  // steps (T = E = 4, D = 1) included.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/deepseek-tiny.json";
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  int64_t checked = 0, pairedAlone = 0;
  for (const Compiled &c : bruteForce(loadJob(path), path, options))
    if (c.fits && c.pipeline == 1 && c.tensor > 1) {
      EXPECT_NEAR(c.boundStepS, c.stepTimeS, 1e-5 * c.stepTimeS) << c.parallelism;
      ++checked;
      pairedAlone += c.data == 1 && (c.family == "dualpipev" || c.family == "depth-first");
    }
  EXPECT_GT(checked, 0);
  EXPECT_GT(pairedAlone, 0);
}

TEST(TuneBruteForceExperts, MultiTokenPredictionStaysWithTheHead) {
  // moe-tiny with two multi-token prediction modules on 4 GPUs, without a tensor group: the
  // modules stay on the last stage with the head, and that stage (untied) keeps a copy of the
  // token table whose gradient a tie_grads sums with the embedding's. The bounds take the
  // partition's tail, the copy's state and its tie as the plan does: bruteForce() checks that
  // every bound stays below the compiled step and memory, the search ranks as compiling
  // everything does, and on one pipeline rank (the tie summed in place) the step bound is the
  // compiled step.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/moe-tiny.json";
  Json root = loadJob(path);
  root["model"]["mtp_layers"] = 2;
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  options.top = 5;
  std::string error;
  options.restrictions.push_back(*parseRestriction("parallelism.tensor=1", "--fix", error));
  std::vector<Compiled> all = bruteForce(root, path, options);
  int64_t onOneRank = 0, pipelined = 0;
  for (const Compiled &c : all) {
    if (!c.fits)
      continue;
    pipelined += c.pipeline > 1;
    if (c.pipeline == 1) {
      ++onOneRank;
      EXPECT_NEAR(c.boundStepS, c.stepTimeS, 1e-5 * c.stepTimeS) << c.parallelism;
    }
  }
  EXPECT_GT(onOneRank, 0);
  EXPECT_GT(pipelined, 0);
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  expectSame(*result, all, options.top, INT64_MAX);
}

TEST(TuneBounds, TransfersBetweenNodesTightenThePipelinedBound) {
  // Two GPUs a node: most of gpt2-small's pipeline transfers on 8 GPUs cross nodes, where they
  // take longer than some of its computes. The timed tier waits for each one (alone on its
  // link): its bound rises on pipelines, and bruteForce() checks that it stays below every
  // compiled step.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/gpt2-small.json";
  Json root = loadJob(path);
  root["cluster"]["gpus_per_node"] = 2;
  TuneOptions options;
  options.gpus = 8;
  options.globalBatch = 16;
  // How many pipelined configurations the timed tier bounds higher, and what the two tiers leave
  // between their bound and the compiled step, summed as fractions of the bound.
  int64_t pipelined = 0, tighter = 0;
  double timedGap = 0, untimedGap = 0;
  for (const Compiled &c : bruteForce(root, path, options))
    if (c.fits && c.pipeline > 1 && c.family != "dualpipev") {
      ++pipelined;
      if (c.boundStepS > c.untimedBoundStepS * (1 + 1e-6))
        ++tighter;
      timedGap += c.stepTimeS / c.boundStepS - 1;
      untimedGap += c.stepTimeS / c.untimedBoundStepS - 1;
    }
  ASSERT_GT(pipelined, 0);
  EXPECT_GT(tighter, pipelined / 2) << "of " << pipelined;
  EXPECT_LT(timedGap, untimedGap) << "summed over " << pipelined;
}

TEST(TuneBounds, ExpertAllToAllsAcrossNodes) {
  // moe-tiny on 8 GPUs, two a node, without sharding or a tensor group: its expert groups lie
  // in one node or span several, and so do its expert-data groups. An unpaired compute's
  // all-to-alls follow it on the compute stream; a paired step (combined 1F1B, depth-first
  // with E > 1, and DualPipeV) leaves exposed what its chunks do not hide, each half's share
  // after it; the timed
  // tier prices both where the configuration places the group, as the plan does, and runs the
  // routed experts' reductions over their expert-data group beside the dense ones'. On one
  // pipeline rank that is what the compiled plan spends: the bound is the compiled step, as a
  // dense model's is, DualPipeV's pairs included. On two pipeline ranks, what the timed tier
  // leaves out (the transfers' order and sharing of links) keeps DualPipeV's bounds within a
  // few percent of its steps; before its all-to-alls were counted they were as low as a third.
  // bruteForce() checks that every bound stays below the compiled step.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/moe-tiny.json";
  Json root = loadJob(path);
  root["cluster"]["gpus_per_node"] = 2;
  TuneOptions options;
  options.gpus = 8;
  options.globalBatch = 16;
  std::string error;
  for (const char *fixed : {"parallelism.sharding=none", "parallelism.tensor=1"})
    options.restrictions.push_back(*parseRestriction(fixed, "--fix", error));
  int64_t onOneRank = 0, paired = 0, dualPipeV = 0;
  for (const Compiled &c : bruteForce(root, path, options)) {
    if (c.fits && c.expert > 1 && c.family == "dualpipev") {
      ++dualPipeV;
      EXPECT_GT(c.boundStepS, 0.95 * c.stepTimeS) << c.parallelism;
    }
    if (c.fits && c.expert > 1 && c.pipeline == 1) {
      ++onOneRank;
      paired += c.family == "depth-first";
      ASSERT_GT(c.exposedAllToAllS, 0) << c.parallelism;
      EXPECT_NEAR(c.boundStepS, c.stepTimeS, 1e-5 * c.stepTimeS) << c.parallelism;
    }
  }
  EXPECT_GT(paired, 0) << "of " << onOneRank;
  EXPECT_GT(dualPipeV, 0);
}

TEST(TuneBounds, KnowTheTensorSize) {
  // The configuration whose bounds, before they knew T, exceeded what it compiles to (a memory
  // bound of 64.3 GB against 39.9 GB compiled): each rank holds an eighth of its layers.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/gpt-52b-bfs.json";
  Json root = loadJob(path);
  root["parallelism"] = {{"tensor", 8},
                         {"pipeline", 8},
                         {"data", 8},
                         {"microbatch_size", 2},
                         {"microbatches", 8},
                         {"stages_per_device", 2},
                         {"schedule", "zbv"},
                         {"activation_checkpointing", "none"},
                         {"sharding", "optimizer"},
                         {"rank_order", "data-inner"}};
  for (bool sequenceParallel : {false, true}) {
    root["parallelism"]["sequence_parallel"] = sequenceParallel;
    Diagnostics diag(path);
    std::optional<Job> job = parseJob(root, path, diag);
    ASSERT_TRUE(job) << diag.getError()->str();
    CompiledJob compiled = compileAsTheTunerDoes(*job);
    ASSERT_TRUE(compiled.report || compiled.refusedPeakBytes) << compiled.error;
    const int64_t peak =
        compiled.report ? compiled.report->peakMemoryBytes : *compiled.refusedPeakBytes;
    BoundCalculator calculator;
    llvm::Expected<Bounds> bounds = calculator.bounds(*job, "");
    ASSERT_TRUE(static_cast<bool>(bounds)) << llvm::toString(bounds.takeError());
    EXPECT_LE(BoundCalculator::staticMemoryBound(*job), peak);
    EXPECT_LE(bounds->peakMemoryBytes, peak);
    if (compiled.report) {
      EXPECT_LE(bounds->stepTimeS, compiled.report->stepTimeS * (1 + 1e-9));
      // The tensor collectives are in the bound: without sequence parallelism they run on the
      // compute stream.
      EXPECT_GT(bounds->stepTimeS, compiled.report->stepTimeS / 2);
    }
  }
}

} // namespace
