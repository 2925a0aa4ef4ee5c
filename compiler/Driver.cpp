//===- Driver.cpp - the conduit-compile driver ----------------------------===//

#include "compiler/Driver.h"

#include "compiler/ImportJob.h"
#include "compiler/JobFile.h"
#include "compiler/Registration.h"
#include "compiler/Summary.h"
#include "dialects/pipe/PipeOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
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
                 clEnumValN(EmitKind::Mlir, "mlir", "the pipe IR of the imported model")),
      cl::cat(category)};
};

int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "conduit-compile") << message << "\n";
  return 1;
}

} // namespace

int conduit::runCompiler(int argc, char **argv) {
  Options options;
  cl::HideUnrelatedOptions(options.category);
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
  mlir::OwningOpRef<mlir::ModuleOp> module = importJob(*job, context);
  if (mlir::failed(mlir::verify(*module)))
    return fail("internal error: the imported IR does not verify");

  switch (options.emit) {
  case EmitKind::Mlir:
    module->print(llvm::outs());
    llvm::outs() << "\n";
    break;
  case EmitKind::Summary:
    printSummary(*job, llvm::outs());
    break;
  }
  return 0;
}
