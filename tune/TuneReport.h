//===- TuneReport.h - what conduit-tune writes ------------------*- C++ -*-===//
//
// The three forms of a search's result: the ranked table with the reason the runner-up lost
// and the Pareto front (for people), a JSON object with the complete job of every entry (for
// scripts), and the breadth-first paper's chart of best throughput per schedule against the
// batch per GPU, one point per global batch searched (for the paper figure).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_TUNE_TUNEREPORT_H
#define CONDUIT_TUNE_TUNEREPORT_H

#include "tune/Tune.h"

#include "job/JsonReader.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace conduit {

/// The table: the search's counts, the ranked configurations, why the runner-up lost, the
/// best of each schedule and (when searched) the Pareto front.
void printTuneTable(const std::string &path, const TuneResult &result, llvm::raw_ostream &os);

/// One search as JSON: `best`, `top`, `best_per_schedule`, `pareto` when searched (each entry
/// with its complete `job`, its figures and its parallel degrees) and `search` (the counts).
Json tuneToJson(const TuneResult &result);

/// Best tokens/s of each schedule against the batch per GPU, one search per global batch, as
/// a self-contained SVG with every line labelled where it ends.
void writeTuneChart(const std::string &title, llvm::ArrayRef<TuneResult> results,
                    llvm::raw_ostream &os);

} // namespace conduit

#endif // CONDUIT_TUNE_TUNEREPORT_H
