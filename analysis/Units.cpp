//===- Units.cpp - human-readable figures ---------------------------------===//

#include "analysis/Units.h"

#include <cmath>
#include <cstdio>

using namespace conduit;

namespace {

/// Three significant digits: 1.23, 12.3, 123.
std::string threeDigits(double value) {
  char buffer[32];
  double magnitude = std::fabs(value);
  const char *format = magnitude >= 100 || magnitude == 0 ? "%.0f"
                       : magnitude >= 10                  ? "%.1f"
                                                          : "%.2f";
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string scaled(double value, double base, const char *const *prefixes, int count,
                   const char *unit) {
  int i = 0;
  while (i + 1 < count && std::fabs(value) >= base) {
    value /= base;
    ++i;
  }
  // Whole units print without decimals: "16 B", not "16.0 B".
  std::string number =
      i == 0 && value == std::floor(value) ? std::to_string(int64_t(value)) : threeDigits(value);
  return number + " " + prefixes[i] + unit;
}

} // namespace

std::string conduit::formatCount(double value) {
  static const char *const kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  std::string text = scaled(value, 1000, kPrefixes, 7, "");
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return text;
}

std::string conduit::formatBytes(double bytes) {
  static const char *const kPrefixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  return scaled(bytes, 1024, kPrefixes, 7, "B");
}

std::string conduit::formatRate(double value, const char *unit) {
  static const char *const kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  return scaled(value, 1000, kPrefixes, 7, unit);
}

std::string conduit::formatSeconds(double seconds) {
  double magnitude = std::fabs(seconds);
  // What would print as 0.00 ns is a difference of sums that cancelled, not a duration.
  if (magnitude < 0.005e-9)
    return "0 s";
  if (magnitude < 1e-6)
    return threeDigits(seconds * 1e9) + " ns";
  if (magnitude < 1e-3)
    return threeDigits(seconds * 1e6) + " us";
  if (magnitude < 1)
    return threeDigits(seconds * 1e3) + " ms";
  return threeDigits(seconds) + " s";
}
