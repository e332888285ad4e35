"""Drafts: tokens proposed for a stream's next positions, verified inside the round
(server/verify.py), so a reply with drafts equals the plain one byte for byte.
Control plane: pure Python, no numpy."""
