//===- ProfileKeys.h - the keys of a measured profile -----------*- C++ -*-===//
//
// `conduit-run --profile` writes a profile (runtime/session/Profile.cpp) that the compiler's cost
// model reads back as `cluster.profile`. Both sides name its keys through these constants,
// so that the writer and the reader cannot drift apart; the format is described in
// runtime/session/Profile.h and docs/cost-model.md. Header-only and IR-free: the reader includes it
// without linking the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_PROFILEKEYS_H
#define CONDUIT_RUNTIME_PLAN_PROFILEKEYS_H

namespace conduit::runtime {

/// The format marker and its version.
inline constexpr char kProfileFormat[] = "conduit_profile";
inline constexpr int kProfileVersion = 1;
/// "cpu" or "cuda".
inline constexpr char kProfileBackend[] = "backend";
/// The plan's job name.
inline constexpr char kProfileJob[] = "job";
/// "adam" or "sgd", and the measured seconds per parameter of one optimizer step (both
/// absent when no optimizer step was timed).
inline constexpr char kProfileOptimizer[] = "optimizer";
inline constexpr char kProfileOptimizerSPerParam[] = "optimizer_s_per_param";
/// The layers of the plan, in order.
inline constexpr char kProfileLayers[] = "layers";
/// Per layer: its name, the micro-batch sizes measured and, for each, the mean forward and
/// backward seconds (where a layer's backwards ran split only, the sum of its halves' means).
inline constexpr char kProfileLayerName[] = "name";
inline constexpr char kProfileLayerSamples[] = "samples";
inline constexpr char kProfileLayerForwardS[] = "forward_s";
inline constexpr char kProfileLayerBackwardS[] = "backward_s";
/// Per layer whose backward ran split (backward_input and backward_weight instructions) at
/// every size measured: the mean seconds of each half, input gradient (I) and weight
/// gradient (W). Absent otherwise.
inline constexpr char kProfileLayerBackwardInputS[] = "backward_input_s";
inline constexpr char kProfileLayerBackwardWeightS[] = "backward_weight_s";
/// What the executor's compute instructions cost beyond their layers' times (optional): an
/// object of the mean seconds per instruction of each kind that ran, keyed by the names below
/// (forward, whole backward, its input and weight halves).
inline constexpr char kProfileInstructionOverhead[] = "instruction_overhead_s";
inline constexpr const char *kProfileInstructionKinds[] = {"forward", "backward", "backward_input",
                                                           "backward_weight"};
/// The transport between two ranks of the run (optional): an object of the latency and the
/// bandwidth a ping-pong through the runtime's transport measured, one way.
inline constexpr char kProfileTransport[] = "transport";
inline constexpr char kProfileTransportLatencyS[] = "latency_s";
inline constexpr char kProfileTransportBandwidth[] = "bandwidth_bytes_per_s";

/// With expert parallelism (optional): the most routed tokens an expert rank took in one piece
/// (a sample's, or a micro-batch's) over the balanced share of its group, over the whole run,
/// the expert-group size E of the run and how many pieces it counted (each member its own).
/// The compiler takes `peak` as `model.moe.imbalance` where a job with the same E leaves that
/// unset.
inline constexpr char kProfileRoutedLoad[] = "routed_load";
inline constexpr char kProfileRoutedLoadExpert[] = "expert";
inline constexpr char kProfileRoutedLoadPeak[] = "peak";
inline constexpr char kProfileRoutedLoadPieces[] = "pieces";

/// Per global rank of the run, in rank order (optional; the cost model does not use it): the
/// memory it held at its peak over the training steps, beside the plan's prediction.
inline constexpr char kProfileMemory[] = "memory";
/// The global rank and its pipeline rank (whose program states the prediction).
inline constexpr char kProfileMemoryRank[] = "rank";
inline constexpr char kProfileMemoryPipelineRank[] = "pipeline_rank";
/// The plan's predicted peak bytes of the pipeline rank (0: the plan does not say).
inline constexpr char kProfileMemoryPredicted[] = "predicted_bytes";
/// The measured peak, counted as the memory plan counts (gradient accumulators at its
/// gradient width; docs/runtime.md), and the peak of the bytes actually allocated.
inline constexpr char kProfileMemoryPeak[] = "peak_bytes";
inline constexpr char kProfileMemoryHeldPeak[] = "held_peak_bytes";
/// An object of the counted bytes of each category at the peak, keyed by the names below
/// (the memory plan's categories, in its order).
inline constexpr char kProfileMemoryAtPeak[] = "at_peak";
inline constexpr const char *kProfileMemoryCategories[] = {
    "parameters", "gathered_parameters", "gradients",    "optimizer_state",       "activations",
    "working",    "receive_buffers",     "send_buffers", "weight_gradient_inputs"};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_PROFILEKEYS_H
