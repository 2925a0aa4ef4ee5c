//===- TorchCsvWriter.cpp - plans as PyTorch CSV action lists -------------===//

#include "compiler/TorchCsvWriter.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace conduit;
using runtime::Instruction;
using runtime::Op;

llvm::Expected<std::string> conduit::writeTorchCsv(const runtime::Plan &plan,
                                                   TorchCsvFormat format) {
  for (const runtime::Stage &stage : plan.stages)
    if (stage.samples != plan.stages.front().samples)
      return llvm::createStringError(
          "PyTorch's action lists number micro-batches globally and cannot express stages "
          "that cut the batch differently");
  const bool comms = format == TorchCsvFormat::ComputeComms;
  if (comms && plan.config.data > 1 &&
      plan.config.gradientReduction == runtime::GradientReduction::Run)
    return llvm::createStringError(
        "PyTorch's action lists reduce a stage's gradients once per step (REDUCE_GRAD after its "
        "last backward) and cannot express parallelism.gradient_reduction \"run\"; write the "
        "compute-only form (--emit=torch-csv-compute) or compile with gradient_reduction "
        "\"step\"");
  const bool fsdp = plan.config.sharding == runtime::Sharding::Full && plan.config.data > 1;
  std::string out;
  for (const runtime::RankProgram &rank : plan.ranks) {
    const std::vector<Instruction> &program = rank.instructions;
    // The last whole backward or weight gradient of each stage, where PyTorch puts
    // REDUCE_GRAD.
    std::map<int32_t, size_t> lastBackward;
    for (size_t i = 0; i < program.size(); ++i)
      if (program[i].op == Op::Backward || program[i].op == Op::BackwardWeight)
        lastBackward[program[i].stage] = i;
    auto computeCell = [](const Instruction &x) {
      const char *kind = x.op == Op::Forward         ? "F"
                         : x.op == Op::Backward      ? "B"
                         : x.op == Op::BackwardInput ? "I"
                                                     : "W";
      return std::to_string(x.stage) + kind + std::to_string(x.microbatch);
    };
    auto transferCell = [](const Instruction &x) {
      bool activation = x.kind == runtime::Transfer::Activation;
      const char *kind = x.op == Op::Send ? (activation ? "SEND_F" : "SEND_B")
                                          : (activation ? "RECV_F" : "RECV_B");
      return std::to_string(x.stage) + kind + std::to_string(x.microbatch);
    };
    std::vector<std::string> cells;
    size_t pairFirst = program.size(), pairSecond = program.size(); // an open pair
    // Whether y sends the output of compute instruction c.
    auto sends = [](const Instruction &y, const Instruction &c) {
      return y.op == Op::Send && y.stage == c.stage && y.microbatch == c.microbatch &&
             (y.kind == runtime::Transfer::Activation) == (c.op == Op::Forward);
    };
    // PyTorch lowers a pair as its receives, the pair, then the sends of its two actions in the
    // pair's order; the plan may post receives for later steps among those sends. The sends
    // written so, out of the plan's order:
    std::vector<bool> written(program.size(), false);
    auto writePairSends = [&](size_t first, size_t second) {
      for (size_t of : {first, second})
        for (size_t k = first + 1; k < program.size() && (k <= second || !program[k].isCompute());
             ++k)
          if (sends(program[k], program[of])) {
            cells.push_back(transferCell(program[k]));
            written[k] = true;
          }
    };
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction &x = program[i];
      std::string s = std::to_string(x.stage);
      if (x.isCompute()) {
        if (i == pairSecond) {
          pairSecond = program.size();
          if (comms && lastBackward[x.stage] == i && plan.config.data > 1)
            cells.push_back(s + "REDUCE_GRAD");
          if (comms)
            writePairSends(pairFirst, i);
          continue;
        } else if (x.flags == Instruction::kPaired) {
          // One cell for the pair, where its forward starts. What the plan orders between the
          // two (receives for the backward) is written before it, but for the forward's send.
          size_t second = i + 1;
          while (!program[second].isCompute())
            ++second;
          for (size_t k = i + 1; k < second; ++k)
            if (comms && program[k].isTransfer() && !sends(program[k], x))
              cells.push_back(transferCell(program[k]));
          cells.push_back("(" + computeCell(x) + ";" + computeCell(program[second]) +
                          ")OVERLAP_F_B");
          pairFirst = i;
          pairSecond = second;
          continue;
        } else {
          cells.push_back(computeCell(x));
        }
        if (comms && lastBackward[x.stage] == i && plan.config.data > 1)
          cells.push_back(s + "REDUCE_GRAD");
        continue;
      }
      if (!comms || written[i] || (pairSecond < program.size() && x.isTransfer()))
        continue; // compute-only, or written before or after its pair
      switch (x.op) {
      case Op::Send:
      case Op::Recv:
        cells.push_back(transferCell(x));
        break;
      case Op::AllGather:
        if (fsdp) // the all-gathers of optimizer and gradient sharding have no PyTorch action
          cells.push_back(s + "UNSHARD");
        break;
      case Op::Free:
        cells.push_back(s + "RESHARD");
        break;
      default: // reductions are written at the last backward; optimizer steps, events and
               // tie_grads (PyTorch leaves tied weights to the model code): none
        break;
      }
    }
    out += llvm::join(cells, ",") + "\n";
  }
  return out;
}
