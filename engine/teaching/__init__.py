"""Teaching mode (issue 18): what a schedule does, made visible.

`trace` is the iteration order of one stage under its schedule on a small extent (cells in
the order they are computed, vector lanes together, one thread id per parallel worker,
producers computed at the stage's loops with their recomputed points, the buffers allocated
at their store levels); `footprint` is the region of each producer read per iteration of a
chosen loop, the storage allocated there and this machine's cache sizes; `animate` renders
a trace as GIF or PNG frames. All of it reads the engine's loop-nest model (loopnest.py,
loops.py, schedule.py); nothing here imports Qt.
"""
