//===- JobFileTest.cpp - job file reading and validation ------------------===//
//
// Defaults, presets and overrides, the model kinds, the cross-section checks, the key editor and
// the reader without a parallelism section. The error messages of bad files are checked one by
// one in tests/lit/bad.
//
//===----------------------------------------------------------------------===//

#include "job/JobFile.h"

#include "job/HuggingFace.h"
#include "job/KeyEditor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace conduit;

namespace {

const char *kMinimal = R"({
  "model": {"kind": "transformer", "num_layers": 4, "hidden_size": 64, "num_heads": 4,
            "seq_length": 32, "vocab_size": 128},
  "parallelism": {"pipeline": 2, "schedule": "1f1b", "microbatches": 4},
  "cluster": {"preset": "h100-80gb"}
})";

/// Parses `text` as a job file named "job.json"; on failure returns the diagnostic instead.
std::optional<Job> parse(std::string_view text, std::string *error = nullptr) {
  Diagnostics diag("job.json");
  std::optional<Json> root = parseJsonText(text, diag);
  std::optional<Job> job = root ? parseJob(*root, "job.json", diag) : std::nullopt;
  if (!job && error)
    *error = diag.getError()->str();
  return job;
}

/// kMinimal with `section.key` replaced by `value` (a JSON snippet).
std::string withKey(const std::string &section, const std::string &key, std::string_view value) {
  Json root = Json::parse(kMinimal);
  root[section][key] = Json::parse(value);
  return writeJson(root);
}

TEST(JobFile, DefaultsAreFilledIn) {
  std::optional<Job> job = parse(kMinimal);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->name, "job");
  const ParallelismSpec &p = job->parallelism;
  EXPECT_EQ(p.data, 1);
  EXPECT_EQ(p.stagesPerDevice, 1);
  EXPECT_EQ(p.microbatchSize, 1);
  EXPECT_EQ(p.groupSize, 2); // = pipeline
  EXPECT_EQ(p.sharding, runtime::Sharding::None);
  EXPECT_EQ(p.checkpointing, runtime::Checkpointing::None);
  EXPECT_EQ(p.fsdpWindow, 2);
  EXPECT_EQ(p.rankOrder, RankOrder::DataInner);
  EXPECT_EQ(job->training.dtype, runtime::DType::BF16);
  EXPECT_EQ(job->training.optimizer, runtime::Optimizer::Adam);
  EXPECT_EQ(job->cluster.preset, "h100-80gb");
  EXPECT_DOUBLE_EQ(job->cluster.peakFlops, 989e12);
  EXPECT_EQ(job->cluster.gpusPerNode, 8);
  ASSERT_TRUE(job->model.transformer);
  EXPECT_EQ(job->model.transformer->ffnHiddenSize, 256);
  EXPECT_EQ(job->model.transformer->numKvHeads, 4);
  EXPECT_EQ(job->model.layers.size(), 6u);
  EXPECT_EQ(job->model.tokensPerSample, 32);
}

TEST(JobFile, ClusterFiguresAreOverridable) {
  std::optional<Job> job = parse(withKey("cluster", "peak_flops", "1"));
  ASSERT_TRUE(job);
  EXPECT_DOUBLE_EQ(job->cluster.peakFlops, 1.0);
  job = parse(withKey("cluster", "efficiency", "1"));
  ASSERT_TRUE(job);
  EXPECT_DOUBLE_EQ(job->cluster.efficiency, 1.0);
  job = parse(withKey("cluster", "inter_node_bandwidth", "1e12"));
  ASSERT_TRUE(job);
  EXPECT_DOUBLE_EQ(job->cluster.interNodeBandwidth, 1e12);
  EXPECT_DOUBLE_EQ(job->cluster.intraNodeBandwidth, 18 * 20.6e9); // the preset's
  EXPECT_DOUBLE_EQ(job->cluster.memoryBandwidth, 3.35e12);        // the preset's
  job = parse(withKey("cluster", "memory_bandwidth", "1.5e12"));
  ASSERT_TRUE(job);
  EXPECT_DOUBLE_EQ(job->cluster.memoryBandwidth, 1.5e12);
}

TEST(JobFile, MemoryBandwidthMustBePositive) {
  for (const char *value : {"0", "-1"}) {
    std::string error;
    EXPECT_FALSE(parse(withKey("cluster", "memory_bandwidth", value), &error));
    EXPECT_NE(error.find("cluster.memory_bandwidth"), std::string::npos) << error;
  }
}

TEST(JobFile, DataTypeSetsActivationBytes) {
  std::optional<Job> bf16 = parse(kMinimal);
  std::string fp32Text = kMinimal;
  fp32Text.insert(fp32Text.rfind('}'), R"(, "training": {"dtype": "fp32"})");
  std::optional<Job> fp32 = parse(fp32Text);
  ASSERT_TRUE(bf16 && fp32);
  EXPECT_EQ(fp32->model.layers[1].outputBytes, 2 * bf16->model.layers[1].outputBytes);
}

// Multi-token prediction modules follow the blocks: a block of the model's kind with its two
// inputs' norms, the projection 2h -> h, the shared head's norm, and the shared head's product
// and loss (its weights the main model's, the token table copied to their stage untied).
TEST(JobFile, MultiTokenPredictionModulesFollowTheBlocks) {
  std::optional<Job> plain = parse(kMinimal);
  std::optional<Job> mtp = parse(withKey("model", "mtp_layers", "2"));
  ASSERT_TRUE(plain && mtp);
  const std::vector<LayerSpec> &a = plain->model.layers, &b = mtp->model.layers;
  ASSERT_EQ(b.size(), a.size() + 2);
  EXPECT_EQ(b[5].name, "mtp.0");
  EXPECT_EQ(b[6].name, "mtp.1");
  EXPECT_EQ(b[7].name, "head");
  EXPECT_EQ(b[5].kind, runtime::LayerKind::Block);
  const int64_t h = 64, s = 32, v = 128;
  // LayerNorms: gain and bias. Untied, the first keeps the last stage's copy of the token
  // table; with tied embeddings the head's matrix is that copy.
  EXPECT_EQ(b[5].params, a[4].params + 2 * h * h + 3 * 2 * h + v * h);
  EXPECT_EQ(b[6].params, a[4].params + 2 * h * h + 3 * 2 * h);
  Json tied = Json::parse(withKey("model", "mtp_layers", "1"));
  tied["model"]["tie_embeddings"] = true;
  std::optional<Job> shared = parse(writeJson(tied));
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->model.layers[5].params, b[6].params);
  EXPECT_DOUBLE_EQ(b[5].fwdFlops, a[4].fwdFlops + 2.0 * s * 2 * h * h + 2.0 * s * h * v);
  EXPECT_DOUBLE_EQ(b[5].bwdFlops, 2 * b[5].fwdFlops);
  // The first takes the main hidden state, passes it on with its own; the last passes the
  // main one alone to the head.
  EXPECT_EQ(b[5].checkpointBytes, a[4].checkpointBytes);
  EXPECT_EQ(b[5].outputBytes, 2 * a[4].outputBytes);
  EXPECT_EQ(b[6].checkpointBytes, 2 * a[4].checkpointBytes);
  EXPECT_EQ(b[6].outputBytes, a[4].outputBytes);
  EXPECT_EQ(mtp->model.transformer->mtpLayers, 2);
  std::string error;
  EXPECT_FALSE(parse(withKey("model", "mtp_layers", "17"), &error));
  EXPECT_NE(error.find("model.mtp_layers"), std::string::npos) << error;
  Json layers = Json::parse(kMinimal);
  layers["model"] = Json::parse(R"({"kind": "layers", "mtp_layers": 1, "layers": []})");
  EXPECT_FALSE(parse(writeJson(layers), &error));
  EXPECT_NE(error.find("model.mtp_layers: applies to a transformer"), std::string::npos) << error;
}

TEST(JobFile, AttentionKernelAndFp8) {
  // Flash attention unless the model says eager; either keeps the model FLOPs.
  std::optional<Job> flash = parse(kMinimal);
  std::optional<Job> eager = parse(withKey("model", "attention", R"("eager")"));
  ASSERT_TRUE(flash && eager);
  EXPECT_EQ(flash->model.transformer->attention, AttentionKind::Flash);
  EXPECT_EQ(eager->model.transformer->attention, AttentionKind::Eager);
  EXPECT_LT(flash->model.layers[1].activationBytes, eager->model.layers[1].activationBytes);
  EXPECT_DOUBLE_EQ(flash->model.layers[1].fwdFlops, eager->model.layers[1].fwdFlops);
  std::string error;
  EXPECT_FALSE(parse(withKey("model", "attention", R"("fused")"), &error));
  EXPECT_EQ(error, "job.json: model.attention: unknown value \"fused\"; expected one of "
                   "\"flash\", \"eager\", \"flash2\", \"flash_triton\"");
  // FlashAttention-2's generation keeps what flash keeps.
  std::optional<Job> flash2 = parse(withKey("model", "attention", R"("flash2")"));
  ASSERT_TRUE(flash2);
  EXPECT_EQ(flash2->model.transformer->attention, AttentionKind::Flash2);
  EXPECT_EQ(flash2->model.layers[1].activationBytes, flash->model.layers[1].activationBytes);
  // So does FlashAttention in Triton.
  std::optional<Job> triton = parse(withKey("model", "attention", R"("flash_triton")"));
  ASSERT_TRUE(triton);
  EXPECT_EQ(triton->model.transformer->attention, AttentionKind::FlashTriton);
  EXPECT_EQ(triton->model.layers[1].activationBytes, flash->model.layers[1].activationBytes);
  // Element-wise operations fused unless the model says how PyTorch's eager mode ran them:
  // the same FLOPs; for GPT-2 (LayerNorm, GELU, all heads) the same bytes kept.
  EXPECT_EQ(flash->model.transformer->elementwise, ElementwiseKind::Fused);
  for (auto [name, kind] : {std::pair{"eager", ElementwiseKind::Eager},
                            std::pair{"eager_fused_norm", ElementwiseKind::EagerFusedNorm}}) {
    std::optional<Job> eagerOps =
        parse(withKey("model", "elementwise", "\"" + std::string(name) + "\""));
    ASSERT_TRUE(eagerOps);
    EXPECT_EQ(eagerOps->model.transformer->elementwise, kind);
    EXPECT_EQ(eagerOps->model.layers[1].activationBytes, flash->model.layers[1].activationBytes);
    EXPECT_EQ(eagerOps->model.layers[1].fwdFlops, flash->model.layers[1].fwdFlops);
  }
  // Llama's keeps more: an eager RMSNorm its input in fp32 (4 bytes an element more, two a
  // block and the head's), SiLU's output beside its input, keys and values repeated to every
  // query head.
  Json llama = Json::parse(kMinimal);
  for (auto [key, value] :
       {std::pair{"norm", Json("rmsnorm")}, std::pair{"mlp", Json("swiglu")},
        std::pair{"position", Json("rotary")}, std::pair{"num_kv_heads", Json(2)}})
    llama["model"][key] = value;
  std::optional<Job> fusedLlama = parse(writeJson(llama));
  llama["model"]["elementwise"] = "eager_fused_norm";
  std::optional<Job> fusedNorm = parse(writeJson(llama));
  llama["model"]["elementwise"] = "eager";
  std::optional<Job> eagerLlama = parse(writeJson(llama));
  ASSERT_TRUE(fusedLlama && fusedNorm && eagerLlama);
  const TransformerSpec &t = *fusedLlama->model.transformer;
  const int64_t s = t.seqLength, h = t.hiddenSize, f = t.ffnHiddenSize,
                kv = h / t.numHeads * t.numKvHeads;
  const std::vector<LayerSpec> &a = fusedLlama->model.layers, &b = fusedNorm->model.layers,
                               &c = eagerLlama->model.layers;
  EXPECT_EQ(b[1].activationBytes - a[1].activationBytes, 2 * s * f + 2 * 2 * s * (h - kv));
  EXPECT_EQ(c[1].activationBytes - b[1].activationBytes, 4 * 2 * s * h);
  EXPECT_EQ(c.back().activationBytes - a.back().activationBytes, 4 * s * h);
  EXPECT_EQ(c[1].fwdFlops, a[1].fwdFlops);
  EXPECT_FALSE(parse(withKey("model", "elementwise", R"("compiled")"), &error));
  EXPECT_EQ(error, "job.json: model.elementwise: unknown value \"compiled\"; expected one of "
                   "\"fused\", \"eager\", \"eager_fused_norm\"");
  // FP8 keeps bf16 parameters and activations, and needs FP8 tensor cores.
  std::optional<Job> fp8 = parse(withKey("training", "dtype", R"("fp8")"));
  ASSERT_TRUE(fp8);
  EXPECT_EQ(fp8->training.elementBytes(), 2);
  Json a100 = Json::parse(withKey("training", "dtype", R"("fp8")"));
  a100["cluster"]["preset"] = "a100-80gb";
  EXPECT_FALSE(parse(writeJson(a100), &error));
  EXPECT_EQ(error, "job.json: training.dtype: \"fp8\" needs FP8 tensor cores, which the preset "
                   "\"a100-80gb\" does not have; use \"bf16\" or an H100 or H200 preset");
}

TEST(JobFile, DepthFirstGroupSize) {
  std::string text = withKey("parallelism", "schedule", R"("depth-first")");
  std::optional<Job> job = parse(text);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->parallelism.groupSize, 2);
  Json root = Json::parse(text);
  root["parallelism"]["group_size"] = 4;
  job = parse(writeJson(root));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->parallelism.groupSize, 4);
}

TEST(JobFile, DeferredWeightGradientLimit) {
  // Open unless the job states it.
  std::string text = withKey("parallelism", "schedule", R"("zb-h1")");
  std::optional<Job> job = parse(text);
  ASSERT_TRUE(job);
  EXPECT_FALSE(job->parallelism.maxDeferredWeightGradients);
  Json root = Json::parse(text);
  root["parallelism"]["max_deferred_weight_gradients"] = 0;
  job = parse(writeJson(root));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->parallelism.maxDeferredWeightGradients, 0);
  std::string error;
  root["parallelism"]["max_deferred_weight_gradients"] = -1;
  EXPECT_FALSE(parse(writeJson(root), &error));
  EXPECT_EQ(error, "job.json: parallelism.max_deferred_weight_gradients: must be between 0 and "
                   "1048576, got -1");
  // Read with any schedule, as recompute_modules is with any checkpointing, so that a tuner
  // may vary the schedule; only split backwards use it.
  job = parse(withKey("parallelism", "max_deferred_weight_gradients", "2"));
  ASSERT_TRUE(job);
  EXPECT_FALSE(job->parallelism.splitBackward);
  EXPECT_EQ(job->parallelism.maxDeferredWeightGradients, 2);
}

TEST(JobFile, ExplicitLayoutAndPartitions) {
  std::optional<Job> job = parse(withKey("parallelism", "stage_layers", "[2, 4]"));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->parallelism.stageLayers, (std::vector<int64_t>{2, 4}));
  job = parse(withKey("parallelism", "microbatch_partitions", "[[1, 1, 2], [2, 2]]"));
  ASSERT_TRUE(job);
  ASSERT_EQ(job->parallelism.microbatchPartitions.size(), 2u);
  EXPECT_EQ(job->parallelism.microbatchPartitions[0], (std::vector<int64_t>{1, 1, 2}));
  job = parse(withKey("parallelism", "microbatch_partitions", R"("auto")"));
  ASSERT_TRUE(job);
  EXPECT_TRUE(job->parallelism.autoPartitions);
}

TEST(JobFile, ErrorsNameFileKeyAndExpectation) {
  std::string error;
  EXPECT_FALSE(parse(withKey("parallelism", "pipeline", "0"), &error));
  EXPECT_EQ(error, "job.json: parallelism.pipeline: must be between 1 and 65536, got 0");
  EXPECT_FALSE(parse(withKey("model", "kind", R"("layers")"), &error));
  EXPECT_EQ(error, "job.json: model.layers: missing required key");
  EXPECT_FALSE(parse(withKey("parallelism", "stage_layers", "[1, 1, 4]"), &error));
  EXPECT_EQ(error, "job.json: parallelism.stage_layers: lists 3 stages but the job has 2 "
                   "(pipeline x stages_per_device)");
}

TEST(JobFile, LayersModelDefaultsCheckpointToPreviousOutput) {
  std::optional<Job> job = parse(R"({
    "model": {"kind": "layers", "layers": [
      {"name": "a", "params": 10, "fwd_flops": 1, "bwd_flops": 2, "activation_bytes": 5,
       "output_bytes": 7},
      {"name": "b", "kind": "head", "params": 10, "fwd_flops": 1, "bwd_flops": 2,
       "activation_bytes": 5, "output_bytes": 3}]},
    "parallelism": {"pipeline": 2, "schedule": "gpipe", "microbatches": 4},
    "cluster": {"preset": "a100-80gb"}})");
  ASSERT_TRUE(job);
  ASSERT_EQ(job->model.layers.size(), 2u);
  EXPECT_EQ(job->model.layers[0].checkpointBytes, 0);
  EXPECT_EQ(job->model.layers[1].checkpointBytes, 7);
  EXPECT_EQ(job->model.layers[1].kind, runtime::LayerKind::Head);
  EXPECT_EQ(job->model.tokensPerSample, 1);
}

TEST(JobFile, CommittedJobsAreValid) {
  for (const char *name : {"demo", "gpt2-small", "llama2-7b", "gpt-52b-bfs", "vgg16", "moe-tiny",
                           "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"}) {
    std::string path = std::string(CONDUIT_TESTDATA) + "/jobs/" + name + ".json";
    Diagnostics diag(path);
    std::optional<Job> job = readJobFile(path, diag);
    EXPECT_TRUE(job) << (diag.failed() ? diag.getError()->str() : "");
  }
}

TEST(JobFile, OverrideOfAKeyThatIsNotUtf8) {
  // Found by fuzz-job-file: the new section's key is stored repaired (invalid UTF-8 replaced),
  // and the override went on to look it up by its original bytes. It must end in the job
  // file's own "unknown key" diagnostic, not a crash, and the job must still write as text.
  Diagnostics diag("job.json");
  Json root = Json::parse(kMinimal);
  ASSERT_TRUE(applyOverride(root, "\xa1ter.efficiency=2", diag));
  EXPECT_FALSE(parseJob(root, "job.json", diag));
  EXPECT_NE(diag.getError()->str().find("unknown key"), std::string::npos);
  EXPECT_NE(writeJson(root).find("\xef\xbf\xbdter"), std::string::npos);
}

TEST(KeyEditor, SetsErasesAndFindsDottedKeys) {
  Json root = Json::parse(kMinimal);
  ASSERT_TRUE(setKey(root, "parallelism.data", 4));
  ASSERT_TRUE(setKey(root, "training.data.kind", "synthetic")); // creates both objects
  ASSERT_NE(findKey(root, "training.data.kind"), nullptr);
  EXPECT_EQ(*findKey(root, "training.data.kind"), "synthetic");
  EXPECT_EQ(*findKey(root, "parallelism.data"), 4);
  eraseKey(root, "parallelism.data");
  eraseKey(root, "no.such.key");
  EXPECT_EQ(findKey(root, "parallelism.data"), nullptr);
  std::string blocked;
  EXPECT_FALSE(setKey(root, "parallelism.pipeline.x", 1, &blocked));
  EXPECT_EQ(blocked, "parallelism.pipeline");
  EXPECT_FALSE(setKey(root, "model..kind", 1, &blocked));
  EXPECT_EQ(blocked, "model");
}

TEST(KeyEditor, OverridesTakeJsonOrText) {
  Json root = Json::parse(kMinimal);
  Diagnostics diag("job.json");
  ASSERT_TRUE(applyOverride(root, "parallelism.microbatch_partitions=[[4], [4]]", diag));
  ASSERT_TRUE(applyOverride(root, "parallelism.schedule=gpipe", diag));
  ASSERT_TRUE(applyOverride(root, "name=1f1b,run", diag));
  EXPECT_TRUE(root["parallelism"]["microbatch_partitions"].is_array());
  EXPECT_EQ(root["parallelism"]["schedule"], "gpipe");
  EXPECT_EQ(root["name"], "1f1b,run");
  EXPECT_FALSE(applyOverride(root, "parallelism", diag));
  EXPECT_EQ(diag.getError()->str(), "job.json: --set expects key.path=value, got \"parallelism\"");
  Diagnostics blocked("job.json");
  EXPECT_FALSE(applyOverride(root, "parallelism.pipeline.x=1", blocked));
  EXPECT_EQ(blocked.getError()->str(), "job.json: parallelism.pipeline: --set "
                                       "parallelism.pipeline.x: 'parallelism.pipeline' is not an "
                                       "object");
}

TEST(JobFile, WithoutParallelismReadsTheRest) {
  // The parallelism section may be absent, or anything: it is not read.
  Json root = Json::parse(kMinimal);
  root["parallelism"] = "anything";
  Diagnostics diag("job.json");
  std::optional<Job> job = parseJobWithoutParallelism(root, "job.json", diag);
  ASSERT_TRUE(job) << diag.getError()->str();
  EXPECT_EQ(job->model.layers.size(), 6u);
  EXPECT_EQ(job->cluster.preset, "h100-80gb");
  EXPECT_EQ(job->parallelism.pipeline, 1);
  root.erase("parallelism");
  EXPECT_TRUE(parseJobWithoutParallelism(root, "job.json", diag));
  // The other sections are still checked, and so are unknown keys.
  root["cluster"]["preset"] = "h100";
  EXPECT_FALSE(parseJobWithoutParallelism(root, "job.json", diag));
  EXPECT_NE(diag.getError()->str().find("cluster.preset"), std::string::npos);
}

/// kMinimal with a mixture of experts (4 experts, top 2, the first block dense), data 2 and
/// the edits `edit` makes to the parsed JSON.
std::optional<Job> parseMoe(const std::function<void(Json &)> &edit, std::string *error) {
  Json root = Json::parse(kMinimal);
  root["model"]["moe"] = Json::parse(R"({"num_experts": 4, "top_k": 2,
                                          "expert_ffn_hidden_size": 32, "dense_layers": 1})");
  root["parallelism"]["data"] = 2;
  edit(root);
  return parse(writeJson(root), error);
}

TEST(JobFile, MixtureOfExpertsKeys) {
  std::string error;
  std::optional<Job> job = parseMoe(
      [](Json &root) {
        Json &moe = root["model"]["moe"];
        moe["router"] = "sigmoid";
        moe["normalize_top_k"] = true;
        moe["aux_loss_coefficient"] = 0.001;
        moe["z_loss_coefficient"] = 0.002;
        moe["bias_update_rate"] = 0.001;
        moe["shared_experts"] = 2;
        moe["shared_expert_gate"] = true;
        moe["capacity_factor"] = 1.25;
        moe["drop_policy"] = "probs";
        moe["imbalance"] = 1.5;
        moe["router_groups"] = 2;
        moe["router_group_top_k"] = 1;
        moe["dispatch"] = "per_node";
        moe["kernels"] = "megatron";
        root["parallelism"]["expert"] = 2;
        root["model"]["head_dim"] = 32;
        root["model"]["qk_norm"] = true;
      },
      &error);
  ASSERT_TRUE(job) << error;
  const TransformerSpec &t = *job->model.transformer;
  ASSERT_TRUE(t.moe);
  EXPECT_EQ(t.moe->numExperts, 4);
  EXPECT_EQ(t.moe->topK, 2);
  EXPECT_EQ(t.moe->expertFfnHiddenSize, 32);
  EXPECT_EQ(t.moe->router, RouterKind::Sigmoid);
  EXPECT_TRUE(t.moe->normalizeTopK);
  EXPECT_DOUBLE_EQ(t.moe->auxLossCoefficient, 0.001);
  EXPECT_DOUBLE_EQ(t.moe->zLossCoefficient, 0.002);
  EXPECT_DOUBLE_EQ(t.moe->biasUpdateRate, 0.001);
  // Shared experts without a width: each as wide as a routed one (DeepSeek's convention).
  EXPECT_EQ(t.moe->sharedExperts, 2);
  EXPECT_EQ(t.moe->sharedFfnHiddenSize, 64);
  EXPECT_TRUE(t.moe->sharedExpertGate);
  EXPECT_EQ(t.moe->denseLayers, 1);
  EXPECT_EQ(t.moe->capacityFactor, 1.25);
  EXPECT_EQ(t.moe->dropPolicy, DropPolicy::Probs);
  EXPECT_EQ(t.moe->imbalance, 1.5);
  EXPECT_EQ(t.moe->routerGroups, 2);
  EXPECT_EQ(t.moe->routerGroupTopK, 1);
  EXPECT_EQ(t.moe->dispatch, DispatchKind::PerNode);
  EXPECT_EQ(t.moe->kernels, ExpertKernels::Megatron);
  EXPECT_EQ(t.headDim, 32);
  EXPECT_TRUE(t.qkNorm);
  EXPECT_EQ(job->parallelism.expert, 2);
  // The first block keeps its dense MLP; the others hold the routed experts.
  EXPECT_EQ(job->model.layers[1].expertParams, 0);
  EXPECT_GT(job->model.layers[2].expertParams, 0);

  // The defaults: softmax, no renormalisation, no auxiliary loss, no shared experts,
  // dropless, imbalance left to the compiler.
  job = parseMoe([](Json &) {}, &error);
  ASSERT_TRUE(job) << error;
  const MoeSpec &d = *job->model.transformer->moe;
  EXPECT_EQ(d.router, RouterKind::Softmax);
  EXPECT_FALSE(d.normalizeTopK);
  EXPECT_EQ(d.auxLossCoefficient, 0);
  EXPECT_EQ(d.zLossCoefficient, 0);
  EXPECT_EQ(d.biasUpdateRate, 0);
  EXPECT_EQ(d.sharedExperts, 0);
  EXPECT_EQ(d.sharedFfnHiddenSize, 0);
  EXPECT_FALSE(d.sharedExpertGate);
  EXPECT_FALSE(d.capacityFactor);
  EXPECT_EQ(d.dropPolicy, DropPolicy::Position);
  EXPECT_FALSE(d.imbalance);
  EXPECT_EQ(d.routerGroups, 1);
  EXPECT_EQ(d.routerGroupTopK, 1);
  EXPECT_EQ(d.dispatch, DispatchKind::PerExpert);
  EXPECT_FALSE(d.fp8Dispatch);
  EXPECT_EQ(d.kernels, ExpertKernels::Grouped);
  EXPECT_EQ(job->parallelism.expert, 1);
  // router_groups alone allows every group.
  job = parseMoe([](Json &root) { root["model"]["moe"]["router_groups"] = 2; }, &error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->model.transformer->moe->routerGroupTopK, 2);
  // A drop policy needs a capacity to drop anything.
  EXPECT_FALSE(parseMoe([](Json &root) { root["model"]["moe"]["drop_policy"] = "probs"; }, &error));
  EXPECT_EQ(error, "job.json: model.moe.drop_policy: says which assignments a capacity drops, and "
                   "the model is dropless (no moe.capacity_factor); set capacity_factor, or "
                   "remove drop_policy");
}

TEST(JobFile, HuggingFaceMixtureScaledDown) {
  // The job's moe keys override the config's one by one: a smaller Mixtral of 4 experts.
  Json root = Json::parse(kMinimal);
  root["model"] = Json::parse(R"({"kind": "hf", "num_layers": 2, "hidden_size": 64,
      "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 128, "seq_length": 32,
      "moe": {"num_experts": 4, "expert_ffn_hidden_size": 96}})");
  root["model"]["path"] = std::string(CONDUIT_TESTDATA) + "/hf/mixtral-8x7b/config.json";
  root["parallelism"]["data"] = 2;
  root["parallelism"]["expert"] = 2;
  std::string error;
  std::optional<Job> job = parse(writeJson(root), &error);
  ASSERT_TRUE(job) << error;
  const MoeSpec &m = *job->model.transformer->moe;
  EXPECT_EQ(m.numExperts, 4);
  EXPECT_EQ(m.expertFfnHiddenSize, 96);
  EXPECT_EQ(m.topK, 2);         // the config's
  EXPECT_TRUE(m.normalizeTopK); // Mixtral's
  EXPECT_DOUBLE_EQ(m.auxLossCoefficient, 0.02);
  EXPECT_EQ(job->model.transformer->numKvHeads, 1); // 4 heads per key/value head, as Mixtral
}

TEST(JobFile, LatentAttentionKeys) {
  std::string error;
  Json root = Json::parse(kMinimal);
  root["model"]["latent_attention"] = Json::parse(R"({"q_lora_rank": 24, "kv_lora_rank": 16,
      "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16})");
  std::optional<Job> job = parse(writeJson(root), &error);
  ASSERT_TRUE(job) << error;
  ASSERT_TRUE(job->model.transformer->latentAttention);
  const LatentAttentionSpec &a = *job->model.transformer->latentAttention;
  EXPECT_EQ(a.qLoraRank, 24);
  EXPECT_EQ(a.kvLoraRank, 16);
  EXPECT_EQ(a.qkNopeHeadDim, 16);
  EXPECT_EQ(a.qkRopeHeadDim, 8);
  EXPECT_EQ(a.vHeadDim, 16);
  EXPECT_FALSE(a.ropeInterleave); // the halves the runtime rotates, unless the job says
  root["model"]["latent_attention"]["rope_interleave"] = true;
  job = parse(writeJson(root), &error);
  ASSERT_TRUE(job) << error;
  EXPECT_TRUE(job->model.transformer->latentAttention->ropeInterleave);
  root["model"]["latent_attention"].erase("rope_interleave");
  // q_lora_rank may be left out (queries projected directly); the others are required.
  root["model"]["latent_attention"].erase("q_lora_rank");
  job = parse(writeJson(root), &error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->model.transformer->latentAttention->qLoraRank, 0);
  root["model"]["latent_attention"].erase("v_head_dim");
  EXPECT_FALSE(parse(writeJson(root), &error));
  EXPECT_NE(error.find("model.latent_attention.v_head_dim"), std::string::npos) << error;
}

TEST(JobFile, RotaryExtensionAndRoutedScalingKeys) {
  std::string error;
  Json root = Json::parse(kMinimal);
  root["model"]["position"] = "rotary";
  root["model"]["rope_scaling"] =
      Json::parse(R"({"rope_type": "yarn", "factor": 4, "mscale_all_dim": 1})");
  std::optional<Job> job = parse(writeJson(root), &error);
  ASSERT_TRUE(job) << error;
  const runtime::RopeScaling &r = job->model.transformer->ropeScaling;
  EXPECT_EQ(r.type, runtime::RopeType::Yarn);
  EXPECT_EQ(r.originalPositions, 32); // model.seq_length
  EXPECT_DOUBLE_EQ(r.attentionFactor, 0.1 * std::log(4.0) + 1);
  EXPECT_EQ(r.mscaleAllDim, 1);
  // Dynamic NTK scaling: past original_max_position_embeddings (by default seq_length, so that
  // a model trained at its own positions rotates by the base's frequencies).
  Json dynamic = root;
  dynamic["model"]["rope_scaling"] = Json::parse(R"({"rope_type": "dynamic", "factor": 2})");
  job = parse(writeJson(dynamic), &error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->model.transformer->ropeScaling.type, runtime::RopeType::Dynamic);
  EXPECT_EQ(job->model.transformer->ropeScaling.originalPositions, 32);
  dynamic["model"]["rope_scaling"]["original_max_position_embeddings"] = 16;
  job = parse(writeJson(dynamic), &error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->model.transformer->ropeScaling.originalPositions, 16);
  // Both names of the type, as the library saves them, when they agree.
  root["model"]["rope_scaling"]["type"] = "yarn";
  ASSERT_TRUE(parse(writeJson(root), &error)) << error;
  root["model"]["rope_scaling"].erase("type");
  // A key the extension does not have is refused, as everywhere in the job file.
  root["model"]["rope_scaling"]["mscale_al_dim"] = 1;
  EXPECT_FALSE(parse(writeJson(root), &error));
  EXPECT_NE(error.find("model.rope_scaling.mscale_al_dim"), std::string::npos) << error;
  // Learned positions have nothing to extend.
  root["model"]["rope_scaling"].erase("mscale_al_dim");
  root["model"]["position"] = "learned";
  EXPECT_FALSE(parse(writeJson(root), &error));
  EXPECT_NE(error.find("model.rope_scaling: extends rotary positions"), std::string::npos) << error;
  // The routed experts' scaling, above 0.
  job = parseMoe([](Json &root) { root["model"]["moe"]["routed_scaling_factor"] = 2.5; }, &error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->model.transformer->moe->routedScalingFactor, 2.5);
  EXPECT_FALSE(
      parseMoe([](Json &root) { root["model"]["moe"]["routed_scaling_factor"] = 0; }, &error));
  EXPECT_NE(error.find("model.moe.routed_scaling_factor"), std::string::npos) << error;
}

TEST(JobFile, MixtureOfExpertsRefusals) {
  // Each inconsistent value is refused naming its key.
  const struct {
    std::function<void(Json &)> edit;
    const char *key;
    const char *says;
  } cases[] = {
      {[](Json &r) { r["model"]["moe"]["top_k"] = 5; }, "model.moe.top_k", "only 4"},
      {[](Json &r) { r["model"]["moe"]["num_experts"] = 0; }, "model.moe.num_experts", ""},
      {[](Json &r) { r["model"]["moe"]["dense_layers"] = 4; }, "model.moe.dense_layers",
       "no block with experts"},
      {[](Json &r) { r["model"]["moe"]["shared_ffn_hidden_size"] = 64; },
       "model.moe.shared_ffn_hidden_size", "there are none"},
      {[](Json &r) { r["model"]["moe"]["shared_expert_gate"] = true; },
       "model.moe.shared_expert_gate", "there are none"},
      {[](Json &r) { r["model"]["moe"]["shared_expert_gate"] = 1; }, "model.moe.shared_expert_gate",
       ""},
      {[](Json &r) { r["model"]["moe"]["imbalance"] = 0.9; }, "model.moe.imbalance", ""},
      {[](Json &r) { r["model"]["moe"]["imbalance"] = 5; }, "model.moe.imbalance",
       "at most the expert count"},
      {[](Json &r) { r["model"]["moe"]["capacity_factor"] = 0; }, "model.moe.capacity_factor", ""},
      {[](Json &r) { r["model"]["moe"]["capacity_factor"] = -1; }, "model.moe.capacity_factor", ""},
      {[](Json &r) { r["model"]["moe"]["router"] = "topk"; }, "model.moe.router", "softmax"},
      {[](Json &r) { r["model"]["moe"]["bias_update_rate"] = 0.001; }, "model.moe.bias_update_rate",
       "set moe.router to \"sigmoid\""},
      {[](Json &r) {
         r["model"]["moe"]["router"] = "sigmoid";
         r["model"]["moe"]["bias_update_rate"] = -0.001;
       },
       "model.moe.bias_update_rate", ""},
      {[](Json &r) { r["model"]["moe"]["router_groups"] = 3; }, "model.moe.router_groups",
       "3 groups do not divide the 4 experts"},
      {[](Json &r) { r["model"]["moe"]["router_group_top_k"] = 2; }, "model.moe.router_group_top_k",
       "there are only 1 (moe.router_groups)"},
      {[](Json &r) {
         r["model"]["moe"]["router_groups"] = 4;
         r["model"]["moe"]["router_group_top_k"] = 1;
       },
       "model.moe.top_k", "its 1 groups (moe.router_group_top_k) hold only 1"},
      {[](Json &r) { r["model"]["moe"]["dispatch"] = "per_rank"; }, "model.moe.dispatch",
       "\"per_expert\", \"per_node\""},
      {[](Json &r) { r["model"]["moe"]["fp8_dispatch"] = true; }, "model.moe.fp8_dispatch",
       "applies to training.dtype \"fp8\""},
      {[](Json &r) { r["model"]["moe"]["kernels"] = "deepgemm"; }, "model.moe.kernels",
       "\"grouped\", \"megatron\""},
      {[](Json &r) { r["model"]["moe"]["experts"] = 4; }, "model.moe.experts", ""},
      {[](Json &r) { r["model"]["moe"].erase("top_k"); }, "model.moe.top_k", ""},
      {[](Json &r) { r["parallelism"]["expert"] = 3; }, "parallelism.expert",
       "do not divide the 4 experts"},
      {[](Json &r) { r["parallelism"]["expert"] = 4; }, "parallelism.expert",
       "data x tensor ranks"},
      {[](Json &r) {
         r["model"]["moe"]["num_experts"] = 8;
         r["parallelism"]["expert"] = 4;
       },
       "parallelism.expert", "(2 x 1 = 2)"},
      // One replica reduces no gradients: the tensor ranks routing their own tokens through
      // the same experts could not sum them.
      {[](Json &r) {
         r["parallelism"]["tensor"] = 2;
         r["parallelism"]["data"] = 1;
       },
       "parallelism.expert",
       "with one replica (parallelism.data 1) the plan reduces no "
       "gradients, and each expert would be held by 2 tensor-parallel"},
      {[](Json &r) {
         r["model"]["head_dim"] = 15;
         r["model"]["position"] = "rotary";
       },
       "model.head_dim", "even"},
      {[](Json &r) {
         r["model"]["head_dim"] = 32;
         r["model"]["num_heads"] = 3;
         r["model"]["num_kv_heads"] = 1;
       },
       "model.num_heads", "do not divide the hidden size 64"},
      {[](Json &r) {
         r["model"]["head_dim"] = 16;
         r["model"]["latent_attention"] = Json::parse(
             R"({"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8})");
       },
       "model.head_dim", "latent attention"},
      {[](Json &r) {
         r["model"]["latent_attention"] = Json::parse(
             R"({"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 7, "v_head_dim": 8})");
         r["model"]["position"] = "rotary";
       },
       "model.latent_attention.qk_rope_head_dim", "even"},
      {[](Json &r) {
         r["model"]["moe"]["shared_experts"] = 1;
         r["model"]["moe"]["shared_ffn_hidden_size"] = 30;
         r["parallelism"]["tensor"] = 4;
         r["parallelism"]["data"] = 1;
       },
       "parallelism.tensor", "shared_ffn_hidden_size"},
      {[](Json &r) {
         r["model"]["seq_length"] = 30;
         r["parallelism"]["tensor"] = 4;
         r["parallelism"]["data"] = 1;
       },
       "parallelism.tensor", "routes a contiguous slice of every sequence"},
  };
  for (const auto &c : cases) {
    std::string error;
    EXPECT_FALSE(parseMoe(c.edit, &error)) << c.key;
    EXPECT_NE(error.find(std::string(c.key) + ":"), std::string::npos) << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
  // Without a mixture of experts: no expert parallelism, and no moe on a layer list.
  std::string error;
  EXPECT_FALSE(parse(withKey("parallelism", "expert", "2"), &error));
  EXPECT_NE(error.find("parallelism.expert: divides a mixture of experts"), std::string::npos)
      << error;
  Json layers = Json::parse(R"({"kind": "layers", "layers": [{"name": "a", "params": 1,
      "fwd_flops": 1, "bwd_flops": 2, "activation_bytes": 1, "output_bytes": 1}],
      "moe": {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 8}})");
  Json root = Json::parse(kMinimal);
  root["model"] = layers;
  root["parallelism"]["pipeline"] = 1;
  EXPECT_FALSE(parse(writeJson(root), &error));
  EXPECT_NE(error.find("model.moe: applies to a transformer"), std::string::npos) << error;
}

TEST(JobSpec, EnumsAreSpelledAsInTheJobFile) {
  EXPECT_EQ(enumName(runtime::Schedule::OneFOneB), "1f1b");
  EXPECT_EQ(enumName(runtime::Schedule::DualPipeV), "dualpipev");
  EXPECT_EQ(parseEnum<runtime::Schedule>("interleaved-zb"),
            runtime::Schedule::InterleavedZeroBubble);
  EXPECT_EQ(parseEnum<runtime::Sharding>("fsdp"), std::nullopt);
  EXPECT_EQ(enumName(RankOrder::PipelineInner), "pipeline-inner");
  EXPECT_EQ(enumNames<runtime::Schedule>().size(), size_t(runtime::kNumSchedules));
  EXPECT_EQ(enumName(RouterKind::Sigmoid), "sigmoid");
  EXPECT_EQ(parseEnum<RouterKind>("softmax"), RouterKind::Softmax);
}

} // namespace
