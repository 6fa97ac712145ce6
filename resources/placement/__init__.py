"""The trained graph-network placer's weights (gnn_placer.pt; engine/placement/learned/gnn.py makes them)."""
