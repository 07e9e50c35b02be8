"""Fill the chapters' code listings with the package's own source.

    python tools/sync_listings.py

A listing is a markdown cell holding one fenced Python block whose first line names a package
object by its dotted path, for example

    ```python
    # d2lattn.attention.MultiHeadAttention.hybrid_forward
    def hybrid_forward(self, F, queries, keys, values, valid_lens):
        ...
    ```

The block shows that object's source as `inspect.getsource` returns it (dedented), so the book
shows exactly the code that `import d2lattn` runs. A markdown cell, not a code cell: the reader
sees the package's code in the HTML book and on Colab, and running the chapter does not define
a second copy of it. tests/test_book.py fails when a listing differs from the package; this
tool rewrites every listing from the package (run it after changing a listed object).
"""
import importlib
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LISTING = re.compile(r"\A```python\n# (d2lattn(?:\.\w+)+)\n(.*?)```\n?\Z", re.S)


def chapters():
    """The chapter notebooks, sorted."""
    return sorted(ROOT.glob("book/*.ipynb"))


def resolve(dotted):
    """The object named by ``dotted`` (str): the longest importable module prefix, then
    attributes, e.g. ``d2lattn.attention.MultiHeadAttention.hybrid_forward``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ValueError(f"no module in {dotted!r}")


def listing_source(dotted):
    """The markdown of the listing of ``dotted``: a fenced block, its path, then its source."""
    code = textwrap.dedent(inspect.getsource(resolve(dotted)))
    return f"```python\n# {dotted}\n{code}```"


def listings(notebook):
    """(cell, dotted path) for every listing cell of a notebook (a dict read from JSON)."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            match = LISTING.match("".join(cell["source"]))
            if match:
                yield cell, match.group(1)


def sync(path):
    """Rewrite the listings of the notebook at ``path`` from the package; return the dotted
    paths whose listing changed."""
    text = path.read_text(encoding="utf-8")
    notebook = json.loads(text)
    changed = []
    for cell, dotted in listings(notebook):
        new = listing_source(dotted)
        if "".join(cell["source"]) != new:
            cell["source"] = new.splitlines(keepends=True)
            changed.append(dotted)
    if changed:  # nbformat's layout: indent 1, sorted keys
        path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    return changed


def main():
    sys.path.insert(0, str(ROOT))
    for path in chapters():
        for dotted in sync(path):
            print(f"{path.relative_to(ROOT)}: {dotted} updated")


if __name__ == "__main__":
    main()
