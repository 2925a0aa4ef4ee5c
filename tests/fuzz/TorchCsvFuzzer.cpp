//===- TorchCsvFuzzer.cpp - libFuzzer target: PyTorch compute-only CSVs ---===//
//
// `conduit-compile --import-torch-csv` reads a user's compute-only schedule. The first byte
// chooses the job's stage count (1 to 16); the rest is the CSV. Any bytes end in a schedule or
// one message; an accepted schedule must pass the scheduling library's own checks of
// completeness (every stage has one forward and one backward, whole or split, of every
// micro-batch; overlapped pairs inside their rank).
//
//===----------------------------------------------------------------------===//

#include "scheduling/TorchCsvReader.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const int64_t stages = 1 + data[0] % 16;
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::Expected<ImportedSchedule> imported = readTorchCsv(text, stages);
  if (!imported) {
    llvm::consumeError(imported.takeError());
    return 0;
  }
  // What it accepts: a forward and a backward (whole, or I and W; a stage may mix the two over
  // its micro-batches) per (stage, micro-batch), and pairs inside their rank's list.
  int64_t counts[4] = {0, 0, 0, 0};
  const sched::Schedule &schedule = imported->schedule;
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const std::vector<sched::Action> &rank = schedule.ranks[r];
    for (const sched::Action &a : rank)
      ++counts[static_cast<int>(a.kind)];
    for (int32_t first : schedule.pairs[r])
      if (first < 0 || static_cast<size_t>(first) + 1 >= rank.size())
        std::abort();
  }
  const int64_t cells = stages * imported->numMicrobatches;
  auto count = [&](sched::ActionKind kind) { return counts[static_cast<int>(kind)]; };
  if (count(sched::ActionKind::Forward) != cells ||
      count(sched::ActionKind::Backward) + count(sched::ActionKind::BackwardInput) != cells ||
      count(sched::ActionKind::BackwardWeight) != count(sched::ActionKind::BackwardInput))
    std::abort();
  return 0;
}
