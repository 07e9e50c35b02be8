"""The PDF edition (tools/build_pdf.py): the single-page build printed by headless Chromium
holds every chapter, each from a new page, every plot, every figure's caption and every formula
typeset, with an outline of the chapters and no blank page; the book's title page links to it
once it is built, and a build without it links to no missing file."""
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
PDF = "d2lattn-attention.pdf"
FOOTER = re.compile(r"^\s*\d+ / \d+\s*$")  # the page number tools/build_pdf.py prints


@pytest.fixture(scope="module")
def pdf(book_build, tmp_path_factory):
    """The PDF printed from a copy of the tests' build: (its reader, the text of each page,
    the letters of its whole text, the copy's folder). pypdf reads the text of its ~280 pages
    in tens of seconds, so this is done once for every test."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium: apt-get install chromium")
    # into a copy of the tests' HTML build, as `tools/build_pdf.py` does into _build/html (the
    # tool links the PDF from the copy's title page; the build the other tests read stays as is)
    out = tmp_path_factory.mktemp("pdf") / "html"
    shutil.copytree(book_build[0] / "_build" / "html", out)
    result = subprocess.run([sys.executable, TOOL, "--out", out, "--build", book_build[0]],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reader = pypdf.PdfReader(out / PDF)
    texts = [page.extract_text() for page in reader.pages]
    return reader, texts, letters("".join(texts)), out


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
    reader, _, text, _ = pdf
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
    reader, _, text, _ = pdf
    plots = sum(1 for path in CHAPTERS for cell in notebook(path)["cells"]
                for output in cell.get("outputs", []) if "image/png" in output.get("data", {}))
    assert sum(image_count(page) for page in reader.pages) >= plots > 0
    captions = [m[1] for path in CHAPTERS for cell in notebook(path)["cells"]
                if cell["cell_type"] == "markdown"
                for m in re.finditer(r"^:::\{figure\}.*?\n(?::\w+:.*\n)*\n?(.+?)\n",
                                     "".join(cell["source"]), re.M)]
    assert captions
    for caption in captions:  # its words up to the first formula, role or emphasis
        words = letters(re.split(r"[$`*{]", caption)[0])[:40]
        assert len(words) < 10 or words in text, caption


def image_count(obj, seen=()):
    """The image XObjects a page (or a form) ``obj`` holds, those of its forms included, read
    from its resources (Chromium writes every image as one). pypdf's ``page.images`` counts
    these too, and the inline images of the page's content stream, which it parses for them:
    15 to 30 s for the whole book."""
    resources = obj.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    count = 0
    for ref in (xobjects.get_object().values() if xobjects is not None else []):
        xobject = ref.get_object()
        if xobject.get("/Subtype") == "/Image":
            count += 1
        elif xobject.get("/Subtype") == "/Form" and id(xobject) not in seen:
            count += image_count(xobject, (*seen, id(xobject)))
    return count


def test_every_formula_is_typeset(pdf):
    _, texts, _, _ = pdf
    text = "".join(texts)
    assert not re.findall(r"\\(?:frac|mathbf|sum|text|begin)\b|\$\$", text)[:5]


def test_no_page_is_blank(pdf):
    """A page with no text but its page number and no image is blank (Jupyter Book's print
    title, with a page break before it, printed one as the first page)."""
    reader, texts, _, _ = pdf
    blank = [number for number, (page, text) in enumerate(zip(reader.pages, texts), 1)
             if FOOTER.match(text or "") and not page.images]
    assert not blank, f"blank pages: {blank} of {len(reader.pages)}"
    book_title = re.search(r"^# (.+)$", (ROOT / "book" / "index.md").read_text(), re.M)[1]
    assert letters(texts[0]).startswith(letters(book_title))


def test_every_chapter_starts_a_page(pdf):
    _, texts, _, _ = pdf
    starts = [letters(text)[:60] for text in texts]
    for number, path in enumerate(CHAPTERS, 1):
        heading = letters(f"{number}. {title(path)}")[:30]
        assert any(start.startswith(heading) for start in starts), title(path)


def local_links(html):
    """(page, href) for every link of the HTML build ``html`` to a file of the build."""
    for page in sorted((html / "book").glob("*.html")) + [html / "index.html"]:
        for href in re.findall(r'<a [^>]*href="([^"#]+)', page.read_text(encoding="utf-8")):
            if not re.match(r"[a-z]+:", href):
                yield page, href


def test_a_build_without_the_pdf_has_no_broken_link(book_build):
    """`jupyter-book build` alone does not make the PDF: no page may link to it then, nor
    to any file the build lacks."""
    html = book_build[0] / "_build" / "html"
    assert not (html / PDF).exists()
    broken = [(page.name, href) for page, href in local_links(html)
              if not (page.parent / href).resolve().exists()]
    assert not broken
    assert 'id="pdf-edition"' in (html / "book" / "index.html").read_text(encoding="utf-8")


def test_the_title_page_links_to_the_pdf_once_it_is_built(pdf):
    *_, html = pdf
    links = [(page, href) for page, href in local_links(html) if href.endswith(PDF)]
    assert [(page.name, href) for page, href in links] == [("index.html", f"../{PDF}")]
    assert all((page.parent / href).resolve() == (html / PDF).resolve() for page, href in links)
