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

#include "runtime/Checkpoint.h"

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
  explicit Reader(const std::string &bytes) : bytes(bytes) {}
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
    std::memcpy(out.data(), bytes.data() + at, count * sizeof(float));
    at += count * sizeof(float);
    return true;
  }
  bool done() const { return at == bytes.size(); }

private:
  const std::string &bytes;
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

/// The first error of any rank, known to all (every rank calls it together).
absl::Status agree(RankGroup &ranks, const absl::Status &local, const std::string &what) {
  CONDUIT_ASSIGN_OR_RETURN(bool all, ranks.allOk(local.ok()));
  if (!local.ok())
    return local;
  if (!all)
    return absl::AbortedError(absl::StrCat("another process could not ", what));
  return absl::OkStatus();
}

struct Manifest {
  int64_t step = 0, worldSize = 0;
  uint64_t layout = 0;
  std::string directory;
  std::vector<std::pair<uint64_t, uint64_t>> files; ///< per rank: bytes, checksum
};

absl::StatusOr<Manifest> parseManifest(const std::string &text, const std::string &path) {
  Manifest m;
  auto bad = [&](const std::string &why) {
    return absl::DataLossError(absl::StrCat("damaged checkpoint manifest ", path, ": ", why));
  };
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
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
    if (w.size() == 2 && w[0] == "directory" && w[1].find('/') == std::string::npos) {
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
  if (m.step < 0 || m.worldSize < 1 || m.directory.empty() ||
      static_cast<int64_t>(m.files.size()) != m.worldSize)
    return bad("incomplete");
  return m;
}

} // namespace

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
    bytes.append(reinterpret_cast<const char *>(s.params.data()), s.params.size() * sizeof(float));
    bytes.append(reinterpret_cast<const char *>(s.optimizer.data()),
                 s.optimizer.size() * sizeof(float));
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
    CONDUIT_ASSIGN_OR_RETURN(Manifest m, parseManifest(text, manifestPath.string()));
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
    Reader in(bytes);
    char magic[4];
    uint32_t version = 0, count = 0;
    uint64_t layout = 0;
    int32_t worldSize = 0, rank = 0;
    if (!in.get(magic) || std::memcmp(magic, kMagic, 4) != 0 || !in.get(version) ||
        version != kVersion || !in.get(layout) || !in.get(loaded.step) || !in.get(worldSize) ||
        !in.get(rank) || !in.get(count) || layout != m.layout || loaded.step != m.step ||
        worldSize != ranks.size() || rank != ranks.rank())
      return absl::DataLossError(
          absl::StrCat(file.string(), " does not match its manifest (header)"));
    for (uint32_t k = 0; k < count; ++k) {
      StageState s;
      uint64_t params = 0, state = 0;
      if (!in.get(s.stage) || !in.get(s.optimizerSteps) || !in.get(params) || !in.get(state) ||
          !in.floats(s.params, params) || !in.floats(s.optimizer, state))
        return absl::DataLossError(absl::StrCat(file.string(), " is truncated"));
      loaded.states.push_back(std::move(s));
    }
    if (!in.done())
      return absl::DataLossError(absl::StrCat(file.string(), " has trailing bytes"));
    return absl::OkStatus();
  };
  CONDUIT_RETURN_IF_ERROR(agree(ranks, readMine(), "read its checkpoint"));
  return loaded;
}

} // namespace conduit::runtime
