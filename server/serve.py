"""foldserve serve: start the ranks, agree, plan, and serve the OpenAI API from rank 0.

    join -> open the model on this rank's shard -> fingerprints (every rank agrees, or all
    stop) -> rooms gathered -> rank 0 plans by the smallest -> PoolStep -> rank 0: scheduler
    + HTTP; followers: apply steps until told to stop.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import threading

log = logging.getLogger("foldserve")


def read_chat_template(arg: str | None) -> str | None:
    """--chat-template: a file's text, or (as vLLM takes it) the template itself; compiled
    here, so a missing or broken template stops the server before any weight is read."""
    if arg is None:
        return None
    from server.config import ConfigError
    from server.text.chat_template import ChatTemplateError, check
    if os.path.isfile(arg):
        try:
            with open(arg, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"--chat-template {arg}: cannot read it: {e}") from None
    elif "{{" in arg or "{%" in arg:
        text = arg
    else:
        raise ConfigError(f"--chat-template {arg!r}: no such file (and not a template)")
    try:
        check(text)
    except ChatTemplateError as e:
        where = arg if text is not arg else "(the template given)"
        raise ConfigError(f"--chat-template {where}: {e}") from None
    return text


def add_arguments(p):
    from server import flags
    flags.add_plan_flags(p)               # --model --device --tp --context --parallel ... (plan's too)
    p.add_argument("--host", default="127.0.0.1", help="rank 0's HTTP address")
    p.add_argument("--port", type=int, default=8000, help="rank 0's HTTP port")
    p.add_argument("--port-retries", type=int, default=0, metavar="N",
                   help="when --port is in use, take the first free one of the next N ports "
                        "and say which (deploy/one-host.sh passes 10; default 0: stop with "
                        "the error)")
    p.add_argument("--rank", type=int, default=None,
                   help="this host's rank, when each host starts its own (with --master; or $RANK)")
    p.add_argument("--master", default=None,
                   help="HOST:PORT where rank 0 meets the others (or $MASTER_ADDR, $MASTER_PORT; "
                        "default: a free port on 127.0.0.1 when one host starts every rank)")
    p.add_argument("--join-timeout", type=float, default=60.0,
                   help="seconds rank 0 waits for every rank to arrive")
    p.add_argument("--comm-timeout", type=float, default=120.0,
                   help="seconds a CPU rank waits on a peer before calling it lost")
    p.add_argument("--peer-timeout", type=flags.seconds(zero_ok=False), default=5.0,
                   help="seconds without an answer to rank 0's heartbeat after which a rank "
                        "is lost, idle or busy (default 5)")
    p.add_argument("--max-batch-tokens", type=int, default=None,
                   help="tokens in one round, decodes and prefill chunks together "
                        "(default 2048 on GPUs, 512 on the CPU)")
    p.add_argument("--max-batch-keys", type=flags.whole_number("keys", zero="0: no bound"), default=None,
                   help="in a round other streams decode in, the prefill chunks' attention "
                        "reads at most (prompt rows x the keys each reads; at least 64 rows a "
                        "round), so a long prompt interleaves with their decodes in rounds of "
                        "bounded time (default: none; 0: none). A round no stream decodes in "
                        "gives a prompt up to the whole round budget")
    p.add_argument("--api-key-file", default=None, metavar="PATH",
                   help="keys, one a line, any of which a request may carry as a bearer or x-api-key (default: "
                        "none; see also $FOLDSERVE_API_KEY, one key; the sources add up)")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="a bearer key on the command line, where ps shows it to every local "
                        "user (warned at startup): prefer $FOLDSERVE_API_KEY or --api-key-file")
    p.add_argument("--served-model-name", nargs="+", default=None, metavar="NAME",
                   help="the model's name(s) in the API (default: the model file's); the "
                        "first is the one replies carry")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="a jinja2 chat template file (or the template itself) replacing the "
                        "model's")
    from server.text.reasoning import PARSER_NAMES
    p.add_argument("--reasoning-parser", default="auto", choices=PARSER_NAMES,
                   help="how a reply's reasoning is split from its answer into "
                        "reasoning_content: auto (<think> parsing when the chat template or "
                        "the model's family thinks, else none), none (the reply stays raw "
                        "text), think (<think>...</think>; qwen3, deepseek_r1 and glm45 are "
                        "vLLM's names for it)")
    from server.text.glm_tools import PARSER_NAMES as TOOL_PARSERS
    p.add_argument("--tool-call-parser", default="auto", choices=TOOL_PARSERS,
                   help="the tool-call format replies are parsed from and forced calls are "
                        "held to: auto (GLM's <tool_call> with <arg_key>/<arg_value> when the "
                        "chat template writes <arg_key>, else hermes: <tool_call>{json}"
                        "</tool_call>), hermes, glm45 or glm47 (GLM's); harmony replies "
                        "(gpt-oss) carry their calls in their channels")
    p.add_argument("--allowed-origins", action="append", default=None, metavar="ORIGINS",
                   help="sites whose pages may read this server (CORS): origins such as "
                        "http://localhost:3000, comma-separated or the flag repeated (or a "
                        "JSON list, as vLLM takes it), * for every site (default: none; "
                        "docs/api.md says why)")
    p.add_argument("--max-body-bytes", type=int, default=4 << 20, help="largest request body")
    p.add_argument("--max-queue", type=flags.whole_number(), default=256,
                   help="requests that may wait beyond the running streams; 503 past it "
                        "(0: none wait, a request is admitted while a stream is free)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a connection has to send a request's headers (408 after)")
    p.add_argument("--body-timeout", type=flags.seconds(zero_ok=False), default=60.0,
                   help="seconds a request's body has to arrive once its headers are in "
                        "(408 and a close after; default 60)")
    p.add_argument("--write-timeout", type=flags.seconds(zero_ok=False), default=30.0,
                   help="seconds a client may read nothing of a reply waiting to be written "
                        "(its buffers full) before its connection is dropped and its request "
                        "ended, freeing its stream (default 30)")
    p.add_argument("--shutdown-timeout", type=flags.seconds(zero_ok=True), default=5.0,
                   help="on SIGTERM or Ctrl-C, seconds the running requests get to finish "
                        "(new and waiting ones get 503 shutting_down at once); those still "
                        "running then end with an error event and [DONE], and every rank "
                        "exits 0 (default 5; 0: end them at once)")
    p.add_argument("--max-connections", type=int, default=None,
                   help="open client connections at most (default: from the open-file limit)")
    p.add_argument("--seed-salt", type=int, default=0,
                   help="mixed into every request's sampling seed (the same on every rank)")
    p.add_argument("--stats-interval", type=float, default=10.0,
                   help="seconds between rank 0's stats lines while requests run (0: none)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="uvicorn's and foldserve's log level; debug adds tracebacks")


def _origins(values) -> tuple:
    from server.api.cors import parse_origins
    from server.config import ConfigError
    try:
        return parse_origins(values)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _api_keys(args) -> tuple[str, ...]:
    """Rank 0's API keys (server/api/keys.py), said before the model loads: where they came
    from, and the warnings (a key on the command line, a key file others may read)."""
    from server.api.keys import gather_keys
    from server.config import api_key_from_env
    found = gather_keys(args.api_key, args.api_key_file, api_key_from_env())
    for line in found.warnings:
        print(f"foldserve: {line}", file=sys.stderr, flush=True)
    if found.keys:
        n = len(found.keys)
        print(f"foldserve: {n} API key{'s' if n > 1 else ''} (from {', '.join(found.sources)})",
              file=sys.stderr, flush=True)
    return found.keys


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _claim_port(args):
    """Rank 0's HTTP socket, listening now (server/api/http_socket.py): a taken port is said
    before the model loads, or with --port-retries the next free one is taken and said."""
    from server.api.http_socket import PortTaken, claim
    from server.config import ConfigError
    try:
        sock, note = claim(args.host, args.port, args.port_retries)
    except PortTaken as e:
        raise ConfigError(str(e)) from None
    if note:
        print(f"foldserve: {note}", file=sys.stderr, flush=True)
    return sock


KEY_FLAGS = ("--api-key", "--api-key-file")


def follower_argv(argv: list[str], rank: int, world: int, master: str) -> list[str]:
    """A launched follower's arguments: rank 0's (`argv`: sys.argv[1:]) without the API key
    flags (a follower serves no HTTP; its argv is readable by every local user), with its
    rank and the rendezvous. argparse takes an option's unambiguous prefix (--api-key-f),
    so any option name that starts --api-key and begins a key flag goes, with its value."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name, eq, _ = a.partition("=")
        if name.startswith("--api-key") and any(f.startswith(name) for f in KEY_FLAGS):
            skip = not eq
            continue
        out.append(a)
    out += ["--rank", str(rank), "--master", master]
    if "--tp" not in argv:
        out += ["--tp", str(world)]
    return out


def follower_env(environ) -> dict:
    """A launched follower's environment: rank 0's without FOLDSERVE_API_KEY."""
    from server.config import API_KEY_VARIABLE
    return {k: v for k, v in environ.items() if k != API_KEY_VARIABLE}


def _launch_followers(args, world: int, master: str) -> list:
    """One host, several ranks: start ranks 1..N-1 as child processes of rank 0."""
    procs = []
    env = follower_env(os.environ)
    for r in range(1, world):
        argv = [sys.executable, "-m", "server.cli", *follower_argv(sys.argv[1:], r, world, master)]
        proc = subprocess.Popen(argv, env=env)
        threading.Thread(target=_reap, args=(proc, r), name=f"foldserve-reap-{r}",
                         daemon=True).start()
        procs.append(proc)
    return procs


def _reap(proc: subprocess.Popen, rank: int) -> None:
    """Wait for a follower as soon as it exits, so a dead one is no zombie while rank 0
    serves on (answering 503s), and say how it ended."""
    code = proc.wait()
    if code < 0:
        log.warning("rank %d (pid %d) was killed by signal %d", rank, proc.pid, -code)
    elif code:
        log.warning("rank %d (pid %d) exited with status %d", rank, proc.pid, code)


def run(args) -> int:
    from server.config import ConfigError, Env
    from server.ranks.rank_errors import RankError
    from server.planner.plan import PlanError
    logging.getLogger("foldserve").setLevel(args.log_level.upper())
    try:
        return _run(args, Env.read())
    except (ConfigError, RankError, PlanError) as e:
        print(f"foldserve: {e}", file=sys.stderr)
        return 2


def ranks_on_this_host(args, env, world: int) -> int:
    """All `world` when this process starts the others (one host, --tp N); else torchrun's
    LOCAL_WORLD_SIZE, else 1 (a rank a host, --rank/--master or RANK)."""
    if world > 1 and args.rank is None and "RANK" not in env.torchrun:
        return world
    return env.local_world or 1


def _run(args, env) -> int:
    from server.config import numba_threads
    from server.ranks.rendezvous import from_env_or_args
    world = args.tp or int(env.torchrun.get("WORLD_SIZE", 1))
    children = []
    if args.device == "cpu":                   # before numba's import; the followers inherit it
        numba_threads(os.environ, ranks_on_this_host(args, env, world))
    if args.device == "cuda":                  # said once, before any follower starts
        from server.engine.device import require_cuda
        require_cuda()
    if (args.rank or int(env.torchrun.get("RANK", 0))) == 0:
        args.chat_template_text = read_chat_template(args.chat_template)   # before the load
        args.api_keys = _api_keys(args)
        args.origins = _origins(args.allowed_origins)
        from server.api.http_socket import Loading
        args.http_socket = _claim_port(args)   # before the model loads, not after
        args.loading = Loading(args.http_socket).start()   # 503 "loading" until serving
    if world > 1 and args.rank is None and "RANK" not in env.torchrun:
        host = "127.0.0.1"
        master = args.master or f"{host}:{_free_port(host)}"
        children = _launch_followers(args, world, master)
        args.master, args.rank = master, 0
    rank, world, mhost, mport = from_env_or_args(args.rank, world, args.master, env.torchrun)
    try:
        return _serve_rank(args, env, rank, world, mhost, mport)
    finally:
        if getattr(args, "loading", None):    # a start that failed: the port is let go
            args.loading.stop()
            args.http_socket.close()
        for c in children:
            try:
                c.wait(timeout=10)
            except subprocess.TimeoutExpired:
                c.kill()


def _serve_rank(args, env, rank, world, mhost, mport) -> int:
    from server.engine.build import open_model
    from server.engine.room import measure
    from server.shapes.shard import shard_of
    from server.flags import resolve_context, verify_window
    from server.planner.layout import KV_BYTES, layouts
    from server.ranks import fingerprint, heartbeat
    from server.ranks.rendezvous import join

    if args.device == "cuda":                  # _run has checked that cupy and a device are here
        import cupy
        dev = env.local_rank if env.local_rank is not None else rank % cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.Device(dev).use()
    link = join(rank, world, mhost, mport, args.join_timeout)
    comm = beat = None
    try:
        # rank 0: a Monitor (pings; the join timeout's allowance until serving begins);
        # followers: a Responder; None at TP=1
        beat = heartbeat.start(link, max(args.peer_timeout, args.join_timeout), args.join_timeout)
        if args.device == "cuda":              # NCCL even at TP=1: a communicator of one
            from server.ranks.nccl_comm import NcclComm
            comm = NcclComm(link)
        elif world > 1:
            from server.ranks.comm import HostComm
            comm = HostComm(link, args.comm_timeout)
    except BaseException:
        if beat:
            beat.stop()
        link.close()
        raise
    if beat:                                   # rank 0: a frozen follower breaks the comm at once;
        beat.on_lost(comm.lose)                # a follower: a frozen rank 0 does
    try:
        if world > 1:                          # settings and file identity, before any weight is read
            _early_fingerprint(args, env, comm, rank, world)
        opened = open_model(args.model, device=args.device, tp=world, rank=rank,
                            all_reduce=comm.all_reduce if world > 1 else None,
                            progress=rank == 0, mtp=args.draft == "mtp")
        spec = opened.spec
        from server.flags import drafts_for
        spec = drafts_for(args, spec)          # --draft mtp: opened with its MTP layer
        context = resolve_context(args.context, spec.max_context)
        if context > spec.max_context and rank == 0:
            log.warning("--context %d is past the %d tokens this model was trained for; replies "
                        "past that length may degrade", context, spec.max_context)
        parallel = 0 if str(args.parallel) == "auto" else int(args.parallel)
        lays = layouts(spec, world, KV_BYTES[args.device], args.page_rows, args.prefill_chunk)
        ident = dict(opened.identity)
        ident.setdefault("content_hash", ident.get("sha256"))
        from server.config import q8_0_x
        fp = fingerprint.make(
            rank=rank, model=ident, tp=world,
            shard=str(shard_of(spec, world, rank)),
            kv_pages=env.kv_pages_static, kv_poison=env.kv_poison, page_rows=args.page_rows,
            page_bytes=[l.page_bytes for l in lays], kv_dtype=str(opened.engine.kv_dtype.__name__
                                                             if hasattr(opened.engine.kv_dtype, "__name__")
                                                             else opened.engine.kv_dtype),
            context=context, parallel=parallel, prefill_chunk=args.prefill_chunk,
            prompt_cache_gib=args.prompt_cache_gib, verify_window=verify_window(args),
            seed_salt=args.seed_salt, q8_0_x=q8_0_x())
        if comm:
            shards = [str(shard_of(spec, world, r))
                      for r in range(world)]
            fingerprint.exchange_and_check(comm, fp, expected_shards=shards)
        room, reserve = measure(args.device, args.reserve_gib, env.room_gib)
        # every rank's (room, reserve); reserve -1 where TF_ROOM_GIB, not the reserve, set the room
        mine = f"{room},{-1 if reserve is None else reserve}".encode()
        pairs = [tuple(int(x) for x in b.split(b",")) for b in
                 (comm.all_gather_bytes(mine) if comm else [mine])]
        rooms = [r for r, _ in pairs]
        reserves = [None if v < 0 else v for _, v in pairs]
        if rank != 0:
            from server.ranks.follower import follow
            beat.set_timeout(args.peer_timeout)    # following from here: rank 0 pings as it serves
            wait = args.shutdown_timeout + FOLLOWER_WAIT_S
            _await_stop_on_signal(rank, wait)
            try:
                follow(comm, opened.engine)
            except _NoStop as e:
                print(f"foldserve: rank {rank}: stopped by {e}; rank 0 sent no stop within "
                      f"{wait:g} s of it (was it stopped too?); its group cannot go on: "
                      "restart every rank", file=sys.stderr, flush=True)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            return 0
        return _serve_front(args, env, opened, comm, beat, lays, rooms, reserves, context,
                            parallel)
    finally:
        if beat:                               # before the comm: a clean stop is no lost rank
            beat.stop()
        if comm:
            comm.close()


def _early_fingerprint(args, env, comm, rank, world) -> None:
    from server.config import q8_0_x
    from server.engine.locate import resolve
    from server.flags import resolve_context, verify_window
    from server.ranks import fingerprint
    source = resolve(args.model)
    try:
        context = resolve_context(args.context, _trained_context(source))
    except Exception:                      # the load that follows names what is wrong
        context = None
    fp = fingerprint.make_early(
        rank=rank, tp=world, model_file=fingerprint.file_identity(source), device=args.device,
        kv_pages=env.kv_pages_static, kv_poison=env.kv_poison, page_rows=args.page_rows,
        context=context, parallel=int(args.parallel), prefill_chunk=args.prefill_chunk,
        prompt_cache_gib=args.prompt_cache_gib, verify_window=verify_window(args),
        seed_salt=args.seed_salt, q8_0_x=q8_0_x())
    fingerprint.exchange_and_check(comm, fp)


def _trained_context(source: str) -> int:
    """The model's trained context from its metadata alone (gguf.GGUFReader would take
    seconds on the default model: it parses the vocabulary into numpy views)."""
    import os
    from server.shapes.spec import shape
    if source.startswith("dummy:"):
        return shape(source.removeprefix("dummy:").partition(":")[0]).max_context
    if os.path.isdir(source):
        from server.engine.weights.hf_config import read_config
        return int(read_config(source).get("max_position_embeddings", 4096))
    from server.text.gguf_meta import read_metadata
    meta = read_metadata(source, keep=lambda key: key == "general.architecture"
                         or key.endswith(".context_length"))           # one walk of the header
    return int(meta.get(f"{meta['general.architecture']}.context_length", 4096))


def _dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", None) or str(dtype)


def _exit_on_term(signum, frame):
    raise SystemExit(0)


FOLLOWER_WAIT_S = 15.0     # beyond --shutdown-timeout, a signalled follower's wait for rank 0


class _NoStop(BaseException):
    """A signalled follower's wait for rank 0's stop step ran out (not an engine error)."""


def _await_stop_on_signal(rank: int, wait_s: float) -> None:
    """A follower's SIGTERM and SIGINT: the same signal has almost always reached rank 0
    too (systemd signals the unit's whole cgroup, a terminal's Ctrl-C the whole process
    group, and `--tp N` on one host starts the followers in rank 0's group), and rank 0
    drains its requests and then sends every rank its stop step, which a follower that
    died at the signal would never see (rank 0 would call it lost in the middle of its
    drain). So a follower keeps following, and leaves on its own (exit 0, with a line)
    only if no stop comes within `wait_s` (rank 0 was not stopped, or is gone), or at a
    third signal."""
    count = [0]

    def on_signal(signum, frame):
        count[0] += 1
        name = signal.Signals(signum).name
        if count[0] == 1:
            log.info("rank %d: %s: following until rank 0's stop (%g s at most)", rank,
                     name, wait_s)
            signal.setitimer(signal.ITIMER_REAL, wait_s)
        elif count[0] >= 3:
            raise _NoStop(f"{name} (a third time)")

    def on_alarm(signum, frame):
        raise _NoStop("a signal")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _serve_front(args, env, opened, comm, beat, lays, rooms, reserves, context, parallel) -> int:
    from server.api.app import create_app
    from server.api.http_server import run_uvicorn
    from server.api.state import AppState
    from server.drafts.policy import CHUNK_COST, ROW_COST
    from server.drafts.source import make_source
    from server.flags import draft_kind, verify_window
    from server.step_driver import LocalDriver, RankDriver
    from server.planner.admission import Admission
    from server.planner.describe import startup_line
    from server.planner.plan import PlanError, plan
    from server.ranks.steps import StopStep, pack
    from server.scheduler import Scheduler
    from server.startup import startup_block, weight_bytes
    from server.stats_log import StatsLogger

    try:
        p = plan(lays, rooms, context, parallel, int(args.prompt_cache_gib * (1 << 30)),
                 env.kv_pages, verify_window=verify_window(args))
    except PlanError:
        if beat:                                   # the followers leave now: no lost rank
            beat.stop()
        if comm and len(rooms) > 1:                # tell the followers to stop, then say why
            comm.broadcast_step(pack(StopStep(1)))
        raise
    line = startup_line(p, reserves[p.governing])       # the governing rank's own reserve
    budget = args.max_batch_tokens or (2048 if args.device == "cuda" else 512)
    # a prompt alone in a round: the whole budget, within the activations the plan funded
    solo = min(budget, max(args.prefill_chunk, p.streams * args.prefill_chunk))
    keys = args.max_batch_keys or None
    graphs = getattr(opened.engine.model, "graphs", None)
    block = startup_block(          # the notes are in the plan line: said once
        plan=p, plan_line=line, model=opened.name, spec=opened.spec,
        weights=weight_bytes(opened.engine.weights), load_s=opened.load_seconds,
        device=args.device, kv_dtype=_dtype_name(opened.engine.kv_dtype),
        reserve=reserves[p.governing], env=env, token_budget=budget,
        prefill_chunk=args.prefill_chunk, cuda_graphs=graphs.enabled if graphs else None,
        solo_chunk=solo, prefill_keys=keys)
    driver = RankDriver(opened.engine, comm) if len(rooms) > 1 else LocalDriver(opened.engine)
    if beat:
        beat.on_lost(driver.lost)              # /health 503 at once; NCCL: abort a waiting step
    driver.run(p.pool_step(env.kv_poison))
    if beat:                                   # serving from here: the peer timeout holds
        beat.set_timeout(args.peer_timeout)
    adm = Admission.from_plan(p, poison=env.kv_poison)
    sched = Scheduler(driver, adm, context=context,
                      prefill_chunk=args.prefill_chunk, seed_salt=args.seed_salt,
                      token_budget=budget, solo_chunk=solo, prefill_keys=keys,
                      drafts=make_source(draft_kind(args)), draft_tokens=args.draft_tokens,
                      draft_row_cost=ROW_COST[args.device] if getattr(args, "draft_row_cost", None) is None
                      else args.draft_row_cost,
                      draft_chunk_cost=CHUNK_COST[args.device]
                      if getattr(args, "draft_row_cost", None) is None else None,
                      snap_rows=adm.page_rows if opened.spec.recurrent else None).start()
    names = tuple(args.served_model_name or ())
    state = AppState(scheduler=sched, tokenizer=opened.tokenizer,
                     model_name=names[0] if names else opened.name, served_names=names,
                     chat_template=args.chat_template_text, reasoning_parser=args.reasoning_parser,
                     tool_call_parser=args.tool_call_parser, allowed_origins=args.origins,
                     context=context, api_keys=args.api_keys, max_body_bytes=args.max_body_bytes,
                     max_queue=args.max_queue, shutdown_timeout=args.shutdown_timeout,
                     tp=len(rooms), plan_line="\n".join(block),
                     kv_mode="pages" if p.paged else "windows", load_s=opened.load_seconds)
    from server.api.reasoning_plan import server_parser
    log.info("reasoning parser: %s (--reasoning-parser %s)", server_parser(state) or "none",
             args.reasoning_parser)
    # a signal just before uvicorn serves or after it stopped (it drains on the ones in
    # between, server/api/http_server.py): exit as after a clean run; the default actions
    # would kill rank 0 before sched.stop() could send the followers their StopStep
    signal.signal(signal.SIGTERM, _exit_on_term)
    signal.signal(signal.SIGINT, _exit_on_term)
    stats = StatsLogger(sched.stats, args.stats_interval).start()
    try:
        from server.warmup import warm_up
        # the first round compiles the CPU kernels (builds the GPU's): /health says "loading"
        # until they are ready; a SIGTERM meanwhile stops the ranks as below
        warm_up(sched, opened.spec.vocab, f"the {args.device.replace('cuda', 'GPU').upper()} kernels")
        args.loading.stop()                    # uvicorn takes the socket from here
        run_uvicorn(create_app(state), args.host, args.port, args.log_level, sock=args.http_socket,
                    header_timeout=args.header_timeout, max_connections=args.max_connections,
                    body_timeout=args.body_timeout, write_timeout=args.write_timeout)
    except SystemExit as e:                    # the SIGTERM above: exit as below
        if e.code not in (0, None):
            raise
    finally:
        stats.stop()
        if beat:                               # the followers leave at the StopStep: no alarm
            beat.stop()
        sched.stop()
    if not driver.ok or sched.error:           # the group failed while serving: say so
        log.error("exiting with status 1: %s", sched.error or driver.failure or "a rank failed")
        return 1
    return 0
