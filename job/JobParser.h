//===- JobParser.h - the job-file reader's sections -------------*- C++ -*-===//
//
// Private to job/: the reader behind JobFile.h, one member per section and per relation
// between sections, spread over JobFile.cpp (the file, training and cluster),
// ModelSection.cpp, ParallelismSection.cpp and JobChecks.cpp (the relations).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_JOBPARSER_H
#define CONDUIT_JOB_JOBPARSER_H

#include "job/JobSpec.h"
#include "job/JsonReader.h"

#include <optional>
#include <string>
#include <string_view>

namespace conduit::detail {

/// Reads `key` as the job-file spelling of one of `Enum`'s values.
template <typename Enum> std::optional<Enum> readEnum(ObjectReader &reader, std::string_view key) {
  std::optional<size_t> index = reader.choice(key, enumNames<Enum>());
  if (!index)
    return std::nullopt;
  return static_cast<Enum>(*index);
}

/// A path written in the job file, resolved against the job file's folder.
std::string resolvePath(std::string_view jobPath, std::string_view path);

/// resolvePath, then absolute: for paths the plan carries to conduit-run, which may run
/// elsewhere in the file system than the compiler did.
std::string absolutePath(std::string_view jobPath, std::string_view path);

/// Whether `path` names a regular file (after following links).
bool isRegularFile(const std::string &path);

class JobParser {
public:
  JobParser(std::string_view path, Diagnostics &diag) : path(path), diag(diag) {}

  /// The whole job; without `parallelism` when `withParallelism` is false.
  std::optional<Job> parse(const Json &root, bool withParallelism);
  /// The parallelism section alone, for a job read without it (parseParallelismFor).
  bool parseParallelismOnly(Job &job, const Json &parallelism);

private:
  // JobFile.cpp
  void parseTraining(ObjectReader &section, TrainingSpec &t);
  void parseData(ObjectReader section, TrainingSpec &t);
  void parseCluster(ObjectReader &section, Cluster &c);

  // ModelSection.cpp
  void parseModel(ObjectReader &section, ModelSpec &m, const TrainingSpec &training);
  void parseTransformer(ObjectReader &section, TransformerSpec &t);
  /// The transformer's keys, each optional, over `t`'s values.
  void readShape(ObjectReader &section, TransformerSpec &t);
  /// The transformer's `latent_attention` and `moe` sections, over what `t` has of them.
  void readLatentAttention(ObjectReader &section, TransformerSpec &t);
  void readMoe(ObjectReader &section, TransformerSpec &t);
  /// Reports a shape that cannot be built, naming the key (unless an error came first).
  void checkShape(ObjectReader &section, const TransformerSpec &t);
  void parseHuggingFace(ObjectReader &section, ModelSpec &m);
  void parseLayers(ObjectReader &section, ModelSpec &m);

  // ParallelismSection.cpp
  void parseParallelism(ObjectReader &section, ParallelismSpec &p);

  // JobChecks.cpp
  /// What the training section needs of the model (token data feeds a transformer).
  void checkTraining(const Job &job);
  /// The parallel configuration against the model and itself.
  void checkParallelism(const Job &job);
  /// The tensor-parallel degree against the model: what Megatron-LM's partitioning splits.
  void checkTensor(const Job &job);
  /// The expert-parallel degree against the model's experts and the data and tensor ranks.
  void checkExpert(const Job &job);
  /// parallelism.recompute_modules against the model: each must drop something of it.
  void checkRecompute(const Job &job);
  void checkSchedule(const ParallelismSpec &p);
  void checkStageLayers(const Job &job);
  void checkPartitions(const Job &job);

  std::string path;
  Diagnostics &diag;
};

} // namespace conduit::detail

#endif // CONDUIT_JOB_JOBPARSER_H
