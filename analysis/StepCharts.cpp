//===- StepCharts.cpp - a simulated step as a trace or a chart ------------===//

#include "analysis/StepCharts.h"

#include "analysis/Units.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

void conduit::writeChromeTrace(const runtime::Plan &plan, const SimulationResult &simulation,
                               llvm::raw_ostream &os) {
  std::vector<std::vector<runtime::TraceEvent>> events(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r)
    for (size_t i = 0; i < plan.ranks[r].instructions.size(); ++i)
      events[r].push_back({0, static_cast<int64_t>(i), simulation.times[r][i]});
  std::ostringstream out;
  runtime::writeChromeTrace(plan, events, plan.name, simulation.makespan, out);
  os << out.str();
}

//===----------------------------------------------------------------------===//
// SVG
//===----------------------------------------------------------------------===//

namespace {

struct Kind {
  const char *label;
  const char *colour;
};

// Colours from the Tableau 10 palette, which stays distinguishable for most colour vision.
constexpr Kind kForward{"forward", "#4c78a8"};
constexpr Kind kBackward{"backward", "#54a24b"};
constexpr Kind kInput{"input gradient", "#72b7b2"};
constexpr Kind kWeight{"weight gradient", "#ff9da6"};
constexpr Kind kOptimizer{"optimizer step", "#b279a2"};
constexpr Kind kTransfer{"send / receive", "#9d755d"};
constexpr Kind kAllGather{"all-gather", "#f58518"};
constexpr Kind kReduceScatter{"reduce-scatter", "#e45756"};
constexpr Kind kAllReduce{"all-reduce", "#eeca3b"};

const Kind *kindOf(Op op) {
  switch (op) {
  case Op::Forward:
    return &kForward;
  case Op::Backward:
    return &kBackward;
  case Op::BackwardInput:
    return &kInput;
  case Op::BackwardWeight:
    return &kWeight;
  case Op::OptimizerStep:
    return &kOptimizer;
  case Op::Send:
  case Op::Recv:
  case Op::TieGrads:
    return &kTransfer;
  case Op::AllGather:
    return &kAllGather;
  case Op::ReduceScatter:
    return &kReduceScatter;
  case Op::AllReduce:
    return &kAllReduce;
  default:
    return nullptr;
  }
}

/// A tick step of 1, 2 or 5 times a power of ten giving at most `count` ticks over `span`.
double tickStep(double span, int count) {
  const double raw = span / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw)
      return m * power;
  return 10 * power;
}

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// Draws rectangles on one lane, merging runs of the same kind that are too thin to tell
/// apart, so that the file stays small whatever the number of instructions.
class Lane {
public:
  Lane(llvm::raw_ostream &os, double y, double height, bool labels)
      : os(os), y(y), height(height), labels(labels) {}
  ~Lane() { flush(); }

  void add(double x0, double x1, const Kind *kind, const std::string &label,
           const std::string &title) {
    if (pending.kind == kind && x0 - pending.x1 < 0.25 && pending.x1 - pending.x0 < 2 &&
        x1 - x0 < 2) {
      pending.x1 = std::max(pending.x1, x1);
      pending.title.clear(); // a merged run has no single name
      pending.label.clear();
      return;
    }
    flush();
    pending = {x0, x1, kind, label, title};
  }

private:
  struct Rect {
    double x0 = 0, x1 = 0;
    const Kind *kind = nullptr;
    std::string label, title;
  };

  void flush() {
    if (!pending.kind)
      return;
    const double width = std::max(pending.x1 - pending.x0, 0.3);
    os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"",
                       pending.x0, y, width, height, pending.kind->colour);
    if (pending.title.empty()) {
      os << "/>\n";
    } else {
      os << "><title>" << escape(pending.title) << "</title></rect>\n";
    }
    // A label where it fits: about 5.5 px per character at the chart's font size.
    const double fontSize = std::min(10.0, height - 2);
    if (labels && !pending.label.empty() && fontSize >= 6 &&
        width >= 0.55 * fontSize * static_cast<double>(pending.label.size()) + 4)
      os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" fill=\"#fff\" "
                         "text-anchor=\"middle\">",
                         pending.x0 + width / 2, y + height / 2 + fontSize * 0.35, fontSize)
         << escape(pending.label) << "</text>\n";
    pending = {};
  }

  llvm::raw_ostream &os;
  double y, height;
  bool labels;
  Rect pending;
};

} // namespace

void conduit::writeGanttSvg(const runtime::Plan &plan, const SimulationResult &simulation,
                            llvm::raw_ostream &os) {
  const runtime::Config &c = plan.config;
  const int32_t ranks = static_cast<int32_t>(plan.ranks.size());
  const double step = simulation.makespan > 0 ? simulation.makespan : 1;
  // Geometry: rows shrink with the rank count but stay readable at 64 ranks.
  const double left = 64, right = 24, top = 64, axis = 40, width = 1280;
  const double row = std::clamp(720.0 / ranks, 12.0, 36.0);
  const double plotWidth = width - left - right;
  const double height = top + row * ranks + axis;
  auto xOf = [&](double t) { return left + t / step * plotWidth; };

  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
                     width, height, width, height);
  os << llvm::format("<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", width, height);

  // Title and legend.
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\" font-weight=\"bold\">"
     << escape(plan.name) << ": " << runtime::scheduleName(c.schedule)
     << (c.splitBackward && c.schedule < runtime::Schedule::ZeroBubbleH1 ? " (split backward)" : "")
     << ", P=" << c.pipeline << " V=" << c.stagesPerDevice << " M=" << c.microbatches
     << " D=" << c.data << ", step " << escape(formatSeconds(simulation.makespan)) << "</text>\n";
  // The legend names the kinds the chart draws: an imported order may mix whole and split
  // backwards, and a plan without data parallelism has no collectives.
  double legendX = left;
  std::vector<const Kind *> legend;
  for (const Kind *kind : {&kForward, &kBackward, &kInput, &kWeight, &kOptimizer, &kTransfer,
                           &kAllGather, &kReduceScatter, &kAllReduce})
    if (std::any_of(plan.ranks.begin(), plan.ranks.end(), [&](const runtime::RankProgram &p) {
          return std::any_of(p.instructions.begin(), p.instructions.end(),
                             [&](const Instruction &x) { return kindOf(x.op) == kind; });
        }))
      legend.push_back(kind);
  for (const Kind *kind : legend) {
    os << llvm::format("<rect x=\"%.1f\" y=\"32\" width=\"12\" height=\"12\" fill=\"%s\"/>",
                       legendX, kind->colour)
       << llvm::format("<text x=\"%.1f\" y=\"42\" font-size=\"11\">", legendX + 16) << kind->label
       << "</text>\n";
    legendX += 24 + 6.5 * static_cast<double>(std::string(kind->label).size());
  }
  os << llvm::format("<text x=\"%.1f\" y=\"42\" font-size=\"11\" fill=\"#555\">each row: "
                     "compute, then point-to-point and collectives</text>\n",
                     legendX + 8);

  // Time axis and grid.
  const double tick = tickStep(step, 10);
  for (double t = 0; t <= step * (1 + 1e-9); t += tick) {
    const double x = xOf(t);
    os << llvm::format("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#ddd\"/>", x,
                       top, x, top + row * ranks)
       << llvm::format("<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">", x,
                       top + row * ranks + 16)
       << escape(formatSeconds(t)) << "</text>\n";
  }
  os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">time"
                     "</text>\n",
                     left + plotWidth / 2, top + row * ranks + 34);

  // One row per rank: compute on 60% of the row, transfers and collectives on 15% each.
  const bool looped = c.stagesPerDevice > 1;
  for (int32_t r = 0; r < ranks; ++r) {
    const double y = top + row * r;
    os << llvm::format("<text x=\"%.1f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"end\">"
                       "rank %d</text>\n",
                       left - 6, y + row * 0.45, std::min(11.0, row * 0.6), r);
    Lane compute(os, y + row * 0.05, row * 0.6, /*labels=*/true);
    Lane transfers(os, y + row * 0.67, row * 0.14, false);
    Lane collectives(os, y + row * 0.83, row * 0.14, false);
    const std::vector<Instruction> &program = plan.ranks[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction &x = program[i];
      const Kind *kind = kindOf(x.op);
      if (!kind)
        continue;
      const InstructionTime &t = simulation.times[r][i];
      std::string title =
          runtime::shortName(x) + ": " + formatSeconds(t.start) + " to " + formatSeconds(t.end);
      if (x.isCompute()) {
        // PyTorch's notation: 3F5 is the forward of stage 3, micro-batch 5.
        std::string label = (looped ? std::to_string(x.stage) : "") +
                            runtime::shortName(x).substr(0, 1) + std::to_string(x.microbatch);
        compute.add(xOf(t.start), xOf(t.end), kind, label, title);
      } else if (x.op == Op::OptimizerStep) {
        compute.add(xOf(t.start), xOf(t.end), kind, "", title);
      } else if (x.isTransfer()) {
        transfers.add(xOf(t.start), xOf(t.end), kind, "", title);
      } else {
        collectives.add(xOf(t.start), xOf(t.end), kind, "", title);
      }
    }
  }
  os << "</svg>\n";
}
