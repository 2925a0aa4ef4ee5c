//===- Driver.cpp - the conduit-compile driver ----------------------------===//

#include "compiler/Driver.h"

#include "compiler/ImportJob.h"
#include "compiler/JobFile.h"
#include "compiler/PlanExport.h"
#include "compiler/Registration.h"
#include "compiler/Summary.h"
#include "compiler/TorchCsv.h"
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
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

using namespace conduit;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Summary, Mlir, PlanJson, TorchCsv };

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
                            "PyTorch pipelining compute+comms action lists")),
      cl::cat(category)};
  cl::opt<PipelineStop> until{
      "until", cl::desc("Stop the compilation after this step"), cl::init(PipelineStop::Plan),
      cl::values(clEnumValN(PipelineStop::Model, "model", "the imported model"),
                 clEnumValN(PipelineStop::Partitioned, "partitioned", "stages"),
                 clEnumValN(PipelineStop::Placed, "placed", "placement"),
                 clEnumValN(PipelineStop::Split, "split", "micro-batches"),
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

/// Prints pass diagnostics the way input errors print: "conduit-compile: error: FILE:
/// message", without MLIR's op-name prefix, which means nothing to a user of the driver.
class UserDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  explicit UserDiagnostics(mlir::MLIRContext *context)
      : mlir::ScopedDiagnosticHandler(context, [](mlir::Diagnostic &diag) {
          std::string message = diag.str();
          llvm::StringRef text(message);
          if (text.consume_front("'")) {
            auto [op, rest] = text.split("' op ");
            if (!rest.empty())
              text = rest;
          }
          std::string where;
          if (auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
            where = loc.getFilename().str() + ": ";
          bool error = diag.getSeverity() == mlir::DiagnosticSeverity::Error;
          print(llvm::errs(), error ? llvm::raw_ostream::RED : llvm::raw_ostream::MAGENTA,
                error ? "error" : "warning", where + text.str());
          for (const mlir::Diagnostic &note : diag.getNotes())
            llvm::errs() << "  note: " << note.str() << "\n";
          return mlir::success();
        }) {}
};

/// LLVM's code generator registers --stop-after in the same process-wide option registry, so
/// the driver takes the option out of the command line before parsing and lends LLVM's entry
/// its own description for --help. Returns the arguments without it.
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
  if (cl::Option *option = cl::getRegisteredOptions().lookup("stop-after")) {
    option->setDescription("Stop the compilation after this pass (conduit-schedule, ...)");
    option->setValueStr("pass");
    option->addCategory(category);
    option->setHiddenFlag(cl::NotHidden);
  }
  return rest;
}

plan::ProgramOp findProgram(mlir::ModuleOp module) {
  auto programs = module.getOps<plan::ProgramOp>();
  return programs.empty() ? plan::ProgramOp() : *programs.begin();
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
                         options.emit == EmitKind::TorchCsv;
  if (needsPlan && options.until != PipelineStop::Plan)
    return fail("-o, --emit=plan-json and --emit=torch-csv need the whole pipeline; drop "
                "--until and --stop-after");

  Diagnostics diag(options.input);
  std::optional<Job> job = readJobFile(options.input, diag, options.set);
  if (!job)
    return fail(diag.getError()->str());

  mlir::DialectRegistry registry;
  registerDialects(registry);
  auto contextOwner = std::make_unique<mlir::MLIRContext>(registry);
  mlir::MLIRContext &context = *contextOwner;
  context.printOpOnDiagnostic(false);
  UserDiagnostics handler(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = importJob(*job, context);
  if (mlir::failed(mlir::verify(*module)))
    return fail("internal error: the imported IR does not verify");

  if (options.until > PipelineStop::Model) {
    mlir::PassManager pm(&context);
    // Passes keep their IR valid and conduit-verify-plan proves the result, including every
    // rule the plan dialect's verifiers state; verifying the whole module after every pass
    // would cost more than the passes on large plans. conduit-opt keeps the per-pass
    // verification, and the tests run every pass through it.
    pm.enableVerifier(false);
    if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
      return 2;
    mlir::DefaultTimingManager timing;
    mlir::applyDefaultTimingManagerCLOptions(timing);
    mlir::TimingScope timingScope = timing.getRootScope();
    pm.enableTiming(timingScope);
    PipelineOptions pipeline;
    pipeline.stopAfter = options.until;
    pipeline.importSchedule = options.importCsv;
    buildConduitPipeline(pm, pipeline);
    if (mlir::failed(pm.run(*module)))
      return 1;
  }

  std::optional<runtime::Plan> plan;
  if (plan::ProgramOp program = findProgram(*module))
    plan = exportPlan(program);
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
    module->print(llvm::outs());
    llvm::outs() << "\n";
    break;
  case EmitKind::PlanJson:
    llvm::outs().flush();
    runtime::writePlanJson(*plan, std::cout);
    break;
  case EmitKind::TorchCsv:
    llvm::outs() << csv;
    break;
  case EmitKind::Summary:
    printSummary(*job, *module, llvm::outs());
    break;
  }
#if !defined(__SANITIZE_ADDRESS__)
  // The process ends right after this (see conduit-compile.cpp): tearing down the IR of a large
  // plan would only cost time. Sanitizer builds tear down so that leaks stay visible.
  (void)module.release();
  (void)contextOwner.release();
#endif
  return 0;
}
