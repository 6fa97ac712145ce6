"""The Placement tab (issue 16 item 8): which device runs each stage of the open pipeline.

`model` holds the placement problem, the current placement and its simulation (a thin
layer over engine.placement); `commands` are its undoable edits; `charts` the graph
coloured by device, the Gantt chart, memory against capacity and a learned policy's
training curve; `panel` puts them together with the profile and policy choices.
"""
