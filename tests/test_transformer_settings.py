"""``tools/transformer_settings.py`` and the runs it stored for Chapter 6: each variant changes one
of the chapter's settings, the chapter trains with the script's settings, the stored file holds
every setting, and the first epoch of a stored run reproduces."""
import ast
import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import nbformat
import numpy as onp

import d2lattn
from d2lattn.data import load_corpus

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "transformer_settings", ROOT / "tools" / "transformer_settings.py")
settings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(settings)
STORED = json.loads(settings.OUT.read_text())


def chapter_constants():
    """The last value the chapter's code gives each plainly assigned name (``a, b = 1, 2``)."""
    values = {}
    nb = nbformat.read(ROOT / "book" / "06_transformer.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or "%pip" in cell.source:
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                items = value.elts if isinstance(value, ast.Tuple) else [value]
                for name, item in zip(names, items):
                    if isinstance(name, ast.Name) and isinstance(item, ast.Constant):
                        values[name.id] = item.value
    return values


def test_each_variant_changes_one_of_the_chapters_settings():
    chapter = asdict(settings.CHAPTER)
    for name, variant in settings.VARIANTS.items():
        changed = {key for key, value in asdict(variant).items() if value != chapter[key]}
        assert len(changed) == (0 if name == "chosen settings" else 1), (name, changed)


def test_the_chapter_trains_with_the_scripts_settings():
    values = chapter_constants()
    setting = settings.CHAPTER
    assert (values["num_hiddens"], values["ffn_num_hiddens"], values["num_heads"],
            values["num_blks"], values["num_epochs"]) == (
        settings.NUM_HIDDENS, settings.FFN_NUM_HIDDENS, settings.NUM_HEADS,
        settings.NUM_BLKS, settings.NUM_EPOCHS)
    assert (values["dropout"], values["batch_size"], values["warmup_steps"],
            values["label_smoothing"]) == (setting.dropout, setting.batch_size,
                                           setting.warmup_steps, setting.label_smoothing)
    assert (setting.factor, setting.pre_norm) == (1.0, False)  # the package's defaults


def test_the_stored_runs_hold_every_setting_with_its_values():
    assert STORED["epochs"] == settings.NUM_EPOCHS
    seed_one = {run["setting"]: run for run in STORED["runs"] if run["seed"] == 1}
    assert set(seed_one) == set(settings.VARIANTS)
    for run in STORED["runs"]:
        assert {key: run[key] for key in asdict(settings.CHAPTER)} == asdict(
            settings.VARIANTS[run["setting"]])
        assert 0 <= run["val_bleu"] <= 1 and run["val_loss"] > 0
        if "val_losses" in run:  # older records keep only the last epoch's numbers
            assert len(run["train_losses"]) == len(run["val_losses"]) == settings.NUM_EPOCHS
            assert run["val_loss"] == round(run["val_losses"][-1], 4)


def test_the_first_epoch_of_the_chapters_run_reproduces():
    (stored,) = [run for run in STORED["runs"]
                 if (run["setting"], run["seed"]) == ("chosen settings", 1)]
    history, bleu, _ = settings.train_and_validate(
        settings.CHAPTER, 1, load_corpus(n_train=4000), d2lattn.cpu(), num_epochs=1)
    onp.testing.assert_allclose(history["train"][0], stored["train_losses"][0], rtol=2e-3)
    onp.testing.assert_allclose(history["val"][0], stored["val_losses"][0], rtol=2e-3)
    assert 0 <= bleu < stored["val_bleu"]  # one epoch is not yet the trained model
