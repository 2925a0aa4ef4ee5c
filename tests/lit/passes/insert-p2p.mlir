// RUN: conduit-opt %s -split-input-file --conduit-insert-p2p | FileCheck %s

// GPipe on two ranks: each transfer sits where its data is produced, on both sides.
// CHECK-LABEL: pipe.model
// CHECK-SAME: phase communicating
// CHECK: pipe.rank 0 {
// CHECK-NEXT: pipe.forward stage 0 mb 0
// CHECK-NEXT: pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 0 mb 1
// CHECK-NEXT: pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.backward stage 0 mb 1
// CHECK-NEXT: pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.backward stage 0 mb 0
// CHECK-NEXT: }
// CHECK: pipe.rank 1 {
// CHECK-NEXT: pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 1 mb 0
// CHECK-NEXT: pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.forward stage 1 mb 1
// CHECK-NEXT: pipe.backward stage 1 mb 1
// CHECK-NEXT: pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.backward stage 1 mb 0
// CHECK-NEXT: pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: }

pipe.model @tiny phase scheduled attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.forward stage 0 mb 1
    pipe.backward stage 0 mb 1
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.forward stage 1 mb 0
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.backward stage 1 mb 0
  }
}

// -----

// 1F1B with transfers as long as a compute: the steady-state exchanges of the two
// neighbours become batches on both sides.
// CHECK-LABEL: pipe.model
// CHECK-SAME: phase communicating
// CHECK: pipe.rank 0 {
// CHECK-NEXT: pipe.forward stage 0 mb 0
// CHECK-NEXT: pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 0 mb 1
// CHECK-NEXT: pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.backward stage 0 mb 0
// CHECK-NEXT: pipe.forward stage 0 mb 2
// CHECK-NEXT: pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 batch 0
// CHECK-NEXT: pipe.send activation stage 0 mb 2 to 1 stage 1 mb 2 samples [2, 3) bytes 4 batch 0
// CHECK-NEXT: pipe.backward stage 0 mb 1
// CHECK-NEXT: pipe.forward stage 0 mb 3
// CHECK-NEXT: pipe.send activation stage 0 mb 3 to 1 stage 1 mb 3 samples [3, 4) bytes 4 batch 1
// CHECK-NEXT: pipe.recv gradient stage 0 mb 2 from 1 stage 1 mb 2 samples [2, 3) bytes 4 batch 1
// CHECK-NEXT: pipe.backward stage 0 mb 2
// CHECK-NEXT: pipe.recv gradient stage 0 mb 3 from 1 stage 1 mb 3 samples [3, 4) bytes 4
// CHECK-NEXT: pipe.backward stage 0 mb 3
// CHECK-NEXT: }
// CHECK: pipe.rank 1 {
// CHECK-NEXT: pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 1 mb 0
// CHECK-NEXT: pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.backward stage 1 mb 0
// CHECK-NEXT: pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 1 mb 1
// CHECK-NEXT: pipe.backward stage 1 mb 1
// CHECK-NEXT: pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 batch 0
// CHECK-NEXT: pipe.recv activation stage 1 mb 2 from 0 stage 0 mb 2 samples [2, 3) bytes 4 batch 0
// CHECK-NEXT: pipe.forward stage 1 mb 2
// CHECK-NEXT: pipe.backward stage 1 mb 2
// CHECK-NEXT: pipe.recv activation stage 1 mb 3 from 0 stage 0 mb 3 samples [3, 4) bytes 4 batch 1
// CHECK-NEXT: pipe.send gradient stage 1 mb 2 to 0 stage 0 mb 2 samples [2, 3) bytes 4 batch 1
// CHECK-NEXT: pipe.forward stage 1 mb 3
// CHECK-NEXT: pipe.backward stage 1 mb 3
// CHECK-NEXT: pipe.send gradient stage 1 mb 3 to 0 stage 0 mb 3 samples [3, 4) bytes 4
// CHECK-NEXT: }

pipe.model @tiny1f1b phase scheduled attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 4.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 4, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny1f1b.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.forward stage 0 mb 1
    pipe.backward stage 0 mb 0
    pipe.forward stage 0 mb 2
    pipe.backward stage 0 mb 1
    pipe.forward stage 0 mb 3
    pipe.backward stage 0 mb 2
    pipe.backward stage 0 mb 3
  }
  pipe.rank 1 {
    pipe.forward stage 1 mb 0
    pipe.backward stage 1 mb 0
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.forward stage 1 mb 2
    pipe.backward stage 1 mb 2
    pipe.forward stage 1 mb 3
    pipe.backward stage 1 mb 3
  }
}

// -----

// Unequal partitions (1+1+2 against 2+2): a micro-batch receives one piece from every
// overlapping micro-batch of its neighbour.
// CHECK-LABEL: pipe.model
// CHECK-SAME: phase communicating
// CHECK: pipe.rank 0 {
// CHECK-NEXT: pipe.forward stage 0 mb 0
// CHECK-NEXT: pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.forward stage 0 mb 1
// CHECK-NEXT: pipe.send activation stage 0 mb 1 to 1 stage 1 mb 0 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.forward stage 0 mb 2
// CHECK-NEXT: pipe.send activation stage 0 mb 2 to 1 stage 1 mb 1 samples [2, 4) bytes 8
// CHECK-NEXT: pipe.recv gradient stage 0 mb 2 from 1 stage 1 mb 1 samples [2, 4) bytes 8
// CHECK-NEXT: pipe.backward stage 0 mb 2
// CHECK-NEXT: pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 0 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.backward stage 0 mb 1
// CHECK-NEXT: pipe.backward stage 0 mb 0
// CHECK-NEXT: }
// CHECK: pipe.rank 1 {
// CHECK-NEXT: pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: pipe.forward stage 1 mb 0
// CHECK-NEXT: pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 2 samples [2, 4) bytes 8
// CHECK-NEXT: pipe.forward stage 1 mb 1
// CHECK-NEXT: pipe.backward stage 1 mb 1
// CHECK-NEXT: pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 2 samples [2, 4) bytes 8
// CHECK-NEXT: pipe.backward stage 1 mb 0
// CHECK-NEXT: pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
// CHECK-NEXT: pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 1 samples [1, 2) bytes 4
// CHECK-NEXT: }

pipe.model @tinyunequal phase scheduled attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, microbatch_partitions = [array<i64: 1, 1, 2>, array<i64: 2, 2>], parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 4, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tinyunequal.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 4]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 2, 4]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.forward stage 0 mb 1
    pipe.forward stage 0 mb 2
    pipe.backward stage 0 mb 2
    pipe.backward stage 0 mb 1
    pipe.backward stage 0 mb 0
  }
  pipe.rank 1 {
    pipe.forward stage 1 mb 0
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.backward stage 1 mb 0
  }
}

// -----

// Stages on one rank exchange nothing.
// CHECK-LABEL: pipe.model
// CHECK-SAME: phase communicating
// CHECK: pipe.rank 0 {
// CHECK-NEXT: pipe.forward stage 0 mb 0
// CHECK-NEXT: pipe.forward stage 0 mb 1
// CHECK-NEXT: pipe.forward stage 1 mb 0
// CHECK-NEXT: pipe.forward stage 1 mb 1
// CHECK-NEXT: pipe.backward stage 1 mb 1
// CHECK-NEXT: pipe.backward stage 1 mb 0
// CHECK-NEXT: pipe.backward stage 0 mb 1
// CHECK-NEXT: pipe.backward stage 0 mb 0
// CHECK-NEXT: }

pipe.model @tinyonerank phase scheduled attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 2, schedule = "breadth-first", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tinyonerank.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 0 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.forward stage 0 mb 1
    pipe.forward stage 1 mb 0
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.backward stage 1 mb 0
    pipe.backward stage 0 mb 1
    pipe.backward stage 0 mb 0
  }
}
