"""The control plane's memory logic: layout, plan, pool, admission, prompt cache.

Pure Python: no numpy or cupy, no device (`foldserve plan`, which reads model files, is server/plan_cli.py).
"""
from server.planner.admission import Admission, Grant, Refused, Ticket
from server.planner.describe import startup_line
from server.planner.layout import Layout, default_page_rows, layouts
from server.planner.modes import resolve_kv_pages
from server.planner.plan import NoStream, Plan, PlanError, RankPlan, TooManyStreams, plan
from server.planner.pool import Pool, PoolCorrupt, PoolExhausted
from server.planner.prompt_cache import PromptCache

__all__ = ["Admission", "Grant", "Refused", "Ticket", "startup_line", "Layout", "default_page_rows",
           "layouts", "resolve_kv_pages", "NoStream", "Plan", "PlanError", "RankPlan",
           "TooManyStreams", "plan", "Pool", "PoolCorrupt", "PoolExhausted", "PromptCache"]
