// RUN: conduit-opt %s -split-input-file --conduit-place-collectives | FileCheck %s

// Full sharding, breadth-first, P = 2, V = 4, M = 2, window 3: the unshard/reshard order of
// PyTorch's lowering for the same schedule (schedules reference §4.3), five all-gathers on
// rank 0, plus one reduce-scatter per stage after its last backward.
// CHECK-LABEL: pipe.model
// CHECK: pipe.rank 0 {
// CHECK: pipe.unshard stage 0 bytes 400
// CHECK: pipe.unshard stage 2 bytes 400
// CHECK: pipe.unshard stage 4 bytes 400
// CHECK: pipe.forward stage 0 mb 0
// CHECK: pipe.forward stage 0 mb 1
// CHECK: pipe.reshard stage 0
// CHECK: pipe.unshard stage 6 bytes 400
// CHECK: pipe.forward stage 2 mb 0
// CHECK: pipe.forward stage 2 mb 1
// CHECK: pipe.forward stage 4 mb 0
// CHECK: pipe.forward stage 4 mb 1
// CHECK: pipe.forward stage 6 mb 0
// CHECK: pipe.forward stage 6 mb 1
// CHECK: pipe.backward stage 6 mb 1
// CHECK: pipe.backward stage 6 mb 0
// CHECK: pipe.reshard stage 6
// CHECK: pipe.unshard stage 0 bytes 400
// CHECK: pipe.reduce_grad stage 6 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 4 mb 1
// CHECK: pipe.backward stage 4 mb 0
// CHECK: pipe.reshard stage 4
// CHECK: pipe.reduce_grad stage 4 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 2 mb 1
// CHECK: pipe.backward stage 2 mb 0
// CHECK: pipe.reshard stage 2
// CHECK: pipe.reduce_grad stage 2 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 0
// CHECK: pipe.reshard stage 0
// CHECK: pipe.reduce_grad stage 0 bytes 400 reduce_scatter
// CHECK: pipe.optimizer_step stage 6
// CHECK: pipe.optimizer_step stage 4
// CHECK: pipe.optimizer_step stage 2
// CHECK: pipe.optimizer_step stage 0
// CHECK: }
// CHECK: pipe.rank 1 {
// CHECK: pipe.unshard stage 1 bytes 400
// CHECK: pipe.unshard stage 3 bytes 400
// CHECK: pipe.unshard stage 5 bytes 400
// CHECK: pipe.forward stage 1 mb 0
// CHECK: pipe.forward stage 1 mb 1
// CHECK: pipe.reshard stage 1
// CHECK: pipe.unshard stage 7 bytes 400
// CHECK: pipe.forward stage 3 mb 0
// CHECK: pipe.forward stage 3 mb 1
// CHECK: pipe.forward stage 5 mb 0
// CHECK: pipe.forward stage 5 mb 1
// CHECK: pipe.forward stage 7 mb 0
// CHECK: pipe.forward stage 7 mb 1
// CHECK: pipe.backward stage 7 mb 1
// CHECK: pipe.backward stage 7 mb 0
// CHECK: pipe.reshard stage 7
// CHECK: pipe.unshard stage 1 bytes 400
// CHECK: pipe.reduce_grad stage 7 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 5 mb 1
// CHECK: pipe.backward stage 5 mb 0
// CHECK: pipe.reshard stage 5
// CHECK: pipe.reduce_grad stage 5 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 3 mb 1
// CHECK: pipe.backward stage 3 mb 0
// CHECK: pipe.reshard stage 3
// CHECK: pipe.reduce_grad stage 3 bytes 400 reduce_scatter
// CHECK: pipe.backward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 0
// CHECK: pipe.reshard stage 1
// CHECK: pipe.reduce_grad stage 1 bytes 400 reduce_scatter
// CHECK: pipe.optimizer_step stage 7
// CHECK: pipe.optimizer_step stage 5
// CHECK: pipe.optimizer_step stage 3
// CHECK: pipe.optimizer_step stage 1
// CHECK: }
// CHECK-NOT: pipe.unshard

pipe.model @golden phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 4, schedule = "breadth-first", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 3, rank_order = "data-inner">, source = "golden.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l4" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l5" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l6" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l7" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.stage 2 layers [2, 3) rank 0 samples [0, 1, 2]
  pipe.stage 3 layers [3, 4) rank 1 samples [0, 1, 2]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2]
  pipe.stage 6 layers [6, 7) rank 0 samples [0, 1, 2]
  pipe.stage 7 layers [7, 8) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 batch 0
    pipe.recv activation stage 2 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 batch 0
    pipe.forward stage 2 mb 0
    pipe.recv activation stage 2 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 batch 1
    pipe.send activation stage 2 mb 0 to 1 stage 3 mb 0 samples [0, 1) bytes 4 batch 1
    pipe.forward stage 2 mb 1
    pipe.send activation stage 2 mb 1 to 1 stage 3 mb 1 samples [1, 2) bytes 4 batch 2
    pipe.recv activation stage 4 mb 0 from 1 stage 3 mb 0 samples [0, 1) bytes 4 batch 2
    pipe.forward stage 4 mb 0
    pipe.recv activation stage 4 mb 1 from 1 stage 3 mb 1 samples [1, 2) bytes 4 batch 3
    pipe.send activation stage 4 mb 0 to 1 stage 5 mb 0 samples [0, 1) bytes 4 batch 3
    pipe.forward stage 4 mb 1
    pipe.send activation stage 4 mb 1 to 1 stage 5 mb 1 samples [1, 2) bytes 4 batch 4
    pipe.recv activation stage 6 mb 0 from 1 stage 5 mb 0 samples [0, 1) bytes 4 batch 4
    pipe.forward stage 6 mb 0
    pipe.recv activation stage 6 mb 1 from 1 stage 5 mb 1 samples [1, 2) bytes 4 batch 5
    pipe.send activation stage 6 mb 0 to 1 stage 7 mb 0 samples [0, 1) bytes 4 batch 5
    pipe.forward stage 6 mb 1
    pipe.send activation stage 6 mb 1 to 1 stage 7 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 6 mb 1 from 1 stage 7 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 6 mb 1
    pipe.recv gradient stage 6 mb 0 from 1 stage 7 mb 0 samples [0, 1) bytes 4 batch 6
    pipe.send gradient stage 6 mb 1 to 1 stage 5 mb 1 samples [1, 2) bytes 4 batch 6
    pipe.backward stage 6 mb 0
    pipe.send gradient stage 6 mb 0 to 1 stage 5 mb 0 samples [0, 1) bytes 4 batch 7
    pipe.recv gradient stage 4 mb 1 from 1 stage 5 mb 1 samples [1, 2) bytes 4 batch 7
    pipe.backward stage 4 mb 1
    pipe.recv gradient stage 4 mb 0 from 1 stage 5 mb 0 samples [0, 1) bytes 4 batch 8
    pipe.send gradient stage 4 mb 1 to 1 stage 3 mb 1 samples [1, 2) bytes 4 batch 8
    pipe.backward stage 4 mb 0
    pipe.send gradient stage 4 mb 0 to 1 stage 3 mb 0 samples [0, 1) bytes 4 batch 9
    pipe.recv gradient stage 2 mb 1 from 1 stage 3 mb 1 samples [1, 2) bytes 4 batch 9
    pipe.backward stage 2 mb 1
    pipe.recv gradient stage 2 mb 0 from 1 stage 3 mb 0 samples [0, 1) bytes 4 batch 10
    pipe.send gradient stage 2 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 batch 10
    pipe.backward stage 2 mb 0
    pipe.send gradient stage 2 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 batch 11
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 batch 11
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 batch 0
    pipe.send activation stage 1 mb 0 to 0 stage 2 mb 0 samples [0, 1) bytes 4 batch 0
    pipe.forward stage 1 mb 1
    pipe.send activation stage 1 mb 1 to 0 stage 2 mb 1 samples [1, 2) bytes 4 batch 1
    pipe.recv activation stage 3 mb 0 from 0 stage 2 mb 0 samples [0, 1) bytes 4 batch 1
    pipe.forward stage 3 mb 0
    pipe.recv activation stage 3 mb 1 from 0 stage 2 mb 1 samples [1, 2) bytes 4 batch 2
    pipe.send activation stage 3 mb 0 to 0 stage 4 mb 0 samples [0, 1) bytes 4 batch 2
    pipe.forward stage 3 mb 1
    pipe.send activation stage 3 mb 1 to 0 stage 4 mb 1 samples [1, 2) bytes 4 batch 3
    pipe.recv activation stage 5 mb 0 from 0 stage 4 mb 0 samples [0, 1) bytes 4 batch 3
    pipe.forward stage 5 mb 0
    pipe.recv activation stage 5 mb 1 from 0 stage 4 mb 1 samples [1, 2) bytes 4 batch 4
    pipe.send activation stage 5 mb 0 to 0 stage 6 mb 0 samples [0, 1) bytes 4 batch 4
    pipe.forward stage 5 mb 1
    pipe.send activation stage 5 mb 1 to 0 stage 6 mb 1 samples [1, 2) bytes 4 batch 5
    pipe.recv activation stage 7 mb 0 from 0 stage 6 mb 0 samples [0, 1) bytes 4 batch 5
    pipe.forward stage 7 mb 0
    pipe.recv activation stage 7 mb 1 from 0 stage 6 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 7 mb 1
    pipe.backward stage 7 mb 1
    pipe.send gradient stage 7 mb 1 to 0 stage 6 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 7 mb 0
    pipe.send gradient stage 7 mb 0 to 0 stage 6 mb 0 samples [0, 1) bytes 4 batch 6
    pipe.recv gradient stage 5 mb 1 from 0 stage 6 mb 1 samples [1, 2) bytes 4 batch 6
    pipe.backward stage 5 mb 1
    pipe.recv gradient stage 5 mb 0 from 0 stage 6 mb 0 samples [0, 1) bytes 4 batch 7
    pipe.send gradient stage 5 mb 1 to 0 stage 4 mb 1 samples [1, 2) bytes 4 batch 7
    pipe.backward stage 5 mb 0
    pipe.send gradient stage 5 mb 0 to 0 stage 4 mb 0 samples [0, 1) bytes 4 batch 8
    pipe.recv gradient stage 3 mb 1 from 0 stage 4 mb 1 samples [1, 2) bytes 4 batch 8
    pipe.backward stage 3 mb 1
    pipe.recv gradient stage 3 mb 0 from 0 stage 4 mb 0 samples [0, 1) bytes 4 batch 9
    pipe.send gradient stage 3 mb 1 to 0 stage 2 mb 1 samples [1, 2) bytes 4 batch 9
    pipe.backward stage 3 mb 0
    pipe.send gradient stage 3 mb 0 to 0 stage 2 mb 0 samples [0, 1) bytes 4 batch 10
    pipe.recv gradient stage 1 mb 1 from 0 stage 2 mb 1 samples [1, 2) bytes 4 batch 10
    pipe.backward stage 1 mb 1
    pipe.recv gradient stage 1 mb 0 from 0 stage 2 mb 0 samples [0, 1) bytes 4 batch 11
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 batch 11
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
  }
}

// -----

// No sharding: an all-reduce after each stage's last backward.
// CHECK-LABEL: pipe.model
// CHECK: pipe.rank 0 {
// CHECK: pipe.forward stage 0 mb 0
// CHECK: pipe.forward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 0
// CHECK: pipe.reduce_grad stage 0 bytes 400 all_reduce
// CHECK: pipe.optimizer_step stage 0
// CHECK: }
// CHECK: pipe.rank 1 {
// CHECK: pipe.forward stage 1 mb 0
// CHECK: pipe.forward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 0
// CHECK: pipe.reduce_grad stage 1 bytes 400 all_reduce
// CHECK: pipe.optimizer_step stage 1
// CHECK: }
// CHECK-NOT: pipe.unshard

pipe.model @tiny_none phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny_none.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
  }
}

// -----

// Optimizer sharding: the parameters the previous step updated are gathered before the first
// compute, and the gradients reduce-scattered for the optimizer step on the shard.
// CHECK-LABEL: pipe.model
// CHECK: pipe.rank 0 {
// CHECK-NEXT: pipe.gather_params stage 0 bytes 400
// CHECK-NEXT: pipe.forward stage 0 mb 0
// CHECK: pipe.forward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 0
// CHECK: pipe.reduce_grad stage 0 bytes 400 reduce_scatter
// CHECK-NEXT: pipe.optimizer_step stage 0
// CHECK-NEXT: }
// CHECK: pipe.rank 1 {
// CHECK-NEXT: pipe.gather_params stage 1 bytes 400
// CHECK: pipe.forward stage 1 mb 0
// CHECK: pipe.forward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 0
// CHECK: pipe.reduce_grad stage 1 bytes 400 reduce_scatter
// CHECK: pipe.optimizer_step stage 1
// CHECK-NEXT: }
// CHECK-NOT: pipe.unshard

pipe.model @tiny_optimizer phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "optimizer", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny_optimizer.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
  }
}

// -----

// One replica: no collectives, only the optimizer step.
// CHECK-LABEL: pipe.model
// CHECK: pipe.rank 0 {
// CHECK: pipe.forward stage 0 mb 0
// CHECK: pipe.forward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 1
// CHECK: pipe.backward stage 0 mb 0
// CHECK: pipe.optimizer_step stage 0
// CHECK: }
// CHECK: pipe.rank 1 {
// CHECK: pipe.forward stage 1 mb 0
// CHECK: pipe.forward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 1
// CHECK: pipe.backward stage 1 mb 0
// CHECK: pipe.optimizer_step stage 1
// CHECK: }
// CHECK-NOT: pipe.unshard

pipe.model @tiny_d1 phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny_d1.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
  }
}
