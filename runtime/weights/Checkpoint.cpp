//===- Checkpoint.cpp - training state that survives a crash --------------===//
//
// Rank file: "CDCK", u32 version, u64 layout, i64 step, i32 world size, i32 rank,
// u32 stages; per stage: i32 stage, i64 optimizer steps, u64 parameters, u64 state floats,
// then the floats (little-endian, as the machine writes them).
//
// Manifest (text, one fact per line):
//   conduit-checkpoint 1
//   step 4
//   world_size 4
//   layout 9f2c...
//   directory step-00000004
//   rank 0 bytes 1234 fnv1a64 0a1b...     (one line per rank)
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/Checkpoint.h"

#include "runtime/exec/StageWork.h"
#include "runtime/model/Optimizer.h"
#include "runtime/plan/Limits.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace conduit::runtime {

namespace {

constexpr char kMagic[4] = {'C', 'D', 'C', 'K'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kMaxCheckpointBytes = int64_t(1) << 36;

uint64_t fnv1a(const void *data, size_t size, uint64_t hash = 0xcbf29ce484222325ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

template <typename T> void put(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof value);
}

/// Reads fixed-size values from a buffer, failing once it runs out.
class Reader {
public:
  explicit Reader(std::string_view bytes) : bytes(bytes) {}
  template <typename T> bool get(T &value) {
    if (at + sizeof value > bytes.size())
      return false;
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return true;
  }
  bool floats(std::vector<float> &out, uint64_t count) {
    if (count > (bytes.size() - at) / sizeof(float))
      return false;
    out.resize(count);
    if (count == 0) // SGD keeps no state: out.data() may be null
      return true;
    std::memcpy(out.data(), bytes.data() + at, count * sizeof(float));
    at += count * sizeof(float);
    return true;
  }
  bool done() const { return at == bytes.size(); }

private:
  std::string_view bytes;
  size_t at = 0;
};

std::string stepDirectory(int64_t step) { return absl::StrFormat("step-%08d", step); }
std::string rankFile(int64_t rank) { return absl::StrCat("rank-", rank, ".ckpt"); }

/// Writes `bytes` to `path` through a temporary file and a rename.
absl::Status writeAtomically(const fs::path &path, const std::string &bytes) {
  fs::path temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary.string()));
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error)
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", temporary.string(), ": ", error.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> readWhole(const fs::path &path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error)
    return absl::NotFoundError(absl::StrCat("cannot read ", path.string(), ": ", error.message()));
  if (size > static_cast<uintmax_t>(kMaxCheckpointBytes))
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is too large"));
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in)
    return absl::UnavailableError(absl::StrCat("cannot read ", path.string()));
  return bytes;
}

template <typename T> void appendFloats(std::string &out, const std::vector<T> &values) {
  if (!values.empty())
    out.append(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(T));
}

} // namespace

absl::StatusOr<CheckpointManifest> parseCheckpointManifest(std::string_view text,
                                                           const std::string &path) {
  CheckpointManifest m;
  auto bad = [&](const std::string &why) {
    return absl::DataLossError(absl::StrCat("damaged checkpoint manifest ", path, ": ", why));
  };
  std::vector<std::string> lines = absl::StrSplit(std::string(text), '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != "conduit-checkpoint 1")
    return bad("not a Conduit checkpoint manifest (version 1)");
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> w = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    if (w.size() == 2 && w[0] == "step" && absl::SimpleAtoi(w[1], &m.step))
      continue;
    if (w.size() == 2 && w[0] == "world_size" && absl::SimpleAtoi(w[1], &m.worldSize))
      continue;
    if (w.size() == 2 && w[0] == "layout" && absl::SimpleHexAtoi(w[1], &m.layout))
      continue;
    if (w.size() == 2 && w[0] == "directory" && w[1].find('/') == std::string::npos &&
        w[1] != "." && w[1] != "..") {
      m.directory = w[1];
      continue;
    }
    uint64_t rank = 0, bytes = 0, sum = 0;
    if (w.size() == 6 && w[0] == "rank" && absl::SimpleAtoi(w[1], &rank) && w[2] == "bytes" &&
        absl::SimpleAtoi(w[3], &bytes) && w[4] == "fnv1a64" && absl::SimpleHexAtoi(w[5], &sum) &&
        rank == m.files.size()) {
      m.files.push_back({bytes, sum});
      continue;
    }
    return bad(absl::StrCat("line ", i + 1, ": \"", lines[i], "\""));
  }
  if (m.step < 0 || m.step > limits::kMaxSteps)
    return bad(absl::StrCat("step ", m.step, " is not between 0 and ", limits::kMaxSteps));
  if (m.worldSize < 1 || m.worldSize > limits::kMaxWorld)
    return bad(
        absl::StrCat("world_size ", m.worldSize, " is not between 1 and ", limits::kMaxWorld));
  if (m.directory.empty() || static_cast<int64_t>(m.files.size()) != m.worldSize)
    return bad(absl::StrCat("incomplete: it needs a directory line and one rank line for each of "
                            "its ",
                            m.worldSize, " ranks"));
  return m;
}

/// The parameters rank `where` keeps of stage `stage`: its shards of its part of them, or
/// that part unsharded (ShardLayout).
int64_t keptParams(const Plan &plan, int32_t stage, RankPosition where) {
  absl::StatusOr<model::StageLayout> layout = rankStageLayout(plan, stage, where);
  if (!layout.ok()) // the backends refuse such a plan before this
    return plan.stages[stage].params;
  return ShardLayout::of(*layout, plan.config, isSharded(plan.config), where).updatedLen;
}

absl::StatusOr<std::vector<StageState>> parseRankState(std::string_view bytes,
                                                       const CheckpointManifest &m,
                                                       const Plan &plan, int64_t rank,
                                                       const std::string &path) {
  Reader in(bytes);
  char magic[4];
  uint32_t version = 0, count = 0;
  uint64_t layout = 0;
  int64_t step = 0;
  int32_t worldSize = 0, writer = 0;
  if (!in.get(magic) || std::memcmp(magic, kMagic, 4) != 0 || !in.get(version) ||
      version != kVersion)
    return absl::DataLossError(
        absl::StrCat(path, " is not a Conduit checkpoint rank file (version ", kVersion, ")"));
  if (!in.get(layout) || !in.get(step) || !in.get(worldSize) || !in.get(writer) || !in.get(count) ||
      layout != m.layout || step != m.step || worldSize != m.worldSize || writer != rank)
    return absl::DataLossError(absl::StrCat(path, " does not match its manifest (header)"));
  const Config &c = plan.config;
  const RankPosition where = RankPosition::of(c, rank);
  const int64_t width = model::OptimizerConfig::fromPlan(c).stateWidth();
  std::vector<StageState> states;
  int32_t previous = -1;
  for (uint32_t k = 0; k < count; ++k) {
    StageState s;
    uint64_t params = 0, state = 0;
    if (!in.get(s.stage) || !in.get(s.optimizerSteps) || !in.get(params) || !in.get(state))
      return absl::DataLossError(absl::StrCat(path, " is truncated"));
    if (s.stage <= previous || s.stage >= static_cast<int32_t>(plan.stages.size()) ||
        plan.stages[s.stage].rank != where.pipelineRank)
      return absl::DataLossError(absl::StrCat(path, ": state ", k, " is for stage ", s.stage,
                                              ", which is not the next stage of ", "pipeline rank ",
                                              where.pipelineRank, " in this plan"));
    previous = s.stage;
    const int64_t expected = keptParams(plan, s.stage, where);
    if (params != static_cast<uint64_t>(expected) ||
        state != static_cast<uint64_t>(width * expected))
      return absl::DataLossError(
          absl::StrCat(path, ": the state of stage ", s.stage, " has ", params, " parameters and ",
                       state, " optimizer values; the plan's stage has ", expected,
                       " parameters and ", width * expected, " optimizer values (",
                       width == 0 ? "SGD keeps none" : "Adam keeps two per parameter", ")"));
    if (s.optimizerSteps < 0 || s.optimizerSteps > step)
      return absl::DataLossError(absl::StrCat(path, ": the state of stage ", s.stage, " counts ",
                                              s.optimizerSteps,
                                              " optimizer steps after training step ", step));
    if (!in.floats(s.params, params) || !in.floats(s.optimizer, state))
      return absl::DataLossError(absl::StrCat(path, " is truncated"));
    states.push_back(std::move(s));
  }
  if (!in.done())
    return absl::DataLossError(absl::StrCat(path, " has trailing bytes"));
  return states;
}

uint64_t layoutFingerprint(const Plan &plan) {
  const Config &c = plan.config;
  std::ostringstream key;
  key << "P" << c.pipeline << " D" << c.data << " V" << c.stagesPerDevice << " sharding "
      << int(c.sharding) << " optimizer " << int(c.optimizer) << " seed " << c.seed << " order "
      << c.pipelineInner;
  for (const Stage &s : plan.stages)
    key << " [" << s.firstLayer << "," << s.endLayer << ")@" << s.rank;
  for (const Layer &l : plan.layers)
    key << " " << l.name << ":" << l.params;
  const std::string text = key.str();
  return fnv1a(text.data(), text.size());
}

absl::Status writeCheckpoint(const std::string &dir, int64_t step, const Plan &plan,
                             RankGroup &ranks, const std::vector<StageState> &states) {
  const uint64_t layout = layoutFingerprint(plan);
  const fs::path root(dir), stepDir = root / stepDirectory(step);
  absl::Status made = absl::OkStatus();
  if (ranks.rank() == 0) {
    std::error_code error;
    fs::create_directories(stepDir, error);
    if (error)
      made = absl::UnavailableError(
          absl::StrCat("cannot create ", stepDir.string(), ": ", error.message()));
  }
  CONDUIT_RETURN_IF_ERROR(agree(ranks, made, "create the checkpoint directory"));

  std::string bytes;
  bytes.append(kMagic, 4);
  put(bytes, kVersion);
  put(bytes, layout);
  put(bytes, step);
  put(bytes, static_cast<int32_t>(ranks.size()));
  put(bytes, static_cast<int32_t>(ranks.rank()));
  put(bytes, static_cast<uint32_t>(states.size()));
  for (const StageState &s : states) {
    put(bytes, s.stage);
    put(bytes, s.optimizerSteps);
    put(bytes, static_cast<uint64_t>(s.params.size()));
    put(bytes, static_cast<uint64_t>(s.optimizer.size()));
    appendFloats(bytes, s.params);
    appendFloats(bytes, s.optimizer);
  }
  CONDUIT_RETURN_IF_ERROR(agree(ranks, writeAtomically(stepDir / rankFile(ranks.rank()), bytes),
                                "write its checkpoint"));

  const uint64_t mine[2] = {bytes.size(), fnv1a(bytes.data(), bytes.size())};
  CONDUIT_ASSIGN_OR_RETURN(
      std::vector<std::string> gathered,
      ranks.gatherAtZero(std::string(reinterpret_cast<const char *>(mine), sizeof mine)));
  absl::Status manifest = absl::OkStatus();
  if (ranks.rank() == 0) {
    std::vector<uint64_t> all(2 * ranks.size());
    for (int64_t r = 0; r < ranks.size(); ++r)
      if (gathered[r].size() == sizeof mine)
        std::memcpy(&all[2 * r], gathered[r].data(), sizeof mine);
    std::string text = absl::StrCat("conduit-checkpoint 1\nstep ", step, "\nworld_size ",
                                    ranks.size(), "\nlayout ", absl::StrFormat("%016x", layout),
                                    "\ndirectory ", stepDirectory(step), "\n");
    for (int64_t r = 0; r < ranks.size(); ++r)
      absl::StrAppend(&text, "rank ", r, " bytes ", all[2 * r], " fnv1a64 ",
                      absl::StrFormat("%016x", all[2 * r + 1]), "\n");
    manifest = writeAtomically(root / "manifest", text);
    if (manifest.ok()) {
      // The new manifest is in place: older steps are no longer reachable.
      std::error_code error;
      for (const fs::directory_entry &entry : fs::directory_iterator(root, error))
        if (entry.is_directory(error) && entry.path().filename().string().rfind("step-", 0) == 0 &&
            entry.path() != stepDir)
          fs::remove_all(entry.path(), error);
    }
  }
  return agree(ranks, manifest, "complete the checkpoint manifest");
}

absl::StatusOr<LoadedCheckpoint> readCheckpoint(const std::string &dir, const Plan &plan,
                                                RankGroup &ranks) {
  LoadedCheckpoint loaded;
  auto readMine = [&]() -> absl::Status {
    const fs::path manifestPath = fs::path(dir) / "manifest";
    CONDUIT_ASSIGN_OR_RETURN(std::string text, readWhole(manifestPath));
    CONDUIT_ASSIGN_OR_RETURN(CheckpointManifest m,
                             parseCheckpointManifest(text, manifestPath.string()));
    if (m.worldSize != ranks.size())
      return absl::FailedPreconditionError(absl::StrCat("the checkpoint in ", dir,
                                                        " was written by ", m.worldSize,
                                                        " ranks; this run has ", ranks.size()));
    if (m.layout != layoutFingerprint(plan))
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint in ", dir,
                       " belongs to a plan with another state layout (pipeline, "
                       "data, stages, sharding, optimizer or seed differ)"));
    const fs::path file = fs::path(dir) / m.directory / rankFile(ranks.rank());
    CONDUIT_ASSIGN_OR_RETURN(std::string bytes, readWhole(file));
    const auto [size, sum] = m.files[ranks.rank()];
    if (bytes.size() != size || fnv1a(bytes.data(), bytes.size()) != sum)
      return absl::DataLossError(absl::StrCat(
          file.string(), " is damaged: its size or checksum differs from the manifest's"));
    CONDUIT_ASSIGN_OR_RETURN(loaded.states,
                             parseRankState(bytes, m, plan, ranks.rank(), file.string()));
    loaded.step = m.step;
    return absl::OkStatus();
  };
  CONDUIT_RETURN_IF_ERROR(agree(ranks, readMine(), "read its checkpoint"));
  return loaded;
}

} // namespace conduit::runtime
