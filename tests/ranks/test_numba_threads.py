"""CPU ranks of one host share its cores: each rank's numba threads default to
max(1, cores // ranks on this host) (server/config.py numba_threads), put in
NUMBA_NUM_THREADS before numba is imported, so the followers rank 0 starts inherit it."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from server.config import ConfigError, Env, numba_threads
from server.serve import ranks_on_this_host


@pytest.mark.parametrize("cores, ranks, want", [(2, 1, 2), (2, 2, 1), (2, 3, 1), (16, 3, 5),
                                                (16, 4, 4), (1, 2, 1)])
def test_the_cores_are_shared_by_the_ranks_of_the_host(cores, ranks, want):
    environ = {}
    assert numba_threads(environ, ranks, cores=cores) == want
    assert environ == {"NUMBA_NUM_THREADS": str(want)}


def test_a_number_set_is_kept_and_a_bad_one_refused():
    environ = {"NUMBA_NUM_THREADS": "3"}
    assert numba_threads(environ, 2, cores=2) == 3 and environ["NUMBA_NUM_THREADS"] == "3"
    for bad in ("two", "0", "-1"):
        with pytest.raises(ConfigError, match="NUMBA_NUM_THREADS"):
            numba_threads({"NUMBA_NUM_THREADS": bad}, 1, cores=2)


def _args(rank=None):
    return argparse.Namespace(rank=rank)


def test_ranks_on_this_host():
    assert ranks_on_this_host(_args(), Env.read({}), 1) == 1
    assert ranks_on_this_host(_args(), Env.read({}), 3) == 3          # rank 0 starts the others
    assert ranks_on_this_host(_args(1), Env.read({}), 3) == 1         # a rank a host
    assert ranks_on_this_host(_args(0), Env.read({}), 3) == 1
    torchrun = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    assert ranks_on_this_host(_args(), Env.read(torchrun), 4) == 2
    with pytest.raises(ConfigError, match="LOCAL_WORLD_SIZE"):
        Env.read({"LOCAL_WORLD_SIZE": "0"})


def test_serve_sets_it_before_numba_is_imported(tmp_path):
    """The serve path up to the model's load imports no numba: the setting takes effect."""
    code = ("import sys, os; import server.cli, server.serve, server.config, server.flags, "
            "server.ranks.rendezvous, server.api.http_socket; "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
