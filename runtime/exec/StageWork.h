//===- StageWork.h - what every backend computes the same way ---*- C++ -*-===//
//
// The parts of running a plan that do not depend on the device: where a process sits in the
// (pipeline, data) grid, which samples a micro-batch of a stage trains on, which pieces of a
// producer's micro-batches make up a consumer's input when the two stages cut the batch
// differently (UMPIPE), how a stage splits into data-parallel shards, and the per-layer
// timings --profile writes. Backends differ in where the bytes live, not in these rules.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_EXEC_STAGEWORK_H
#define CONDUIT_RUNTIME_EXEC_STAGEWORK_H

#include "runtime/data/Data.h"
#include "runtime/exec/Backend.h"
#include "runtime/model/Gpt.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <map>
#include <memory>

namespace conduit::runtime {

/// Where a global rank sits: its pipeline rank, data-parallel replica and tensor rank.
struct RankPosition {
  int32_t pipelineRank = 0, replica = 0, tensorRank = 0;
  /// The global rank of the same replica and tensor rank on pipeline rank `pipelineRank`.
  int64_t peer(const Config &config, int32_t otherPipelineRank) const {
    return config.globalRank(otherPipelineRank, replica, tensorRank);
  }
  static RankPosition of(const Config &config, int64_t globalRank);
};

/// A rank's expert group (Megatron-Core's parallel folding, as the plan's Config::expert
/// says): of its pipeline rank's D x T ranks, indexed i = replica x T + tensor rank, group
/// (pipeline rank, i / E) holds the E consecutive indices, at position i mod E. `group` is a
/// number unique in the job.
struct ExpertPlace {
  int64_t group = 0, position = 0;
};
ExpertPlace expertPlaceOf(const Config &config, const RankPosition &where);
/// A rank's expert-data group: of its pipeline rank's D x T ranks (indexed as above), the
/// D x T / E that hold the same routed experts, i mod E (`group`, unique within the pipeline
/// rank), at position i / E.
ExpertPlace expertDataPlaceOf(const Config &config, const RankPosition &where);

/// One segment of a rank's parameters of a stage (model::StageLayout) and how it splits over
/// the ranks that share it: padded to a multiple of their count, each keeping one shard of it
/// when sharded.
struct ShardSegment {
  int64_t at = 0;          ///< where it starts in the rank's array
  int64_t n = 0;           ///< its elements
  int64_t padded = 0;      ///< n rounded up to a multiple of the ranks sharing it
  int64_t shardLen = 0;    ///< this rank's shard (n when not sharded)
  int64_t shardOffset = 0; ///< where the shard starts in the segment
  /// Where the shard lies among what the rank updates (its kept shards, then its in-place
  /// segments: the order of its optimizer state and of a checkpoint).
  int64_t shardAt = 0;
  /// Sharded over one rank (an expert-data group of one, E = D x T): nothing to reduce or
  /// gather, so no shard is kept beside the segment; the optimizer updates it where it lies.
  bool inPlace = false;
  /// In place under ZeRO-2 or full sharding, whose whole gradients (and, under full sharding,
  /// whose gathered parameters) exist only part of a step: the segment's gradients (and
  /// parameters) are kept all step in buffers of their own instead, once.
  bool apart = false;
};

/// How a rank's parameters of a stage split over the ranks that share them: the dense segment
/// over the D replicas of its pipeline rank and tensor rank (its plan group), the expert segment
/// (expert parallelism: the rank's routed experts) over its expert-data group. The rank keeps
/// the array `padded` long (each segment padded, the padding zero) and, when sharded, its
/// shards of the segments not in place one after the other, `shardLen` long.
struct ShardLayout {
  ShardSegment dense, experts; ///< experts.n is 0 without expert parallelism
  int64_t n = 0;               ///< the array's elements (StageLayout::size)
  int64_t padded = 0;          ///< dense.padded + experts.padded
  int64_t shardLen = 0;        ///< the kept shards' elements (n when not sharded)
  /// What the optimizer updates and a checkpoint keeps: the kept shards, then the segments in
  /// place (n when not sharded).
  int64_t updatedLen = 0;
  static ShardLayout of(const model::StageLayout &layout, const Config &config, bool sharded,
                        const RankPosition &where);
  /// For each segment: f(the segment, where this rank's shard starts in the array, how many of
  /// its elements the array holds); the rest of the shard is padding (zero).
  template <typename F> void forEachShard(F f) const {
    for (const ShardSegment *g : {&dense, &experts}) {
      const int64_t from = g->at + g->shardOffset;
      const int64_t count = std::clamp<int64_t>(g->at + g->n - from, 0, g->shardLen);
      if (count > 0)
        f(*g, from, count);
    }
  }
  /// Where element `at` of the array lies among what this rank updates (the order of
  /// BackendCore's Stage::forEachUpdated, its optimizer state and a checkpoint), or -1 where
  /// another rank of its segment's group updates it.
  int64_t updatedIndex(int64_t at, bool sharded) const;
  /// What this rank updates of its array `array` (n elements): `updatedLen` values.
  std::vector<float> shardsOf(const std::vector<float> &array) const {
    std::vector<float> kept(updatedLen, 0.0f);
    forEachShard([&](const ShardSegment &g, int64_t at, int64_t count) {
      std::copy(array.begin() + at, array.begin() + at + count, kept.begin() + g.shardAt);
    });
    return kept;
  }
  /// The elements of the whole gradients a backward allocates, and of the parameters full
  /// sharding gathers: the array less a segment kept apart.
  int64_t allocatedLen() const { return experts.apart ? dense.padded : padded; }
  /// The `align` of the StageLayout a ShardLayout splits: the dense segment's shard count.
  static int64_t align(const Config &config) { return config.data; }
};

/// The layout of rank `where`'s parameters of stage `stage` (StageLayout::of with its tensor and
/// expert rank and the alignment ShardLayout needs); an error names what the runtime cannot
/// build.
absl::StatusOr<model::StageLayout> rankStageLayout(const Plan &plan, int32_t stage,
                                                   const RankPosition &where);

/// Whether the plan splits parameters or optimizer state over replicas.
bool isSharded(const Config &config);

/// What every backend requires of a plan's model: a transformer this runtime implements,
/// stages whose parameter counts match it, data-parallel groups within one pipeline rank
/// (`backend` names the backend in the message), and training data it can read (a file of
/// tokens is opened and checked here, before any rank starts; initialise opens it again).
absl::Status validateModel(const Plan &plan, const char *backend);

/// The bytes pipeline rank `pipelineRank` holds at the least: its stages' parameters,
/// gradients (`gradBytes` per element) and optimizer state, its receive slots, and the
/// activations of each stage's largest micro-batch. Computed with overflow checks; an error
/// when the figure does not fit in 64 bits.
absl::StatusOr<int64_t> rankMemoryBytes(const Plan &plan, const model::GptShape &shape,
                                        int32_t pipelineRank, int64_t gradBytes);

/// The physical memory of this machine in bytes (0 when unknown).
int64_t hostMemoryBytes();

/// "12.3 GiB": for messages.
std::string formatBytes(double bytes);

/// The elements a transfer moves (`rowFloats` per sample), checked against its byte count.
absl::StatusOr<int64_t> transferFloats(const Instruction &inst, const Config &config,
                                       int64_t rowFloats);

/// The tokens of micro-batch `mb` of `stage` at `step` for `replica`, in `tokens` and
/// `targets`, with the loss scale of the global batch.
model::Tokens microbatchTokens(const Config &config, const model::TokenSource &data,
                               const model::GptShape &shape, const Stage &stage, int64_t mb,
                               int32_t replica, int64_t step, std::vector<int32_t> &tokens,
                               std::vector<int32_t> &targets);

/// A run of samples a consumer micro-batch takes from one producer micro-batch.
struct Piece {
  int64_t producerMicrobatch = 0;
  int64_t from = 0;  ///< first sample, relative to the producer micro-batch
  int64_t to = 0;    ///< first sample, relative to the consumer micro-batch
  int64_t count = 0; ///< samples
};
/// The pieces of the producer's micro-batches (cut at `producerCuts`) that cover samples
/// [begin, end) of the batch, in order.
std::vector<Piece> piecesOf(int64_t begin, int64_t end, const std::vector<int64_t> &producerCuts);

/// The input that micro-batch `mb` of stage `consumer` takes from its neighbour on this rank:
/// the stage before it (`forward`: its outputs) or after it (its input gradients). `stages`
/// holds this rank's stages by index (null where a stage is elsewhere). When both stages cut
/// the batch alike this is the producer's own buffer; otherwise the producer's pieces are
/// copied, with `copy(floats, from, to)`, into `scratch`, which `allocate(floats)` provides.
template <typename StageT, typename Buffer, typename Allocate, typename Copy>
absl::StatusOr<const float *> gatherLocalInput(const std::vector<std::unique_ptr<StageT>> &stages,
                                               const StageT &consumer, int64_t mb, bool forward,
                                               int64_t rowFloats, Buffer &scratch,
                                               Allocate allocate, Copy copy) {
  const int32_t from = consumer.spec->index + (forward ? -1 : 1);
  const StageT *producer = stages[from].get();
  if (!producer)
    return absl::InternalError(absl::StrCat("stage ", consumer.spec->index, " needs stage ", from,
                                            " locally, which is elsewhere"));
  const int64_t begin = consumer.spec->samples[mb], end = consumer.spec->samples[mb + 1];
  const std::vector<Buffer> &made = forward ? producer->outputs : producer->inputGrads;
  const std::vector<Piece> pieces = piecesOf(begin, end, producer->spec->samples);
  if (pieces.empty())
    return absl::InternalError(
        absl::StrCat("stage ", consumer.spec->index, " micro-batch ", mb, " has no samples"));
  for (const Piece &p : pieces)
    if (made[p.producerMicrobatch].empty())
      return absl::InternalError(absl::StrCat("stage ", from, " micro-batch ", p.producerMicrobatch,
                                              " has not produced what stage ", consumer.spec->index,
                                              " needs"));
  const Buffer &first = made[pieces.front().producerMicrobatch];
  if (pieces.size() == 1 && static_cast<int64_t>(first.size()) == (end - begin) * rowFloats)
    return first.data(); // the same cut: no copy
  scratch = allocate((end - begin) * rowFloats);
  for (const Piece &p : pieces)
    copy(p.count * rowFloats, made[p.producerMicrobatch].data() + p.from * rowFloats,
         scratch.data() + p.to * rowFloats);
  return scratch.data();
}

/// Per-layer times for --profile, summed per (layer, micro-batch size).
class LayerTimer {
public:
  /// `seconds[i]` is the time of layer firstLayer + i on a micro-batch of `samples`, in a
  /// forward, backward, backward_input or backward_weight (`op`).
  void record(int64_t firstLayer, int64_t samples, const std::vector<double> &seconds, Op op);
  /// One optimizer step over `params` parameters took `seconds`.
  void recordOptimizer(int64_t params, double seconds);
  /// A compute instruction `op` took `seconds` beyond the layer times recorded in it.
  void recordOverhead(Op op, double seconds);
  /// The seconds recorded so far by record() (what a compute's layers took).
  double recordedSeconds() const { return layerSeconds; }
  std::vector<LayerTiming> timings() const;
  void clear() { byLayer.clear(); }

private:
  std::map<std::pair<int64_t, int64_t>, LayerTiming> byLayer;
  double layerSeconds = 0;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_EXEC_STAGEWORK_H
