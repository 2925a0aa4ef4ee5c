//===- JobFile.cpp - the job file: the file, training and cluster ---------===//
//
// Reads the four sections in order (training first, since the model's byte counts need its
// data type; then model, parallelism and cluster), fills in defaults, and checks the relations
// between sections (JobChecks.cpp). The model and parallelism sections have files of their
// own. Every limit is far above real jobs; they exist so that no derived figure can overflow.
//
//===----------------------------------------------------------------------===//

#include "job/JobFile.h"

#include "job/JobParser.h"
#include "job/KeyEditor.h"
#include "runtime/plan/Limits.h"

#include <filesystem>

using namespace conduit;
using namespace conduit::detail;

namespace fs = std::filesystem;

std::string conduit::detail::resolvePath(std::string_view jobPath, std::string_view path) {
  const fs::path file(path);
  if (file.is_absolute())
    return file.string();
  return (fs::path(jobPath).parent_path() / file).string();
}

std::string conduit::detail::absolutePath(std::string_view jobPath, std::string_view path) {
  std::error_code ec;
  fs::path resolved(resolvePath(jobPath, path));
  if (fs::path absolute = fs::absolute(resolved, ec); !ec)
    resolved = absolute;
  return resolved.lexically_normal().string();
}

bool conduit::detail::isRegularFile(const std::string &path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

namespace {

/// The file name without its folder and its last extension: "jobs/demo.json" -> "demo".
std::string stemOf(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  if (name == "." || name == "..")
    return std::string(name);
  return std::string(name.substr(0, name.rfind('.')));
}

} // namespace

std::optional<Job> JobParser::parse(const Json &root, bool withParallelism) {
  if (!root.is_object()) {
    diag.report("", "expected a JSON object with sections model, parallelism, cluster and "
                    "training, got " +
                        describeJson(root));
    return std::nullopt;
  }
  Job job;
  job.path = path;
  job.name = stemOf(path);
  ObjectReader top(root, "", diag);
  if (std::optional<std::string> name = top.string("name"))
    job.name = *name;
  for (std::string_view key : {"model", "parallelism", "cluster"})
    if ((withParallelism || key != "parallelism") && !top.require(key))
      return std::nullopt;

  // Training comes first: the model's byte counts depend on its data type.
  if (const Json *training = top.object("training")) {
    ObjectReader section(*training, "training", diag);
    parseTraining(section, job.training);
  }
  if (const Json *model = top.object("model")) {
    ObjectReader section(*model, "model", diag);
    parseModel(section, job.model, job.training);
  }
  if (!withParallelism) {
    (void)top.value("parallelism"); // known, and not read
  } else if (const Json *parallelism = top.object("parallelism")) {
    ObjectReader section(*parallelism, "parallelism", diag);
    parseParallelism(section, job.parallelism);
  }
  if (const Json *cluster = top.object("cluster")) {
    ObjectReader section(*cluster, "cluster", diag);
    parseCluster(section, job.cluster);
  }
  top.rejectUnknownKeys();
  if (!diag.failed())
    checkTraining(job);
  if (!diag.failed() && withParallelism)
    checkParallelism(job);
  if (diag.failed())
    return std::nullopt;
  return job;
}

bool JobParser::parseParallelismOnly(Job &job, const Json &parallelism) {
  if (!parallelism.is_object()) {
    diag.report("parallelism", "expected an object, got " + describeJson(parallelism));
    return false;
  }
  ObjectReader section(parallelism, "parallelism", diag);
  ParallelismSpec p;
  parseParallelism(section, p);
  if (diag.failed())
    return false;
  // The checks read the job's parallelism: put the new one in place, and the old one back if
  // they refuse it.
  ParallelismSpec before = std::move(job.parallelism);
  job.parallelism = std::move(p);
  checkParallelism(job);
  if (diag.failed()) {
    job.parallelism = std::move(before);
    return false;
  }
  return true;
}

void JobParser::parseTraining(ObjectReader &section, TrainingSpec &t) {
  if (auto dtype = readEnum<runtime::DType>(section, "dtype"))
    t.dtype = *dtype;
  if (auto optimizer = readEnum<runtime::Optimizer>(section, "optimizer"))
    t.optimizer = *optimizer;
  if (auto seed = section.integer("seed", 0, limits::kMaxExact))
    t.seed = *seed;
  if (auto lr = section.number("learning_rate", 0, limits::kMaxLearningRate, /*minExclusive=*/true))
    t.learningRate = *lr;
  if (const Json *data = section.object("data"))
    parseData(ObjectReader(*data, section.keyPath("data"), diag), t);
  t.fp8SavedInputs = readEnum<Fp8SavedInputs>(section, "fp8_saved_inputs");
  t.masterWeights = readEnum<MasterWeights>(section, "master_weights");
  t.adamMoments = readEnum<runtime::AdamMoments>(section, "adam_moments");
  t.fp8Scaling = readEnum<Fp8Scaling>(section, "fp8_scaling");
  t.optimizerKernels = readEnum<OptimizerKernels>(section, "optimizer_kernels");
  section.rejectUnknownKeys();
}

void JobParser::parseData(ObjectReader section, TrainingSpec &t) {
  if (!section.require("kind"))
    return;
  if (auto kind = readEnum<runtime::DataKind>(section, "kind"))
    t.data = *kind;
  if (section.failed())
    return;
  if (t.data == runtime::DataKind::Synthetic) {
    section.rejectUnknownKeys();
    return;
  }
  if (!section.require("path"))
    return;
  if (t.data == runtime::DataKind::Tokens)
    if (auto dtype = readEnum<TokenType>(section, "dtype"))
      t.dataDtype = *dtype;
  std::optional<std::string> file = section.string("path");
  section.rejectUnknownKeys();
  if (!file || section.failed())
    return;
  t.dataPath = absolutePath(path, *file);
  if (!isRegularFile(t.dataPath))
    diag.report(section.keyPath("path"), "cannot read data file \"" + t.dataPath +
                                             "\" (relative paths start at the job file's folder)");
}

void JobParser::parseCluster(ObjectReader &section, Cluster &c) {
  if (!section.require("preset"))
    return;
  std::optional<size_t> preset = section.choice("preset", clusterPresetNames());
  if (!preset)
    return;
  c = clusterPresets()[*preset];
  if (auto v = section.number("peak_flops", 0, 1e20, /*minExclusive=*/true))
    c.peakFlops = *v;
  if (auto v = section.number("efficiency", 0, 1, /*minExclusive=*/true))
    c.efficiency = *v;
  if (auto v = section.number("memory_bandwidth", 0, 1e30, /*minExclusive=*/true))
    c.memoryBandwidth = *v;
  if (auto v = section.integer("memory_bytes", 1, limits::kMaxExact))
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
    if (!isRegularFile(c.profile))
      diag.report(section.keyPath("profile"), "cannot read profile file \"" + c.profile + "\"");
  }
  section.rejectUnknownKeys();
}

std::optional<Job> conduit::parseJob(const Json &root, std::string_view path, Diagnostics &diag) {
  return JobParser(path, diag).parse(root, /*withParallelism=*/true);
}

std::optional<Job> conduit::parseJobWithoutParallelism(const Json &root, std::string_view path,
                                                       Diagnostics &diag) {
  return JobParser(path, diag).parse(root, /*withParallelism=*/false);
}

bool conduit::parseParallelismFor(Job &job, const Json &parallelism, Diagnostics &diag) {
  return JobParser(job.path, diag).parseParallelismOnly(job, parallelism);
}

std::optional<Job> conduit::readJobFile(std::string_view path, Diagnostics &diag,
                                        absl::Span<const std::string> overrides) {
  std::optional<Json> root = loadJsonFile(path, diag);
  if (!root)
    return std::nullopt;
  for (const std::string &assignment : overrides)
    if (!applyOverride(*root, assignment, diag))
      return std::nullopt;
  return parseJob(*root, path, diag);
}
