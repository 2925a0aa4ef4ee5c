//
// Unequal partitions: stage 0 cuts 8 samples as 2+2+4, stage 1 as 4+4. Stage 1's first
// micro-batch needs stage 0's first two. The option overrides the job's schedule and the
// model records the one that ran.

// GPIPE: schedule = "gpipe"
// GPIPE: pipe.rank 0 {
// GPIPE-NEXT: pipe.forward stage 0 mb 0
// GPIPE-NEXT: pipe.forward stage 0 mb 1
// GPIPE-NEXT: pipe.forward stage 0 mb 2
// GPIPE-NEXT: pipe.backward stage 0 mb 2
// GPIPE-NEXT: pipe.backward stage 0 mb 1
// GPIPE-NEXT: pipe.backward stage 0 mb 0
// GPIPE-NEXT: }
// 1F1B: schedule = "1f1b"
// 1F1B: pipe.rank 0 {
// 1F1B-NEXT: pipe.forward stage 0 mb 0
// 1F1B-NEXT: pipe.forward stage 0 mb 1
// 1F1B-NEXT: pipe.backward stage 0 mb 0
// 1F1B-NEXT: pipe.forward stage 0 mb 2
// 1F1B-NEXT: pipe.backward stage 0 mb 1
// 1F1B-NEXT: pipe.backward stage 0 mb 2
// 1F1B-NEXT: }
// 1F1B: pipe.rank 1 {
// 1F1B-NEXT: pipe.forward stage 1 mb 0
// 1F1B-NEXT: pipe.backward stage 1 mb 0
// 1F1B-NEXT: pipe.forward stage 1 mb 1
// 1F1B-NEXT: pipe.backward stage 1 mb 1
// 1F1B-NEXT: }
// BFS: schedule = "breadth-first"
// BFS: pipe.rank 0 {
// BFS-NEXT: pipe.forward stage 0 mb 0
// BFS-NEXT: pipe.forward stage 0 mb 1
// BFS-NEXT: pipe.forward stage 0 mb 2
// BFS-NEXT: pipe.backward stage 0 mb 2
// BFS-NEXT: pipe.backward stage 0 mb 1
// BFS-NEXT: pipe.backward stage 0 mb 0
// BFS-NEXT: }

pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 4, microbatch_size = 2, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 2, 4, 8]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 4, 8]
}
