"""The book: every chapter is in the table of contents, stored executed, installs itself on
Colab from the repository named in _config.yml, and the book builds with no Sphinx warning."""
import ast
import io
import math
import re
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_listings  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO_URL = CONFIG["repository"]["url"]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("ch*.ipynb"))
# Characters of code or output that fit in a cell of the HTML book at a 1280 px window
# (_static/course.css); tests/test_browser.py checks the pages themselves.
LINE_WIDTH = 92
FENCED = re.compile(r"^(```+)(.*)\n(.*?)^\1$", re.S | re.M)


def code_blocks(markdown):
    """The code blocks of a markdown text (fenced, not MyST {directives})."""
    return [m.group(3) for m in FENCED.finditer(markdown) if not m.group(2).startswith("{")]
COLAB_BLOB = (f"https://colab.research.google.com/github/{REPO_URL.split('github.com/')[1]}"
              f"/blob/{CONFIG['repository']['branch']}")


def toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [chapter["file"] for chapter in part["chapters"]]
    return files


def test_every_chapter_is_in_the_toc():
    assert CHAPTERS, "no chapter notebooks in book/"
    listed = set(toc_files())
    for path in CHAPTERS:
        assert str(path.relative_to(ROOT).with_suffix("")) in listed, path.name


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_is_stored_executed_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), "not executed top to bottom in one run"
    errors = [out for cell in code for out in cell.outputs if out.output_type == "error"]
    assert not errors, errors[0].get("ename")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_first_code_cell_installs_from_the_configured_repository_on_colab_only(path):
    nb = nbformat.read(path, as_version=4)
    first = next(cell for cell in nb.cells if cell.cell_type == "code").source
    assert 'if "google.colab" in sys.modules:' in first
    urls = re.findall(r"git\+(https://\S+?)[\"@\s]", first)
    assert urls == [REPO_URL], f"install cell points at {urls}, _config.yml at {REPO_URL}"


def shown_lines(nb):
    """(cell number, line) for every line of code a reader sees: code cells, their text
    outputs, and code blocks in markdown."""
    for number, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            texts = code_blocks(cell.source)
        elif "remove-cell" in cell.metadata.get("tags", []):
            texts = []
        else:
            texts = [cell.source]
            for out in cell.outputs:
                texts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
        for text in texts:
            for line in text.splitlines():
                yield number, line


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_code_or_output_line_is_wider_than_a_cell(path):
    nb = nbformat.read(path, as_version=4)
    wide = [(number, len(line), line[:60]) for number, line in shown_lines(nb)
            if len(line) > LINE_WIDTH]
    assert not wide, f"{len(wide)} lines wider than {LINE_WIDTH} characters, e.g. {wide[:3]}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_listings_show_the_package_source(path):
    notebook = nbformat.read(path, as_version=4)
    for cell, dotted in sync_listings.listings(notebook):
        assert cell.source == sync_listings.listing_source(dotted), \
            f"the listing of {dotted} differs from the package: run python tools/sync_listings.py"


def test_listing_cells_are_recognised():
    cell = {"cell_type": "markdown",
            "source": "```python\n# d2lattn.attention.masked_softmax\nstale\n```"}
    found = list(sync_listings.listings({"cells": [cell]}))
    assert found == [(cell, "d2lattn.attention.masked_softmax")]
    assert sync_listings.listing_source("d2lattn.attention.masked_softmax").startswith(
        "```python\n# d2lattn.attention.masked_softmax\ndef masked_softmax(X, valid_lens):")
    assert "    def forward(" not in sync_listings.listing_source(
        "d2lattn.attention.DotProductAttention.forward")  # methods are dedented


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_install_cell_and_nbval_markers_stay_out_of_the_book(path):
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert "remove-cell" in code[0].metadata.get("tags", []), "run tools/set_colab_cell.py"
    marked = [number for number, cell in enumerate(code) if "NBVAL" in cell.source]
    assert not marked, f"code cells {marked}: use the nbval-ignore-output tag, not a comment"


# One fenced block: its info string stays on the opening line (FENCED's ``(.*)`` under re.S runs
# on to the last fence of the text, so the prose check once saw no number at all).
FENCED_BLOCK = r"^(```+)([^\n]*)\n(.*?)^\1$"


def prose(nb):
    """The chapter's prose: markdown without code blocks, math, links' targets or citations."""
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    for pattern in (FENCED_BLOCK, r"\$\$.*?\$\$", r"\$[^$\n]+\$", r"\]\([^)]*\)", r"\{\w+\}`[^`]*`",
                    r"`[^`\n]*`"):
        text = re.sub(pattern, " ", text, flags=re.S | re.M)
    return text


def output_numbers(nb):
    """Every number the chapter prints, as printed (str: its decimals count; text and HTML
    outputs, not the progress bars on stderr, whose rates and counts would excuse almost any
    number)."""
    found = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("name") == "stderr":
                continue
            data = out.get("data", {})
            text = out.get("text", "") + data.get("text/plain", "") + data.get("text/html", "")
            found.update(NUMBER.findall(text.replace(",", "")))
    return found


NUMBER = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])")
# Decimal numbers a chapter or page takes from papers, settings or versions, not from its
# outputs (in a chapter's prose or, written as literals, in its code).
QUOTED = {
    # Vaswani et al. 2017: BLEU of the base and big models, 3.5 days of training, Adam's beta2;
    # an exercise's label-smoothing rate.
    "06_transformer.ipynb": {"27.3", "38.1", "28.4", "41.8", "3.5", "0.98", "0.2"},
    # the Python version the corpus was extracted from; d2l's section numbers; the 3.3 billion
    # words BERT was pretrained on (Devlin et al. 2019)
    "07_bert.ipynb": {"3.11", "15.8", "15.10", "3.3"},
    # the Python version of the set-up command; the oldest numpy d2lattn supports
    "index.md": {"3.11", "1.23"},
}
PAGES = sorted((ROOT / "book").glob("*.md"))


def decimals(number):
    """The number of digits after the point of a number written in fixed notation (str)."""
    return len(number.split(".")[1]) if "." in number else 0


def matches(quoted, printed):
    """Whether the prose's ``quoted`` is ``printed`` (both str) as the prose rounds it: to its
    decimals, from an output that shows at least as many (a printed 0.67 does not vouch for a
    quoted 0.670), or within 5% for a number in scientific notation."""
    value, shown = float(quoted), float(printed)
    if "e" in quoted.lower():
        return math.isclose(shown, value, rel_tol=0.05)
    digits = decimals(quoted)
    return ("e" in printed.lower() or decimals(printed) >= digits) \
        and abs(round(shown, digits) - value) < 0.5 * 10**-digits


def pasted_literals(nb, quoted=()):
    """The results a chapter's code pastes rather than computes: decimal literals of three or
    more decimals and two or more significant digits (0.924, not a setting such as 0.005 or
    0.1), unless ``quoted``. Lines of IPython magics (the install cell's versions) are not
    Python."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines, magic = [], False
        for line in cell.source.splitlines():
            magic = line.lstrip().startswith(("%", "!")) or (magic and lines[-1:] == ["\\"])
            lines.append("\\" if magic and line.rstrip().endswith("\\") else
                         "" if magic else line)
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            number = token.string.lower().replace("_", "")
            if token.type != tokenize.NUMBER or not re.fullmatch(r"\d*\.\d+", number):
                continue
            if decimals(number) >= 3 and len(number.replace(".", "").lstrip("0")) >= 2 \
                    and number not in quoted:
                found.append(token.string)
    return found


def unprinted_numbers(nb, quoted=()):
    """The decimal numbers of the prose that the outputs do not print (nor ``quoted``); an
    output that only echoes a result pasted into the code (:func:`pasted_literals`) vouches
    for nothing."""
    pasted = [float(number) for number in pasted_literals(nb, quoted)]
    printed = {p for p in output_numbers(nb) if float(p) not in pasted}
    return [number for number in NUMBER.findall(prose(nb).replace(",", ""))
            if number not in quoted and not any(matches(number, p) for p in printed)]


def nearest_printed(number, nb):
    """The printed number closest to ``number`` (str), to say what a stale one should be."""
    return min(output_numbers(nb), key=lambda p: abs(float(p) - float(number)), default=None)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_decimal_numbers_in_the_prose_come_from_the_outputs(path):
    """A decimal number in the text (0.944, 3.8e-6, 15.0%) is one the chapter computed and
    printed, rounded as the text rounds it, or one it quotes from a paper (QUOTED); a number
    of another chapter is computed again from that chapter's stored runs, not pasted."""
    nb = nbformat.read(path, as_version=4)
    missing = unprinted_numbers(nb, QUOTED.get(path.name, set()))
    assert not missing, "numbers in the prose that no output computes (the nearest printed): " \
        + ", ".join(f"{n} ({nearest_printed(n, nb)})" for n in missing)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_result_is_pasted_into_the_code(path):
    """Chapter 6 once printed Chapter 3's BLEU from a literal, 0.924, long after Chapter 3's
    stored model had come to score 0.934: a result comes from a computation."""
    pasted = pasted_literals(nbformat.read(path, as_version=4), QUOTED.get(path.name, set()))
    assert not pasted, f"results written into the code instead of computed: {pasted}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_pages_quote_only_cited_numbers(path):
    """A page without outputs (the index, the glossary, ...) has no decimal number of its
    own beyond the cited ones (QUOTED): a measurement there would go stale unseen."""
    page = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(path.read_text())])
    assert unprinted_numbers(page, QUOTED.get(path.name, set())) == []


def test_a_stale_number_in_the_prose_is_found():
    """Chapter 8 once said 0.670 where its cell printed 0.660: the check must see it, also
    after a fenced block and beside progress bars that print other numbers. (Until then a
    fenced block's pattern ran on to the last fence of the chapter and took the prose between
    with it, so the check saw almost none of Chapter 8's prose.)"""
    def notebook(text, printed="test accuracy 0.660\n"):
        return nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_markdown_cell(
                "```{figure} f.svg\nalt\n```\n\n```python\nx = 1.5\n```"),
            nbformat.v4.new_code_cell("print(acc)", outputs=[
                nbformat.v4.new_output("stream", name="stdout", text=printed),
                nbformat.v4.new_output("stream", name="stderr", text="val_acc=0.670 3.5it/s")]),
            nbformat.v4.new_markdown_cell(text + "\n\n```{figure} g.svg\nalt\n```")])
    assert unprinted_numbers(notebook("It reaches 0.660 ($p = 0.5$).")) == []
    assert unprinted_numbers(notebook("It reaches 0.670, then 0.66 and 3.5 s.")) == ["0.670",
                                                                                  "3.5"]
    assert nearest_printed("0.670", notebook("")) == "0.660"
    # an output that rounds to fewer decimals than the prose quotes does not vouch for it
    rounded = "accuracy 0.67, loss 4.9, 3.8e-06\n"
    assert unprinted_numbers(notebook("0.670 and 4.93; 0.67, 4.9 and 3.8e-6", rounded)) == [
        "0.670", "4.93"]



def test_a_pasted_result_is_found():
    """A number that a cell only echoes from a literal of its code is not vouched for, in the
    prose or in the code; settings, versions in magics and quoted numbers are no results."""
    def notebook(code, printed):
        return nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("%pip install mxnet==1.9.1 \\\n    numpy==1.23.5"),
            nbformat.v4.new_code_cell(code, outputs=[
                nbformat.v4.new_output("stream", name="stdout", text=printed)]),
            nbformat.v4.new_markdown_cell("Chapter 3 scores 0.924 with dropout 0.1.")])
    pasted = notebook("other = {'bleu': 0.924}  # Chapter 3\nprint(other['bleu'], 0.1)",
                      "0.924 0.1\n")
    assert pasted_literals(pasted) == ["0.924"]
    assert unprinted_numbers(pasted) == ["0.924"]
    assert unprinted_numbers(pasted, {"0.924"}) == []  # a cited value may be written down
    computed = notebook("print(round(corpus_bleu(preds, refs), 3), 0.1, 1e-3, 0.005)",
                        "0.924 0.1 0.001 0.005\n")
    assert pasted_literals(computed) == [] and unprinted_numbers(computed) == []


def chapter_functions(path, *names):
    """The functions ``names`` that a chapter's code cells define, executed on their own
    (their module-level names: numpy as ``onp``)."""
    import numpy
    nb = nbformat.read(path, as_version=4)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"
             and any(f"def {name}(" in cell.source for name in names)]  # no magics there
    defs = [node for source in cells for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef) and node.name in names]
    namespace = {"onp": numpy}
    exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)
    return [namespace[name] for name in names]


def test_chapter_8_interval_resamples_whole_groups():
    """Chapter 8's ``interval`` against a loop over replicates that gathers the examples of
    the drawn groups (the twins of a sentence) one group at a time; without groups it
    draws the examples themselves, from the same stream."""
    import numpy
    interval, = chapter_functions(ROOT / "book" / "08_bert_finetuning.ipynb", "interval")
    rng = numpy.random.RandomState(5)
    n, num_groups, num_draws = 30, 12, 300
    groups = numpy.sort(numpy.r_[numpy.arange(num_groups), rng.randint(0, num_groups,
                                                                          n - num_groups)])
    a, b = (rng.rand(3, n) < 0.7).astype(float), (rng.rand(2, n) < 0.6).astype(float)
    for g, count in ((groups, num_groups), (numpy.arange(n), n)):
        stream = numpy.random.RandomState(9)
        drawn = stream.randint(0, count, (num_draws, count))
        run_a, run_b = stream.randint(0, 3, num_draws), stream.randint(0, 2, num_draws)
        replicates = []
        for k in range(num_draws):
            rows = numpy.concatenate([numpy.flatnonzero(g == j) for j in drawn[k]])
            replicates.append(a[run_a[k], rows].mean() - b[run_b[k], rows].mean())
        want = (a.mean() - b.mean(), *numpy.percentile(replicates, [2.5, 97.5]))
        got = interval(a, b, g if count < n else None, num_draws=num_draws, seed=9)
        numpy.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # twins that always agree: resampled together, the interval is wider than apart
    twins = numpy.repeat(rng.rand(40) < 0.8, 2).astype(float)
    _, low, high = interval(twins, groups=numpy.arange(80) // 2)
    _, low_apart, high_apart = interval(twins)
    assert high - low > 1.2 * (high_apart - low_apart)


# Calls that draw a colour map. In a chapter, heatmaps go through d2lattn.show_heatmaps, whose
# colour map and scale follow from the kind of quantity (weights on 0..1, signed values centred
# at 0: tests/test_plot.py); any other colour map uses the package's map with a fixed scale.
COLOUR_MAPS = {"imshow", "matshow", "pcolor", "pcolormesh"}
PACKAGE_CMAPS = {"WEIGHTS_CMAP", "SIGNED_CMAP"}


def own_colour_scales(source):
    """The calls in ``source`` that choose a colour map or a scale of their own: show_heatmaps
    given a ``cmap``, or an imshow (matshow, pcolormesh) without one of the package's maps and a
    fixed ``vmin`` and ``vmax``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", None))
        keywords = {k.arg: k.value for k in node.keywords}
        cmap = keywords.get("cmap")
        if name == "show_heatmaps" and cmap is not None or name in COLOUR_MAPS and not (
                getattr(cmap, "id", None) in PACKAGE_CMAPS and {"vmin", "vmax"} <= set(keywords)):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:70]}")
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_colour_maps_follow_the_kind_of_quantity(path):
    """One colour map per kind of quantity and one scale for panels meant to be compared:
    no chapter picks a colour map or lets a heatmap scale itself."""
    nb = nbformat.read(path, as_version=4)
    found = {number: own_colour_scales(cell.source) for number, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and "remove-cell" not in cell.metadata.get("tags", [])}
    assert not any(found.values()), {n: calls for n, calls in found.items() if calls}


def test_own_colour_scales_are_found():
    """The defects the check is for: Chapter 3's grey alignment map, Chapter 5's sequential map
    for signed values and its imshow with a scale per panel."""
    assert own_colour_scales('show_heatmaps(w, "k", "q", cmap="gray")') == [
        "line 1: show_heatmaps(w, 'k', 'q', cmap='gray')"]
    assert len(own_colour_scales("ax.imshow(t, cmap='Blues', vmin=low, vmax=1)\n"
                                 "ax.imshow(t, cmap=SIGNED_CMAP)\nplt.imshow(t)")) == 3
    assert own_colour_scales("show_heatmaps(w, 'k', 'q', signed=True)\n"
                             "ax.imshow(t, cmap=WEIGHTS_CMAP, vmin=0, vmax=1)") == []


def test_book_builds_without_warnings(book_build):
    out, result = book_build
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = out / "_build" / "html"
    for path in CHAPTERS:
        page = (html / "book" / path.name).with_suffix(".html").read_text()
        assert page.count("<img") >= 1, f"{path.name}: no figure"
        assert 'class="math' in page, f"{path.name}: no formula"
        colab = f"{COLAB_BLOB}/book/{path.name}"
        assert colab in page, f"{path.name}: no Colab launch button for {colab}"
        for image in re.findall(r'<img[^>]+src="([^"]+)"', page):
            assert (html / "book" / image).resolve().exists(), f"{path.name}: missing {image}"
    references = (html / "book" / "references.html").read_text()
    for author in ["Nadaraya", "Watson", "Bahdanau", "Vaswani", "Devlin", "Papineni"]:
        assert author in references
    exercises = (html / "book" / "exercises.html").read_text()
    assert exercises.count(f"{COLAB_BLOB}/exercises/student/ch") == len(EXERCISES)
    for page in html.rglob("*"):  # no solution, hidden test or master notebook in the book
        if page.is_file() and page.suffix in (".html", ".ipynb", ".txt", ".js"):
            text = page.read_text(errors="replace")
            assert "BEGIN SOLUTION" not in text and "# HIDDEN" not in text, page
            assert not re.search(r"exercises/ch\d", text), page


def test_exercise_links_point_at_committed_student_notebooks():
    text = (ROOT / "book" / "exercises.md").read_text()
    links = re.findall(r"\((https://colab[^)]+)\)", text)
    assert len(links) == len(EXERCISES)
    for link in links:
        assert link.startswith(f"{COLAB_BLOB}/exercises/student/"), link
        assert (ROOT / link[len(COLAB_BLOB) + 1:]).is_file(), link


# The index promises that no chapter reaches forward (book/index.md, "Chapter map"): a chapter
# imports only the package modules that it or an earlier chapter brings in (the map's table
# names each one where it first appears), and it never leaves an explanation to a later
# chapter; naming a later chapter only to say where an idea goes next is allowed.
SENTENCE_END = re.compile(r"[.!?]\s|\n\n")
DEFERRING = re.compile(r"\b(?:explain\w*|see(?= Chapter| \{)|defin\w*|introduc\w*|at length|in detail|"
                       r"covers?|teach\w*|derive\w*|later)\b", re.I)


def chapter_number(path):
    return int(path.name[:2])


def chapter_map():
    """{chapter number: its row of the index's chapter map}."""
    index = (ROOT / "book" / "index.md").read_text()
    return {int(m[1]): m[0] for m in re.finditer(r"^\| (\d+) .*\|$", index, re.M)}


def imported_modules(nb):
    """The d2lattn modules (dotted, below d2lattn) a notebook's code imports or names."""
    import pkgutil
    import d2lattn
    modules = {name.split(".", 1)[1] for _, name, _ in
               pkgutil.walk_packages(d2lattn.__path__, "d2lattn.")}
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    named = set(re.findall(r"\bd2lattn\.([a-z_]+(?:\.[a-z_]+)*)", code))
    return {module for name in named for module in modules
            if name == module or name.startswith(module + ".")}


def forward_mentions(number, markdown, labels):
    """(sentence, target chapter) for each mention of a later chapter in ``markdown``."""
    pattern = r"\{(?:ref|numref)\}`(?:[^`<]*<)?([^`>]+)>?`|\bChapters? (\d+(?:(?:,| and| to) \d+)*)"
    for m in re.finditer(pattern, markdown):
        later = [labels.get(m[1], 0)] if m[1] else [int(n) for n in re.findall(r"\d+", m[2])]
        if max(later) > number:
            ends = [e.end() for e in SENTENCE_END.finditer(markdown, 0, m.start())]
            end = SENTENCE_END.search(markdown, m.end())
            yield markdown[ends[-1] if ends else 0:end.start() if end else None].strip(), \
                max(later)


def section_labels():
    """{label: chapter} for the labels of sections and figures the chapters define."""
    labels = {}
    for path in CHAPTERS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                for label in re.findall(r"^\(([\w-]+)\)=|:(?:name|label): ([\w-]+)", cell.source,
                                        re.M):
                    labels[label[0] or label[1]] = chapter_number(path)
    return labels


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_imports_a_later_chapters_module(path):
    rows = chapter_map()
    number = chapter_number(path)
    for module in sorted(imported_modules(nbformat.read(path, as_version=4))):
        first = min((n for n, row in rows.items() if re.search(rf"`{re.escape(module)}(?!\w)", row)),
                    default=None)
        assert first is not None, f"the index's chapter map never names `{module}`"
        assert first <= number, f"uses `{module}`, which the chapter map has Chapter {first} add"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_leaves_an_explanation_to_a_later_one(path):
    labels, number = section_labels(), chapter_number(path)
    deferred = [(sentence[-160:], later) for cell in nbformat.read(path, as_version=4).cells
                if cell.cell_type == "markdown"
                for sentence, later in forward_mentions(number, cell.source, labels)
                if DEFERRING.search(sentence)]
    assert not deferred, f"sends the reader forward for an explanation: {deferred}"


def test_a_forward_explanation_is_found():
    labels = {"sec-bootstrap": 8}
    text = ("The uncertainty comes from the bootstrap ({ref}`sec-bootstrap` explains it at "
            "length): draw pairs. Chapter 9 uses the same table. Chapter 8 explains it.")
    found = [(s, n) for s, n in forward_mentions(7, text, labels) if DEFERRING.search(s)]
    assert [n for _, n in found] == [8, 8]
    assert not [s for s, _ in forward_mentions(9, text, labels)]


def uncaptioned_plots(nb):
    """Code cells that draw a plot without a caption and alt text of their own: a cell may
    draw one image, whose caption is the cell's ``mystnb.figure.caption`` metadata."""
    found = []
    for number, cell in enumerate(nb.cells):
        images = [out for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
        meta = cell.metadata.get("mystnb", {})
        caption = meta.get("figure", {}).get("caption", "")
        alt = meta.get("image", {}).get("alt", "")
        if images and (len(images) > 1 or len(caption.split()) < 4 or not alt):
            found.append(f"cell {number}: {len(images)} image(s), caption {caption!r}")
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_plot_has_a_caption(path):
    """Figures drawn by code are captioned (and numbered) like the drawn ones, one per cell."""
    assert not uncaptioned_plots(nbformat.read(path, as_version=4))


def test_an_uncaptioned_plot_is_found():
    image = nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": ""})
    plain = nbformat.v4.new_code_cell("plt.plot(x)", outputs=[image])
    two = nbformat.v4.new_code_cell("plot twice", outputs=[image, image], metadata={
        "mystnb": {"figure": {"caption": "Two plots under one caption."},
                   "image": {"alt": "two"}}})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1"), plain, two])
    assert [line.split(":")[0] for line in uncaptioned_plots(nb)] == ["cell 1", "cell 2"]
