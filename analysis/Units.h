//===- Units.h - human-readable figures -------------------------*- C++ -*-===//
//
// Formatting of counts, bytes, FLOP/s and seconds for reports, so that every table prints them
// the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_UNITS_H
#define CONDUIT_ANALYSIS_UNITS_H

#include <string>

namespace conduit {

/// 1234567 -> "1.23 M" (k, M, G, T, P, E).
std::string formatCount(double value);
/// Binary units: 1536 -> "1.50 KiB".
std::string formatBytes(double bytes);
/// Decimal units with a suffix: formatRate(3.12e14, "FLOP/s") -> "312 TFLOP/s".
std::string formatRate(double value, const char *unit);
/// Seconds in the most readable unit: "12.3 ms", "4.56 s"; "0 s" for what rounds to nothing.
std::string formatSeconds(double seconds);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_UNITS_H
