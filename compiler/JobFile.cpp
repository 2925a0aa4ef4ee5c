//===- JobFile.cpp - the job file: model, parallelism, cluster, training --===//
//
// Reads the four sections in order (model, parallelism, cluster, training; training first where
// the model's byte counts need its data type), fills in defaults, and checks the relations
// between sections (stages vs layers, explicit layouts and partitions vs the shape of the job).
// Every limit below is far above real jobs; they exist so that no derived figure can overflow.
//
//===----------------------------------------------------------------------===//

#include "compiler/JobFile.h"

#include "compiler/HuggingFace.h"
#include "compiler/TransformerCosts.h"
#include "scheduling/Schedulers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <numeric>

using namespace conduit;
namespace json = llvm::json;

namespace {

// The limits the runtime's plan reader enforces too (runtime/plan/Limits.h).
using limits::kMaxBatchSamples;
using limits::kMaxData;
using limits::kMaxExact;
using limits::kMaxMicrobatches;
using limits::kMaxMicrobatchSize;
using limits::kMaxPipeline;
using limits::kMaxStageMicrobatches;
using limits::kMaxStagesPerDevice;
using limits::kMaxTensor;
using limits::kMaxWorld;

/// NVIDIA datasheets (dense BF16 tensor-core peak; HBM bandwidth; NVLink and one NIC per GPU,
/// per direction); the defaults for efficiency, latency and launch overhead are discussed in
/// docs/cost-model.md.
const Cluster kPresets[] = {
    {"a100-80gb", 312e12, 0.5, 2.039e12, int64_t(80) << 30, 8, 300e9, 25e9, 10e-6, 0.0, ""},
    {"h100-80gb", 989e12, 0.5, 3.35e12, int64_t(80) << 30, 8, 450e9, 50e9, 10e-6, 0.0, ""},
    {"h200-141gb", 989e12, 0.5, 4.8e12, int64_t(141) << 30, 8, 450e9, 50e9, 10e-6, 0.0, ""},
};

const llvm::StringRef kModelKinds[] = {"transformer", "layers", "hf"};
const llvm::StringRef kScheduleNames[] = {"gpipe", "1f1b",           "depth-first", "breadth-first",
                                          "zb-h1", "interleaved-zb", "zbv",         "dualpipev"};
const llvm::StringRef kPlacementNames[] = {"loop", "v"};
const llvm::StringRef kShardingNames[] = {"none", "optimizer", "gradients", "full"};
const llvm::StringRef kCheckpointingNames[] = {"none", "full", "selective"};
const llvm::StringRef kRankOrderNames[] = {"data-inner", "pipeline-inner"};
const llvm::StringRef kDTypeNames[] = {"bf16", "fp16", "fp32"};
const llvm::StringRef kOptimizerNames[] = {"adam", "sgd"};
const llvm::StringRef kDataKindNames[] = {"synthetic", "tokens", "text"};
const llvm::StringRef kTokenTypeNames[] = {"uint16", "uint32"};
const llvm::StringRef kMlpNames[] = {"gelu", "swiglu"};
const llvm::StringRef kNormNames[] = {"layernorm", "rmsnorm"};
const llvm::StringRef kPositionNames[] = {"learned", "rotary"};
const llvm::StringRef kBiasNames[] = {"all", "qkv", "none"};
const llvm::StringRef kLayerKindNames[] = {"embedding", "block", "head", "custom"};

/// Reads `key` as one of `names` and converts it with the dialect's symbolizer.
template <typename EnumT>
std::optional<EnumT> readEnum(ObjectReader &reader, llvm::StringRef key,
                              llvm::ArrayRef<llvm::StringRef> names) {
  std::optional<size_t> index = reader.choice(key, names);
  if (!index)
    return std::nullopt;
  return pipe::symbolizeEnum<EnumT>(names[*index]);
}

/// The keys whose values name files (relative to the job file).
const llvm::StringRef kPathKeys[] = {"model.path", "cluster.profile", "training.data.path"};

/// Resolves a path written in the job file against the job file's directory.
std::string resolvePath(llvm::StringRef jobPath, llvm::StringRef path) {
  if (llvm::sys::path::is_absolute(path))
    return path.str();
  llvm::SmallString<256> resolved(llvm::sys::path::parent_path(jobPath));
  llvm::sys::path::append(resolved, path);
  return std::string(resolved);
}

/// resolvePath, then absolute: for paths the plan carries to conduit-run, which may run
/// elsewhere in the file system than the compiler did.
std::string absolutePath(llvm::StringRef jobPath, llvm::StringRef path) {
  llvm::SmallString<256> resolved(resolvePath(jobPath, path));
  (void)llvm::sys::fs::make_absolute(resolved);
  llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
  return std::string(resolved);
}

class JobParser {
public:
  JobParser(llvm::StringRef path, Diagnostics &diag) : path(path), diag(diag) {}

  std::optional<Job> parse(const json::Value &root);

private:
  void parseTraining(ObjectReader &section, TrainingSpec &t);
  void parseData(ObjectReader section, TrainingSpec &t);
  void parseModel(ObjectReader &section, ModelSpec &m, const TrainingSpec &training);
  void parseTransformer(ObjectReader &section, TransformerSpec &t);
  /// The transformer's keys, each optional, over `t`'s values.
  void readShape(ObjectReader &section, TransformerSpec &t);
  /// Reports a shape that cannot be built, naming the key (unless an error came first).
  void checkShape(ObjectReader &section, const TransformerSpec &t);
  void parseLayers(ObjectReader &section, ModelSpec &m);
  void parseParallelism(ObjectReader &section, ParallelismSpec &p);
  void parseCluster(ObjectReader &section, Cluster &c);
  void checkJob(const Job &job);
  /// The tensor-parallel degree against the model: what Megatron-LM's partitioning splits.
  void checkTensor(const Job &job);
  void checkSchedule(const ParallelismSpec &p);
  void checkStageLayers(const Job &job);
  void checkPartitions(const Job &job);

  llvm::StringRef path;
  Diagnostics &diag;
};

std::optional<Job> JobParser::parse(const json::Value &root) {
  const json::Object *object = root.getAsObject();
  if (!object) {
    diag.report("", "expected a JSON object with sections model, parallelism, cluster and "
                    "training, got " +
                        describeJson(root));
    return std::nullopt;
  }
  Job job;
  job.path = path.str();
  job.name = llvm::sys::path::stem(path).str();
  ObjectReader top(*object, "", diag);
  if (std::optional<std::string> name = top.string("name"))
    job.name = *name;
  for (llvm::StringRef key : {"model", "parallelism", "cluster"})
    if (!top.require(key))
      return std::nullopt;

  // Training comes first: the model's byte counts depend on its data type.
  if (const json::Object *training = top.object("training")) {
    ObjectReader section(*training, "training", diag);
    parseTraining(section, job.training);
  }
  if (const json::Object *model = top.object("model")) {
    ObjectReader section(*model, "model", diag);
    parseModel(section, job.model, job.training);
  }
  if (const json::Object *parallelism = top.object("parallelism")) {
    ObjectReader section(*parallelism, "parallelism", diag);
    parseParallelism(section, job.parallelism);
  }
  if (const json::Object *cluster = top.object("cluster")) {
    ObjectReader section(*cluster, "cluster", diag);
    parseCluster(section, job.cluster);
  }
  top.rejectUnknownKeys();
  if (!diag.failed())
    checkJob(job);
  if (diag.failed())
    return std::nullopt;
  return job;
}

void JobParser::parseTraining(ObjectReader &section, TrainingSpec &t) {
  if (auto dtype = readEnum<pipe::DType>(section, "dtype", kDTypeNames))
    t.dtype = *dtype;
  if (auto optimizer = readEnum<pipe::Optimizer>(section, "optimizer", kOptimizerNames))
    t.optimizer = *optimizer;
  if (auto seed = section.integer("seed", 0, kMaxExact))
    t.seed = *seed;
  if (auto lr = section.number("learning_rate", 0, limits::kMaxLearningRate, /*minExclusive=*/true))
    t.learningRate = *lr;
  if (const json::Object *data = section.object("data"))
    parseData(ObjectReader(*data, section.keyPath("data"), diag), t);
  section.rejectUnknownKeys();
}

void JobParser::parseData(ObjectReader section, TrainingSpec &t) {
  if (!section.require("kind"))
    return;
  if (auto kind = readEnum<pipe::DataKind>(section, "kind", kDataKindNames))
    t.data = *kind;
  if (section.failed())
    return;
  if (t.data == pipe::DataKind::Synthetic) {
    section.rejectUnknownKeys();
    return;
  }
  if (!section.require("path"))
    return;
  if (t.data == pipe::DataKind::Tokens)
    if (auto dtype = readEnum<pipe::TokenType>(section, "dtype", kTokenTypeNames))
      t.dataDtype = *dtype;
  std::optional<std::string> file = section.string("path");
  section.rejectUnknownKeys();
  if (!file || section.failed())
    return;
  t.dataPath = absolutePath(path, *file);
  if (!llvm::sys::fs::is_regular_file(t.dataPath))
    diag.report(section.keyPath("path"), "cannot read data file \"" + t.dataPath +
                                             "\" (relative paths start at the job file's folder)");
}

void JobParser::parseTransformer(ObjectReader &section, TransformerSpec &t) {
  for (llvm::StringRef key : {"num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size"})
    if (!section.require(key))
      return;
  readShape(section, t);
  if (t.numKvHeads == 0)
    t.numKvHeads = t.numHeads;
  if (t.ffnHiddenSize == 0)
    t.ffnHiddenSize = 4 * t.hiddenSize;
  checkShape(section, t);
}

void JobParser::readShape(ObjectReader &section, TransformerSpec &t) {
  const struct {
    const char *key;
    int64_t most;
    int64_t TransformerSpec::*field;
  } counts[] = {{"num_layers", kMaxLayers, &TransformerSpec::numLayers},
                {"hidden_size", kMaxHidden, &TransformerSpec::hiddenSize},
                {"num_heads", kMaxHeads, &TransformerSpec::numHeads},
                {"num_kv_heads", kMaxHeads, &TransformerSpec::numKvHeads},
                {"ffn_hidden_size", kMaxFfn, &TransformerSpec::ffnHiddenSize},
                {"seq_length", kMaxSeqLength, &TransformerSpec::seqLength},
                {"vocab_size", kMaxVocab, &TransformerSpec::vocabSize}};
  for (const auto &c : counts)
    if (auto value = section.integer(c.key, 1, c.most))
      t.*c.field = *value;
  if (auto mlp = readEnum<pipe::MlpKind>(section, "mlp", kMlpNames))
    t.mlp = *mlp;
  if (auto norm = readEnum<pipe::NormKind>(section, "norm", kNormNames))
    t.norm = *norm;
  if (auto position = readEnum<pipe::PositionKind>(section, "position", kPositionNames))
    t.position = *position;
  if (auto tie = section.boolean("tie_embeddings"))
    t.tieEmbeddings = *tie;
  if (auto bias = readEnum<pipe::BiasKind>(section, "bias", kBiasNames))
    t.bias = *bias;
  if (auto theta = section.number("rope_theta", 1, 1e12, /*minExclusive=*/true))
    t.ropeTheta = *theta;
  if (auto eps = section.number("norm_eps", 0, 0.1, /*minExclusive=*/true))
    t.normEps = *eps;
}

void JobParser::checkShape(ObjectReader &section, const TransformerSpec &t) {
  if (section.failed())
    return;
  if (std::optional<ShapeProblem> problem = checkTransformerShape(t))
    diag.report(section.keyPath(problem->key), problem->message);
}

void JobParser::parseLayers(ObjectReader &section, ModelSpec &m) {
  if (!section.require("layers"))
    return;
  if (auto tokens = section.integer("tokens_per_sample", 1, kMaxSeqLength))
    m.tokensPerSample = *tokens;
  const json::Array *layers = section.array("layers");
  if (!layers)
    return;
  if (layers->empty() || static_cast<int64_t>(layers->size()) > kMaxLayers) {
    diag.report(section.keyPath("layers"), "expected between 1 and " + std::to_string(kMaxLayers) +
                                               " layers, got " + std::to_string(layers->size()));
    return;
  }
  int64_t previousOutput = 0;
  for (auto [i, value] : llvm::enumerate(*layers)) {
    std::string at = section.elementPath("layers", i);
    const json::Object *object = value.getAsObject();
    if (!object) {
      diag.report(at, "expected an object, got " + describeJson(value));
      return;
    }
    ObjectReader entry(*object, at, diag);
    for (llvm::StringRef key :
         {"name", "params", "fwd_flops", "bwd_flops", "activation_bytes", "output_bytes"})
      if (!entry.require(key))
        return;
    LayerSpec layer;
    layer.name = entry.string("name").value_or("");
    if (auto kind = readEnum<pipe::LayerKind>(entry, "kind", kLayerKindNames))
      layer.kind = *kind;
    layer.params = entry.integer("params", 0, kMaxExact).value_or(0);
    layer.fwdFlops = entry.number("fwd_flops", 0, 9e15).value_or(0);
    layer.bwdFlops = entry.number("bwd_flops", 0, 9e15).value_or(0);
    // Half of the backward computes weight gradients unless the layer says otherwise.
    layer.bwdWeightFlops = entry.number("bwd_weight_flops", 0, 9e15).value_or(layer.bwdFlops / 2);
    if (layer.bwdWeightFlops > layer.bwdFlops)
      diag.report(at + ".bwd_weight_flops",
                  "the weight-gradient FLOPs exceed bwd_flops; W is the part of the backward "
                  "that computes weight gradients, so it is at most bwd_flops");
    layer.activationBytes = entry.integer("activation_bytes", 0, kMaxExact).value_or(0);
    layer.outputBytes = entry.integer("output_bytes", 0, kMaxExact).value_or(0);
    layer.weightGradientBytes = entry.integer("weight_gradient_bytes", 0, kMaxExact);
    layer.replicatedParams = entry.integer("replicated_params", 0, layer.params);
    layer.replicatedActivationBytes =
        entry.integer("replicated_activation_bytes", 0, layer.activationBytes);
    // By default checkpointing keeps the layer's input: the previous layer's output.
    layer.checkpointBytes =
        entry.integer("checkpoint_bytes", 0, kMaxExact).value_or(previousOutput);
    entry.rejectUnknownKeys();
    if (diag.failed())
      return;
    previousOutput = layer.outputBytes;
    m.layers.push_back(std::move(layer));
  }
}

void JobParser::parseModel(ObjectReader &section, ModelSpec &m, const TrainingSpec &training) {
  if (!section.require("kind"))
    return;
  std::optional<size_t> kind = section.choice("kind", kModelKinds);
  if (!kind)
    return;
  m.kind = kModelKinds[*kind].str();
  if (m.kind == "layers") {
    parseLayers(section, m);
    section.rejectUnknownKeys();
    return;
  }
  if (m.kind == "transformer") {
    TransformerSpec t;
    parseTransformer(section, t);
    m.transformer = t;
  } else { // hf
    if (!section.require("path"))
      return;
    std::optional<std::string> hfPath = section.string("path");
    if (!hfPath)
      return;
    std::string config = resolvePath(path, *hfPath);
    if (!llvm::sys::fs::is_regular_file(config)) {
      diag.report(section.keyPath("path"),
                  "cannot read the Hugging Face config \"" + config +
                      "\"; name a model's config.json (relative paths start at the job file)");
      return;
    }
    Diagnostics hfDiag(config);
    std::optional<TransformerSpec> t = readHuggingFaceConfig(hfDiag.getFile(), hfDiag);
    diag.adopt(hfDiag);
    if (!t)
      return;
    // The job's own transformer keys override the config's (a smaller model of the family).
    // Fewer heads keep the config's heads per key/value head unless the job says otherwise.
    const int64_t groups = t->numHeads / t->numKvHeads;
    readShape(section, *t);
    if (section.value("num_heads") && !section.value("num_kv_heads") && t->numHeads % groups == 0)
      t->numKvHeads = t->numHeads / groups;
    checkShape(section, *t);
    m.transformer = t;
  }
  section.rejectUnknownKeys();
  if (diag.failed())
    return;
  m.tokensPerSample = m.transformer->seqLength;
  llvm::Expected<std::vector<LayerSpec>> layers =
      expandTransformer(*m.transformer, training.elementBytes());
  if (!layers) {
    diag.report("model", llvm::toString(layers.takeError()));
    return;
  }
  m.layers = std::move(*layers);
}

/// Reads a list of positive integers at `keyPath`.
std::optional<std::vector<int64_t>> readPositiveList(const json::Value &value,
                                                     const std::string &keyPath, int64_t max,
                                                     Diagnostics &diag) {
  const json::Array *array = value.getAsArray();
  if (!array || array->empty()) {
    diag.report(keyPath,
                "expected a non-empty array of positive integers, got " + describeJson(value));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (auto [i, element] : llvm::enumerate(*array)) {
    std::optional<int64_t> n =
        readInteger(element, keyPath + "[" + std::to_string(i) + "]", 1, max, diag);
    if (!n)
      return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

void JobParser::parseParallelism(ObjectReader &section, ParallelismSpec &p) {
  for (llvm::StringRef key : {"pipeline", "schedule", "microbatches"})
    if (!section.require(key))
      return;
  p.pipeline = section.integer("pipeline", 1, kMaxPipeline).value_or(1);
  p.data = section.integer("data", 1, kMaxData).value_or(1);
  p.tensor = section.integer("tensor", 1, kMaxTensor).value_or(1);
  p.sequenceParallel = section.boolean("sequence_parallel").value_or(false);
  p.stagesPerDevice = section.integer("stages_per_device", 1, kMaxStagesPerDevice).value_or(1);
  if (auto schedule = readEnum<pipe::ScheduleKind>(section, "schedule", kScheduleNames))
    p.schedule = *schedule;
  p.microbatches = section.integer("microbatches", 1, kMaxMicrobatches).value_or(1);
  p.microbatchSize = section.integer("microbatch_size", 1, kMaxMicrobatchSize).value_or(1);
  std::optional<int64_t> group = section.integer("group_size", 1, kMaxMicrobatches);
  if (auto sharding = readEnum<pipe::Sharding>(section, "sharding", kShardingNames))
    p.sharding = *sharding;
  if (auto checkpointing =
          readEnum<pipe::Checkpointing>(section, "activation_checkpointing", kCheckpointingNames))
    p.checkpointing = *checkpointing;
  p.fsdpWindow = section.integer("fsdp_window", 1, kMaxStagesPerDevice).value_or(2);
  if (auto order = readEnum<pipe::RankOrder>(section, "rank_order", kRankOrderNames))
    p.rankOrder = *order;
  const bool vSchedule =
      p.schedule == pipe::ScheduleKind::ZeroBubbleV || p.schedule == pipe::ScheduleKind::DualPipeV;
  p.placement = vSchedule ? pipe::Placement::V : pipe::Placement::Loop;
  if (auto placement = readEnum<pipe::Placement>(section, "placement", kPlacementNames))
    p.placement = *placement;
  std::optional<bool> split = section.boolean("split_backward");
  p.splitBackward = split.value_or(false) || pipe::isZeroBubble(p.schedule);
  if (const json::Value *layout = section.value("stage_layers"))
    if (auto list = readPositiveList(*layout, section.keyPath("stage_layers"), kMaxLayers, diag))
      p.stageLayers = std::move(*list);
  if (const json::Value *partitions = section.value("microbatch_partitions")) {
    std::string at = section.keyPath("microbatch_partitions");
    if (std::optional<llvm::StringRef> text = partitions->getAsString()) {
      if (*text == "auto")
        p.autoPartitions = true;
      else
        diag.report(at, "expected \"auto\" or an array with one list of micro-batch sizes per "
                        "stage, got " +
                            describeJson(*partitions));
    } else if (const json::Array *perStage = partitions->getAsArray();
               perStage && !perStage->empty()) {
      for (auto [s, sizes] : llvm::enumerate(*perStage)) {
        auto list = readPositiveList(sizes, at + "[" + std::to_string(s) + "]",
                                     kMaxMicrobatchSize * kMaxMicrobatches, diag);
        if (!list)
          break;
        p.microbatchPartitions.push_back(std::move(*list));
      }
    } else {
      diag.report(at, "expected \"auto\" or an array with one list of micro-batch sizes per "
                      "stage, got " +
                          describeJson(*partitions));
    }
  }
  section.rejectUnknownKeys();
  if (diag.failed())
    return;
  if (split == false && pipe::isZeroBubble(p.schedule)) {
    diag.report(section.keyPath("split_backward"),
                "schedule \"" + stringifyScheduleKind(p.schedule).str() +
                    "\" always splits backwards into input and weight gradients; remove "
                    "split_backward, or choose a schedule with whole backwards (gpipe, 1f1b, "
                    "depth-first, breadth-first)");
    return;
  }
  if (group && p.schedule != pipe::ScheduleKind::DepthFirst &&
      p.schedule != pipe::ScheduleKind::InterleavedZeroBubble) {
    diag.report(section.keyPath("group_size"),
                "only applies to schedules \"depth-first\" and \"interleaved-zb\" (the "
                "schedule is \"" +
                    stringifyScheduleKind(p.schedule).str() + "\")");
    return;
  }
  p.groupSize = group.value_or(p.pipeline);
}

void JobParser::parseCluster(ObjectReader &section, Cluster &c) {
  if (!section.require("preset"))
    return;
  std::optional<size_t> preset = section.choice("preset", clusterPresetNames());
  if (!preset)
    return;
  c = kPresets[*preset];
  if (auto v = section.number("peak_flops", 0, 1e20, /*minExclusive=*/true))
    c.peakFlops = *v;
  if (auto v = section.number("efficiency", 0, 1, /*minExclusive=*/true))
    c.efficiency = *v;
  if (auto v = section.number("memory_bandwidth", 0, 1e30, /*minExclusive=*/true))
    c.memoryBandwidth = *v;
  if (auto v = section.integer("memory_bytes", 1, kMaxExact))
    c.memoryBytes = *v;
  if (auto v = section.integer("gpus_per_node", 1, limits::kMaxGpusPerNode))
    c.gpusPerNode = *v;
  if (auto v = section.number("intra_node_bandwidth", 0, 1e30, /*minExclusive=*/true))
    c.intraNodeBandwidth = *v;
  if (auto v = section.number("inter_node_bandwidth", 0, 1e30, /*minExclusive=*/true))
    c.interNodeBandwidth = *v;
  if (auto v = section.number("latency_s", 0, 1e3))
    c.latencyS = *v;
  if (auto v = section.number("launch_overhead_s", 0, 1e3))
    c.launchOverheadS = *v;
  if (auto profile = section.string("profile")) {
    c.profile = resolvePath(path, *profile);
    if (!llvm::sys::fs::is_regular_file(c.profile))
      diag.report(section.keyPath("profile"), "cannot read profile file \"" + c.profile + "\"");
  }
  section.rejectUnknownKeys();
}

void JobParser::checkStageLayers(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.stageLayers.empty())
    return;
  int64_t layers = static_cast<int64_t>(job.model.layers.size());
  int64_t sum = std::accumulate(p.stageLayers.begin(), p.stageLayers.end(), int64_t(0));
  if (static_cast<int64_t>(p.stageLayers.size()) != p.numStages())
    diag.report("parallelism.stage_layers",
                "lists " + std::to_string(p.stageLayers.size()) + " stages but the job has " +
                    std::to_string(p.numStages()) + " (pipeline x stages_per_device)");
  else if (sum != layers)
    diag.report("parallelism.stage_layers",
                "assigns " + std::to_string(sum) + " layers but the model has " +
                    std::to_string(layers) + " (embedding and head included)");
}

void JobParser::checkPartitions(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.microbatchPartitions.empty())
    return;
  if (static_cast<int64_t>(p.microbatchPartitions.size()) != p.numStages()) {
    diag.report("parallelism.microbatch_partitions",
                "lists " + std::to_string(p.microbatchPartitions.size()) +
                    " stages but the job has " + std::to_string(p.numStages()));
    return;
  }
  for (auto [s, sizes] : llvm::enumerate(p.microbatchPartitions)) {
    int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    if (sum != p.batchSamples()) {
      diag.report("parallelism.microbatch_partitions[" + std::to_string(s) + "]",
                  "sizes add up to " + std::to_string(sum) + " samples but the batch has " +
                      std::to_string(p.batchSamples()) + " (microbatches x microbatch_size)");
      return;
    }
  }
}

void JobParser::checkSchedule(const ParallelismSpec &p) {
  using pipe::ScheduleKind;
  const std::string schedule = "\"" + stringifyScheduleKind(p.schedule).str() + "\"";
  const bool v = p.placement == pipe::Placement::V;
  switch (p.schedule) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZeroBubbleH1:
    if (p.stagesPerDevice > 1) {
      const char *instead = p.schedule == ScheduleKind::GPipe
                                ? "\"breadth-first\" (GPipe's order on looped stages)"
                            : p.schedule == ScheduleKind::OneFOneB
                                ? "\"depth-first\" (interleaved 1F1B) or \"breadth-first\""
                                : "\"interleaved-zb\" or \"zbv\"";
      diag.report("parallelism.stages_per_device",
                  "schedule " + schedule + " runs one stage per device, got " +
                      std::to_string(p.stagesPerDevice) + "; use 1, or schedule " + instead);
      return;
    }
    break;
  case ScheduleKind::DepthFirst:
  case ScheduleKind::InterleavedZeroBubble:
    if (v) {
      diag.report("parallelism.placement",
                  "schedule " + schedule +
                      " runs on the looped placement; use \"loop\", or schedule \"zbv\" or "
                      "\"dualpipev\" for the V placement");
      return;
    }
    if (p.schedule == ScheduleKind::InterleavedZeroBubble && p.stagesPerDevice < 2) {
      diag.report("parallelism.stages_per_device",
                  "schedule \"interleaved-zb\" loops at least 2 stages per device, got 1; use "
                  "2 or more, or schedule \"zb-h1\" for one stage per device");
      return;
    }
    break;
  case ScheduleKind::ZeroBubbleV:
  case ScheduleKind::DualPipeV:
    if (!v) {
      diag.report("parallelism.placement",
                  "schedule " + schedule +
                      " runs on the V placement (rank r holds stages r and 2P-1-r); use \"v\" "
                      "(the default for this schedule), or schedule \"interleaved-zb\" for the "
                      "looped placement");
      return;
    }
    break;
  case ScheduleKind::BreadthFirst:
    break;
  }
  if (v && p.stagesPerDevice != 2) {
    diag.report("parallelism.stages_per_device",
                "the V placement holds exactly 2 stages per device, got " +
                    std::to_string(p.stagesPerDevice) +
                    "; use 2, or placement \"loop\" with schedule \"breadth-first\" or "
                    "\"interleaved-zb\"");
    return;
  }
  if (p.splitBackward && p.autoPartitions) {
    diag.report("parallelism.microbatch_partitions",
                "\"auto\" searches micro-batch cuts of whole-backward gpipe and 1f1b schedules; "
                "give explicit partitions, or drop split_backward");
    return;
  }
  // Depth-first's rules on the number of micro-batches per stage; explicit unequal partitions
  // are checked by the schedule itself.
  if ((p.schedule != ScheduleKind::DepthFirst &&
       p.schedule != ScheduleKind::InterleavedZeroBubble) ||
      !p.microbatchPartitions.empty() || p.autoPartitions)
    return;
  if (std::optional<sched::GroupingViolation> violation =
          sched::checkDepthFirstGrouping(p.microbatches, p.pipeline, p.groupSize))
    diag.report(violation->rule == sched::GroupingViolation::TooFewMicrobatches
                    ? "parallelism.microbatches"
                    : "parallelism.group_size",
                violation->message);
}

void JobParser::checkTensor(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (p.sequenceParallel && p.tensor == 1) {
    diag.report("parallelism.sequence_parallel",
                "splits activations over the tensor-parallel ranks, and there are none "
                "(parallelism.tensor is 1); remove it or set tensor above 1");
    return;
  }
  if (p.tensor == 1 || !job.model.transformer)
    return;
  const TransformerSpec &t = *job.model.transformer;
  // Megatron-LM's partitioning: heads (and key/value heads), the FFN's columns and the
  // vocabulary are split evenly over the group.
  const std::pair<const char *, int64_t> split[] = {
      {"num_heads", t.numHeads},
      {"num_kv_heads", t.numKvHeads > 0 ? t.numKvHeads : t.numHeads},
      {"ffn_hidden_size", t.ffnHiddenSize},
      {"vocab_size", t.vocabSize}};
  for (auto [key, value] : split)
    if (value % p.tensor != 0) {
      diag.report("parallelism.tensor",
                  "tensor parallelism splits model." + std::string(key) + " (" +
                      std::to_string(value) + ") over the " + std::to_string(p.tensor) +
                      " ranks of a group, and it is not a multiple of " + std::to_string(p.tensor) +
                      "; choose a tensor size that divides it, or "
                      "change model." +
                      key);
      return;
    }
  if (p.sequenceParallel && t.seqLength % p.tensor != 0)
    diag.report("parallelism.sequence_parallel",
                "splits each sequence over the " + std::to_string(p.tensor) +
                    " tensor-parallel ranks, and model.seq_length (" + std::to_string(t.seqLength) +
                    ") is not a multiple of " + std::to_string(p.tensor) +
                    "; change model.seq_length or parallelism.tensor");
}

void JobParser::checkJob(const Job &job) {
  const ParallelismSpec &p = job.parallelism;
  if (job.training.data != pipe::DataKind::Synthetic) {
    if (!job.model.transformer) {
      diag.report("training.data.kind", "token data feeds a transformer; this model is a layer "
                                        "list, which trains on nothing: use \"synthetic\"");
      return;
    }
    if (job.training.data == pipe::DataKind::Text && job.model.transformer->vocabSize < 256) {
      diag.report("model.vocab_size",
                  "text data uses bytes as tokens, which needs a vocabulary of at least 256, "
                  "got " +
                      std::to_string(job.model.transformer->vocabSize));
      return;
    }
  }
  const int64_t layers = static_cast<int64_t>(job.model.layers.size());
  if (p.numStages() > layers) {
    std::string fix = "use at most " + std::to_string(layers) + " stages";
    if (p.stagesPerDevice > 1 && layers >= p.pipeline)
      fix += " (stages_per_device " + std::to_string(layers / p.pipeline) + ")";
    diag.report(p.stagesPerDevice > 1 ? "parallelism.stages_per_device" : "parallelism.pipeline",
                std::to_string(p.numStages()) + " stages (pipeline " + std::to_string(p.pipeline) +
                    " x stages_per_device " + std::to_string(p.stagesPerDevice) +
                    ") but the model has " + std::to_string(layers) +
                    " layers, and every stage needs at least one; " + fix +
                    ", or more layers (model.num_layers)");
    return;
  }
  // Each factor is bounded (2^16 * 2^20 * 2^10): no overflow here.
  if (p.worldSize() > kMaxWorld) {
    diag.report(p.tensor > 1 ? "parallelism.tensor" : "parallelism.data",
                "pipeline x data x tensor is " + std::to_string(p.worldSize()) +
                    " ranks; at most " + std::to_string(kMaxWorld) + " are supported");
    return;
  }
  checkTensor(job);
  if (diag.failed())
    return;
  // Both factors are bounded (2^16 * 2^10 stages, 2^20 micro-batches): no overflow here.
  if (p.numStages() * p.microbatches > kMaxStageMicrobatches) {
    diag.report("parallelism.microbatches",
                std::to_string(p.numStages() * p.microbatches) +
                    " (stage, micro-batch) pairs per step; at most " +
                    std::to_string(kMaxStageMicrobatches) + " are supported (use at most " +
                    std::to_string(kMaxStageMicrobatches / p.numStages()) + " micro-batches for " +
                    std::to_string(p.numStages()) + " stages)");
    return;
  }
  if (p.batchSamples() > kMaxBatchSamples) {
    diag.report("parallelism.microbatch_size",
                "microbatches x microbatch_size is " + std::to_string(p.batchSamples()) +
                    " samples; at most " + std::to_string(kMaxBatchSamples) + " are supported");
    return;
  }
  checkSchedule(p);
  if (diag.failed())
    return;
  checkStageLayers(job);
  checkPartitions(job);
}

} // namespace

llvm::ArrayRef<llvm::StringRef> conduit::clusterPresetNames() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> n;
    for (const Cluster &preset : kPresets)
      n.push_back(preset.preset);
    return n;
  }();
  return names;
}

std::optional<Job> conduit::parseJob(const json::Value &root, llvm::StringRef path,
                                     Diagnostics &diag) {
  return JobParser(path, diag).parse(root);
}

bool conduit::applyOverride(json::Value &root, llvm::StringRef assignment, Diagnostics &diag) {
  auto [path, text] = assignment.split('=');
  if (path.empty() || path.size() == assignment.size()) {
    diag.report("", "--set expects key.path=value, got \"" + assignment.str() + "\"");
    return false;
  }
  json::Value *node = &root;
  llvm::SmallVector<llvm::StringRef> keys;
  path.split(keys, '.');
  std::string walked;
  for (size_t k = 0; k < keys.size(); ++k) {
    json::Object *object = node->getAsObject();
    if (!object || keys[k].empty()) {
      diag.report(walked, "--set " + path.str() + ": " +
                              (walked.empty() ? std::string("the job") : "'" + walked + "'") +
                              " is not an object");
      return false;
    }
    walked += (walked.empty() ? "" : ".") + keys[k].str();
    if (k + 1 == keys.size()) {
      llvm::Expected<json::Value> value = json::parse(text);
      if (!value) {
        llvm::consumeError(value.takeError());
        value = json::Value(text.str());
      }
      // A file named on the command line is relative to the current directory, not to the
      // job file as the job's own paths are.
      std::optional<llvm::StringRef> file = value->getAsString();
      if (file && !file->empty() && llvm::is_contained(kPathKeys, path) &&
          !llvm::sys::path::is_absolute(*file)) {
        llvm::SmallString<256> absolute(*file);
        if (!llvm::sys::fs::make_absolute(absolute))
          value = json::Value(std::string(absolute));
      }
      (*object)[keys[k]] = std::move(*value);
      return true;
    }
    // The entry's own reference: a key that is not valid UTF-8 is stored repaired, so looking
    // it up again by the original text would find nothing.
    node = &object->try_emplace(keys[k], json::Object()).first->second;
  }
  return true;
}

std::optional<Job> conduit::readJobFile(llvm::StringRef path, Diagnostics &diag,
                                        llvm::ArrayRef<std::string> overrides) {
  std::optional<json::Value> root = loadJsonFile(path, diag);
  if (!root)
    return std::nullopt;
  for (const std::string &assignment : overrides)
    if (!applyOverride(*root, assignment, diag))
      return std::nullopt;
  return parseJob(*root, path, diag);
}
