//===- Sweep.h - compile every combination of a few keys --------*- C++ -*-===//
//
// `conduit-compile JOB --sweep KEY=v1,v2 --sweep ...`: every combination of the listed values
// applied to the job file, each compiled on its own, compared in one table (or a JSON array with
// --emit=report). The driver supplies how one configuration compiles; this file parses the
// axes, enumerates the combinations and writes the comparison.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_SWEEP_H
#define CONDUIT_COMPILER_SWEEP_H

#include "analysis/Report.h"
#include "job/JobFile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// One --sweep axis: a key path and its values.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

/// Parses "key.path=v1,v2,..." specifications; on a malformed one, sets `error`.
std::optional<std::vector<SweepAxis>> parseSweepAxes(llvm::ArrayRef<std::string> specs,
                                                     std::string &error);

/// What compiling one configuration gave: its predicted step (its figures, the fullest rank's
/// peak memory among them), or why it failed.
struct SweepOutcome {
  std::optional<PlanReport> report;
  std::string error;
  std::vector<std::string> warnings;
};

/// One row of the comparison: the values of the axes and the outcome.
struct SweepRow {
  std::vector<std::string> values;
  SweepOutcome outcome;
};

/// Compiles one configuration (the driver's compileJob()).
using CompileConfiguration = std::function<SweepOutcome(const Job &)>;

/// Applies every combination of the axes' values (first axis slowest) to `root`, the job
/// file's JSON read from `path`, and compiles each.
std::vector<SweepRow> runSweep(const Json &root, const std::string &path,
                               llvm::ArrayRef<SweepAxis> axes, const CompileConfiguration &compile);

/// The comparison as a table, the best configuration (most tokens/s) marked.
void printSweepTable(const std::string &path, llvm::ArrayRef<SweepAxis> axes,
                     llvm::ArrayRef<SweepRow> rows, llvm::raw_ostream &os);

/// The comparison as a JSON array: per row its configuration, and its report or its error.
llvm::json::Value sweepToJson(llvm::ArrayRef<SweepAxis> axes, llvm::ArrayRef<SweepRow> rows);

} // namespace conduit

#endif // CONDUIT_COMPILER_SWEEP_H
