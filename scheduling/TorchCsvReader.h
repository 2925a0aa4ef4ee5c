//===- TorchCsvReader.h - PyTorch compute-only CSVs -------------*- C++ -*-===//
//
// Reads the compute-only action lists of torch.distributed.pipelining (one row per rank, cells
// `0F3`, `1B2`, split backwards as `1I2` and `1W2`, overlapped pairs as
// `(0F3;1B2)OVERLAP_F_B`, empty for an idle step) as a user-defined schedule: the rank of every
// stage and every rank's order. conduit-import-schedule adapts the result to the IR; the writer of
// both of PyTorch's forms is compiler/TorchCsvWriter.h.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_SCHEDULING_TORCHCSVREADER_H
#define CONDUIT_SCHEDULING_TORCHCSVREADER_H

#include "scheduling/Problems.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace conduit {

/// A schedule read from a compute-only CSV: the stage of every rank (from where each stage's
/// actions appear) and every rank's order.
struct ImportedSchedule {
  std::vector<int64_t> stageRank;
  int64_t numMicrobatches = 0;
  sched::Schedule schedule;
};

/// Reads a compute-only CSV (cells `sFm`, `sBm`, `sIm`, `sWm`, `(sFm;tBn)OVERLAP_F_B` or
/// `(sFm;tIn)OVERLAP_F_B`, or empty for an idle step) for `numStages` stages; checks that every
/// stage lives on one rank and has, for each of the micro-batches 0..M-1 of stage 0's
/// forwards, one forward and either a whole backward or an input gradient followed by its
/// weight gradient (a stage may mix the two over its micro-batches, as PyTorch's DualPipeV
/// does). Errors name the cell. The schedule's verification checks the rest of the order.
llvm::Expected<ImportedSchedule> readTorchCsv(llvm::StringRef text, int64_t numStages);

} // namespace conduit

#endif // CONDUIT_SCHEDULING_TORCHCSVREADER_H
