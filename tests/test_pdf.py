"""The PDF edition (tools/build_pdf.py): the single-page build printed by headless Chromium
holds every chapter, every plot, every figure's caption and every formula typeset, with an
outline of the chapters, and the book's title page links to it."""
import json
import re
import shutil
import subprocess
import sys
import unicodedata

import pytest

pypdf = pytest.importorskip("pypdf", reason="pypdf is not installed: pip install -r "
                                            "requirements.txt")

from test_book import CHAPTERS, ROOT  # noqa: E402

TOOL = ROOT / "tools" / "build_pdf.py"


@pytest.fixture(scope="module")
def pdf(book_build, tmp_path_factory):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium: apt-get install chromium")
    out = tmp_path_factory.mktemp("pdf")
    result = subprocess.run([sys.executable, TOOL, "--out", out, "--build", book_build[0]],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reader = pypdf.PdfReader(out / "d2lattn-attention.pdf")
    text = "".join(page.extract_text() for page in reader.pages)
    return reader, letters(text)


def letters(text):
    """Letters and digits only, ligatures split ("fi" for U+FB01): layout apart (words split
    across lines, hyphens, spaces)."""
    return re.sub(r"[\W_]", "", unicodedata.normalize("NFKC", text))


def notebook(path):
    return json.loads(path.read_text(encoding="utf-8"))


def title(path):
    """A chapter's title: the first heading of its first markdown cell."""
    cell = next(c for c in notebook(path)["cells"] if c["cell_type"] == "markdown")
    return re.search(r"^# (.+)$", "".join(cell["source"]), re.M)[1]


def test_the_pdf_holds_every_chapter_with_an_outline(pdf):
    reader, text = pdf
    assert len(reader.pages) > 20 * len(CHAPTERS) // 2
    outline = [item.title for item in flat(reader.outline)]
    for number, path in enumerate(CHAPTERS, 1):
        name = title(path)
        assert letters(name) in text, name
        # Chromium's outline repeats some headings' text ("5.1. 5.1. Self-attention...")
        assert any(entry.startswith(f"{number}. ") and name.split()[0] in entry
                   for entry in outline), (name, outline)


def flat(outline):
    """The entries of a PDF outline, nested levels included."""
    return [entry for item in outline
            for entry in (flat(item) if isinstance(item, list) else [item])]


def test_the_pdf_holds_every_plot_and_figure(pdf):
    reader, text = pdf
    plots = sum(1 for path in CHAPTERS for cell in notebook(path)["cells"]
                for output in cell.get("outputs", []) if "image/png" in output.get("data", {}))
    assert sum(len(page.images) for page in reader.pages) >= plots > 0
    captions = [m[1] for path in CHAPTERS for cell in notebook(path)["cells"]
                if cell["cell_type"] == "markdown"
                for m in re.finditer(r"^:::\{figure\}.*?\n(?::\w+:.*\n)*\n?(.+?)\n",
                                     "".join(cell["source"]), re.M)]
    assert captions
    for caption in captions:  # its words up to the first formula, role or emphasis
        words = letters(re.split(r"[$`*{]", caption)[0])[:40]
        assert len(words) < 10 or words in text, caption


def test_every_formula_is_typeset(pdf):
    reader, _ = pdf
    text = "".join(page.extract_text() for page in reader.pages)
    assert not re.findall(r"\\(?:frac|mathbf|sum|text|begin)\b|\$\$", text)[:5]


def test_the_title_page_links_to_the_pdf():
    assert 'href="../d2lattn-attention.pdf"' in (ROOT / "book" / "index.md").read_text()
