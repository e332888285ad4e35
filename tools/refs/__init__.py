"""Reference checkpoints and the records made from them (tools/refs/README-free: see each module)."""
