"""Device placement (issue 16): which device runs each stage of a pipeline, and how long it takes.

`devices` (profiles of devices and links, JSON), `graph` (the stage DAG as an `OpGraph`),
`costs` (seconds per stage and device: roofline here, measured in `execute`), `simulator`
(event-driven list scheduling, Baechi's semantics), `policies` (the registry of placers: the
heuristics here, the learned ones in `learned/`). Headless: never imports Qt. The shared
interface is fixed in docs/ARCHITECTURE.md's placement section.
"""
