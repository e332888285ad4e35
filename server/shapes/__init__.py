"""What both planes use: a model's shapes (spec) and how it splits over TP ranks (shard).

Pure Python, no numpy: the planner builds per-rank layouts from these without the engine.
"""
