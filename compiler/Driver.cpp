//===- Driver.cpp - the conduit-compile driver ----------------------------===//

#include "compiler/Driver.h"

#include "analysis/Report.h"
#include "analysis/StepCharts.h"
#include "analysis/Units.h"
#include "compiler/CompileModule.h"
#include "compiler/Registration.h"
#include "compiler/Summary.h"
#include "compiler/Sweep.h"
#include "compiler/ToolConsole.h"
#include "compiler/TorchCsvWriter.h"
#include "dialects/pipe/PipeOps.h"
#include "dialects/plan/PlanOps.h"
#include "job/JobFile.h"
#include "job/KeyEditor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "passes/Pipeline.h"
#include "runtime/ExitCodes.h"
#include "runtime/model/Trainable.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/PlanJson.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <sstream>

using namespace conduit;
namespace cl = llvm::cl;

namespace {

enum class EmitKind {
  Summary,
  Plan,
  Mlir,
  PlanJson,
  TorchCsv,
  TorchCsvCompute,
  Report,
  Trace,
  Svg
};

struct Options {
  cl::OptionCategory category{"conduit-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<job.json>"), cl::Required,
                             cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("Write what --emit names to this file ('-': standard output)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit",
      cl::desc("What to write (default: the plan file with -o, else the summary on standard "
               "output)"),
      cl::values(
          clEnumValN(EmitKind::Summary, "summary", "the readable report"),
          clEnumValN(EmitKind::Plan, "plan", "the verified plan file (binary)"),
          clEnumValN(EmitKind::Mlir, "mlir", "the IR where the pipeline stopped (see --until)"),
          clEnumValN(EmitKind::PlanJson, "plan-json", "the plan file as JSON"),
          clEnumValN(EmitKind::TorchCsv, "torch-csv",
                     "PyTorch pipelining compute+comms action lists"),
          clEnumValN(EmitKind::TorchCsvCompute, "torch-csv-compute",
                     "PyTorch pipelining compute-only action lists (torchtitan)"),
          clEnumValN(EmitKind::Report, "report", "the predicted step as JSON"),
          clEnumValN(EmitKind::Trace, "trace", "the predicted step as a Chrome trace (Perfetto)"),
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
                 clEnumValN(PipelineStop::Collectives, "collectives", "data-parallel collectives"),
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
          clEnumValN(sched::SearchMethod::Genetic, "genetic", "dual-chromosome genetic algorithm"),
          clEnumValN(sched::SearchMethod::Descent, "descent",
                     "iterated coordinate descent (default)"),
          clEnumValN(sched::SearchMethod::Descent, "best",
                     "the method that does best on the committed cases (descent)")),
      cl::cat(category)};
  cl::opt<uint64_t> searchSeed{"search-seed", cl::desc("Seed of the micro-batch search"),
                               cl::init(1), cl::cat(category)};
  cl::opt<double> searchBudget{"search-budget",
                               cl::desc("Seconds the micro-batch search may take (0: no limit)"),
                               cl::init(0), cl::value_desc("seconds"), cl::cat(category)};
  cl::list<std::string> sweep{
      "sweep", cl::desc("Compile every combination of these values and compare (repeatable)"),
      cl::value_desc("key.path=v1,v2,..."), cl::cat(category)};
  cl::opt<std::string> importCsv{
      "import-torch-csv", cl::desc("Take placement and schedule from a PyTorch compute-only CSV"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<bool> overlapAllToAlls{
      "overlap-all-to-alls",
      cl::desc("Hide the expert all-to-alls of a paired step behind the other half's compute, "
               "ordering the schedule for it (default true; false to price them exposed)"),
      cl::init(true), cl::cat(category)};
};

const ToolConsole console("conduit-compile");

/// The options that say how to compile, not what to write.
CompileOptions compileOptionsOf(const Options &options) {
  CompileOptions out;
  out.searchMethod = options.searchMethod;
  out.searchSeed = options.searchSeed;
  out.searchBudgetS = options.searchBudget;
  out.importSchedule = options.importCsv;
  out.overlapAllToAlls = options.overlapAllToAlls;
  return out;
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
          console.print(error ? llvm::raw_ostream::RED : llvm::raw_ostream::MAGENTA,
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

int runSweep(const Options &options, const std::vector<SweepAxis> &axes) {
  Diagnostics diag(options.input);
  std::optional<Json> root = loadJsonFile(options.input, diag);
  if (!root)
    return console.fail(diag.getError()->str());
  for (const std::string &assignment : options.set)
    if (!applyOverride(*root, assignment, diag))
      return console.fail(diag.getError()->str());

  const CompileOptions compileOptions = compileOptionsOf(options);
  std::vector<SweepRow> rows = runSweep(*root, options.input, axes, [&](const Job &job) {
    CompiledJob compiled = compileJob(job, compileOptions);
    SweepOutcome outcome;
    outcome.warnings = std::move(compiled.warnings);
    outcome.report = std::move(compiled.report);
    if (!outcome.report)
      outcome.error = std::move(compiled.error);
    return outcome;
  });
  if (int code = console.writeOutput(options.output, [&](llvm::raw_ostream &os) {
        if (options.emit == EmitKind::Report)
          os << llvm::formatv("{0:2}", sweepToJson(axes, rows)) << "\n";
        else
          printSweepTable(options.input, axes, rows, os);
      }))
    return code;
  if (llvm::none_of(rows, [](const SweepRow &row) { return row.outcome.report.has_value(); }))
    return console.fail("no configuration of the sweep compiled (each row above says why)");
  return kExitOk;
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
                                   "Conduit: compile a training job into a plan\n", &llvm::errs()))
    return kExitUsage;
  if (options.stopAfter) {
    if (options.until.getNumOccurrences())
      return console.usageError("give --until or --stop-after, not both");
    llvm::ArrayRef<PipelinePass> passes = pipelinePasses();
    const auto *pass = llvm::find_if(
        passes, [&](const PipelinePass &p) { return p.argument == *options.stopAfter; });
    if (pass == passes.end()) {
      std::string known;
      for (const PipelinePass &p : passes)
        known += (known.empty() ? "" : ", ") + p.argument.str();
      return console.usageError("--stop-after: '" + *options.stopAfter +
                                "' is not a pass of the pipeline; the passes are " + known);
    }
    options.until = pass->stopAfter;
  }
  // -o names the output of what is emitted: the plan file unless --emit says otherwise.
  if (!options.emit.getNumOccurrences())
    options.emit = options.output.empty() ? EmitKind::Summary : EmitKind::Plan;
  const bool needsPlan = options.emit != EmitKind::Summary && options.emit != EmitKind::Mlir;
  if (needsPlan && options.until != PipelineStop::Plan)
    return console.usageError(
        "--emit=plan, plan-json, torch-csv, torch-csv-compute, report, trace and "
        "svg (and -o without --emit) need the whole pipeline; drop --until and "
        "--stop-after");
  std::optional<std::vector<SweepAxis>> axes;
  if (!options.sweep.empty()) {
    std::string error;
    axes = parseSweepAxes(options.sweep, error);
    if (!axes)
      return console.usageError(error);
    if (options.emit != EmitKind::Summary && options.emit != EmitKind::Report)
      return console.usageError(
          "--sweep writes a comparison: a table (--emit=summary, the default) or "
          "a JSON array (--emit=report); compile one configuration for the others");
    if (options.until != PipelineStop::Plan)
      return console.usageError("--sweep needs the whole pipeline; drop --until and --stop-after");
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
    return runSweep(options, *axes);

  Diagnostics diag(options.input);
  const std::vector<std::string> overrides(options.set.begin(), options.set.end());
  std::optional<Job> job = readJobFile(options.input, diag, overrides);
  if (!job)
    return console.fail(diag.getError()->str());
  // Compile time grows with the (stage, micro-batch) pairs, about 13 us each
  // (docs/performance.md): say so before a compile that takes seconds.
  const int64_t pairs = job->parallelism.numStages() * job->parallelism.microbatches;
  if (pairs >= kManyPairs && !refusedBeforeScheduling(*job, options.until))
    console.print(
        llvm::raw_ostream::CYAN, "note",
        options.input + ": " + formatCount(static_cast<double>(pairs)) +
            " (stage, micro-batch) pairs per step; compiling them takes a while, and progress "
            "is reported every second after the first " +
            std::to_string(static_cast<int>(kQuietCompileS)) + " s");
  // A tensor group's collectives run inside every layer: across nodes they take the slow link.
  const int64_t tensor = job->parallelism.tensor, perNode = job->cluster.gpusPerNode;
  if (tensor > 1 && (tensor > perNode || perNode % tensor != 0))
    console.print(llvm::raw_ostream::MAGENTA, "warning",
                  options.input + ": parallelism.tensor " + std::to_string(tensor) +
                      (tensor > perNode ? " exceeds" : " does not divide") +
                      " cluster.gpus_per_node " + std::to_string(perNode) +
                      ", so tensor groups span nodes and their collectives (several per layer) "
                      "run on the inter-node link; the prediction prices them there");
  ModuleOptions watch;
  watch.until = options.until;
  watch.timing = &timingScope;
  watch.progress = true;
  watch.commandLinePassOptions = true;
  // The plan IR is built only to be printed.
  watch.planOps = options.emit == EmitKind::Mlir;
  // Only the reports and charts read the simulated step's times.
  watch.simulatedTimes = options.emit == EmitKind::Summary || options.emit == EmitKind::Report ||
                         options.emit == EmitKind::Trace || options.emit == EmitKind::Svg;
  ModuleCompilation compiled = compileModule(*job, context, compileOptionsOf(options), watch);
  if (!compiled.succeeded)
    return kExitInvalidInput;
  mlir::ModuleOp module = *compiled.module;
  const runtime::Plan *plan = compiled.verified ? &compiled.verified->plan : nullptr;
  // The compiler plans and prices more than conduit-run computes: say so where it writes a plan.
  if (options.emit == EmitKind::Plan && plan)
    if (absl::Status s = model::checkTrainable(*plan, "conduit-run"); !s.ok())
      console.print(llvm::raw_ostream::CYAN, "note",
                    options.input + ": conduit-run refuses this plan: " + std::string(s.message()) +
                        "; the plan serves predictions and traces");

  // Everything that can fail comes before the output is written.
  std::string csv;
  if (options.emit == EmitKind::TorchCsv || options.emit == EmitKind::TorchCsvCompute) {
    llvm::Expected<std::string> text =
        writeTorchCsv(*plan, options.emit == EmitKind::TorchCsv ? TorchCsvFormat::ComputeComms
                                                                : TorchCsvFormat::ComputeOnly);
    if (!text)
      return console.fail(llvm::toString(text.takeError()));
    csv = std::move(*text);
  }
  int code = console.writeOutput(options.output, [&](llvm::raw_ostream &os) {
    switch (options.emit) {
    case EmitKind::Plan: {
      // Nothing reads the plan after this: its instructions go as they are written.
      flatbuffers::DetachedBuffer bytes = runtime::planBytes(std::move(compiled.verified->plan));
      os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
      break;
    }
    case EmitKind::Mlir:
      module.print(os);
      os << "\n";
      break;
    case EmitKind::PlanJson: {
      std::ostringstream json;
      runtime::writePlanJson(*plan, json);
      os << json.str();
      break;
    }
    case EmitKind::TorchCsv:
    case EmitKind::TorchCsvCompute:
      os << csv;
      break;
    case EmitKind::Report:
      os << llvm::formatv("{0:2}", reportToJson(analyzeStep(*plan, compiled.verified->simulation)))
         << "\n";
      break;
    case EmitKind::Trace:
      writeChromeTrace(*plan, compiled.verified->simulation, os);
      break;
    case EmitKind::Svg:
      writeGanttSvg(*plan, compiled.verified->simulation, os);
      break;
    case EmitKind::Summary:
      printSummary(*job, module, plan, os);
      if (compiled.search)
        printSearch(compiled.search->first, compiled.search->second, os);
      if (plan)
        printReport(analyzeStep(*plan, compiled.verified->simulation), *plan, os);
      break;
    }
  });
#if !defined(__SANITIZE_ADDRESS__)
  // The process ends right after this (see conduit-compile.cpp): tearing down the IR of a large
  // plan would only cost time. Sanitizer builds tear down so that leaks stay visible.
  (void)compiled.module.release();
  (void)contextOwner.release();
#endif
  return code;
}
