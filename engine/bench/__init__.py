"""The benchmarks, each a function of plain parameters that returns one JSON-able dict
with a `table` (Markdown) and prints its progress on stderr; `engine/cli/bench.py` turns
the `bench` subcommands' options into these parameters.

  core       `bench_core`: default, hand and Halide's autoschedulers on every zoo pipeline
  models     `bench_models`: sample models under ONNX Runtime, PyTorch and Halide
  importing  `bench_import`: a ResNet-50 ONNX file to a JIT-compiled default schedule, per phase
  search     `bench_search`: every search strategy against Halide's autoschedulers
  fuzz       `bench_fuzz` / `fuzz`: bad input through the public paths (it drives the CLI)
  costmodel  `bench_costmodel`: predictions per second of every cost model, the app's edit latency
  peers      ONNX Runtime and PyTorch eager timed like the runner (also `measure --peers`)
  peak       the FMA peak microbenchmark, the yardstick for GFLOP/s

Nothing is imported here: `python -m engine.bench.fuzz` (the fuzzer's recheck process)
and a single benchmark load only what they use.
"""
