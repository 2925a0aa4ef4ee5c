//===- Sweep.cpp - compile every combination of a few keys ---------------===//

#include "compiler/Sweep.h"

#include "analysis/Units.h"
#include "job/KeyEditor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace conduit;

std::optional<std::vector<SweepAxis>> conduit::parseSweepAxes(llvm::ArrayRef<std::string> specs,
                                                              std::string &error) {
  std::vector<SweepAxis> axes;
  for (llvm::StringRef spec : specs) {
    auto [key, list] = spec.split('=');
    if (key.empty() || !spec.contains('=') || list.empty()) {
      error = "--sweep expects key.path=v1,v2,..., got \"" + spec.str() + "\"";
      return std::nullopt;
    }
    SweepAxis axis{key.str(), {}};
    llvm::SmallVector<llvm::StringRef> values;
    list.split(values, ',');
    for (llvm::StringRef value : values) {
      if (value.trim().empty()) {
        error = "--sweep " + key.str() + ": empty value in \"" + list.str() + "\"";
        return std::nullopt;
      }
      axis.values.push_back(value.trim().str());
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

namespace {

/// Every combination of the axes' values, as override lists, first axis slowest.
std::vector<std::vector<std::string>> combinations(llvm::ArrayRef<SweepAxis> axes) {
  std::vector<std::vector<std::string>> result{{}};
  for (const SweepAxis &axis : axes) {
    std::vector<std::vector<std::string>> next;
    for (const std::vector<std::string> &prefix : result)
      for (const std::string &value : axis.values) {
        next.push_back(prefix);
        next.back().push_back(axis.key + "=" + value);
      }
    result = std::move(next);
  }
  return result;
}

/// The short name of an axis in the table's header: the key's last component.
std::string columnName(const SweepAxis &axis) {
  llvm::StringRef name = llvm::StringRef(axis.key).rsplit('.').second;
  return name.empty() ? axis.key : name.str();
}

} // namespace

std::vector<SweepRow> conduit::runSweep(const Json &root, const std::string &path,
                                        llvm::ArrayRef<SweepAxis> axes,
                                        const CompileConfiguration &compile) {
  std::vector<SweepRow> rows;
  for (const std::vector<std::string> &overrides : combinations(axes)) {
    SweepRow &row = rows.emplace_back();
    for (const std::string &assignment : overrides)
      row.values.push_back(llvm::StringRef(assignment).split('=').second.str());
    Json edited = root;
    Diagnostics local(path);
    std::optional<Job> job;
    bool applied = true;
    for (const std::string &assignment : overrides)
      applied = applied && applyOverride(edited, assignment, local);
    if (applied)
      job = parseJob(edited, path, local);
    if (!job) {
      const InputError &error = *local.getError();
      row.outcome.error =
          error.keyPath.empty() ? error.message : error.keyPath + ": " + error.message;
      continue;
    }
    row.outcome = compile(*job);
  }
  return rows;
}

llvm::json::Value conduit::sweepToJson(llvm::ArrayRef<SweepAxis> axes,
                                       llvm::ArrayRef<SweepRow> rows) {
  llvm::json::Array out;
  for (const SweepRow &row : rows) {
    llvm::json::Object config;
    for (size_t a = 0; a < axes.size(); ++a) {
      // Values that are JSON (numbers, booleans) stay typed; the rest are strings.
      llvm::Expected<llvm::json::Value> value = llvm::json::parse(row.values[a]);
      if (value) {
        config[axes[a].key] = std::move(*value);
      } else {
        llvm::consumeError(value.takeError());
        config[axes[a].key] = row.values[a];
      }
    }
    llvm::json::Object entry{{"config", std::move(config)}};
    if (!row.outcome.warnings.empty())
      entry["warnings"] = llvm::json::Array(row.outcome.warnings);
    if (row.outcome.report)
      entry["report"] = reportToJson(*row.outcome.report);
    else
      entry["error"] = row.outcome.error;
    out.push_back(std::move(entry));
  }
  return out;
}

void conduit::printSweepTable(const std::string &path, llvm::ArrayRef<SweepAxis> axes,
                              llvm::ArrayRef<SweepRow> rows, llvm::raw_ostream &os) {
  // One column per swept key, then the predictions.
  std::vector<size_t> widths;
  for (size_t a = 0; a < axes.size(); ++a) {
    size_t width = columnName(axes[a]).size();
    for (const SweepRow &row : rows)
      width = std::max(width, row.values[a].size());
    widths.push_back(width + 2);
  }
  size_t best = rows.size();
  for (size_t k = 0; k < rows.size(); ++k)
    if (rows[k].outcome.report &&
        (best == rows.size() ||
         rows[k].outcome.report->tokensPerS > rows[best].outcome.report->tokensPerS))
      best = k;
  os << "sweep of " << path << ": " << rows.size() << " configurations\n\n";
  for (size_t a = 0; a < axes.size(); ++a)
    os << llvm::left_justify(columnName(axes[a]), widths[a]);
  os << llvm::right_justify("step", 10) << llvm::right_justify("tokens/s", 11)
     << llvm::right_justify("TFLOP/s/GPU", 13) << llvm::right_justify("bubble", 8)
     << llvm::right_justify("exposed comm", 14) << llvm::right_justify("peak memory", 13) << "\n";
  for (size_t k = 0; k < rows.size(); ++k) {
    const SweepRow &row = rows[k];
    for (size_t a = 0; a < axes.size(); ++a)
      os << llvm::left_justify(row.values[a], widths[a]);
    if (const std::optional<PlanReport> &r = row.outcome.report) {
      os << llvm::right_justify(formatSeconds(r->stepTimeS), 10)
         << llvm::right_justify(formatCount(r->tokensPerS), 11)
         << llvm::right_justify(llvm::formatv("{0:f1}", r->tflopsPerGpu).str(), 13)
         << llvm::right_justify(llvm::formatv("{0:f1}%", 100 * r->bubbleFraction).str(), 8)
         << llvm::right_justify(formatSeconds(r->exposedCommS), 14)
         << llvm::right_justify(formatBytes(static_cast<double>(r->peakMemoryBytes)), 13)
         << (k == best ? "  <- best" : "") << "\n";
    } else {
      os << "  error: " << row.outcome.error << "\n";
    }
    for (const std::string &warning : row.outcome.warnings)
      os << "    warning: " << warning << "\n";
  }
}
