//===- TorchCsvFuzzer.cpp - libFuzzer target: PyTorch compute-only CSVs ---===//
//
// `conduit-compile --import-torch-csv` reads a user's compute-only schedule. The first byte
// chooses the job's stage count (1 to 16); the rest is the CSV. Any bytes end in a schedule or
// one message; an accepted schedule must pass the scheduling library's own checks of
// completeness (every stage has one forward and one backward of every micro-batch).
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
  int64_t actions = 0;
  for (const std::vector<sched::Action> &rank : imported->schedule.ranks)
    actions += static_cast<int64_t>(rank.size());
  if (actions != 2 * stages * imported->numMicrobatches)
    std::abort();
  return 0;
}
