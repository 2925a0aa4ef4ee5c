//===- TuneSpace.cpp - the configurations conduit-tune searches -----------===//

#include "tune/TuneSpace.h"

#include "job/JobSpec.h"
#include "job/KeyEditor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <mutex>
#include <unordered_set>

using namespace conduit;

std::string_view conduit::internKey(std::string_view key) {
  static std::mutex mutex;
  static std::unordered_set<std::string> keys;
  std::lock_guard<std::mutex> lock(mutex);
  return *keys.emplace(key).first;
}

const Json *conduit::lookup(const Configuration &config, llvm::StringRef key) {
  for (const Assignment &a : config)
    if (llvm::StringRef(a.key) == key)
      return &a.value;
  return nullptr;
}

int64_t conduit::integerOf(const Configuration &config, llvm::StringRef key, int64_t fallback) {
  if (const Json *v = lookup(config, key))
    if (std::optional<int64_t> n = jsonInteger(*v))
      return *n;
  return fallback;
}

std::string conduit::stringOf(const Configuration &config, llvm::StringRef key) {
  if (const Json *v = lookup(config, key); v && v->is_string())
    return v->get<std::string>();
  return "";
}

bool conduit::booleanOf(const Configuration &config, llvm::StringRef key, bool fallback) {
  if (const Json *v = lookup(config, key); v && v->is_boolean())
    return v->get<bool>();
  return fallback;
}

std::string conduit::displayValue(const Json &value) {
  if (value.is_string())
    return value.get<std::string>();
  // A list of names (recompute modules): joined with "+".
  if (value.is_array() && !value.empty() &&
      llvm::all_of(value, [](const Json &v) { return v.is_string(); })) {
    std::string text;
    for (const Json &v : value)
      text += (text.empty() ? "" : "+") + v.get<std::string>();
    return text;
  }
  return writeJson(value, /*indent=*/-1);
}

std::optional<Restriction> conduit::parseRestriction(llvm::StringRef spec, llvm::StringRef option,
                                                     std::string &error) {
  auto [key, list] = spec.split('=');
  if (key.empty() || !spec.contains('=') || list.empty()) {
    error = option.str() + " expects key.path=" +
            (option == "--fix" ? std::string("value") : std::string("v1,v2,...")) + ", got \"" +
            spec.str() + "\"";
    return std::nullopt;
  }
  Restriction restriction{key.trim().str(), {}};
  llvm::SmallVector<llvm::StringRef> values;
  if (option == "--fix")
    values.push_back(list);
  else
    list.split(values, ',');
  for (llvm::StringRef text : values) {
    text = text.trim();
    if (text.empty()) {
      error = option.str() + " " + restriction.key + ": empty value in \"" + list.str() + "\"";
      return std::nullopt;
    }
    Json value = parseValueText(text);
    // A value listed twice is searched once (JSON compares numbers by value: 1 is 1.0).
    if (llvm::none_of(restriction.values, [&](const Json &v) { return v == value; }))
      restriction.values.push_back(std::move(value));
  }
  return restriction;
}

namespace {

constexpr llvm::StringLiteral kTensor = "parallelism.tensor";
constexpr llvm::StringLiteral kSequenceParallel = "parallelism.sequence_parallel";
constexpr llvm::StringLiteral kPipeline = "parallelism.pipeline";
constexpr llvm::StringLiteral kData = "parallelism.data";
constexpr llvm::StringLiteral kExpert = "parallelism.expert";
constexpr llvm::StringLiteral kMicrobatchSize = "parallelism.microbatch_size";
constexpr llvm::StringLiteral kMicrobatches = "parallelism.microbatches";
constexpr llvm::StringLiteral kStagesPerDevice = "parallelism.stages_per_device";
constexpr llvm::StringLiteral kSchedule = "parallelism.schedule";
constexpr llvm::StringLiteral kSharding = "parallelism.sharding";
constexpr llvm::StringLiteral kRecomputeModules = "parallelism.recompute_modules";

int64_t tensorOf(const Configuration &c) { return integerOf(c, kTensor, 1); }
int64_t pipelineOf(const Configuration &c) { return integerOf(c, kPipeline, 1); }
int64_t dataOf(const Configuration &c) { return integerOf(c, kData, 1); }
/// Whether a mixture of experts may take expert degree `e` in `c`: it divides the D x T ranks
/// its groups are carved from, and with one replica (no gradient reductions) it puts each
/// expert on one rank of the tensor group.
bool expertDegreeFits(const Configuration &c, int64_t e) {
  const int64_t d = dataOf(c), t = tensorOf(c);
  return e >= 1 && (d * t) % e == 0 && (d > 1 || e == t);
}
/// GPUs per tensor group's worth: what pipeline x data must make.
int64_t groupsOf(const SpaceRequest &r, const Configuration &c) { return r.gpus / tensorOf(c); }
/// The tensor sizes searched without a restriction.
std::vector<int64_t> defaultTensorSizes(const SpaceRequest &r) {
  std::vector<int64_t> out;
  for (int64_t t : r.tensorSizes.empty() ? std::vector<int64_t>{1} : r.tensorSizes)
    if (t >= 1 && r.gpus % t == 0)
      out.push_back(t);
  return out;
}
int64_t stagesPerDeviceOf(const Configuration &c) { return integerOf(c, kStagesPerDevice, 1); }
/// Samples per replica and step.
int64_t replicaBatch(const SpaceRequest &r, const Configuration &c) {
  return r.globalBatch / dataOf(c);
}

/// Every spelling of a job enum, in the enum's order: the job model's own list of choices.
template <typename Enum> std::vector<Json> choicesOf() {
  std::vector<Json> names;
  for (std::string_view name : enumNames<Enum>())
    names.push_back(std::string(name));
  return names;
}

/// The schedule `config` chose, if any.
std::optional<runtime::Schedule> scheduleOf(const Configuration &config) {
  return parseEnum<runtime::Schedule>(stringOf(config, kSchedule));
}

const std::string kFullSharding(enumName(runtime::Sharding::Full));
const std::string kNoSharding(enumName(runtime::Sharding::None));

std::vector<Json> integers(llvm::ArrayRef<int64_t> values) {
  std::vector<Json> out;
  for (int64_t v : values)
    out.push_back(v);
  return out;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

bool always(const SpaceRequest &, const Configuration &) { return true; }

/// Whether the reader accepts the schedule named `name` for the shape `c` has chosen (any name
/// it does not know is its to refuse).
bool runsHere(const SpaceRequest &r, const Configuration &c, std::string_view name) {
  std::optional<runtime::Schedule> kind = parseEnum<runtime::Schedule>(name);
  return !r.scheduleRules || !kind ||
         scheduleRuns(*kind, pipelineOf(c), stagesPerDeviceOf(c), integerOf(c, kMicrobatches, 1));
}

/// Whether depth-first's grouping rule (ScheduleRules.h, which the reader applies) accepts a
/// group of `n` micro-batches.
bool groupRuns(const SpaceRequest &r, const Configuration &c, int64_t n) {
  return !r.scheduleRules ||
         !runtime::checkDepthFirstGrouping(integerOf(c, kMicrobatches, 1), pipelineOf(c), n);
}

/// Whether `value` is an integer for which `accept` holds.
template <typename Accept> bool integerWhere(const Json &value, Accept accept) {
  std::optional<int64_t> n = jsonInteger(value);
  return n && accept(*n);
}

std::vector<Dimension> makeBuiltins() {
  std::vector<Dimension> table;
  // T first: the tensor group is the innermost axis of the global rank, and the rest of the
  // shape is made of what it leaves.
  table.push_back(
      {kTensor.str(), "T", always,
       [](const SpaceRequest &r, const Configuration &) { return integers(defaultTensorSizes(r)); },
       [](const SpaceRequest &r, const Configuration &, const Json &v) {
         return integerWhere(v, [&](int64_t t) { return t >= 1 && r.gpus % t == 0; });
       },
       [](const SpaceRequest &r) {
         return "no tensor size divides --gpus " + std::to_string(r.gpus);
       }});
  // Sequence parallelism splits what tensor parallelism leaves whole: it needs T > 1.
  table.push_back({kSequenceParallel.str(), "SP", always,
                   [](const SpaceRequest &, const Configuration &c) {
                     return tensorOf(c) > 1 ? std::vector<Json>{false, true}
                                            : std::vector<Json>{false};
                   },
                   [](const SpaceRequest &, const Configuration &c, const Json &v) {
                     return v.is_boolean() && (tensorOf(c) > 1 || !v.get<bool>());
                   },
                   [](const SpaceRequest &) {
                     return std::string("sequence parallelism needs parallelism.tensor above 1");
                   }});
  // P: divides the GPUs a tensor size leaves; every stage needs a layer.
  table.push_back({kPipeline.str(), "P", always,
                   [](const SpaceRequest &r, const Configuration &c) {
                     std::vector<int64_t> out;
                     for (int64_t p : divisors(groupsOf(r, c)))
                       if (p <= r.numLayers)
                         out.push_back(p);
                     return integers(out);
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     return integerWhere(
                         v, [&](int64_t p) { return p >= 1 && groupsOf(r, c) % p == 0; });
                   },
                   [](const SpaceRequest &r) {
                     return "no pipeline size left that divides --gpus " + std::to_string(r.gpus) +
                            " (over the tensor size) and is at most the model's " +
                            std::to_string(r.numLayers) + " layers";
                   }});
  // D: the rest of the GPUs, and it must divide the global batch.
  table.push_back(
      {kData.str(), "D", always,
       [](const SpaceRequest &r, const Configuration &c) {
         const int64_t d = groupsOf(r, c) / pipelineOf(c);
         return r.globalBatch % d == 0 ? integers({d}) : std::vector<Json>{};
       },
       [](const SpaceRequest &r, const Configuration &c, const Json &v) {
         const int64_t d = groupsOf(r, c) / pipelineOf(c);
         return integerWhere(v, [&](int64_t n) { return n == d && r.globalBatch % d == 0; });
       },
       [](const SpaceRequest &r) {
         std::vector<int64_t> sizes;
         for (int64_t t : defaultTensorSizes(r))
           for (int64_t p : divisors(r.gpus / t))
             if (p <= r.numLayers && !llvm::is_contained(sizes, r.gpus / t / p))
               sizes.push_back(r.gpus / t / p);
         std::sort(sizes.rbegin(), sizes.rend());
         std::string list;
         for (int64_t d : sizes)
           list += (list.empty() ? "" : ", ") + std::to_string(d);
         return "--global-batch " + std::to_string(r.globalBatch) +
                " is not a multiple of the data-parallel size of any shape of --gpus " +
                std::to_string(r.gpus) + " (D = GPUs / (pipeline x tensor), with at most " +
                std::to_string(r.numLayers) + " pipeline ranks for this model: D is one of " +
                list + "); use a multiple of one of them";
       }});
  // E: the expert groups are carved out of a pipeline rank's D x T ranks (the reader's rules):
  // every divisor of the expert count that divides D x T, and with one replica, which reduces
  // no gradients, one that puts each expert on one rank (E = T).
  table.push_back(
      {kExpert.str(), "E",
       [](const SpaceRequest &r, const Configuration &) {
         // Restricted on a model without experts: the reader says why not.
         return r.numExperts > 0 ||
                llvm::any_of(r.restrictions, [](const Restriction &x) { return x.key == kExpert; });
       },
       [](const SpaceRequest &r, const Configuration &c) {
         std::vector<int64_t> out;
         for (int64_t e : divisors(r.numExperts))
           if (expertDegreeFits(c, e))
             out.push_back(e);
         return integers(out);
       },
       [](const SpaceRequest &r, const Configuration &c, const Json &v) {
         return integerWhere(v, [&](int64_t e) {
           return r.numExperts == 0 ? e >= 1 && (dataOf(c) * tensorOf(c)) % e == 0
                                    : r.numExperts % e == 0 && expertDegreeFits(c, e);
         });
       },
       [](const SpaceRequest &r) {
         return "no expert-parallel size divides both the " + std::to_string(r.numExperts) +
                " experts (model.moe.num_experts) and data x tensor (and equals tensor with one "
                "replica)";
       }});
  // b: divides the batch of a replica.
  table.push_back({kMicrobatchSize.str(), "b", always,
                   [](const SpaceRequest &r, const Configuration &c) {
                     return integers(divisors(replicaBatch(r, c)));
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     return integerWhere(
                         v, [&](int64_t b) { return b >= 1 && replicaBatch(r, c) % b == 0; });
                   },
                   [](const SpaceRequest &r) {
                     return "no micro-batch size divides the batch per replica (--global-batch " +
                            std::to_string(r.globalBatch) + " over the data-parallel size)";
                   }});
  // M: the micro-batches that make up the replica's batch, D·M·b = B.
  table.push_back({kMicrobatches.str(), "M", always,
                   [](const SpaceRequest &r, const Configuration &c) {
                     return integers({replicaBatch(r, c) / integerOf(c, kMicrobatchSize, 1)});
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     const int64_t m = replicaBatch(r, c) / integerOf(c, kMicrobatchSize, 1);
                     return integerWhere(v, [&](int64_t n) { return n == m; });
                   },
                   [](const SpaceRequest &r) {
                     return "no micro-batch count gives data x microbatches x microbatch_size = "
                            "--global-batch " +
                            std::to_string(r.globalBatch);
                   }});
  // V: as many stages per device as the layers allow.
  table.push_back({kStagesPerDevice.str(), "V", always,
                   [](const SpaceRequest &r, const Configuration &c) {
                     std::vector<int64_t> out;
                     for (int64_t v = 1; v * pipelineOf(c) <= r.numLayers; ++v)
                       out.push_back(v);
                     return integers(out);
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     return integerWhere(
                         v, [&](int64_t n) { return n >= 1 && n * pipelineOf(c) <= r.numLayers; });
                   },
                   [](const SpaceRequest &r) {
                     return "pipeline x stages_per_device must be at most the model's " +
                            std::to_string(r.numLayers) + " layers";
                   }});
  // Every schedule the compiler knows that the job-file reader accepts for the shape.
  table.push_back({kSchedule.str(), "schedule", always,
                   [](const SpaceRequest &r, const Configuration &c) {
                     std::vector<Json> out;
                     for (std::string_view name : enumNames<runtime::Schedule>())
                       if (runsHere(r, c, name))
                         out.push_back(std::string(name));
                     return out;
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     return !v.is_string() || runsHere(r, c, v.get_ref<const std::string &>());
                   },
                   [](const SpaceRequest &) {
                     return std::string(
                         "no schedule runs the shapes left: gpipe, 1f1b and zb-h1 run one "
                         "stage per device, interleaved-zb 2 or more, zbv and dualpipev "
                         "exactly 2, and depth-first and interleaved-zb need at least as many "
                         "micro-batches as pipeline ranks");
                   }});
  // The interleaved schedules' group size N, P <= N <= M: Megatron's default P, doublings of
  // it, and M (the breadth-first order with a 1F1B steady state).
  table.push_back({"parallelism.group_size", "N",
                   [](const SpaceRequest &, const Configuration &c) {
                     std::optional<runtime::Schedule> kind = scheduleOf(c);
                     return kind && isInterleaved(*kind);
                   },
                   [](const SpaceRequest &r, const Configuration &c) {
                     const int64_t p = pipelineOf(c), m = integerOf(c, kMicrobatches, 1);
                     std::vector<int64_t> out{p};
                     for (int64_t n = 2 * p; n < m; n *= 2)
                       out.push_back(n);
                     if (m > p)
                       out.push_back(m);
                     llvm::erase_if(out, [&](int64_t n) { return !groupRuns(r, c, n); });
                     return integers(out);
                   },
                   [](const SpaceRequest &r, const Configuration &c, const Json &v) {
                     std::optional<int64_t> n = jsonInteger(v);
                     return !n || groupRuns(r, c, *n);
                   },
                   [](const SpaceRequest &) {
                     return std::string("depth-first's group size must lie between the pipeline "
                                        "size and the micro-batch count, and leave a last group "
                                        "of at least P micro-batches");
                   }});
  // Deferred weight gradients for the schedules with whole backwards (the zero-bubble ones
  // always split).
  table.push_back(
      {"parallelism.split_backward", "split",
       [](const SpaceRequest &, const Configuration &c) {
         std::optional<runtime::Schedule> kind = scheduleOf(c);
         return kind && !isZeroBubble(*kind);
       },
       [](const SpaceRequest &, const Configuration &) { return std::vector<Json>{false, true}; },
       nullptr, nullptr});
  table.push_back({"parallelism.activation_checkpointing", "ckpt", always,
                   [](const SpaceRequest &r, const Configuration &) {
                     std::vector<Json> modes = choicesOf<runtime::Checkpointing>();
                     if (!r.selectiveCheckpointing)
                       llvm::erase(modes, Json(enumName(runtime::Checkpointing::Selective)));
                     return modes;
                   },
                   nullptr, nullptr});
  // What selective checkpointing recomputes, where the job leaves it to the search.
  table.push_back({kRecomputeModules.str(), "recompute",
                   [](const SpaceRequest &, const Configuration &c) {
                     return stringOf(c, "parallelism.activation_checkpointing") ==
                            enumName(runtime::Checkpointing::Selective);
                   },
                   [](const SpaceRequest &r, const Configuration &) { return r.recomputeChoices; },
                   nullptr, nullptr});
  // Sharding means nothing with one replica.
  table.push_back({kSharding.str(), "sharding", always,
                   [](const SpaceRequest &, const Configuration &c) {
                     if (dataOf(c) == 1)
                       return std::vector<Json>{kNoSharding};
                     return choicesOf<runtime::Sharding>();
                   },
                   [](const SpaceRequest &, const Configuration &c, const Json &v) {
                     return dataOf(c) > 1 || v == kNoSharding;
                   },
                   [](const SpaceRequest &) {
                     return std::string("sharding needs more than one data-parallel replica");
                   }});
  // The FSDP window matters only for full sharding over several stages: one stage resident,
  // the default two, or every stage (no re-gathering); larger windows equal V.
  table.push_back({"parallelism.fsdp_window", "window",
                   [](const SpaceRequest &, const Configuration &c) {
                     return dataOf(c) > 1 && stagesPerDeviceOf(c) > 1 &&
                            stringOf(c, kSharding) == kFullSharding;
                   },
                   [](const SpaceRequest &, const Configuration &c) {
                     const int64_t v = stagesPerDeviceOf(c);
                     return integers(v > 2 ? std::vector<int64_t>{1, 2, v}
                                           : std::vector<int64_t>{1, 2});
                   },
                   nullptr, nullptr});
  // Reducing sharded gradients after each run differs from once per step only where a rank's
  // backwards switch stage and come back: several stages per device and micro-batches, and
  // not breadth-first or a single group of all M micro-batches (which run each stage's
  // backwards together).
  table.push_back({"parallelism.gradient_reduction", "reduce",
                   [](const SpaceRequest &, const Configuration &c) {
                     const std::optional<runtime::Sharding> sharding =
                         parseEnum<runtime::Sharding>(stringOf(c, kSharding));
                     const std::optional<runtime::Schedule> kind = scheduleOf(c);
                     const int64_t m = integerOf(c, kMicrobatches, 1);
                     const bool oneGroup = kind && isInterleaved(*kind) &&
                                           integerOf(c, "parallelism.group_size", m) >= m;
                     return dataOf(c) > 1 && stagesPerDeviceOf(c) > 1 && m > 1 && !oneGroup &&
                            kind != runtime::Schedule::BreadthFirst && sharding &&
                            runtime::shardsGradients(*sharding);
                   },
                   [](const SpaceRequest &, const Configuration &) {
                     return choicesOf<runtime::GradientReduction>();
                   },
                   nullptr, nullptr});
  // The rank order decides which links the pipeline and data-parallel groups use.
  table.push_back(
      {"parallelism.rank_order", "order",
       [](const SpaceRequest &, const Configuration &c) {
         return pipelineOf(c) > 1 && dataOf(c) > 1;
       },
       [](const SpaceRequest &, const Configuration &) { return choicesOf<RankOrder>(); }, nullptr,
       nullptr});
  return table;
}

const Restriction *restrictionOf(const SpaceRequest &request, llvm::StringRef key) {
  for (const Restriction &r : request.restrictions)
    if (r.key == key)
      return &r;
  return nullptr;
}

} // namespace

const std::vector<Dimension> &conduit::builtinDimensions() {
  static const std::vector<Dimension> table = makeBuiltins();
  return table;
}

bool conduit::scheduleRuns(runtime::Schedule schedule, int64_t pipeline, int64_t stagesPerDevice,
                           int64_t microbatches) {
  using runtime::Schedule;
  switch (schedule) {
  case Schedule::GPipe:
  case Schedule::OneFOneB:
  case Schedule::ZeroBubbleH1:
    return stagesPerDevice == 1;
  case Schedule::DepthFirst:
    return microbatches >= pipeline;
  case Schedule::InterleavedZeroBubble:
    return stagesPerDevice >= 2 && microbatches >= pipeline;
  case Schedule::ZeroBubbleV:
  case Schedule::DualPipeV:
    return stagesPerDevice == 2;
  case Schedule::BreadthFirst:
    return true;
  }
  return true;
}

std::vector<int64_t> conduit::tensorSizesOf(const std::optional<TransformerSpec> &transformer,
                                            int64_t gpus, int64_t gpusPerNode) {
  if (!transformer)
    return {1};
  const TransformerSpec &t = *transformer;
  const int64_t node = gpusPerNode > 0 ? gpusPerNode : gpus;
  std::vector<int64_t> out;
  for (int64_t size : divisors(std::min(gpus, node))) {
    const int64_t kvHeads = t.numKvHeads > 0 ? t.numKvHeads : t.numHeads;
    if (gpus % size == 0 && node % size == 0 && t.numHeads % size == 0 && kvHeads % size == 0 &&
        t.ffnHiddenSize % size == 0 && t.vocabSize % size == 0)
      out.push_back(size);
  }
  return out;
}

llvm::ArrayRef<std::string_view> conduit::shapeDependentKeys() {
  static constexpr std::string_view keys[] = {"parallelism.stage_layers",
                                              "parallelism.microbatch_partitions"};
  return keys;
}

std::vector<Dimension> conduit::dimensionsFor(const SpaceRequest &request) {
  // Keys no built-in row owns come first: they depend on nothing, and configurations that share
  // their values then sit together, as the bounds' caches want.
  const std::vector<Dimension> &builtins = builtinDimensions();
  std::vector<Dimension> table;
  for (const Restriction &r : request.restrictions) {
    if (llvm::any_of(builtins, [&](const Dimension &d) { return d.key == r.key; }))
      continue;
    llvm::StringRef column = llvm::StringRef(r.key).rsplit('.').second;
    std::vector<Json> values = r.values;
    table.push_back({r.key, column.empty() ? r.key : column.str(), always,
                     [values](const SpaceRequest &, const Configuration &) { return values; },
                     nullptr, nullptr});
  }
  // The recompute modules are searched only where the request lists choices (or a restriction
  // names them); else the job's own list holds, which a table row would erase from each job.
  const bool searchModules = !request.recomputeChoices.empty() ||
                             llvm::any_of(request.restrictions, [](const Restriction &r) {
                               return r.key == kRecomputeModules;
                             });
  for (const Dimension &d : builtins)
    if (searchModules || d.key != kRecomputeModules)
      table.push_back(d);
  return table;
}

void ConfigurationList::read(size_t i, Configuration &out) const {
  size_t k = 0;
  const uint16_t *code = codes.data() + i * dimensions;
  for (size_t d = 0; d < dimensions; ++d) {
    if (code[d] == kAbsent)
      continue;
    const Json &value = values[d][code[d]];
    if (k == out.size())
      out.push_back({keys[d], value});
    else if (out[k].key != keys[d] || out[k].value != value)
      out[k] = {keys[d], value};
    ++k;
  }
  out.resize(k);
}

std::vector<Configuration> ConfigurationList::all() const {
  std::vector<Configuration> out(size());
  for (size_t i = 0; i < out.size(); ++i)
    read(i, out[i]);
  return out;
}

std::vector<Configuration> conduit::enumerateSpace(const SpaceRequest &request,
                                                   llvm::ArrayRef<Dimension> dimensions,
                                                   std::string &why, const ShapeFilter &keepShape) {
  return listConfigurations(request, dimensions, why, keepShape).all();
}

ConfigurationList conduit::listConfigurations(const SpaceRequest &request,
                                              llvm::ArrayRef<Dimension> dimensions,
                                              std::string &why, const ShapeFilter &keepShape) {
  // Depth first, with one configuration extended and shortened in place, and its codes beside
  // it: only the codes of the leaves are stored. The order is the table's (the first
  // dimension varies slowest).
  const size_t n = dimensions.size();
  std::vector<const Restriction *> restrictions(n);
  ConfigurationList out;
  out.dimensions = n;
  out.keys.resize(n);
  out.values.resize(n);
  for (size_t d = 0; d < n; ++d) {
    restrictions[d] = restrictionOf(request, dimensions[d].key);
    out.keys[d] = internKey(dimensions[d].key);
  }
  const std::vector<std::string_view> &keys = out.keys;
  // Per level: configurations that reached it, and values made there before keepShape.
  std::vector<int64_t> reached(n + 1, 0), made(n, 0);
  Configuration config;
  config.reserve(n);
  std::vector<uint16_t> code(n, ConfigurationList::kAbsent);
  // The code of `value` among dimension d's values (added when new).
  auto codeOf = [&](size_t d, const Json &value) {
    std::vector<Json> &known = out.values[d];
    for (size_t k = 0; k < known.size(); ++k)
      if (known[k] == value)
        return static_cast<uint16_t>(k);
    known.push_back(value);
    return static_cast<uint16_t>(known.size() - 1);
  };
  auto walk = [&](auto &self, size_t d) -> void {
    ++reached[d];
    if (d == n) {
      out.codes.insert(out.codes.end(), code.begin(), code.end());
      return;
    }
    const Dimension &dim = dimensions[d];
    if (!dim.applies(request, config)) {
      ++made[d];
      self(self, d + 1);
      return;
    }
    std::vector<Json> values;
    if (const Restriction *restriction = restrictions[d]) {
      for (const Json &v : restriction->values)
        if (!dim.admits || dim.admits(request, config, v))
          values.push_back(v);
    } else {
      values = dim.values(request, config);
    }
    const bool shapeChosen = keepShape && dim.key == (request.numExperts > 0 ? kExpert : kData);
    for (Json &v : values) {
      ++made[d];
      code[d] = codeOf(d, v);
      config.push_back({keys[d], std::move(v)});
      if (!shapeChosen || keepShape(config))
        self(self, d + 1);
      config.pop_back();
    }
    code[d] = ConfigurationList::kAbsent;
  };
  walk(walk, 0);
  if (!out.empty())
    return out;
  // The first level no configuration got past names the key that emptied the space.
  for (size_t d = 0; d < n; ++d) {
    if (reached[d + 1] > 0)
      continue;
    const Dimension &dim = dimensions[d];
    if (made[d] > 0) {
      why = "every shape was left out before listing";
      return {};
    }
    const Restriction *restriction = restrictions[d];
    std::string listed;
    if (restriction)
      for (const Json &v : restriction->values)
        listed += (listed.empty() ? "" : ",") + displayValue(v);
    why = dim.key + ": " +
          (restriction
               ? "no configuration can take the value(s) " + listed + " given to --vary or --fix" +
                     (dim.whyEmpty ? " (" + dim.whyEmpty(request) + ")" : "")
               : (dim.whyEmpty ? dim.whyEmpty(request) : "no value fits"));
    return {};
  }
  return out;
}
