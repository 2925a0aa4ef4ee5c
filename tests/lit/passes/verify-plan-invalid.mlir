// RUN: conduit-opt %s -split-input-file --conduit-verify-plan -verify-diagnostics
// RUN: conduit-opt %s -split-input-file --conduit-verify-plan=simulated-times=false -verify-diagnostics
//
// Hand-broken plans, each rejected with a message on the offending instruction. The base is
// the plan conduit-compile writes for a two-rank GPipe job with full sharding over two
// replicas (verify-plan.mlir checks that it passes).

// A swapped receive order: the first receive from rank 0 no longer matches the first send.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    // expected-error @+1 {{rank 1 instruction 2 (recv activation s1 mb1 from rank 0 (s0 mb1, samples [1, 2))): message 0 from rank 0 is sent as send activation s0 mb0 to rank 1 (s1 mb0, samples [0, 1)) (instruction 6)}}
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A missing send: rank 1's second receive has no partner.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    // expected-error @+1 {{message 1 from rank 0 has no matching send}}
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A compute on a resharded stage.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.free stage 0 on 0
    // expected-error @+1 {{computes on stage 0 while its parameters are not gathered}}
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A collective issued by only part of its group.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>, array<i64: 0, 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    // expected-error @+1 {{is collective 0 of group 2, which rank 1 never issues}}
    plan.all_reduce stage 0 bytes 400 group 2 on 2
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A deadlock: rank 0 waits for a gradient before it sends the activation that produces it.
// Every blocked stream is named with what it waits for.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    // expected-error @+1 {{the plan deadlocks: rank 0 stream 0 at instruction 13 (wait event 3 on stream 0) waits for event 3, which stream 1 signals at instruction 10; rank 0 stream 1 at instruction 9 (recv gradient s0 mb1 from rank 1 (s1 mb1, samples [1, 2))) waits for rank 1 to reach instruction 16; that stream is at instruction 9 (recv activation s1 mb1 from rank 0 (s0 mb1, samples [1, 2))); }}
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A missing wait: the forward is not ordered after the receive of its input.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 1 on 0
    // expected-error @+1 {{may run before samples [0, 1) of its input are received}}
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}

// -----

// A slot reused before its content was read.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
    plan.all_gather stage 0 bytes 400 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 1
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4 on 1
    plan.forward stage 0 mb 1 on 0
    plan.signal event 2 on 0
    plan.wait event 2 on 1
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4 on 1
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.backward stage 0 mb 1 slot 0 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 5 on 1
    plan.wait event 5 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.signal event 6 on 0
    plan.free stage 0 on 0
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 7 slots [4] {
    plan.all_gather stage 1 bytes 400 group 1 on 2
    plan.signal event 1 on 2
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
    plan.wait event 1 on 0
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.signal event 2 on 0
    // expected-error @+1 {{overwrites slot 0, which still holds the activation of s1 mb0 that no compute has read}}
    plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4 slot 0 on 1
    plan.signal event 3 on 1
    plan.wait event 3 on 0
    plan.forward stage 1 mb 1 slot 0 on 0
    plan.backward stage 1 mb 1 on 0
    plan.signal event 4 on 0
    plan.wait event 4 on 1
    plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4 on 1
    plan.backward stage 1 mb 0 on 0
    plan.signal event 5 on 0
    plan.free stage 1 on 0
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
  }
}
