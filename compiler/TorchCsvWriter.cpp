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
  const bool fsdp = plan.config.sharding == runtime::Sharding::Full && plan.config.data > 1;
  std::string out;
  for (const runtime::RankProgram &rank : plan.ranks) {
    // The last backward of each stage, where PyTorch puts REDUCE_GRAD.
    std::map<int32_t, size_t> lastBackward;
    for (size_t i = 0; i < rank.instructions.size(); ++i)
      if (rank.instructions[i].op == Op::Backward)
        lastBackward[rank.instructions[i].stage] = i;
    std::vector<std::string> cells;
    for (size_t i = 0; i < rank.instructions.size(); ++i) {
      const Instruction &x = rank.instructions[i];
      std::string s = std::to_string(x.stage), m = std::to_string(x.microbatch);
      bool activation = x.kind == runtime::Transfer::Activation;
      if (!comms && x.op != Op::Forward && x.op != Op::Backward)
        continue;
      switch (x.op) {
      case Op::Forward:
        cells.push_back(s + "F" + m);
        break;
      case Op::Backward:
        cells.push_back(s + "B" + m);
        if (comms && lastBackward[x.stage] == i && plan.config.data > 1)
          cells.push_back(s + "REDUCE_GRAD");
        break;
      case Op::Send:
        cells.push_back(s + (activation ? "SEND_F" : "SEND_B") + m);
        break;
      case Op::Recv:
        cells.push_back(s + (activation ? "RECV_F" : "RECV_B") + m);
        break;
      case Op::AllGather:
        if (fsdp) // the all-gathers of optimizer and gradient sharding have no PyTorch action
          cells.push_back(s + "UNSHARD");
        break;
      case Op::Free:
        cells.push_back(s + "RESHARD");
        break;
      default: // reductions are written at the last backward; optimizer steps, events: none
        break;
      }
    }
    out += llvm::join(cells, ",") + "\n";
  }
  return out;
}
