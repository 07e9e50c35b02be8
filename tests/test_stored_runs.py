"""tools/stored_runs.py, what tools/gpt_ladder.py and tools/attention_variants.py share: the
command line, the cache of finished runs, the held-out losses in windows and the interval."""
import math
import sys
from pathlib import Path

import numpy as onp
import pytest
from mxnet import npx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import stored_runs  # after the path to tools/ is added


def test_command_line_defaults_and_the_cache_folder_it_makes(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["script"])
    args = stored_runs.command_line("A script.\n\nMore.", tmp_path / "out.json")
    assert (args.seeds, args.out, args.processes, args.cache) == \
        ([0, 1], tmp_path / "out.json", 1, None)
    cache = tmp_path / "a" / "cache"
    monkeypatch.setattr(sys, "argv", ["script", "--seeds", "3", "4", "5", "--processes", "2",
                                      "--cache", str(cache), "--out", str(tmp_path / "x")])
    args = stored_runs.command_line("A script.", tmp_path / "out.json")
    assert (args.seeds, args.out, args.processes, args.cache) == ([3, 4, 5], tmp_path / "x", 2,
                                                                 cache)
    assert cache.is_dir()


def test_a_cached_run_is_made_once_and_read_after(tmp_path):
    made = []

    def make():
        made.append(1)
        return {"seed": 0, "nll": [0.5, 1.5]}

    assert stored_runs.cached(None, "run-0", make) == {"seed": 0, "nll": [0.5, 1.5]}
    assert stored_runs.cached(None, "run-0", make) == {"seed": 0, "nll": [0.5, 1.5]}
    assert len(made) == 2  # no cache: made every time
    for _ in range(2):
        assert stored_runs.cached(tmp_path, "run-0", make) == {"seed": 0, "nll": [0.5, 1.5]}
    assert len(made) == 3 and (tmp_path / "run-0.json").is_file()


def test_window_nll_is_the_loss_of_every_token_but_the_first_in_order():
    """A model that puts its mass on the token after the previous one (mod V): every target
    once, in order, whatever the window length, none of the padding."""
    V = 5

    def net(X):
        return 4.0 * npx.one_hot((X + 1) % V, V)

    ids = [0, 1, 3, 4, 0, 2, 3, 3, 4]
    logits = 4.0 * onp.eye(V)[(onp.array(ids[:-1]) + 1) % V]
    log_p = logits - onp.log(onp.exp(logits).sum(-1, keepdims=True))
    expected = -log_p[onp.arange(len(ids) - 1), ids[1:]]
    for length in (1, 3, 4, 8, 20):
        got = stored_runs.window_nll(net, ids, length, pad=V - 1)
        assert got.dtype == onp.float64
        onp.testing.assert_allclose(got, expected, atol=1e-5)  # float32 losses


def test_interval_is_the_central_95_percent():
    low, high = stored_runs.interval(onp.arange(1001) / 1000)
    assert (low, high) == (0.025, 0.975)
    assert stored_runs.interval([math.pi] * 3) == [3.1416, 3.1416]
