//===- StepCharts.h - a simulated step as a trace or a chart ----*- C++ -*-===//
//
// Two views of one simulated step: a Chrome trace-event file for Perfetto and
// chrome://tracing (one process per rank, one thread per stream, flow arrows from each send to
// its receive), and a self-contained SVG Gantt chart (one row per rank).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_STEPCHARTS_H
#define CONDUIT_ANALYSIS_STEPCHARTS_H

#include "analysis/Simulator.h"
#include "runtime/plan/Plan.h"
#include "llvm/Support/raw_ostream.h"

namespace conduit {

/// Chrome trace-event JSON ("JSON Object Format"), timestamps in microseconds.
void writeChromeTrace(const runtime::Plan &plan, const SimulationResult &simulation,
                      llvm::raw_ostream &os);

/// An SVG Gantt chart of the step: per rank a compute lane and two thin lanes for
/// point-to-point transfers and collectives, colours by kind, a legend and a time axis.
void writeGanttSvg(const runtime::Plan &plan, const SimulationResult &simulation,
                   llvm::raw_ostream &os);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_STEPCHARTS_H
