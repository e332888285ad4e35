"""Small layouts for exact cases: 8 bytes a token, pages of 4 rows = 32 bytes.

fixed bytes: table 4 per page of a window (pages only) + sampling 4*1*4 = 16
             + scratch 1 * (4*1 + 3*0) * 4 = 16
"""
from server.planner.layout import Layout


def small(rank: int = 0, n_kv: int = 1, page_rows: int = 4) -> Layout:
    return Layout(rank=rank, n_layers=1, n_kv=n_kv, head_dim=1, kv_bytes=4, page_rows=page_rows,
                  vocab=1, d_model=1, ff_rank=0, prefill_chunk=1)
