//===- Driver.cpp - the conduit-compile driver ----------------------------===//

#include "compiler/Driver.h"

#include "compiler/ImportJob.h"
#include "compiler/JobFile.h"
#include "compiler/Registration.h"
#include "compiler/Summary.h"
#include "dialects/pipe/PipeOps.h"
#include "passes/Pipeline.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace conduit;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Summary, Mlir };

struct Options {
  cl::OptionCategory category{"conduit-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<job.json>"), cl::Required,
                             cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to print on standard output"), cl::init(EmitKind::Summary),
      cl::values(clEnumValN(EmitKind::Summary, "summary", "the readable report (default)"),
                 clEnumValN(EmitKind::Mlir, "mlir", "the pipe IR at the end of the pipeline")),
      cl::cat(category)};
  cl::opt<pipe::Phase> until{
      "until", cl::desc("Stop once the model reaches this phase"),
      cl::init(PipelineOptions().stopAfter),
      cl::values(clEnumValN(pipe::Phase::Model, "model", "the imported model"),
                 clEnumValN(pipe::Phase::Partitioned, "partitioned", "after partitioning"),
                 clEnumValN(pipe::Phase::Placed, "placed", "after placement"),
                 clEnumValN(pipe::Phase::Split, "split", "after splitting micro-batches"),
                 clEnumValN(pipe::Phase::Scheduled, "scheduled", "after scheduling")),
      cl::cat(category)};
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

} // namespace

int conduit::runCompiler(int argc, char **argv) {
  Options options;
  mlir::registerPassManagerCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  if (!cl::ParseCommandLineOptions(argc, argv, "Conduit: compile a training job into a plan\n",
                                   &llvm::errs()))
    return 2;

  Diagnostics diag(options.input);
  std::optional<Job> job = readJobFile(options.input, diag);
  if (!job)
    return fail(diag.getError()->str());

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  UserDiagnostics handler(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = importJob(*job, context);
  if (mlir::failed(mlir::verify(*module)))
    return fail("internal error: the imported IR does not verify");

  if (options.until > pipe::Phase::Model) {
    mlir::PassManager pm(&context);
    if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
      return 2;
    PipelineOptions pipeline;
    pipeline.stopAfter = options.until;
    buildConduitPipeline(pm, pipeline);
    if (mlir::failed(pm.run(*module)))
      return 1;
  }

  switch (options.emit) {
  case EmitKind::Mlir:
    module->print(llvm::outs());
    llvm::outs() << "\n";
    break;
  case EmitKind::Summary:
    printSummary(*job, *module, llvm::outs());
    break;
  }
  return 0;
}
