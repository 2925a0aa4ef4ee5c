//===- TorchCsvWriter.h - plans as PyTorch CSV action lists -----*- C++ -*-===//
//
// Interoperability with torch.distributed.pipelining: a verified plan written as one of the two
// CSV forms PyTorch's `_PipelineScheduleRuntime._load_csv` reads (one row per pipeline rank):
// compute+comms (`0F3`, `1B2`, `2SEND_F1`, `1RECV_B0`, `0UNSHARD`, `0RESHARD`, `0REDUCE_GRAD`;
// `format="compute_comms"`) and compute-only (`0F3`, `1B2`; its default `format="compute_only"`,
// which torchtitan's `pipeline_parallel_schedule_csv` uses). The reader of compute-only CSVs is
// scheduling/TorchCsvReader.h.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_TORCHCSVWRITER_H
#define CONDUIT_COMPILER_TORCHCSVWRITER_H

#include "runtime/plan/Plan.h"

#include "llvm/Support/Error.h"

#include <string>

namespace conduit {

enum class TorchCsvFormat {
  ComputeComms, ///< every action PyTorch's runtime executes, communication included
  ComputeOnly,  ///< forwards and backwards only; PyTorch adds the communication itself
};

/// The plan as PyTorch's CSV in `format`. PyTorch numbers micro-batches globally, so every
/// stage must cut the batch the same way; fails otherwise.
llvm::Expected<std::string> writeTorchCsv(const runtime::Plan &plan, TorchCsvFormat format);

} // namespace conduit

#endif // CONDUIT_COMPILER_TORCHCSVWRITER_H
