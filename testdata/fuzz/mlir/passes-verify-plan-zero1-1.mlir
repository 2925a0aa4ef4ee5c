// Gathered after the optimizer step.
plan.program @tiny attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "optimizer", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", tokens_per_sample = 1 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  plan.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  plan.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  plan.stage 0 rank 0 layers [0, 1) params 100 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 100 samples [0, 1, 2]
  plan.rank 0 events 8 slots [4] {
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
    plan.wait event 6 on 2
    plan.reduce_scatter stage 0 bytes 400 group 0 on 2
    plan.signal event 7 on 2
    plan.wait event 7 on 0
    plan.optimizer_step stage 0 on 0
    plan.signal event 0 on 0
    plan.wait event 0 on 2
    plan.all_gather stage 0 bytes 400 group 0 on 2
  }
  plan.rank 1 events 7 slots [4] {
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4 slot 0 on 1
    plan.signal event 0 on 1
    plan.wait event 0 on 0
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
    plan.wait event 5 on 2
    plan.reduce_scatter stage 1 bytes 400 group 1 on 2
    plan.signal event 6 on 2
    plan.wait event 5 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4 on 1
    plan.wait event 6 on 0
    plan.optimizer_step stage 1 on 0
    plan.signal event 1 on 0
    plan.wait event 1 on 2
    plan.all_gather stage 1 bytes 400 group 1 on 2
  }
}
