//===- TuneReport.cpp - what conduit-tune writes --------------------------===//

#include "tune/TuneReport.h"

#include "analysis/Units.h"
#include "job/KeyEditor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace conduit;

namespace {

std::string percent(double fraction) { return llvm::formatv("{0:f1}%", 100 * fraction).str(); }

std::string columnOf(llvm::ArrayRef<Dimension> dimensions, std::string_view key) {
  for (const Dimension &d : dimensions)
    if (d.key == key)
      return d.column;
  return std::string(key);
}

/// The dimensions any of `rows` sets, in table order.
std::vector<const Dimension *> usedDimensions(llvm::ArrayRef<Dimension> dimensions,
                                              llvm::ArrayRef<TunedConfiguration> rows) {
  std::vector<const Dimension *> used;
  for (const Dimension &d : dimensions)
    if (llvm::any_of(rows, [&](const TunedConfiguration &r) { return lookup(r.config, d.key); }))
      used.push_back(&d);
  return used;
}

/// Rows of configurations with their figures, aligned.
void printRows(llvm::ArrayRef<TunedConfiguration> rows, llvm::ArrayRef<Dimension> dimensions,
               bool numbered, llvm::raw_ostream &os) {
  std::vector<const Dimension *> used = usedDimensions(dimensions, rows);
  std::vector<size_t> widths;
  for (const Dimension *d : used) {
    size_t width = d->column.size();
    for (const TunedConfiguration &r : rows)
      if (const Json *v = lookup(r.config, d->key))
        width = std::max(width, displayValue(*v).size());
    widths.push_back(width + 2);
  }
  os << "  ";
  if (numbered)
    os << llvm::left_justify("#", 4);
  for (size_t k = 0; k < used.size(); ++k)
    os << llvm::left_justify(used[k]->column, widths[k]);
  os << llvm::right_justify("step", 10) << llvm::right_justify("tokens/s", 11)
     << llvm::right_justify("TFLOP/s/GPU", 13) << llvm::right_justify("bubble", 8)
     << llvm::right_justify("exposed comm", 14) << llvm::right_justify("peak memory", 13) << "\n";
  for (auto [n, r] : llvm::enumerate(rows)) {
    os << "  ";
    if (numbered)
      os << llvm::left_justify(std::to_string(n + 1), 4);
    for (size_t k = 0; k < used.size(); ++k) {
      const Json *v = lookup(r.config, used[k]->key);
      os << llvm::left_justify(v ? displayValue(*v) : "-", widths[k]);
    }
    os << llvm::right_justify(formatSeconds(r.figures.stepTimeS), 10)
       << llvm::right_justify(formatCount(r.figures.tokensPerS), 11)
       << llvm::right_justify(llvm::formatv("{0:f1}", r.figures.tflopsPerGpu).str(), 13)
       << llvm::right_justify(percent(r.figures.bubbleFraction), 8)
       << llvm::right_justify(formatSeconds(r.figures.exposedCommS), 14)
       << llvm::right_justify(formatBytes(static_cast<double>(r.figures.peakMemoryBytes)), 13)
       << "\n";
  }
}

/// "sharding gradients instead of full, window - instead of 2".
std::string differences(const TunedConfiguration &other, const TunedConfiguration &best,
                        llvm::ArrayRef<Dimension> dimensions) {
  std::vector<std::string_view> keys;
  for (const Assignment &a : best.config)
    keys.push_back(a.key);
  for (const Assignment &a : other.config)
    if (!llvm::is_contained(keys, a.key))
      keys.push_back(a.key);
  std::string text;
  for (std::string_view key : keys) {
    const Json *mine = lookup(other.config, key), *theirs = lookup(best.config, key);
    std::string a = mine ? displayValue(*mine) : "-", b = theirs ? displayValue(*theirs) : "-";
    if (a != b)
      text += (text.empty() ? "" : ", ") + columnOf(dimensions, key) + " " + a + " instead of " + b;
  }
  return text.empty() ? "nothing" : text;
}

/// The tensor size of a configuration (1 when it does not set one).
int64_t tensorOfEntry(const TunedConfiguration &c) {
  return integerOf(c.config, "parallelism.tensor", 1);
}

/// Why `loser` is slower than `best`: its step split into compute, communication it waits
/// for, and the rest of its idle time (fill, drain, imbalance), each compared. Where the two
/// differ in tensor size, the tensor collectives are a part of their own.
std::string whyLost(const TunedConfiguration &loser, const TunedConfiguration &best) {
  const bool tensor = tensorOfEntry(loser) != tensorOfEntry(best);
  auto parts = [&](const TunedConfiguration &c) {
    const double idle = c.figures.bubbleFraction * c.figures.stepTimeS;
    std::vector<double> out{c.figures.stepTimeS - idle};
    if (tensor)
      out.push_back(c.tensorCommS);
    out.push_back(c.figures.exposedCommS - (tensor ? c.tensorCommS : 0));
    out.push_back(idle - c.figures.exposedCommS);
    return out;
  };
  std::vector<double> a = parts(loser), b = parts(best);
  std::vector<std::string> names{"compute per rank"};
  if (tensor)
    names.push_back("tensor-parallel collectives");
  names.push_back(tensor ? "other exposed communication" : "exposed communication");
  names.push_back("pipeline bubble (fill, drain, imbalance)");
  size_t worst = 0;
  for (size_t k = 1; k < a.size(); ++k)
    if (a[k] - b[k] > a[worst] - b[worst])
      worst = k;
  std::string text;
  for (size_t k = 0; k < a.size(); ++k)
    text += std::string(k ? ", " : "") + names[k] + " " + formatSeconds(a[k]) + " against " +
            formatSeconds(b[k]);
  return "mostly " + names[worst] + " (" + text + ")";
}

Json entryJson(const TunedConfiguration &c) {
  Json config = Json::object();
  for (const Assignment &a : c.config)
    config[a.key] = a.value;
  Json entry = Json::object();
  entry["job"] = c.job;
  entry["config"] = std::move(config);
  entry["schedule"] = c.family;
  // The parallel degrees, whether the configuration sets them or the job's defaults hold.
  const Json *parallelism = c.job.is_object() ? findKey(c.job, "parallelism") : nullptr;
  auto degree = [&](const char *key, const Json &fallback) {
    if (const Json *v = lookup(c.config, std::string("parallelism.") + key))
      return *v;
    if (parallelism && parallelism->is_object() && parallelism->contains(key))
      return (*parallelism)[key];
    return fallback;
  };
  entry["tensor"] = degree("tensor", 1);
  entry["sequence_parallel"] = degree("sequence_parallel", false);
  entry["expert"] = degree("expert", 1);
  entry["tensor_comm_s"] = c.tensorCommS;
  entry["step_time_s"] = c.figures.stepTimeS;
  entry["tokens_per_s"] = c.figures.tokensPerS;
  entry["peak_memory_bytes"] = c.figures.peakMemoryBytes;
  entry["tflops_per_gpu"] = c.figures.tflopsPerGpu;
  entry["bubble_fraction"] = c.figures.bubbleFraction;
  entry["exposed_comm_s"] = c.figures.exposedCommS;
  entry["bounds"] = {{"step_time_s", c.bounds.stepTimeS},
                     {"peak_memory_bytes", c.bounds.peakMemoryBytes}};
  return entry;
}

Json entriesJson(llvm::ArrayRef<TunedConfiguration> entries) {
  Json out = Json::array();
  for (const TunedConfiguration &c : entries)
    out.push_back(entryJson(c));
  return out;
}

/// The batch per GPU: "2", "0.5".
std::string perGpuLabel(const TuneResult &r) {
  if (r.globalBatch % r.gpus == 0)
    return std::to_string(r.globalBatch / r.gpus);
  return llvm::formatv("{0:g}", static_cast<double>(r.globalBatch) / r.gpus).str();
}

} // namespace

void conduit::printTuneTable(const std::string &path, const TuneResult &result,
                             llvm::raw_ostream &os) {
  llvm::ArrayRef<Dimension> dimensions = result.dimensions;
  const TuneCounts &c = result.counts;
  os << "conduit-tune: " << path << " on " << result.gpus << " GPUs, global batch "
     << result.globalBatch << " samples (" << perGpuLabel(result) << " per GPU), objective "
     << (result.objective == TuneObjective::Throughput ? "throughput" : "memory") << "\n";
  const int64_t decided =
      c.invalid + c.infeasibleByBound + c.infeasibleCompiled + c.pruned + c.evaluated + c.failed;
  os << "  searched " << c.configurations << " configurations in " << formatSeconds(c.seconds)
     << " (bounds " << formatSeconds(c.boundSeconds) << "): " << c.invalid << " invalid, "
     << c.infeasibleByBound + c.infeasibleCompiled << " do not fit (" << c.infeasibleByBound
     << " by their memory bound, " << c.infeasibleCompiled << " compiled), " << c.pruned
     << " pruned by their bounds, " << c.evaluated << " compiled and ranked";
  if (c.failed)
    os << ", " << c.failed << " failed to compile";
  if (c.shapesTooLarge)
    os << "; " << c.shapesTooLarge
       << " shapes (T, SP, P, D) not listed, whose static state exceeds the device";
  os << "; " << formatCount(c.seconds > 0 ? static_cast<double>(decided) / c.seconds : 0)
     << " configurations/s\n";
  if (!c.complete)
    os << "  the budget ran out with " << c.undecided
       << " candidates undecided: the ranking is the best of what was compiled, not proven\n";
  if (c.failed)
    os << "  failed, for example: " << result.exampleFailure << "\n";
  os << "\n";
  printRows(result.top, dimensions, /*numbered=*/true, os);

  const TunedConfiguration &best = result.top.front();
  const TunedConfiguration &recommended = result.best();
  os << "\n  best: step " << formatSeconds(recommended.figures.stepTimeS) << ", "
     << formatCount(recommended.figures.tokensPerS) << " tokens/s, peak memory "
     << formatBytes(static_cast<double>(recommended.figures.peakMemoryBytes))
     << (&recommended == &best ? " (#1)" : " (#1 with the micro-batch search's cut)") << "\n";
  if (result.top.size() > 1) {
    const TunedConfiguration &second = result.top[1];
    os << "\n  runner-up: " << differences(second, best, dimensions) << "; ";
    if (second.figures.stepTimeS > best.figures.stepTimeS)
      os << llvm::formatv("{0:f2}", 100 * (second.figures.stepTimeS / best.figures.stepTimeS - 1))
         << "% slower, " << whyLost(second, best) << "\n";
    else if (second.figures.peakMemoryBytes > best.figures.peakMemoryBytes)
      os << "as fast, but " << formatBytes(static_cast<double>(second.figures.peakMemoryBytes))
         << " at "
         << "its peak against " << formatBytes(static_cast<double>(best.figures.peakMemoryBytes))
         << "\n";
    else
      os << "the same figures (a tie, ranked by the order of the search space)\n";
  }
  if (result.refinement) {
    const Refinement &r = *result.refinement;
    if (!r.skipped.empty() || r.refined.config.empty()) {
      os << "\n  micro-batch search: not applied"
         << (r.skipped.empty() ? "" : " (" + r.skipped + ")") << "\n";
    } else {
      const std::string changed = differences(r.from, best, dimensions);
      os << "\n  micro-batch search on "
         << (changed == "nothing" ? std::string("#1") : "#1 with " + changed) << ": step "
         << formatSeconds(r.from.figures.stepTimeS) << " with equal micro-batches, "
         << formatSeconds(r.refined.figures.stepTimeS) << " with the cut found; "
         << (r.better ? "the cut is the recommendation"
             : r.refined.figures.stepTimeS < r.from.figures.stepTimeS
                 ? "#1 stays the best"
                 : "equal micro-batches stay the best")
         << "\n";
    }
  }

  os << "\n  best of each schedule:\n";
  printRows(result.bestPerFamily, dimensions, /*numbered=*/false, os);
  for (const TunedConfiguration &f : result.bestPerFamily)
    if (f.index != best.index && f.figures.stepTimeS > best.figures.stepTimeS)
      os << "    " << f.family << ": "
         << llvm::formatv("{0:f1}", 100 * (f.figures.stepTimeS / best.figures.stepTimeS - 1))
         << "% slower, " << whyLost(f, best) << "\n";

  if (result.paretoSearched) {
    os << "\n  Pareto front (no configuration is both faster and smaller):\n";
    printRows(result.pareto, dimensions, /*numbered=*/false, os);
  }
}

Json conduit::tuneToJson(const TuneResult &result) {
  const TuneCounts &c = result.counts;
  Json search = Json::object();
  search["configurations"] = c.configurations;
  search["shapes_too_large"] = c.shapesTooLarge;
  search["invalid"] = c.invalid;
  search["infeasible"] = c.infeasibleByBound + c.infeasibleCompiled;
  search["infeasible_by_bound"] = c.infeasibleByBound;
  search["pruned"] = c.pruned;
  search["evaluated"] = c.evaluated;
  search["failed"] = c.failed;
  search["undecided"] = c.undecided;
  search["complete"] = c.complete;
  search["seconds"] = c.seconds;
  search["bound_seconds"] = c.boundSeconds;
  Json out = Json::object();
  out["gpus"] = result.gpus;
  out["global_batch"] = result.globalBatch;
  out["objective"] = result.objective == TuneObjective::Throughput ? "throughput" : "memory";
  out["best"] = entryJson(result.best());
  out["top"] = entriesJson(result.top);
  out["best_per_schedule"] = entriesJson(result.bestPerFamily);
  if (result.paretoSearched)
    out["pareto"] = entriesJson(result.pareto);
  out["search"] = std::move(search);
  if (result.refinement && !result.refinement->refined.config.empty())
    out["microbatch_search"] = {{"from", entryJson(result.refinement->from)},
                                {"refined", entryJson(result.refinement->refined)}};
  return out;
}

void conduit::writeTuneChart(const std::string &title, llvm::ArrayRef<TuneResult> results,
                             llvm::raw_ostream &os) {
  // family -> (batch per GPU, tokens/s), in the order the batches were given.
  std::map<std::string, std::vector<std::pair<double, double>>> lines;
  double xMin = INFINITY, xMax = 0, yMax = 0;
  for (const TuneResult &r : results) {
    const double perGpu = static_cast<double>(r.globalBatch) / r.gpus;
    xMin = std::min(xMin, perGpu);
    xMax = std::max(xMax, perGpu);
    for (const TunedConfiguration &f : r.bestPerFamily) {
      lines[f.family].push_back({perGpu, f.figures.tokensPerS});
      yMax = std::max(yMax, f.figures.tokensPerS);
    }
  }
  const double width = 760, height = 440, left = 80, right = 150, top = 50, bottom = 60;
  const double plotW = width - left - right, plotH = height - top - bottom;
  const double lx0 = std::log2(xMin), lx1 = std::max(std::log2(xMax), lx0 + 1);
  // A round ceiling for the y axis.
  const double power = std::pow(10.0, std::floor(std::log10(std::max(yMax, 1.0))));
  double yTop = power;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * power >= yMax) {
      yTop = m * power;
      break;
    }
  auto px = [&](double x) { return left + (std::log2(x) - lx0) / (lx1 - lx0) * plotW; };
  auto py = [&](double y) { return top + plotH - y / yTop * plotH; };

  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "font-family=\"sans-serif\">\n",
                     width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  os << llvm::format("<text x=\"%.0f\" y=\"24\" font-size=\"14\" font-weight=\"bold\">", left)
     << title << "</text>\n";
  os << llvm::format("<text x=\"%.0f\" y=\"40\" font-size=\"11\" fill=\"#555\">", left)
     << "best configuration of each schedule per global batch (conduit-tune); schedules "
        "within 0.5% share a line</text>\n";
  // Axes, grid and ticks.
  for (int k = 0; k <= 5; ++k) {
    const double y = yTop * k / 5;
    os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                       left, py(y), left + plotW, py(y));
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">",
                       left - 6, py(y) + 4)
       << formatCount(y) << "</text>\n";
  }
  for (const TuneResult &r : results) {
    const double perGpu = static_cast<double>(r.globalBatch) / r.gpus;
    os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                       px(perGpu), top, px(perGpu), top + plotH);
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">",
                       px(perGpu), top + plotH + 16)
       << perGpuLabel(r) << "</text>\n";
  }
  os << llvm::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                     "stroke=\"#333\"/>\n",
                     left, top, plotW, plotH);
  os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">",
                     left + plotW / 2, height - 18)
     << "batch per GPU (samples per step / GPUs, log scale)</text>\n";
  os << llvm::format("<text transform=\"translate(18 %.1f) rotate(-90)\" font-size=\"12\" "
                     "text-anchor=\"middle\">tokens/s</text>\n",
                     top + plotH / 2);

  // Tableau 10, distinguishable for most colour vision.
  static const char *const kColours[] = {"#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2",
                                         "#9d755d", "#eeca3b", "#72b7b2", "#ff9da6", "#bab0ac"};
  // Schedules whose best configurations are within half a percent of each other at every
  // batch would hide one another: they share one line and one label.
  std::vector<std::pair<std::vector<std::string>, std::vector<std::pair<double, double>>>> groups;
  for (auto &[family, points] : lines) {
    auto close = [&](const std::vector<std::pair<double, double>> &other) {
      if (other.size() != points.size())
        return false;
      for (size_t k = 0; k < points.size(); ++k)
        if (other[k].first != points[k].first ||
            std::abs(other[k].second - points[k].second) > 0.005 * points[k].second)
          return false;
      return true;
    };
    auto group = llvm::find_if(groups, [&](const auto &g) { return close(g.second); });
    if (group == groups.end())
      groups.push_back({{family}, points});
    else
      group->first.push_back(family);
  }
  // Labels at the lines' right ends, one name a row, moved apart where two would overlap.
  struct Label {
    double y, x;
    const char *colour;
    std::vector<std::string> names;
  };
  std::vector<Label> labels;
  for (auto [k, group] : llvm::enumerate(groups)) {
    const auto &[names, points] = group;
    const char *stroke = kColours[k % std::size(kColours)];
    std::string d;
    for (auto [n, p] : llvm::enumerate(points))
      d += llvm::formatv("{0}{1:f1},{2:f1} ", n ? "L" : "M", px(p.first), py(p.second)).str();
    os << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << stroke
       << "\" stroke-width=\"2\"/>\n";
    for (const auto &p : points)
      os << llvm::format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(p.first),
                         py(p.second), stroke);
    const double rows = static_cast<double>(names.size());
    labels.push_back(
        {py(points.back().second) - 7 * (rows - 1), px(points.back().first), stroke, names});
  }
  std::sort(labels.begin(), labels.end(), [](const Label &a, const Label &b) { return a.y < b.y; });
  // Overlapping labels form a block centred on where its labels want to be; blocks that then
  // overlap merge, until none do.
  constexpr double kRow = 14;
  auto rowsOf = [&](const Label &l) { return kRow * static_cast<double>(l.names.size()); };
  struct Block {
    size_t first, last; // labels [first, last)
    double top, wanted, height;
  };
  std::vector<Block> blocks;
  for (size_t k = 0; k < labels.size(); ++k) {
    blocks.push_back({k, k + 1, labels[k].y, labels[k].y, rowsOf(labels[k])});
    while (blocks.size() > 1) {
      Block &b = blocks.back(), &a = blocks[blocks.size() - 2];
      if (a.top + a.height <= b.top)
        break;
      // Centre the merged block on the mean of its labels' wanted tops (offset by their place).
      const double count = static_cast<double>(b.last - a.first);
      a.wanted = (a.wanted * static_cast<double>(a.last - a.first) +
                  (b.wanted - a.height) * static_cast<double>(b.last - b.first)) /
                 count;
      a.height += b.height;
      a.last = b.last;
      a.top = a.wanted;
      blocks.pop_back();
    }
  }
  // Top to bottom, none above the plot and none over the one before.
  double next = top + kRow / 2;
  for (const Block &b : blocks) {
    double y = std::max(b.top, next);
    for (size_t k = b.first; k < b.last; ++k) {
      labels[k].y = y;
      y += rowsOf(labels[k]);
    }
    next = y;
  }
  for (const Label &label : labels)
    for (auto [row, name] : llvm::enumerate(label.names))
      os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\">", label.x + 8,
                         label.y + 4 + kRow * static_cast<double>(row), label.colour)
         << name << "</text>\n";
  os << "</svg>\n";
}
