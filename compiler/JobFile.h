//===- JobFile.h - the job file: model, parallelism, cluster, training ---*- C++ -*-===//
//
// A job file is one JSON object with four sections (ARCHITECTURE.md §3). This header holds the
// validated, defaults-filled form of a job and the reader that produces it. Every problem is
// one diagnostic naming the file, the key path and what was expected; nothing is read past the
// first problem.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_JOBFILE_H
#define CONDUIT_COMPILER_JOBFILE_H

#include "analysis/Cluster.h"
#include "analysis/JsonReader.h"
#include "dialects/pipe/PipeAttrs.h"

#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// One layer of the model chain with its costs per sample (see pipe.layer).
struct LayerSpec {
  std::string name;
  pipe::LayerKind kind = pipe::LayerKind::Custom;
  int64_t params = 0;
  double fwdFlops = 0;
  double bwdFlops = 0;
  /// The weight-gradient part of bwdFlops (W); the rest is the input gradient (I).
  double bwdWeightFlops = 0;
  /// Bytes per sample a deferred weight gradient keeps between I and W; unset: the layer's
  /// activation bytes, an upper bound.
  std::optional<int64_t> weightGradientBytes;
  int64_t activationBytes = 0;
  int64_t checkpointBytes = 0;
  int64_t outputBytes = 0;
  /// What tensor parallelism does not split (see pipe.layer); unset: everything is split.
  std::optional<int64_t> replicatedParams;
  std::optional<int64_t> replicatedActivationBytes;
  /// The part of activationBytes that selective checkpointing recomputes (a block's attention
  /// core); unset: none.
  std::optional<int64_t> attentionCoreBytes;
};

/// The shape of a decoder-only transformer (see #pipe.transformer).
struct TransformerSpec {
  int64_t numLayers = 0;
  int64_t hiddenSize = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t ffnHiddenSize = 0;
  int64_t seqLength = 0;
  int64_t vocabSize = 0;
  pipe::MlpKind mlp = pipe::MlpKind::Gelu;
  pipe::NormKind norm = pipe::NormKind::LayerNorm;
  pipe::PositionKind position = pipe::PositionKind::Learned;
  bool tieEmbeddings = false;
  pipe::BiasKind bias = pipe::BiasKind::All;
  double ropeTheta = 10000; ///< rotary base (Hugging Face's rope_theta)
  double normEps = 1e-5;    ///< the norms' epsilon
};

struct ModelSpec {
  /// "transformer", "layers" or "hf".
  std::string kind;
  /// The transformer shape for "transformer" and "hf" models.
  std::optional<TransformerSpec> transformer;
  /// The layer chain, in model order.
  std::vector<LayerSpec> layers;
  /// Tokens per sample, for throughput in tokens/s (1 for models without a sequence).
  int64_t tokensPerSample = 1;
};

struct ParallelismSpec {
  int64_t pipeline = 1;
  int64_t data = 1;
  int64_t stagesPerDevice = 1;
  pipe::ScheduleKind schedule = pipe::ScheduleKind::OneFOneB;
  int64_t groupSize = 0; // depth-first group size N; defaults to P
  int64_t microbatches = 1;
  int64_t microbatchSize = 1;
  pipe::Sharding sharding = pipe::Sharding::None;
  pipe::Checkpointing checkpointing = pipe::Checkpointing::None;
  int64_t fsdpWindow = 2;
  pipe::RankOrder rankOrder = pipe::RankOrder::DataInner;
  /// Stage placement; "v" for zbv and dualpipev unless the job says otherwise.
  pipe::Placement placement = pipe::Placement::Loop;
  /// Backwards split into input and weight gradients (implied by the zero-bubble schedules).
  bool splitBackward = false;
  /// Tensor-parallel ranks T (the innermost axis of the global rank), and whether the norms'
  /// and residuals' activations are split over them along the sequence.
  int64_t tensor = 1;
  bool sequenceParallel = false;
  /// Explicit layers per stage (empty: the partitioner decides).
  std::vector<int64_t> stageLayers;
  /// Explicit micro-batch sizes per stage (empty: equal micro-batches).
  std::vector<std::vector<int64_t>> microbatchPartitions;
  /// "microbatch_partitions": "auto": searched during compilation.
  bool autoPartitions = false;

  int64_t numStages() const { return pipeline * stagesPerDevice; }
  int64_t batchSamples() const { return microbatches * microbatchSize; }
  int64_t worldSize() const { return pipeline * data * tensor; }
};

struct TrainingSpec {
  pipe::DType dtype = pipe::DType::BF16;
  pipe::Optimizer optimizer = pipe::Optimizer::Adam;
  int64_t seed = 1234;
  double learningRate = 1e-3;
  /// Where the tokens come from: "data": {"kind", "path", "dtype"}; the path resolved
  /// against the job file and made absolute.
  pipe::DataKind data = pipe::DataKind::Synthetic;
  std::string dataPath;
  pipe::TokenType dataDtype = pipe::TokenType::UInt16;

  int64_t elementBytes() const { return dtype == pipe::DType::FP32 ? 4 : 2; }
};

struct Job {
  std::string path; // the job file, as given
  std::string name; // the job file's stem, or "name" from the file
  ModelSpec model;
  ParallelismSpec parallelism;
  Cluster cluster;
  TrainingSpec training;
};

/// The cluster presets, in the order the job file lists them in diagnostics.
llvm::ArrayRef<llvm::StringRef> clusterPresetNames();

/// Reads and validates the job file at `path`, after applying `overrides` ("a.b.c=value",
/// value as JSON, or as a string when it is not valid JSON) to its content.
std::optional<Job> readJobFile(llvm::StringRef path, Diagnostics &diag,
                               llvm::ArrayRef<std::string> overrides = {});

/// Applies one "key.path=value" override to a parsed job; reports malformed overrides.
bool applyOverride(llvm::json::Value &root, llvm::StringRef assignment, Diagnostics &diag);

/// Validates an already parsed job (for example one edited by --sweep). Relative paths inside
/// it resolve against the directory of `path`.
std::optional<Job> parseJob(const llvm::json::Value &root, llvm::StringRef path, Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_COMPILER_JOBFILE_H
