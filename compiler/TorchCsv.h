//===- TorchCsv.h - PyTorch pipelining action lists -------------*- C++ -*-===//
//
// Interoperability with torch.distributed.pipelining: plans are written as its
// compute+comms CSV (one row per rank; `0F3`, `1B2`, `2SEND_F1`, `1RECV_B0`, `0UNSHARD`,
// `0RESHARD`, `0REDUCE_GRAD`), and a compute-only CSV is read as a user-defined schedule.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_TORCHCSV_H
#define CONDUIT_COMPILER_TORCHCSV_H

#include "passes/Scheduling/Problems.h"
#include "runtime/plan/Plan.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace conduit {

/// The plan as PyTorch's compute+comms CSV. PyTorch numbers micro-batches globally, so every
/// stage must cut the batch the same way; fails otherwise.
llvm::Expected<std::string> writeTorchCsv(const runtime::Plan &plan);

/// A schedule read from a compute-only CSV: the stage of every rank (from where each stage's
/// actions appear) and every rank's order.
struct ImportedSchedule {
  std::vector<int64_t> stageRank;
  int64_t numMicrobatches = 0;
  sched::Schedule schedule;
};

/// Reads a compute-only CSV (cells `sFm`, `sBm` or empty for an idle step) for `numStages`
/// stages; checks that every stage lives on one rank and has forwards and backwards for the
/// same micro-batches 0..M-1.
llvm::Expected<ImportedSchedule> readTorchCsv(llvm::StringRef text, int64_t numStages);

} // namespace conduit

#endif // CONDUIT_COMPILER_TORCHCSV_H
