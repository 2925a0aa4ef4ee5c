//===- Driver.cpp - the conduit-compile driver ----------------------------===//

#include "compiler/Driver.h"

#include "compiler/ImportJob.h"
#include "compiler/JobFile.h"
#include "compiler/PlanExport.h"
#include "compiler/Registration.h"
#include "compiler/Report.h"
#include "compiler/Summary.h"
#include "compiler/Timeline.h"
#include "compiler/TorchCsv.h"
#include "compiler/Units.h"
#include "dialects/pipe/PipeOps.h"
#include "dialects/plan/PlanOps.h"
#include "passes/Pipeline.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanJson.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

using namespace conduit;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Summary, Mlir, PlanJson, TorchCsv, Report, Trace, Svg };

struct Options {
  cl::OptionCategory category{"conduit-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<job.json>"), cl::Required,
                             cl::cat(category)};
  cl::opt<std::string> output{"o", cl::desc("Write the plan file"), cl::value_desc("file"),
                              cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to print on standard output"), cl::init(EmitKind::Summary),
      cl::values(clEnumValN(EmitKind::Summary, "summary", "the readable report (default)"),
                 clEnumValN(EmitKind::Mlir, "mlir",
                            "the IR where the pipeline stopped (see --until)"),
                 clEnumValN(EmitKind::PlanJson, "plan-json", "the plan file as JSON"),
                 clEnumValN(EmitKind::TorchCsv, "torch-csv",
                            "PyTorch pipelining compute+comms action lists"),
                 clEnumValN(EmitKind::Report, "report", "the predicted step as JSON"),
                 clEnumValN(EmitKind::Trace, "trace",
                            "the predicted step as a Chrome trace (Perfetto)"),
                 clEnumValN(EmitKind::Svg, "svg", "the predicted step as an SVG Gantt chart")),
      cl::cat(category)};
  cl::opt<PipelineStop> until{
      "until", cl::desc("Stop the compilation after this step"), cl::init(PipelineStop::Plan),
      cl::values(clEnumValN(PipelineStop::Model, "model", "the imported model"),
                 clEnumValN(PipelineStop::Partitioned, "partitioned", "stages"),
                 clEnumValN(PipelineStop::Placed, "placed", "placement"),
                 clEnumValN(PipelineStop::Split, "split", "micro-batches"),
                 clEnumValN(PipelineStop::Searched, "searched",
                            "micro-batch partitions searched (microbatch_partitions \"auto\")"),
                 clEnumValN(PipelineStop::Scheduled, "scheduled", "the schedule"),
                 clEnumValN(PipelineStop::Transfers, "transfers", "sends and receives"),
                 clEnumValN(PipelineStop::Collectives, "collectives",
                            "data-parallel collectives"),
                 clEnumValN(PipelineStop::Communicating, "communicating",
                            "transfers, collectives, memory plan"),
                 clEnumValN(PipelineStop::Lowered, "lowered", "the plan, not yet verified"),
                 clEnumValN(PipelineStop::Plan, "plan", "the verified plan (default)")),
      cl::cat(category)};
  /// --stop-after=PASS; see takeStopAfter.
  std::optional<std::string> stopAfter;
  cl::list<std::string> set{"set", cl::desc("Override a job file key (repeatable)"),
                            cl::value_desc("key.path=value"), cl::cat(category)};
  cl::opt<sched::SearchMethod> searchMethod{
      "microbatch-search",
      cl::desc("How to search micro-batch partitions when the job says \"auto\""),
      cl::init(sched::SearchMethod::Descent),
      cl::values(
          clEnumValN(sched::SearchMethod::Greedy, "greedy",
                     "move samples between neighbouring micro-batches while it helps"),
          clEnumValN(sched::SearchMethod::DP, "dp", "greedy dynamic programming, stage by stage"),
          clEnumValN(sched::SearchMethod::Genetic, "genetic",
                     "dual-chromosome genetic algorithm"),
          clEnumValN(sched::SearchMethod::Descent, "descent",
                     "iterated coordinate descent (default)"),
          clEnumValN(sched::SearchMethod::Descent, "best",
                     "the method that does best on the committed cases (descent)")),
      cl::cat(category)};
  cl::opt<uint64_t> searchSeed{"search-seed", cl::desc("Seed of the micro-batch search"),
                               cl::init(1), cl::cat(category)};
  cl::opt<double> searchBudget{
      "search-budget", cl::desc("Seconds the micro-batch search may take (0: no limit)"),
      cl::init(0), cl::value_desc("seconds"), cl::cat(category)};
  cl::list<std::string> sweep{
      "sweep", cl::desc("Compile every combination of these values and compare (repeatable)"),
      cl::value_desc("key.path=v1,v2,..."), cl::cat(category)};
  cl::opt<std::string> importCsv{
      "import-torch-csv",
      cl::desc("Take placement and schedule from a PyTorch compute-only CSV"),
      cl::value_desc("file"), cl::cat(category)};
};

void print(llvm::raw_ostream &os, llvm::raw_ostream::Colors color, llvm::StringRef severity,
           const std::string &message) {
  llvm::WithColor(os, color, /*Bold=*/true) << "conduit-compile: " << severity << ": ";
  os << message << "\n";
}

int fail(const std::string &message) {
  print(llvm::errs(), llvm::raw_ostream::RED, "error", message);
  return 1;
}

/// Strips MLIR's "'op.name' op " prefix, which means nothing to a user of the driver.
std::string userMessage(const mlir::Diagnostic &diag) {
  std::string message = diag.str();
  llvm::StringRef text(message);
  if (text.consume_front("'")) {
    auto [op, rest] = text.split("' op ");
    if (!rest.empty())
      return rest.str();
  }
  return message;
}

/// Prints pass diagnostics the way input errors print: "conduit-compile: error: FILE:
/// message", without MLIR's op-name prefix, which means nothing to a user of the driver.
class UserDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  explicit UserDiagnostics(mlir::MLIRContext *context)
      : mlir::ScopedDiagnosticHandler(context, [](mlir::Diagnostic &diag) {
          std::string text = userMessage(diag);
          std::string where;
          if (auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
            where = loc.getFilename().str() + ": ";
          bool error = diag.getSeverity() == mlir::DiagnosticSeverity::Error;
          print(llvm::errs(), error ? llvm::raw_ostream::RED : llvm::raw_ostream::MAGENTA,
                error ? "error" : "warning", where + text);
          for (const mlir::Diagnostic &note : diag.getNotes())
            llvm::errs() << "  note: " << note.str() << "\n";
          return mlir::success();
        }) {}
};

/// LLVM's code generator, where it is linked in, registers --stop-after in the same
/// process-wide option registry, so the driver takes the option out of the command line before
/// parsing and gives the registry's entry its own description for --help. Returns the
/// arguments without it.
std::vector<char *> takeStopAfter(int argc, char **argv, Options &options,
                                  cl::OptionCategory &category) {
  std::vector<char *> rest;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    llvm::StringRef name = arg.starts_with("--") ? arg.drop_front(2) : arg.drop_front(1);
    if (!arg.starts_with("-") || !name.starts_with("stop-after") || i == 0) {
      rest.push_back(argv[i]);
      continue;
    }
    auto [key, value] = name.split('=');
    if (key != "stop-after") {
      rest.push_back(argv[i]);
      continue;
    }
    if (!name.contains('=') && i + 1 < argc)
      value = argv[++i];
    options.stopAfter = value.str();
  }
  cl::Option *option = cl::getRegisteredOptions().lookup("stop-after");
  if (!option) {
    // LLVM's code generator is not linked in (LLVM is linked statically, in parts): the entry
    // is ours, for --help; its value was taken above.
    static cl::opt<std::string> entry("stop-after");
    option = &entry;
  }
  option->setDescription("Stop the compilation after this pass (conduit-schedule, ...)");
  option->setValueStr("pass");
  option->addCategory(category);
  option->setHiddenFlag(cl::NotHidden);
  return rest;
}

/// What one compilation produced.
struct Compilation {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The verified plan and its simulated step, when the whole pipeline ran.
  std::optional<VerifiedPlan> verified;
  /// The micro-batch search, when the job asked for one.
  std::optional<std::pair<sched::SearchMethod, sched::SearchResult>> search;
};

/// "searched (descent): 1,234 candidates in 0.52 s; ..." for the summary.
void printSearch(sched::SearchMethod method, const sched::SearchResult &search,
                 llvm::raw_ostream &os) {
  const double gain = search.baselineStepTime / search.stepTime - 1;
  os << "  " << llvm::left_justify("micro-batches", 12) << " searched ("
     << sched::searchMethodName(method) << ", " << search.evaluated << " candidates in "
     << formatSeconds(search.seconds) << "): predicted step " << formatSeconds(search.stepTime)
     << ", equal micro-batches " << formatSeconds(search.baselineStepTime) << " ("
     << llvm::formatv("{0:f1}", 100 * gain) << "% faster)\n";
  for (auto [s, cut] : llvm::enumerate(search.best)) {
    os << "  " << llvm::left_justify("", 12) << " stage " << s << ":";
    for (int64_t n : cut)
      os << " " << n;
    os << "\n";
  }
}

/// Imports `job` and runs the pipeline up to `options.until`. Diagnostics go to the context's
/// handlers; returns nullopt when the job cannot be compiled.
std::optional<Compilation> compile(const Job &job, mlir::MLIRContext &context,
                                   const Options &options, mlir::TimingScope &timing) {
  Compilation result;
  result.module = importJob(job, context);
  if (mlir::failed(mlir::verify(*result.module))) {
    mlir::emitError(result.module->getLoc(), "internal error: the imported IR does not verify");
    return std::nullopt;
  }
  if (options.until == PipelineStop::Model)
    return result;
  mlir::PassManager pm(&context);
  // Passes keep their IR valid and conduit-verify-plan proves the result, including every
  // rule the plan dialect's verifiers state; verifying the whole module after every pass
  // would cost more than the passes on large plans. conduit-opt keeps the per-pass
  // verification, and the tests run every pass through it.
  pm.enableVerifier(false);
  if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return std::nullopt;
  pm.enableTiming(timing);
  PipelineOptions pipeline;
  pipeline.stopAfter = options.until;
  pipeline.importSchedule = options.importCsv;
  pipeline.onVerified = [&](VerifiedPlan verified) { result.verified = std::move(verified); };
  pipeline.searchMethod = sched::searchMethodName(options.searchMethod);
  pipeline.searchSeed = options.searchSeed;
  pipeline.searchBudgetS = options.searchBudget;
  pipeline.onSearch = [&](sched::SearchMethod method, const sched::SearchResult &search) {
    result.search = {method, search};
  };
  buildConduitPipeline(pm, pipeline);
  if (mlir::failed(pm.run(*result.module)))
    return std::nullopt;
  return result;
}

/// One --sweep axis: a key and its values.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

std::optional<std::vector<SweepAxis>> parseSweep(llvm::ArrayRef<std::string> specs,
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

/// Every combination of the axes' values, as override lists, first axis slowest.
std::vector<std::vector<std::string>> combinations(const std::vector<SweepAxis> &axes) {
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

/// Keeps what one compilation of a sweep reports, for its row, instead of printing it.
class CaptureDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  explicit CaptureDiagnostics(mlir::MLIRContext *context)
      : mlir::ScopedDiagnosticHandler(context, [this](mlir::Diagnostic &diag) {
          if (diag.getSeverity() == mlir::DiagnosticSeverity::Error) {
            if (error.empty())
              error = userMessage(diag);
          } else if (diag.getSeverity() == mlir::DiagnosticSeverity::Warning) {
            warnings.push_back(userMessage(diag));
          }
          return mlir::success();
        }) {}
  std::string error;
  std::vector<std::string> warnings;
};

int runSweep(const Options &options, const std::vector<SweepAxis> &axes,
             mlir::MLIRContext &context, mlir::TimingScope &timing) {
  Diagnostics diag(options.input);
  std::optional<llvm::json::Value> root = loadJsonFile(options.input, diag);
  if (!root)
    return fail(diag.getError()->str());
  for (const std::string &assignment : options.set)
    if (!applyOverride(*root, assignment, diag))
      return fail(diag.getError()->str());

  struct Row {
    std::vector<std::string> values;
    std::optional<PlanReport> report;
    int64_t peakMemory = 0;
    std::string error;
    std::vector<std::string> warnings;
  };
  std::vector<Row> rows;
  for (const std::vector<std::string> &overrides : combinations(axes)) {
    Row &row = rows.emplace_back();
    for (const std::string &assignment : overrides)
      row.values.push_back(llvm::StringRef(assignment).split('=').second.str());
    llvm::json::Value edited = *root;
    Diagnostics local(options.input);
    std::optional<Job> job;
    bool applied = true;
    for (const std::string &assignment : overrides)
      applied = applied && applyOverride(edited, assignment, local);
    if (applied)
      job = parseJob(edited, options.input, local);
    if (!job) {
      const InputError &error = *local.getError();
      row.error = error.keyPath.empty() ? error.message : error.keyPath + ": " + error.message;
      continue;
    }
    CaptureDiagnostics capture(&context);
    std::optional<Compilation> compiled = compile(*job, context, options, timing);
    row.warnings = capture.warnings;
    if (!compiled || !compiled->verified) {
      row.error = capture.error.empty() ? "the job does not compile" : capture.error;
      continue;
    }
    row.report = analyzeStep(compiled->verified->plan, compiled->verified->simulation);
    for (const runtime::RankProgram &rank : compiled->verified->plan.ranks)
      row.peakMemory = std::max(row.peakMemory, rank.peakMemoryBytes);
  }

  if (options.emit == EmitKind::Report) {
    llvm::json::Array out;
    for (const Row &row : rows) {
      llvm::json::Object config;
      for (size_t a = 0; a < axes.size(); ++a) {
        llvm::Expected<llvm::json::Value> value = llvm::json::parse(row.values[a]);
        if (value) {
          config[axes[a].key] = std::move(*value);
        } else {
          llvm::consumeError(value.takeError());
          config[axes[a].key] = row.values[a];
        }
      }
      llvm::json::Object entry{{"config", std::move(config)}};
      if (!row.warnings.empty())
        entry["warnings"] = llvm::json::Array(row.warnings);
      if (row.report)
        entry["report"] = reportToJson(*row.report);
      else
        entry["error"] = row.error;
      out.push_back(std::move(entry));
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(out))) << "\n";
  } else {
    // The table: one column per swept key, then the predictions.
    std::vector<size_t> widths;
    for (size_t a = 0; a < axes.size(); ++a) {
      size_t width = llvm::StringRef(axes[a].key).rsplit('.').second.size();
      if (width == 0)
        width = axes[a].key.size();
      for (const Row &row : rows)
        width = std::max(width, row.values[a].size());
      widths.push_back(width + 2);
    }
    size_t best = rows.size();
    for (size_t k = 0; k < rows.size(); ++k)
      if (rows[k].report && (best == rows.size() ||
                             rows[k].report->tokensPerS > rows[best].report->tokensPerS))
        best = k;
    llvm::raw_ostream &os = llvm::outs();
    os << "sweep of " << options.input << ": " << rows.size() << " configurations\n\n";
    for (size_t a = 0; a < axes.size(); ++a) {
      llvm::StringRef name = llvm::StringRef(axes[a].key).rsplit('.').second;
      os << llvm::left_justify(name.empty() ? axes[a].key : name.str(), widths[a]);
    }
    os << llvm::right_justify("step", 10) << llvm::right_justify("tokens/s", 11)
       << llvm::right_justify("TFLOP/s/GPU", 13) << llvm::right_justify("bubble", 8)
       << llvm::right_justify("exposed comm", 14) << llvm::right_justify("peak memory", 13)
       << "\n";
    for (size_t k = 0; k < rows.size(); ++k) {
      const Row &row = rows[k];
      for (size_t a = 0; a < axes.size(); ++a)
        os << llvm::left_justify(row.values[a], widths[a]);
      if (row.report) {
        const PlanReport &r = *row.report;
        os << llvm::right_justify(formatSeconds(r.stepTimeS), 10)
           << llvm::right_justify(formatCount(r.tokensPerS), 11)
           << llvm::right_justify(llvm::formatv("{0:f1}", r.tflopsPerGpu).str(), 13)
           << llvm::right_justify(llvm::formatv("{0:f1}%", 100 * r.bubbleFraction).str(), 8)
           << llvm::right_justify(formatSeconds(r.exposedCommS), 14)
           << llvm::right_justify(formatBytes(static_cast<double>(row.peakMemory)), 13)
           << (k == best ? "  <- best" : "") << "\n";
      } else {
        os << "  error: " << row.error << "\n";
      }
      for (const std::string &warning : row.warnings)
        os << "    warning: " << warning << "\n";
    }
  }
  bool any = llvm::any_of(rows, [](const Row &row) { return row.report.has_value(); });
  return any ? 0 : 1;
}

} // namespace

int conduit::runCompiler(int argc, char **argv) {
  Options options;
  mlir::registerPassManagerCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // --help lists what a user of the compiler can use, not every option of the LLVM library.
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = llvm::is_contained(option->Categories, &options.category);
    if (!ours && !name.starts_with("mlir-") && name != "help" && name != "version")
      option->setHiddenFlag(cl::ReallyHidden);
  }
  std::vector<char *> args = takeStopAfter(argc, argv, options, options.category);
  if (!cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                                   "Conduit: compile a training job into a plan\n",
                                   &llvm::errs()))
    return 2;
  if (options.stopAfter) {
    if (options.until.getNumOccurrences())
      return fail("give --until or --stop-after, not both");
    llvm::ArrayRef<PipelinePass> passes = pipelinePasses();
    const auto *pass = llvm::find_if(
        passes, [&](const PipelinePass &p) { return p.argument == *options.stopAfter; });
    if (pass == passes.end()) {
      std::string known;
      for (const PipelinePass &p : passes)
        known += (known.empty() ? "" : ", ") + p.argument.str();
      return fail("--stop-after: '" + *options.stopAfter +
                  "' is not a pass of the pipeline; the passes are " + known);
    }
    options.until = pass->stopAfter;
  }
  const bool needsPlan = !options.output.empty() || options.emit == EmitKind::PlanJson ||
                         options.emit == EmitKind::TorchCsv || options.emit == EmitKind::Report ||
                         options.emit == EmitKind::Trace || options.emit == EmitKind::Svg;
  if (needsPlan && options.until != PipelineStop::Plan)
    return fail("-o and --emit=plan-json, torch-csv, report, trace and svg need the whole "
                "pipeline; drop --until and --stop-after");
  std::optional<std::vector<SweepAxis>> axes;
  if (!options.sweep.empty()) {
    std::string error;
    axes = parseSweep(options.sweep, error);
    if (!axes)
      return fail(error);
    if (!options.output.empty() ||
        (options.emit != EmitKind::Summary && options.emit != EmitKind::Report))
      return fail("--sweep prints a comparison (or, with --emit=report, a JSON array); it "
                  "writes no plan file and no other output");
    if (options.until != PipelineStop::Plan)
      return fail("--sweep needs the whole pipeline; drop --until and --stop-after");
  }

  mlir::DialectRegistry registry;
  registerDialects(registry);
  auto contextOwner = std::make_unique<mlir::MLIRContext>(registry);
  mlir::MLIRContext &context = *contextOwner;
  context.printOpOnDiagnostic(false);
  UserDiagnostics handler(&context);
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope timingScope = timing.getRootScope();
  if (axes)
    return runSweep(options, *axes, context, timingScope);

  Diagnostics diag(options.input);
  std::optional<Job> job = readJobFile(options.input, diag, options.set);
  if (!job)
    return fail(diag.getError()->str());
  std::optional<Compilation> compiled = compile(*job, context, options, timingScope);
  if (!compiled)
    return 1;
  mlir::ModuleOp module = *compiled->module;
  const runtime::Plan *plan = compiled->verified ? &compiled->verified->plan : nullptr;

  // Everything that can fail comes before the plan file is written.
  std::string csv;
  if (options.emit == EmitKind::TorchCsv) {
    llvm::Expected<std::string> text = writeTorchCsv(*plan);
    if (!text)
      return fail(llvm::toString(text.takeError()));
    csv = std::move(*text);
  }
  if (!options.output.empty()) {
    if (absl::Status status = runtime::writePlanFile(*plan, options.output); !status.ok())
      return fail(std::string(status.message()));
  }

  switch (options.emit) {
  case EmitKind::Mlir:
    module.print(llvm::outs());
    llvm::outs() << "\n";
    break;
  case EmitKind::PlanJson:
    llvm::outs().flush();
    runtime::writePlanJson(*plan, std::cout);
    break;
  case EmitKind::TorchCsv:
    llvm::outs() << csv;
    break;
  case EmitKind::Report:
    llvm::outs() << llvm::formatv("{0:2}", reportToJson(analyzeStep(
                                               *plan, compiled->verified->simulation)))
                 << "\n";
    break;
  case EmitKind::Trace:
    writeChromeTrace(*plan, compiled->verified->simulation, llvm::outs());
    break;
  case EmitKind::Svg:
    writeGanttSvg(*plan, compiled->verified->simulation, llvm::outs());
    break;
  case EmitKind::Summary:
    printSummary(*job, module, llvm::outs());
    if (compiled->search)
      printSearch(compiled->search->first, compiled->search->second, llvm::outs());
    if (plan)
      printReport(analyzeStep(*plan, compiled->verified->simulation), *plan, llvm::outs());
    break;
  }
#if !defined(__SANITIZE_ADDRESS__)
  // The process ends right after this (see conduit-compile.cpp): tearing down the IR of a large
  // plan would only cost time. Sanitizer builds tear down so that leaks stay visible.
  (void)compiled->module.release();
  (void)contextOwner.release();
#endif
  return 0;
}
