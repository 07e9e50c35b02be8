"""What the scripts that store training runs for the chapters share (tools/gpt_ladder.py,
tools/attention_variants.py): their command line (--seeds, --out, --processes, --cache), the
pool that trains each run in a fresh process, a finished run kept in the cache folder, the
held-out losses read in consecutive windows, and the 95% percentile interval."""
import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import d2lattn  # noqa: F401  (before mxnet: the numpy shim)
import numpy as onp
from mxnet import npx

from d2lattn.data.lm import consecutive_windows


def command_line(doc, out, seeds_help=None):
    """The parsed arguments of a script whose docstring is ``doc`` and whose result goes to
    ``out`` by default; the --cache folder is made if it is missing."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help=seeds_help)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--processes", type=int, default=1,
                        help="runs trained at once (each uses one core)")
    parser.add_argument("--cache", type=Path, help="a folder that keeps every finished run")
    args = parser.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    return args


def spawn_pool(processes):
    """A pool of ``processes`` workers, each run in a fresh process (spawned: MXNet's threads
    do not survive a fork)."""
    return ProcessPoolExecutor(processes, mp_context=get_context("spawn"))


def cached(cache, name, make):
    """The record ``make()`` returns (a JSON object); with a ``cache`` folder it is kept
    there as ``name``.json, and read from there instead of made again when it is there."""
    stored = cache and cache / f"{name}.json"
    if stored and stored.exists():
        return json.loads(stored.read_text())
    record = make()
    if stored:
        stored.write_text(json.dumps(record))
    return record


def window_nll(net, ids, length, pad):
    """The loss of every token of ``ids`` but the first, in order, read in consecutive
    windows of ``length`` tokens (float64 NumPy)."""
    windows, lens = consecutive_windows(ids, length, pad)
    nll = []
    for i in range(0, windows.shape[0], 16):
        rows = windows[i:i + 16]
        log_p = npx.log_softmax(net(rows[:, :-1]), axis=-1)
        nll.append(-npx.pick(log_p, rows[:, 1:], axis=-1).asnumpy())
    nll = onp.concatenate(nll).astype("float64")
    return onp.concatenate([row[:n - 1] for row, n in zip(nll, lens.asnumpy())])


def interval(values):
    """The 95% percentile interval of ``values`` as [low, high], rounded."""
    return [round(float(v), 4) for v in onp.percentile(values, [2.5, 97.5])]
