//===- CostModel.h - time of compute and communication ----------*- C++ -*-===//
//
// The single source of predicted durations: layer compute time from FLOPs (or from a measured
// profile), point-to-point time from latency and link bandwidth, and ring collective time over
// a group's slowest link. Formulas and sources are in docs/cost-model.md. Passes use it to
// partition and to place collectives; the simulator uses it for every instruction.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_COSTMODEL_H
#define CONDUIT_ANALYSIS_COSTMODEL_H

#include "analysis/Cluster.h"
#include "analysis/ProfileReader.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// Which of a node's links a transfer or collective uses.
enum class Link { IntraNode, InterNode };

enum class Collective { AllGather, ReduceScatter, AllReduce };

/// What the cost model is built from; both dialects (passes/CostModelBuilder.h) and the tuner
/// fill it.
struct CostInputs {
  Cluster cluster;
  int64_t pipeline = 1, data = 1;
  bool pipelineInner = false;
  bool recompute = false;
  /// Per layer: name (to match a profile), forward and backward FLOPs per sample, and the
  /// weight-gradient part of the backward (empty: half).
  std::vector<std::string> names;
  std::vector<double> fwdFlops, bwdFlops, bwdWeightFlops;
};

class CostModel {
public:
  /// Builds the model; reads the cluster's profile file, if any.
  static llvm::Expected<CostModel> build(const CostInputs &inputs);

  int64_t numLayers() const { return static_cast<int64_t>(layers.size()); }

  /// Time of one layer's forward / backward for a micro-batch of `samples` samples. The
  /// backward includes the recomputed forward when activations are checkpointed.
  double forwardTime(int64_t layer, int64_t samples) const;
  double backwardTime(int64_t layer, int64_t samples) const;
  /// The two halves of a split backward: the input gradient (with the recomputed forward
  /// when checkpointed: I needs the activations) and the weight gradient. Each pays its own
  /// launch overhead. A profile's measured halves are used when it has them, else its
  /// backward is divided in the ratio of the layer's FLOPs.
  double inputGradientTime(int64_t layer, int64_t samples) const;
  double weightGradientTime(int64_t layer, int64_t samples) const;
  /// The same for layers [first, end).
  double stageForwardTime(int64_t first, int64_t end, int64_t samples) const;
  double stageBackwardTime(int64_t first, int64_t end, int64_t samples) const;
  double stageInputGradientTime(int64_t first, int64_t end, int64_t samples) const;
  double stageWeightGradientTime(int64_t first, int64_t end, int64_t samples) const;
  /// One optimizer step on `params` parameters: measured per parameter when the profile has
  /// it (scaled by the FLOP ratio when it measured the other optimizer), else Adam's 10 or
  /// SGD's 2 FLOP per parameter at the compute rate.
  double optimizerStepTime(bool adam, int64_t params) const;

  /// Global rank of (pipeline rank, data-parallel replica), per the rank order.
  int64_t globalRank(int64_t pipelineRank, int64_t replica) const;
  /// The link between two global ranks.
  Link linkBetween(int64_t a, int64_t b) const;
  /// The slowest link inside the data-parallel group of a pipeline rank.
  Link dataParallelLink(int64_t pipelineRank) const;
  /// The slowest link between two pipeline ranks over all replicas.
  Link pipelineLink(int64_t fromRank, int64_t toRank) const;

  /// latency + bytes / bandwidth.
  double transferTime(int64_t bytes, Link link) const;
  /// Ring algorithm over `members` ranks: (n-1) steps of bytes/n each for all-gather (bytes =
  /// the gathered size) and reduce-scatter (bytes = the input size), twice that for all-reduce;
  /// each step pays the latency.
  double collectiveTime(Collective kind, int64_t bytes, int64_t members, Link link) const;

  double bandwidth(Link link) const;
  double latency() const { return latencyS; }
  int64_t dataParallelSize() const { return data; }

private:
  struct Layer {
    double fwdFlops, bwdFlops, wgradFlops;
  };
  /// The share of layer l's backward that computes weight gradients.
  double weightShare(int64_t layer) const;
  /// `time` summed over layers [first, end).
  double stageSum(int64_t first, int64_t end, int64_t samples,
                  double (CostModel::*time)(int64_t, int64_t) const) const;

  std::vector<Layer> layers;
  std::vector<LayerProfile> profiles;
  std::optional<double> optimizerSPerParam;
  bool profiledAdam = true;
  double flopRate = 1;
  double launchOverheadS = 0;
  double latencyS = 0;
  double intraBandwidth = 1, interBandwidth = 1;
  int64_t gpusPerNode = 1;
  int64_t pipeline = 1, data = 1;
  bool pipelineInner = false;
  bool recompute = false;
};

} // namespace conduit

#endif // CONDUIT_ANALYSIS_COSTMODEL_H
