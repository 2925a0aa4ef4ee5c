//===- TuneTest.cpp - conduit-tune's space, shapes and refusals -----------===//
//
// The space the tuner lists (every shape, the restrictions, the recompute modules and the
// schedules the compiler knows), the leaves it writes read as the job reader reads them, and
// configurations searched only where they fit or matter. The search against compiling
// everything is in TuneBruteForceTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/tune/BruteForce.h"

using namespace conduit;
using namespace conduit::test;

namespace {

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
