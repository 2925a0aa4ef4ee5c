//===- Trace.h - Chrome traces of executed plans ----------------*- C++ -*-===//
//
// One writer for the timelines of both worlds: the compiler's simulated step and the
// runtime's measured steps. The output is Chrome trace-event JSON (the "JSON Object Format"),
// which Perfetto and chrome://tracing load: one process per pipeline rank, one thread per
// stream, one slice per instruction, and a flow arrow from every send to its receive.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_TRACE_H
#define CONDUIT_RUNTIME_PLAN_TRACE_H

#include "runtime/plan/Plan.h"

#include <ostream>
#include <string>
#include <vector>

namespace conduit::runtime {

/// When one instruction ran, in seconds from a common origin.
struct InstructionTime {
  double posted = 0; ///< when its stream reached it
  double start = 0;  ///< when it began executing (after any waiting for peers)
  double end = 0;
};

/// One executed instruction of a rank: which one, and when. A measured run lists several
/// steps, so the same index appears once per step.
struct TraceEvent {
  int64_t step = 0;
  int64_t instruction = 0;
  InstructionTime time;
};

/// Short readable names: "F s3 mb5", "I s3 mb5" and "W s3 mb5" (the halves of a split
/// backward), "send act s3 mb5 -> 2", "all-gather s3".
std::string shortName(const Instruction &inst);

/// Writes the trace of `events[r]` for each pipeline rank r. Sends and receives are paired
/// per (sender, receiver) in order, as the plan matches them. `title` and `stepTimeS` go into
/// the trace's metadata.
void writeChromeTrace(const Plan &plan, const std::vector<std::vector<TraceEvent>> &events,
                      const std::string &title, double stepTimeS, std::ostream &os);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_TRACE_H
