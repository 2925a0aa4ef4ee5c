//===- TuneSpace.h - the configurations conduit-tune searches ---*- C++ -*-===//
//
// The search space of conduit-tune as a table of dimensions. A dimension is one job-file key
// (`parallelism.pipeline`, `parallelism.sharding`, ...) with the values it takes given the
// keys before it: the pipeline size divides the GPU count, the data-parallel size is what is
// left, the micro-batch size divides the batch per replica, the group size exists only for
// depth-first, and so on. A configuration is the list of assignments one path through the
// table makes; applied to the job file's JSON it is a complete job. Schedules come from the
// job model's list of them (the plan's runtime::Schedule), so a schedule the compiler gains is
// searched without a change here, and the job-file reader has the last word on which
// combinations are valid.
// A new dimension is one more row of the table; `--vary` on a key that no row owns adds a
// row for it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNESPACE_H
#define CONDUIT_TUNE_TUNESPACE_H

#include "job/JobSpec.h"
#include "job/JsonReader.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conduit {

/// One key of the job file set to one value. The key is interned (internKey): a space holds
/// many configurations of the same few keys.
struct Assignment {
  std::string_view key;
  Json value;
};

/// The one stored copy of `key`, valid for the life of the program.
std::string_view internKey(std::string_view key);

/// The assignments of one configuration, in the order of the dimensions that made them.
using Configuration = std::vector<Assignment>;

/// The value `key` has in `config`, or null when the configuration does not set it.
const Json *lookup(const Configuration &config, llvm::StringRef key);
/// The integer `key` has in `config`; `fallback` when it does not set it.
int64_t integerOf(const Configuration &config, llvm::StringRef key, int64_t fallback);
/// The string `key` has in `config`; "" when it does not set it.
std::string stringOf(const Configuration &config, llvm::StringRef key);
/// The boolean `key` has in `config`; `fallback` when it does not set it.
bool booleanOf(const Configuration &config, llvm::StringRef key, bool fallback);

/// `--vary KEY=v1,v2` or `--fix KEY=v`: the values a key may take.
struct Restriction {
  std::string key;
  std::vector<Json> values;
};

/// Parses "key.path=v1,v2,..." (each value as JSON, or as a string when it is not JSON); on a
/// malformed specification sets `error`, which names `option`.
std::optional<Restriction> parseRestriction(llvm::StringRef spec, llvm::StringRef option,
                                            std::string &error);

/// What the space is built for.
struct SpaceRequest {
  int64_t gpus = 1;
  int64_t globalBatch = 1; ///< samples per step, all replicas together
  int64_t numLayers = 1;   ///< layers the stages cut between (embedding and head included)
  std::vector<Restriction> restrictions;
  /// The tensor-parallel sizes searched unless a restriction names them (tensorSizesOf);
  /// empty: 1 only.
  std::vector<int64_t> tensorSizes;
  /// Whether selective checkpointing differs from none: not when every configuration's
  /// attention is fused (model.attention "flash", not varied), which keeps no attention core
  /// to recompute; the space then leaves "selective" out unless a restriction names it.
  bool selectiveCheckpointing = true;
  /// The recompute-module lists a selective configuration searches (each a JSON array of
  /// names, parallelism.recompute_modules), the least recomputation first; empty: the job's
  /// own list (or the default) holds, and no dimension searches them.
  std::vector<Json> recomputeChoices{};
  /// Whether the space lists only the schedules and group sizes the job-file reader accepts
  /// for a shape (scheduleRuns() and depth-first's grouping rule, ScheduleRules.h). False
  /// lists every one and leaves them to the reader: where the job names a placement, which
  /// changes what each schedule runs, and in the tests that check that the rules drop only
  /// what the reader refuses.
  bool scheduleRules = true;
  /// The model's routed experts (model.moe.num_experts); 0: no mixture of experts, and no
  /// expert-parallel dimension.
  int64_t numExperts = 0;
};

/// Whether the job-file reader accepts `schedule` on P pipeline ranks with V stages per device
/// and M micro-batches, the placement being the schedule's default: gpipe, 1f1b and zb-h1 run
/// one stage per device, interleaved-zb two or more, zbv and dualpipev (the V placement)
/// exactly two, and depth-first and interleaved-zb need at least P micro-batches. The space
/// lists no other; tests/unit/tune checks the rule against the reader.
bool scheduleRuns(runtime::Schedule schedule, int64_t pipeline, int64_t stagesPerDevice,
                  int64_t microbatches);

/// The tensor-parallel sizes a model admits on `gpus` GPUs of `gpusPerNode` per node (0: one
/// node): the divisors of the GPU count that split its heads, key/value heads, FFN columns and
/// vocabulary evenly (Megatron-LM's partitioning, which the job-file reader enforces) and keep
/// a tensor group inside a node. A layer list states no such shape: 1 only.
std::vector<int64_t> tensorSizesOf(const std::optional<TransformerSpec> &transformer, int64_t gpus,
                                   int64_t gpusPerNode);

/// A row of the table.
struct Dimension {
  std::string key;
  /// The table's column header.
  std::string column;
  /// Whether the key means anything given the earlier keys; where it does not, the
  /// configuration leaves it out and the job's default holds.
  std::function<bool(const SpaceRequest &, const Configuration &)> applies;
  /// The values searched when no restriction names the key.
  std::function<std::vector<Json>(const SpaceRequest &, const Configuration &)> values;
  /// Whether a value a restriction lists can hold at all given the earlier keys (the pipeline
  /// size must divide the GPU count, ...); null: any value may, and the job-file reader
  /// decides.
  std::function<bool(const SpaceRequest &, const Configuration &, const Json &)> admits;
  /// Why no value was left, for the message when the whole space is empty.
  std::function<std::string(const SpaceRequest &)> whyEmpty;
};

/// The built-in dimensions, in the order they are chosen.
const std::vector<Dimension> &builtinDimensions();

/// Job-file keys whose meaning depends on the shape (explicit stage layouts and micro-batch
/// cuts): the tuner removes them from the starting job.
llvm::ArrayRef<std::string_view> shapeDependentKeys();

/// The table for `request`: one dimension for every restricted key no built-in dimension owns,
/// then the built-in dimensions.
std::vector<Dimension> dimensionsFor(const SpaceRequest &request);

/// Decides, once the tensor, pipeline, data-parallel and expert-parallel sizes of a
/// configuration are chosen (the `parallelism.data` dimension, or `parallelism.expert` for a
/// mixture of experts), whether anything below it can be listed; false drops every
/// configuration of that shape unlisted.
using ShapeFilter = std::function<bool(const Configuration &)>;

/// The configurations of a space in the order of its listing, each stored as one small code
/// per dimension (the position of its value among that dimension's values): a space holds
/// hundreds of thousands of configurations made of the same few dozen values, which as
/// separate Configuration objects would take a hundred bytes and more each.
class ConfigurationList {
public:
  size_t size() const { return dimensions == 0 ? 0 : codes.size() / dimensions; }
  bool empty() const { return codes.empty(); }
  /// Configuration `i`.
  Configuration operator[](size_t i) const {
    Configuration out;
    read(i, out);
    return out;
  }
  /// Configuration `i` into `out`, keeping what `out` already holds where it is the same (a
  /// neighbour in the listing differs in a few keys).
  void read(size_t i, Configuration &out) const;
  /// Every configuration.
  std::vector<Configuration> all() const;

private:
  friend ConfigurationList listConfigurations(const SpaceRequest &, llvm::ArrayRef<Dimension>,
                                              std::string &, const ShapeFilter &);
  static constexpr uint16_t kAbsent = UINT16_MAX;
  size_t dimensions = 0;
  std::vector<std::string_view> keys;
  /// Per dimension, its values in order of first use.
  std::vector<std::vector<Json>> values;
  /// size() x dimensions codes; kAbsent where the dimension does not apply.
  std::vector<uint16_t> codes;
};

/// Every configuration of the space (of the shapes `keepShape` keeps, when given). When it is
/// empty, `why` says which key emptied it and what would work; when `keepShape` dropped every
/// shape, `why` says so and the caller knows why.
ConfigurationList listConfigurations(const SpaceRequest &request,
                                     llvm::ArrayRef<Dimension> dimensions, std::string &why,
                                     const ShapeFilter &keepShape = nullptr);
/// listConfigurations(), each configuration on its own.
std::vector<Configuration> enumerateSpace(const SpaceRequest &request,
                                          llvm::ArrayRef<Dimension> dimensions, std::string &why,
                                          const ShapeFilter &keepShape = nullptr);

/// "8" for numbers, the text for strings, JSON otherwise: how a value reads in a table.
std::string displayValue(const Json &value);

} // namespace conduit

#endif // CONDUIT_TUNE_TUNESPACE_H
