//===- CostModel.h - time of compute and communication ----------*- C++ -*-===//
//
// The single source of predicted durations: layer compute time from the roofline of each of a
// transformer layer's products (analysis/Roofline.h), from FLOPs for other layers, or from a
// measured profile; point-to-point time from latency and link bandwidth; and ring collective
// time over a group's slowest link (over the network, with its members' adapters), for the
// data-parallel and the tensor-parallel groups.
// Formulas and sources are in docs/cost-model.md. Passes use it to partition and to place
// collectives; the simulator uses it for every instruction.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_COSTMODEL_H
#define CONDUIT_ANALYSIS_COSTMODEL_H

#include "analysis/ProfileReader.h"
#include "analysis/Roofline.h"
#include "job/Cluster.h"
#include "job/JobSpec.h"
#include "runtime/plan/Plan.h"

#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// Which of a node's links a transfer or collective uses.
enum class Link { IntraNode, InterNode };

/// Where a ring collective's members sit. Over the network, a ring leaves each of its nodes
/// once per channel, and NCCL spreads the channels over the network adapters of the node's
/// members, each its own (one adapter per GPU on the presets), joined by NVLink inside the
/// node: the ring's bandwidth is then `adapters` times the network's, up to NVLink's, where
/// `adapters` is the fewest members any of its nodes holds.
struct Ring {
  Link link = Link::IntraNode;
  int64_t adapters = 1;
  /// The slower of two rings: the one over the network, or over fewer adapters.
  static Ring slower(Ring a, Ring b);
  /// What no ring is slower than, to start the search for the slowest of several:
  /// slower(fastest(), r) is r.
  static Ring fastest() { return {Link::IntraNode, std::numeric_limits<int64_t>::max()}; }
};

enum class Collective { AllGather, ReduceScatter, AllReduce };

/// What the cost model is built from; both dialects (passes/CostModelBuilder.h) and the tuner
/// fill it.
struct CostInputs {
  Cluster cluster;
  int64_t pipeline = 1, data = 1;
  /// T, the tensor-parallel ranks of each stage (innermost in the global rank), and whether
  /// they also split norms and residuals along the sequence.
  int64_t tensor = 1;
  bool sequenceParallel = false;
  bool pipelineInner = false;
  /// Activation checkpointing: the backward repeats the whole forward of the layers the mode
  /// recomputes whole (full, blocks: runtime::recomputesWhole of each layer's kind), or what
  /// `recomputeModules` names of each block (selective: runtime::RecomputeModule bits; 0
  /// without selective checkpointing).
  runtime::Checkpointing checkpointing = runtime::Checkpointing::None;
  uint32_t recomputeModules = 0;
  /// Bytes of a parameter in the training dtype (the working copy the optimizer writes back
  /// beside its fp32 master; 4 when the parameters are the master).
  int64_t parameterBytes = 4;
  /// Bytes of each of Adam's two moments (4, or 2 with training.adam_moments "bf16").
  int64_t momentBytes = 4;
  /// How the optimizer's update runs (training.optimizer_kernels).
  OptimizerKernels optimizerKernels = OptimizerKernels::Fused;
  /// Per layer: name (to match a profile), forward and backward FLOPs per sample, the
  /// weight-gradient part of the backward (empty: half), and its kind (empty: custom).
  std::vector<std::string> names;
  std::vector<runtime::LayerKind> kinds;
  std::vector<double> fwdFlops, bwdFlops, bwdWeightFlops;
  /// The transformer the layers came from (the chain embedding, blocks, head): each layer is
  /// then priced product by product on the roofline, on one of T ranks. Without it, a layer
  /// takes its FLOPs (divided by T) at the peak times the efficiency.
  std::optional<TransformerShape> transformer;
};

class CostModel {
public:
  /// Builds the model; reads the cluster's profile file, if any.
  static llvm::Expected<CostModel> build(const CostInputs &inputs);

  int64_t numLayers() const { return static_cast<int64_t>(layers.size()); }
  /// Whether every time of layer `layer` equals layer `layer` − 1's, for any micro-batch: two
  /// blocks of a transformer alike (both with routed experts or both without), priced
  /// without a profile. Loops over layers reuse the previous layer's times there.
  bool repeatsPrevious(int64_t layer) const {
    return layers[layer].repeatsPrevious && profiles.empty();
  }

  /// Time of one layer's forward / backward for a micro-batch of `samples` samples on one
  /// tensor-parallel rank, compute only (the tensor group's collectives are priced apart,
  /// tensorCollectiveTime). The backward includes recomputeTime.
  double forwardTime(int64_t layer, int64_t samples) const;
  double backwardTime(int64_t layer, int64_t samples) const;
  /// What a checkpointed layer's backward recomputes before it: the whole forward where the
  /// mode recomputes the layer whole (CostInputs::checkpointing), else selectiveRecomputeTime
  /// (nothing without selective checkpointing).
  double recomputeTime(int64_t layer, int64_t samples) const;
  /// What a selective recomputation repeats of a block (CostInputs::recomputeModules;
  /// LayerWork::recomputed): from its roofline, or with a profile by the roofline's ratio to
  /// the measured forward. 0 for other layers and for layers priced by FLOPs alone.
  double selectiveRecomputeTime(int64_t layer, int64_t samples) const;
  /// The two halves of a split backward: the input gradient (with the recomputed forward
  /// when checkpointed: I needs the activations) and the weight gradient. Each pays its own
  /// launch overhead. A profile's measured halves are used when it has them, else its
  /// backward is divided in the ratio of the layer's FLOPs.
  double inputGradientTime(int64_t layer, int64_t samples) const;
  double weightGradientTime(int64_t layer, int64_t samples) const;
  /// The same for layers [first, end): one compute instruction, which with a profile that
  /// measured it also pays its kind's overhead beyond its layers' times.
  double stageForwardTime(int64_t first, int64_t end, int64_t samples) const;
  double stageBackwardTime(int64_t first, int64_t end, int64_t samples) const;
  double stageInputGradientTime(int64_t first, int64_t end, int64_t samples) const;
  double stageWeightGradientTime(int64_t first, int64_t end, int64_t samples) const;
  /// The four times above for each micro-batch of layers [first, end), the batch cut at
  /// `boundaries` (samples, from 0). Each run of equal micro-batches is priced once: equal
  /// cuts are the rule, and a GEMM's price by shape is not free.
  struct MicrobatchTimes {
    std::vector<double> forward, backward, input, weight;
  };
  MicrobatchTimes stageMicrobatchTimes(int64_t first, int64_t end,
                                       const std::vector<int64_t> &boundaries) const;
  /// One optimizer step on `params` parameters: measured per parameter when the profile has
  /// it (scaled by the FLOP ratio when it measured the other optimizer), else the roofline of
  /// Adam's 10 or SGD's 2 FLOP per parameter at the compute rate and the bytes it reads and
  /// writes per parameter (optimizerBytesPerParam) at the memory bandwidth, where the cluster
  /// states one.
  double optimizerStepTime(bool adam, int64_t params) const;
  /// One replica's optimizer step over `params` parameters: its ⌈params / replicas⌉ share
  /// when the sharding divides the optimizer state over the replicas, else all of them. Of
  /// them, `experts` (routed experts apart, runtime::Plan::expertsApart) are divided over
  /// their `expertReplicas` (the expert-data group) instead.
  double replicaOptimizerStepTime(bool adam, int64_t params, int64_t replicas, bool sharded,
                                  int64_t experts = 0, int64_t expertReplicas = 1) const;
  /// The bytes one optimizer update moves per parameter. Fused, one kernel streams each array
  /// once: the fp32 gradient read, Adam's two moments (of momentBytes each) read and written,
  /// the fp32 master (or fp32 parameter) read and written, and with 16-bit parameters the
  /// working copy written. Run as separate operations (foreach, per tensor), each reads its
  /// operands and writes its result, and the working copy is a cast of its
  /// own that reads the master again.
  static int64_t optimizerBytesPerParam(bool adam, int64_t parameterBytes, int64_t momentBytes = 4,
                                        OptimizerKernels kernels = OptimizerKernels::Fused);

  /// Global rank of (pipeline rank, data-parallel replica, tensor rank): the position of
  /// (pipeline rank, replica) per the rank order, times T, plus the tensor rank (T is
  /// innermost).
  int64_t globalRank(int64_t pipelineRank, int64_t replica, int64_t tensorRank = 0) const;
  /// The link between two global ranks.
  Link linkBetween(int64_t a, int64_t b) const;
  /// The ring of these global ranks (at least one).
  Ring ringOver(const std::vector<int64_t> &members) const;
  /// The slowest of the data-parallel groups' rings of a pipeline rank (one per tensor rank:
  /// the replicas with the same pipeline and tensor rank).
  Ring dataParallelRing(int64_t pipelineRank) const;
  /// The slowest link between two pipeline ranks over all replicas and tensor ranks.
  Link pipelineLink(int64_t fromRank, int64_t toRank) const;
  /// The slowest of the tensor groups' rings: intra-node when every group lies in one node
  /// (T divides gpus_per_node, or all ranks fit one node).
  Ring tensorRing() const { return tensorGroupRing; }

  /// latency + bytes / bandwidth. Inside a node, a profile's measured transport replaces the
  /// cluster's latency and bandwidth when it has one (here and in the collectives below).
  double transferTime(int64_t bytes, Link link) const;
  /// Ring algorithm over `members` ranks: (n-1) steps of bytes/n each for all-gather (bytes =
  /// the gathered size) and reduce-scatter (bytes = the input size), twice that for all-reduce;
  /// each step pays the latency, at ringBandwidth.
  double collectiveTime(Collective kind, int64_t bytes, int64_t members, Ring ring) const;
  /// A collective of the tensor group on tensorRing(): `bytes` is the whole (unsharded)
  /// buffer; all-reduce 2(T-1) latencies + 2(T-1)/T · bytes / bandwidth, all-gather and
  /// reduce-scatter half that. 0 when T = 1.
  double tensorCollectiveTime(Collective kind, int64_t bytes) const;
  /// An all-to-all among `members` ranks over `link` in which each rank sends `bytes` (the
  /// part for itself, 1/members of it, stays): latency + bytes (n-1)/n / bandwidth. 0 for one
  /// member.
  double allToAllTime(int64_t bytes, int64_t members, Link link) const;

  double bandwidth(Link link) const;
  /// A ring's bandwidth: its link's, times its adapters over the network up to the intra-node
  /// bandwidth (the link's alone for one adapter).
  double ringBandwidth(Ring ring) const;
  double latency(Link link) const;
  /// Whether the runtime a profile measured moves messages only inside its own calls to the
  /// transport, which it makes between computes (the CPU backend): a transfer then completes
  /// no earlier than the end of the compute its receiver runs at that time (Simulator.h).
  bool progressBetweenComputes() const { return hostProgress; }
  /// The device's streaming multiprocessors (the preset's DeviceKernels); 0: not known.
  int64_t deviceSms() const { return roofline.kernels.sms; }
  /// Whether computes run slower beside a collective (kCollectiveOverlapSlowdown in
  /// PlanCosts.h): on a device whose kernels the preset describes, with computes priced by the
  /// model. A measured profile's times are what its own run measured.
  bool slowsBesideCollectives() const { return roofline.kernels.sms > 0 && profiles.empty(); }
  /// GPUs per node (cluster.gpus_per_node).
  int64_t nodeSize() const { return gpusPerNode; }
  int64_t dataParallelSize() const { return data; }
  int64_t tensorSize() const { return tensor; }
  bool sequenceParallel() const { return sequenceParallelOn; }

private:
  struct Layer {
    double fwdFlops, bwdFlops, wgradFlops;
    /// The layer's products and traffic on one tensor rank, for a transformer.
    std::optional<LayerWork> work;
    bool repeatsPrevious = false; ///< the same work and FLOPs as the layer before it
    bool recomputedWhole = false; ///< runtime::recomputesWhole under the job's checkpointing
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
  bool hostProgress = false; ///< profiled on the CPU backend
  /// A profile's measured time of a compute instruction beyond its layers', per kind
  /// (ProfileReader.h), added once per stage and micro-batch; and its measured transport.
  std::array<std::optional<double>, 4> instructionOverheadS;
  std::optional<double> measuredLatencyS, measuredBandwidth;
  /// `time` plus the measured overhead of instruction kind `kind`, if any.
  double withOverhead(double time, size_t kind) const;
  enum class Pass { Forward, Input, Weight };
  /// The analytic time of one pass (the forward with its attention core), without the launch
  /// overhead: the roofline for a transformer, FLOPs / T at the compute rate otherwise.
  double analyticTime(int64_t layer, Pass pass, int64_t samples) const;

  double flopRate = 1;
  /// The element-wise kernels' bytes/s (DeviceKernels::streamShare of the memory bandwidth),
  /// at which the optimizer step streams its state; 0: not stated, the step priced by its FLOPs.
  double memoryBandwidth = 0;
  int64_t parameterBytes = 4, momentBytes = 4;
  OptimizerKernels optimizerKernels = OptimizerKernels::Fused;
  Roofline roofline;
  double launchOverheadS = 0;
  double latencyS = 0;
  double intraBandwidth = 1, interBandwidth = 1;
  int64_t gpusPerNode = 1;
  int64_t pipeline = 1, data = 1, tensor = 1;
  bool sequenceParallelOn = false;
  Ring tensorGroupRing;
  std::vector<Ring> dataParallelRings; // [pipeline rank]
  bool pipelineInner = false;
};

} // namespace conduit

#endif // CONDUIT_ANALYSIS_COSTMODEL_H
