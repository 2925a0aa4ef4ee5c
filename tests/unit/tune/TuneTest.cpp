//===- TuneTest.cpp - conduit-tune's search against brute force -----------===//
//
// On spaces small enough to compile every configuration, the tuner's ranking, the best of
// each schedule and the Pareto front must equal what compiling all of them with the compiler
// gives, figure for figure; configurations that do not fit are never ranked; and the bounds
// the search prunes by are never above what a configuration compiles to.
//
//===----------------------------------------------------------------------===//

#include "tune/Tune.h"
#include "tune/TuneShapes.h"

#include "compiler/CompileJob.h"
#include "job/JobFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

using namespace conduit;

namespace {

/// Compiles `job` as conduit-tune compiles a configuration: split schedules keep their own
/// deferral of weight gradients, which the bounds price.
CompiledJob compileAsTheTunerDoes(const Job &job) {
  CompileOptions options;
  options.deferFewerToFit = false;
  return compileJob(job, options);
}

/// One configuration compiled on its own.
struct Compiled {
  size_t index = 0;
  std::string family;
  bool fits = false;
  double stepTimeS = 0;
  int64_t peakMemoryBytes = 0;
  /// The schedule tier's step bound, timed (the tuner's last tier) and not, and the static
  /// tier's (no schedule).
  double boundStepS = 0, untimedBoundStepS = 0, quickBoundStepS = 0;
  /// The schedule tier's memory bound, and the static one (the job alone).
  int64_t boundPeakBytes = 0, staticBoundBytes = 0;
  int64_t pipeline = 0, data = 1, tensor = 1, expert = 1;
  /// The compiled plan's expert all-to-alls left exposed, mean over ranks.
  double exposedAllToAllS = 0;
  /// Its parallelism section, for messages.
  std::string parallelism;
};

Json loadJob(const std::string &path) {
  Diagnostics diag(path);
  std::optional<Json> root = loadJsonFile(path, diag);
  EXPECT_TRUE(root) << diag.getError()->str();
  return *root;
}

void setMemory(Json &root, int64_t bytes) { root["cluster"]["memory_bytes"] = bytes; }

/// Compiles every configuration of the space with the compiler, checking each one's bounds.
std::vector<Compiled> bruteForce(const Json &root, const std::string &path,
                                 const TuneOptions &options) {
  llvm::Expected<Job> model = parseModel(root, path);
  EXPECT_TRUE(static_cast<bool>(model));
  SpaceRequest request = spaceRequest(*model, options, &root);
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  Unlisted unlisted;
  const ConfigurationList configs = listSpace(*model, request, dimensions, why, unlisted);
  EXPECT_FALSE(configs.empty()) << why;
  std::vector<Compiled> out;
  BoundCalculator calculator;
  for (size_t i = 0; i < configs.size(); ++i) {
    Json text = applyConfiguration(root, dimensions, configs[i]);
    Diagnostics diag(path);
    std::optional<Job> job = parseJob(text, path, diag);
    if (!job)
      continue;
    CompiledJob compiled = compileAsTheTunerDoes(*job);
    Compiled c;
    c.index = i;
    c.family = std::string(enumName(job->parallelism.schedule));
    if (compiled.report) {
      c.fits = true;
      c.stepTimeS = compiled.report->stepTimeS;
      c.peakMemoryBytes = compiled.report->peakMemoryBytes;
      c.exposedAllToAllS = compiled.report->exposedAllToAllS;
    } else {
      // Only memory may refuse a configuration the reader accepted and the scheduler can run.
      if (!compiled.refusedPeakBytes)
        continue; // the scheduler refuses it: not a candidate
      c.peakMemoryBytes = *compiled.refusedPeakBytes;
    }
    llvm::Expected<Bounds> bounds = calculator.bounds(*job, "");
    if (!bounds) {
      ADD_FAILURE() << "configuration " << i
                    << " compiles but its bounds fail: " << llvm::toString(bounds.takeError());
      continue;
    }
    EXPECT_LE(calculator.staticMemoryBound(*job), c.peakMemoryBytes) << "configuration " << i;
    EXPECT_LE(bounds->peakMemoryBytes, c.peakMemoryBytes) << "configuration " << i;
    // The bounds without a schedule are below the schedule tier's.
    llvm::Expected<Bounds> quick = calculator.quickBounds(*job, "");
    if (!quick) {
      ADD_FAILURE() << "configuration " << i
                    << " has bounds but no quick bounds: " << llvm::toString(quick.takeError());
      continue;
    }
    EXPECT_LE(quick->stepTimeS, bounds->stepTimeS * (1 + 1e-12)) << "configuration " << i;
    EXPECT_LE(quick->peakMemoryBytes, bounds->peakMemoryBytes) << "configuration " << i;
    // And the untimed schedule tier's below the timed one's.
    llvm::Expected<Bounds> untimed = calculator.bounds(*job, "", /*timed=*/false);
    if (!untimed) {
      ADD_FAILURE() << "configuration " << i << " has timed bounds but no untimed ones: "
                    << llvm::toString(untimed.takeError());
      continue;
    }
    EXPECT_LE(untimed->stepTimeS, bounds->stepTimeS * (1 + 1e-12)) << "configuration " << i;
    c.untimedBoundStepS = untimed->stepTimeS;
    c.quickBoundStepS = quick->stepTimeS;
    if (c.fits) {
      EXPECT_LE(bounds->stepTimeS, c.stepTimeS * (1 + 1e-9))
          << "configuration " << i << " " << writeJson(text["parallelism"], -1);
    }
    c.boundStepS = bounds->stepTimeS;
    c.boundPeakBytes = bounds->peakMemoryBytes;
    c.staticBoundBytes = calculator.staticMemoryBound(*job);
    c.pipeline = job->parallelism.pipeline;
    c.data = job->parallelism.data;
    c.tensor = job->parallelism.tensor;
    c.expert = job->parallelism.expert;
    c.parallelism = writeJson(text["parallelism"], -1);
    out.push_back(c);
  }
  return out;
}

bool faster(const Compiled &a, const Compiled &b) {
  return std::make_tuple(a.stepTimeS, a.peakMemoryBytes, a.index) <
         std::make_tuple(b.stepTimeS, b.peakMemoryBytes, b.index);
}

/// The tuner's result against the brute force over the same space.
void expectSame(const TuneResult &result, std::vector<Compiled> all, int64_t top,
                int64_t deviceMemory) {
  std::vector<Compiled> fitting;
  for (const Compiled &c : all)
    if (c.fits)
      fitting.push_back(c);
  std::sort(fitting.begin(), fitting.end(), faster);
  ASSERT_FALSE(fitting.empty());

  // The ranking, entry by entry.
  ASSERT_EQ(result.top.size(), std::min<size_t>(top, fitting.size()));
  for (size_t k = 0; k < result.top.size(); ++k) {
    EXPECT_EQ(result.top[k].index, fitting[k].index) << "rank " << k;
    EXPECT_EQ(result.top[k].figures.stepTimeS, fitting[k].stepTimeS) << "rank " << k;
    EXPECT_EQ(result.top[k].figures.peakMemoryBytes, fitting[k].peakMemoryBytes) << "rank " << k;
    EXPECT_LE(result.top[k].figures.peakMemoryBytes, deviceMemory) << "rank " << k;
  }

  // The best of each schedule.
  std::map<std::string, Compiled> families;
  for (const Compiled &c : fitting)
    families.try_emplace(c.family, c);
  ASSERT_EQ(result.bestPerFamily.size(), families.size());
  for (const TunedConfiguration &f : result.bestPerFamily) {
    ASSERT_TRUE(families.count(f.family)) << f.family;
    EXPECT_EQ(f.index, families[f.family].index) << f.family;
  }

  // The Pareto front: in order of step time, each configuration smaller than all before it.
  std::vector<size_t> front;
  int64_t smallest = INT64_MAX;
  for (const Compiled &c : fitting)
    if (c.peakMemoryBytes < smallest) {
      smallest = c.peakMemoryBytes;
      front.push_back(c.index);
    }
  if (result.paretoSearched) {
    ASSERT_EQ(result.pareto.size(), front.size());
    for (size_t k = 0; k < front.size(); ++k)
      EXPECT_EQ(result.pareto[k].index, front[k]) << "front entry " << k;
  } else {
    EXPECT_TRUE(result.pareto.empty());
  }

  // Every configuration is accounted for once.
  const TuneCounts &n = result.counts;
  EXPECT_EQ(n.invalid + n.infeasibleByBound + n.infeasibleCompiled + n.pruned + n.evaluated +
                n.failed,
            n.configurations);
  EXPECT_LE(n.evaluated, static_cast<int64_t>(fitting.size()));
  EXPECT_TRUE(result.counts.complete);
}

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

bool sameConfiguration(const Configuration &a, const Configuration &b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto &x, auto &y) {
           return x.key == y.key && x.value == y.value;
         });
}

/// The configurations of `all` that `listed` (a subsequence of it, in order) leaves out.
std::vector<Configuration> leftOut(const std::vector<Configuration> &all,
                                   const std::vector<Configuration> &listed) {
  std::vector<Configuration> out;
  size_t k = 0;
  for (const Configuration &c : all) {
    if (k < listed.size() && sameConfiguration(listed[k], c))
      ++k;
    else
      out.push_back(c);
  }
  EXPECT_EQ(k, listed.size()) << "the listing is not a subsequence of the whole space";
  return out;
}

/// Checks that the search reads each configuration of `root`'s space that differs from the
/// last one the reader accepted only in its leaf keys as the reader reads it; returns the leaf
/// keys that varied.
static std::set<std::string> checkLeaves(const Json &root, const std::string &path) {
  TuneOptions options;
  options.gpus = 8;
  options.globalBatch = 16;
  llvm::Expected<Job> model = parseModel(root, path);
  EXPECT_TRUE(static_cast<bool>(model));
  if (!model)
    return {};
  SpaceRequest request = spaceRequest(*model, options, &root);
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  const ConfigurationList configs = listConfigurations(request, dimensions, why);
  std::optional<Configuration> accepted;
  ParallelismSpec acceptedShape;
  int64_t derived = 0;
  std::set<std::string> leaves;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Configuration config = configs[i];
    Diagnostics diag(path);
    std::optional<Job> job = parseJob(applyConfiguration(root, dimensions, config), path, diag);
    if (accepted && sameShape(config, *accepted)) {
      EXPECT_TRUE(job) << "the reader refuses a leaf variant: " << diag.getError()->str();
      std::optional<ParallelismSpec> par = withLeaves(acceptedShape, config);
      EXPECT_TRUE(par);
      if (!job || !par)
        return leaves;
      const ParallelismSpec &read = job->parallelism;
      EXPECT_EQ(par->checkpointing, read.checkpointing) << i;
      // What selective checkpointing recomputes (used by it alone).
      if (read.checkpointing == runtime::Checkpointing::Selective) {
        EXPECT_EQ(par->recomputeModules, read.recomputeModules) << i;
      }
      EXPECT_EQ(par->sharding, read.sharding) << i;
      EXPECT_EQ(par->fsdpWindow, read.fsdpWindow) << i;
      EXPECT_EQ(par->gradientReduction, read.gradientReduction) << i;
      EXPECT_EQ(par->rankOrder, read.rankOrder) << i;
      EXPECT_EQ(par->schedule, read.schedule) << i;
      EXPECT_EQ(par->splitBackward, read.splitBackward) << i;
      EXPECT_EQ(par->placement, read.placement) << i;
      EXPECT_EQ(par->stagesPerDevice, read.stagesPerDevice) << i;
      EXPECT_EQ(par->microbatches, read.microbatches) << i;
      ++derived;
      for (const Assignment &a : config)
        if (lookup(*accepted, a.key) == nullptr || *lookup(*accepted, a.key) != a.value)
          leaves.insert(std::string(a.key));
      continue;
    }
    accepted.reset();
    if (job) {
      accepted = config;
      acceptedShape = job->parallelism;
    }
  }
  EXPECT_GT(derived, static_cast<int64_t>(configs.size()) / 2);
  return leaves;
}

TEST(TuneShapes, LeavesReadAsTheReaderReadsThem) {
  // The search reads a configuration that differs from the last one the reader accepted only
  // in its leaf keys (the split of backwards, checkpointing and what it recomputes, sharding,
  // FSDP window, rank order) from that one: what it makes of it must be what the reader makes
  // of it, on every configuration of a space that varies all of them.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/gpt2-small.json";
  Json root = loadJob(path);
  const std::set<std::string> common = {"parallelism.activation_checkpointing",
                                        "parallelism.fsdp_window",
                                        "parallelism.gradient_reduction",
                                        "parallelism.rank_order",
                                        "parallelism.sharding",
                                        "parallelism.split_backward"};
  std::set<std::string> searched = common;
  searched.insert("parallelism.recompute_modules");
  EXPECT_EQ(checkLeaves(root, path), searched);
  // A job that names its recompute modules keeps them in every configuration.
  root["parallelism"]["recompute_modules"] = Json::array({"layernorm"});
  EXPECT_EQ(checkLeaves(root, path), common);
}

// Selective checkpointing's recompute modules are searched where the job does not name them:
// the attention core where eager attention keeps one, and the norms with the MLP's largest
// part; a job's own list holds everywhere.
TEST(TuneSpace, RecomputeModulesAreSearchedUnlessTheJobNamesThem) {
  auto choices = [](const std::string &job, const std::function<void(Json &)> &edit) {
    const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + job;
    Json root = loadJob(path);
    edit(root);
    TuneOptions options;
    options.gpus = 8;
    options.globalBatch = 16;
    llvm::Expected<Job> model = parseModel(root, path);
    EXPECT_TRUE(static_cast<bool>(model));
    SpaceRequest request = spaceRequest(*model, options, &root);
    EXPECT_TRUE(request.selectiveCheckpointing) << job;
    return request.recomputeChoices;
  };
  using List = std::vector<Json>;
  EXPECT_EQ(choices("gpt2-small.json", [](Json &) {}), (List{Json::array({"layernorm", "mlp"})}));
  EXPECT_EQ(choices("gpt2-small.json", [](Json &r) { r["model"]["attention"] = "eager"; }),
            (List{Json::array({"core_attn"}), Json::array({"core_attn", "layernorm", "mlp"})}));
  // moe-tiny computes eager attention.
  EXPECT_EQ(choices("moe-tiny.json", [](Json &) {}),
            (List{Json::array({"core_attn"}), Json::array({"core_attn", "layernorm", "moe_act"})}));
  EXPECT_EQ(choices("moe-tiny.json", [](Json &r) { r["model"]["attention"] = "flash"; }),
            (List{Json::array({"layernorm", "moe_act"})}));
  EXPECT_TRUE(choices("moe-tiny.json", [](Json &r) {
                r["parallelism"]["recompute_modules"] = Json::array({"moe_act"});
              }).empty());
}

TEST(TuneSpace, ListingDropsOnlyWhatCannotCompileOrFit) {
  // The schedule rules drop only configurations the job-file reader refuses, and the shapes
  // whose static state exceeds the device only configurations that do not fit when compiled.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
  Json root = loadJob(path);
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  llvm::Expected<Job> model = parseModel(root, path);
  ASSERT_TRUE(static_cast<bool>(model));
  SpaceRequest request = spaceRequest(*model, options, &root);
  SpaceRequest everything = request;
  everything.scheduleRules = false;
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  const std::vector<Configuration> all = enumerateSpace(everything, dimensions, why);
  const std::vector<Configuration> ruled = enumerateSpace(request, dimensions, why);
  const std::vector<Configuration> refused = leftOut(all, ruled);
  EXPECT_GT(refused.size(), all.size() / 4);
  for (const Configuration &c : refused) {
    Diagnostics diag(path);
    EXPECT_FALSE(parseJob(applyConfiguration(root, dimensions, c), path, diag))
        << "the rules drop a configuration the reader accepts: "
        << writeJson(applyConfiguration(root, dimensions, c)["parallelism"], -1);
  }

  // A device that holds the static state of about half the shapes, each fully sharded.
  std::vector<int64_t> statics;
  for (const Configuration &c : ruled) {
    Diagnostics diag(path);
    if (std::optional<Job> job = parseJob(applyConfiguration(root, dimensions, c), path, diag)) {
      job->parallelism.sharding = runtime::Sharding::Full;
      statics.push_back(BoundCalculator::staticMemoryBound(*job));
    }
  }
  std::sort(statics.begin(), statics.end());
  setMemory(root, statics[statics.size() / 2]);
  llvm::Expected<Job> small = parseModel(root, path);
  ASSERT_TRUE(static_cast<bool>(small));
  Unlisted unlisted;
  const std::vector<Configuration> listed =
      listSpace(*small, spaceRequest(*small, options, &root), dimensions, why, unlisted).all();
  EXPECT_GT(unlisted.shapes, 0);
  EXPECT_FALSE(listed.empty());
  const std::vector<Configuration> tooLarge = leftOut(ruled, listed);
  EXPECT_FALSE(tooLarge.empty());
  for (const Configuration &c : tooLarge) {
    Diagnostics diag(path);
    std::optional<Job> job = parseJob(applyConfiguration(root, dimensions, c), path, diag);
    if (!job)
      continue;
    CompiledJob compiled = compileAsTheTunerDoes(*job);
    EXPECT_FALSE(compiled.report) << "a shape left out fits: "
                                  << writeJson(applyConfiguration(root, dimensions, c), -1);
  }
}

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

TEST(Tune, ReducingEachRunIsSearchedWhereOnlyItFits) {
  // One pipeline rank of several stages, depth-first one micro-batch at a time (4 of them),
  // fully sharded over 2 replicas, with short sequences and untied embeddings (the gradients
  // weigh most): on a device between
  // the smallest peak reducing each run and the smallest reducing once per step, only the
  // former fit, and the search ranks them.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/gpt2-small.json";
  Json root = loadJob(path);
  TuneOptions options;
  options.gpus = 2;
  options.globalBatch = 8;
  options.top = 3;
  std::string error;
  for (const char *fix :
       {"parallelism.pipeline=1", "parallelism.schedule=depth-first", "parallelism.sharding=full",
        "parallelism.stages_per_device=4", "parallelism.microbatch_size=1",
        "parallelism.group_size=1", "model.seq_length=64", "model.tie_embeddings=false"}) {
    std::optional<Restriction> r = parseRestriction(fix, "--fix", error);
    ASSERT_TRUE(r) << error;
    options.restrictions.push_back(*r);
  }
  std::map<std::string, int64_t> smallest; // per gradient_reduction
  for (const Compiled &x : bruteForce(root, path, options)) {
    const std::string mode =
        x.parallelism.find("\"gradient_reduction\":\"run\"") != std::string::npos ? "run" : "step";
    auto [it, inserted] = smallest.try_emplace(mode, x.peakMemoryBytes);
    if (!inserted)
      it->second = std::min(it->second, x.peakMemoryBytes);
  }
  ASSERT_EQ(smallest.size(), 2u);
  ASSERT_LT(smallest["run"], smallest["step"]);
  setMemory(root, (smallest["run"] + smallest["step"]) / 2);
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  ASSERT_FALSE(result->top.empty());
  for (const TunedConfiguration &t : result->top)
    EXPECT_EQ(t.job["parallelism"].value("gradient_reduction", "step"), "run") << t.job.dump();
}

// A job whose parameters are PyTorch FSDP's fp32 shards (training.master_weights
// "parameters") is searched under full sharding only: the other shardings are configurations
// the reader refuses, not an error of the job.
TEST(Tune, PyTorchFsdpStorageIsSearchedUnderFullShardingOnly) {
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
  Json root = loadJob(path);
  root["training"]["dtype"] = "bf16";
  root["training"]["master_weights"] = "parameters";
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  options.top = 20;
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  ASSERT_FALSE(result->top.empty());
  EXPECT_GT(result->counts.invalid, 0);
  for (const TunedConfiguration &t : result->top) {
    const Json &par = t.job["parallelism"];
    if (par.value("data", 1) > 1) {
      EXPECT_EQ(par.value("sharding", "none"), "full") << t.job.dump();
    }
  }
}

TEST(Tune, NothingFitsNamesTheMemory) {
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
  Json root = loadJob(path);
  setMemory(root, 1024);
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  llvm::Expected<TuneResult> result = tune(root, path, options);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("cluster.memory_bytes"), std::string::npos);
}

TEST(TuneSpace, SchedulesComeFromTheCompiler) {
  SpaceRequest request{8, 16, 14, {}, {}};
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  std::vector<Configuration> configs = enumerateSpace(request, dimensions, why);
  std::set<std::string> schedules;
  for (const Configuration &c : configs)
    schedules.insert(stringOf(c, "parallelism.schedule"));
  for (std::string_view schedule : enumNames<runtime::Schedule>())
    EXPECT_TRUE(schedules.count(std::string(schedule))) << schedule;
}

TEST(TuneSpace, EveryShapeMultipliesOut) {
  // D·M·b = B and P·D·T = N for every configuration; sequence parallelism only with T > 1.
  SpaceRequest request{16, 32, 20, {}, {1, 2, 4}};
  std::vector<Dimension> dimensions = dimensionsFor(request);
  std::string why;
  std::set<int64_t> tensors;
  for (const Configuration &c : enumerateSpace(request, dimensions, why)) {
    const int64_t t = integerOf(c, "parallelism.tensor", 0);
    tensors.insert(t);
    if (t == 1) {
      EXPECT_FALSE(booleanOf(c, "parallelism.sequence_parallel", true));
    }
    EXPECT_EQ(integerOf(c, "parallelism.pipeline", 0) * integerOf(c, "parallelism.data", 0) * t,
              16);
    EXPECT_EQ(integerOf(c, "parallelism.data", 0) * integerOf(c, "parallelism.microbatches", 0) *
                  integerOf(c, "parallelism.microbatch_size", 0),
              32);
  }
  EXPECT_EQ(tensors, (std::set<int64_t>{1, 2, 4}));
}

TEST(TuneSpace, TensorSizesSplitTheModelInsideANode) {
  TransformerSpec shape;
  shape.numHeads = 12;
  shape.numKvHeads = 4;
  shape.ffnHiddenSize = 3072;
  shape.vocabSize = 51200;
  // Heads 12, key/value heads 4: 1, 2 and 4 split both; 8 GPUs a node.
  EXPECT_EQ(tensorSizesOf(shape, 64, 8), (std::vector<int64_t>{1, 2, 4}));
  // Two GPUs: only what divides the GPU count.
  EXPECT_EQ(tensorSizesOf(shape, 2, 8), (std::vector<int64_t>{1, 2}));
  // Nodes of 2: a group of 4 would leave its node.
  EXPECT_EQ(tensorSizesOf(shape, 64, 2), (std::vector<int64_t>{1, 2}));
  // An odd vocabulary cannot be split; a layer list states no shape to split.
  shape.vocabSize = 50257;
  EXPECT_EQ(tensorSizesOf(shape, 64, 8), (std::vector<int64_t>{1}));
  EXPECT_EQ(tensorSizesOf(std::nullopt, 64, 8), (std::vector<int64_t>{1}));
}

TEST(TuneSpace, SequenceParallelNeedsATensorGroup) {
  std::string error;
  std::optional<Restriction> sp =
      parseRestriction("parallelism.sequence_parallel=true", "--fix", error);
  ASSERT_TRUE(sp);
  // Only T = 1: nothing can take it, and the message says why.
  SpaceRequest request{8, 16, 14, {*sp}, {1}};
  std::string why;
  EXPECT_TRUE(enumerateSpace(request, dimensionsFor(request), why).empty());
  EXPECT_NE(why.find("needs parallelism.tensor above 1"), std::string::npos) << why;
  // With T = 2 allowed, the space is T = 2 with it on.
  request.tensorSizes = {1, 2};
  std::vector<Configuration> configs = enumerateSpace(request, dimensionsFor(request), why);
  EXPECT_FALSE(configs.empty());
  for (const Configuration &c : configs) {
    EXPECT_EQ(integerOf(c, "parallelism.tensor", 1), 2);
    EXPECT_TRUE(booleanOf(c, "parallelism.sequence_parallel", false));
  }
}

TEST(TuneSpace, SelectiveCheckpointingOnlyWhereItRecomputesSomething) {
  // Fused attention keeps no attention core: selective of the core alone would be none again,
  // a duplicate row. With other recompute modules to search (or named by the job) it is not.
  const std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/demo.json";
  auto modes = [&](const std::vector<std::string> &overrides, const TuneOptions &options,
                   const char *modules = nullptr) {
    Json root = loadJob(path);
    for (const std::string &o : overrides)
      root["model"]["attention"] = o;
    if (modules)
      root["parallelism"]["recompute_modules"] = Json::array({modules});
    llvm::Expected<Job> model = parseModel(root, path);
    EXPECT_TRUE(static_cast<bool>(model));
    SpaceRequest request = spaceRequest(*model, options, &root);
    std::string why;
    std::set<std::string> out;
    for (const Configuration &c : enumerateSpace(request, dimensionsFor(request), why)) {
      out.insert(stringOf(c, "parallelism.activation_checkpointing"));
      // Selective searches what it recomputes, never the core alone under a fused kernel.
      const Json *m = lookup(c, "parallelism.recompute_modules");
      if (m && overrides == std::vector<std::string>{"flash"} && options.restrictions.empty()) {
        EXPECT_NE(*m, Json::array({"core_attn"})) << writeJson(*m, -1);
      }
    }
    return out;
  };
  TuneOptions options;
  options.gpus = 4;
  options.globalBatch = 8;
  EXPECT_EQ(modes({"flash"}, options, "core_attn"),
            (std::set<std::string>{"none", "full", "blocks"}));
  EXPECT_EQ(modes({"flash"}, options, "layernorm"),
            (std::set<std::string>{"none", "full", "blocks", "selective"}));
  EXPECT_EQ(modes({"flash"}, options),
            (std::set<std::string>{"none", "full", "blocks", "selective"}));
  EXPECT_EQ(modes({"eager"}, options),
            (std::set<std::string>{"none", "full", "blocks", "selective"}));
  // Varying the attention brings it back, and a restriction that names it is obeyed.
  std::string error;
  options.restrictions = {*parseRestriction("model.attention=flash,eager", "--vary", error)};
  EXPECT_EQ(modes({"flash"}, options),
            (std::set<std::string>{"none", "full", "blocks", "selective"}));
  options.restrictions = {
      *parseRestriction("parallelism.activation_checkpointing=selective", "--fix", error)};
  EXPECT_EQ(modes({"flash"}, options), (std::set<std::string>{"selective"}));
}

TEST(TuneSpace, RestrictionsNameTheKeyThatEmptiedTheSpace) {
  std::string error;
  std::optional<Restriction> pipeline = parseRestriction("parallelism.pipeline=3", "--fix", error);
  ASSERT_TRUE(pipeline);
  SpaceRequest request{8, 16, 14, {*pipeline}, {}};
  std::string why;
  EXPECT_TRUE(enumerateSpace(request, dimensionsFor(request), why).empty());
  EXPECT_NE(why.find("parallelism.pipeline"), std::string::npos) << why;
  EXPECT_NE(why.find("--gpus 8"), std::string::npos) << why;

  SpaceRequest small{64, 4, 14, {}, {}};
  EXPECT_TRUE(enumerateSpace(small, dimensionsFor(small), why).empty());
  EXPECT_NE(why.find("--global-batch 4"), std::string::npos) << why;
}

} // namespace
