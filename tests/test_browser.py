"""The built book in a real browser: headless Chromium (Debian's package, driven by Playwright)
opens every page from a local server and finds no console error, no request leaving 127.0.0.1,
every formula typeset by the MathJax shipped in the build, every image loaded, the Colab button of
each chapter opening that chapter's notebook, and a search for "attention" listing the chapters;
in the light and the dark colour mode, no code block scrolling sideways and every caption as
readable as the prose; on every page that holds an attention explorer (d2lattn.explorer), in
both modes, a block, a head and a token chosen through the page light the weights the notebook
stored. A full-page screenshot of each page is kept in _build/screenshots/
(git-ignored), of its dark mode in _build/screenshots/dark/."""
import functools
import http.server
import json
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed: pip install -r requirements.txt")

from test_book import CHAPTERS, COLAB_BLOB, ROOT, toc_files  # noqa: E402

SEARCH = "search.html?q=attention"
MIN_FIGURE_WIDTH = 300  # px on a 1280 px window
MIN_PLOT_SCALE = 0.9  # shown width / natural width of a PNG plot
MIN_TEXT_PX = 12  # the text of an SVG figure, at the size the page shows it
MIN_SCRIPT_PX = 0.7 * MIN_TEXT_PX  # its sub- and superscripts, 70% of the text as in TeX
SCREENSHOTS = ROOT / "_build" / "screenshots"
THEMES = ("light", "dark")  # the theme's colour modes; it follows the browser's (default_mode: auto)
MIN_CAPTION_CONTRAST = 7.0  # WCAG 2's AAA level for text: captions read as well as prose

# Run in each page once it has loaded: waits for MathJax, then reports what a reader would see.
PAGE_FACTS = """async () => {
  const formulas = document.querySelectorAll('.math').length;
  if (formulas && window.MathJax?.startup?.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, .math, mjx-container').forEach(e => e.remove());
  return {
    formulas,
    mathjax: window.MathJax?.version ?? null,
    untypeset: Array.from(document.querySelectorAll('.math:not(:has(mjx-container))'),
                          e => e.textContent.slice(0, 80)),
    tex_errors: Array.from(document.querySelectorAll('mjx-merror'), e => e.textContent),
    raw_tex: prose.textContent.match(/\\$.{0,40}|\\\\[(\\[].{0,40}|\\\\begin\\{\\w+/g) ?? [],
    images: Array.from(document.images, img => ({src: img.getAttribute('src'),
                                                 loaded: img.complete && img.naturalWidth > 0,
                                                 natural: img.naturalWidth,
                                                 shown: img.getBoundingClientRect().width})),
    text: document.querySelector('article')?.innerText ?? '',
    wide_math: Array.from(document.querySelectorAll('mjx-container[display="true"]'))
      .filter(m => m.scrollWidth > m.clientWidth + 1).map(m => m.textContent.slice(0, 60)),
    launch: Array.from(document.querySelectorAll('.dropdown-launch-buttons a'), a => a.href),
  };
}"""
# Run in an SVG figure opened on its own, given the width it is shown at in the chapter: the
# figure is scaled to that width, and every piece of text reports its font size in screen px
# and whether it is a script (a sub- or superscript: smaller than the rest of its <text>).
SVG_TEXT_SIZES = """shown => {
  const svg = document.documentElement, box = svg.viewBox.baseVal;
  const width = box?.width || svg.width.baseVal.value;
  const height = box?.height || svg.height.baseVal.value;
  svg.setAttribute('width', shown);
  svg.setAttribute('height', shown * height / width);
  const own = e => Array.from(e.childNodes).some(n => n.nodeType === 3 && n.data.trim());
  const px = e => parseFloat(getComputedStyle(e).fontSize) *
    Math.hypot(e.getScreenCTM().a, e.getScreenCTM().b);
  return Array.from(svg.querySelectorAll('text')).flatMap(text => {
    const pieces = [text, ...text.querySelectorAll('tspan')].filter(own);
    const base = Math.max(...pieces.map(px));
    return pieces.map(e => ({text: e.textContent.trim().slice(0, 40), px: px(e),
                             script: px(e) < base - 0.01}));
  });
}"""
# Run in each page in each colour mode: the mode the theme shows, the code blocks (input or
# output: every pre of the page) that scroll sideways, with their longest line, and the contrast
# (WCAG 2 ratio) of each figure or table caption's text, and of the prose, against the
# background it is drawn on.
THEME_FACTS = """async () => {
  await document.fonts.ready;
  const rgba = s => (s.match(/[\\d.]+/g) || [0, 0, 0, 0]).map(Number);
  const background = e => {
    for (; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const luminance = c => c.map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 :
    ((v + 0.055) / 1.055) ** 2.4).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const contrast = e => {
    const back = background(e), c = rgba(getComputedStyle(e).color);
    const alpha = (c.length > 3 ? c[3] : 1) * parseFloat(getComputedStyle(e).opacity);
    const fore = c.slice(0, 3).map((v, i) => alpha * v + (1 - alpha) * back[i]);
    const [dark, light] = [luminance(fore), luminance(back)].sort((a, b) => a - b);
    return (light + 0.05) / (dark + 0.05);
  };
  const own = e => Array.from(e.childNodes).some(n => n.nodeType === 3 && n.data.trim());
  // a caption's own words: not its code, links, formulas or the heading link shown on hover
  const words = e => own(e) && !e.closest('code, a, mjx-container, .math');
  const captions = Array.from(document.querySelectorAll('article figcaption, article caption'));
  const prose = Array.from(document.querySelectorAll('article section > p')).filter(own);
  return {
    theme: document.documentElement.dataset.theme,
    clipped: Array.from(document.querySelectorAll('pre'))
      .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
      .map(pre => pre.textContent.split('\\n').reduce((a, b) => a.length < b.length ? b : a)),
    captions: captions.map(c => ({
      text: c.textContent.trim().slice(0, 40),
      contrast: Math.min(...[c, ...c.querySelectorAll('*')].filter(words).map(contrast))})),
    prose: prose.length ? Math.min(...prose.map(contrast)) : null,
  };
}"""
# Run in a page on its explorer number n: whether its script built the view, the view's
# choice (the selects) and the lines lit by the focused token, (key, weight as shown).
EXPLORER_VIEW = """n => {
  const root = document.querySelectorAll('.d2lattn-explorer')[n];
  const value = name => +root.querySelector('select.d2lx-' + name).value;
  return {mounted: root.dataset.mounted === '1',
          choice: [value('attention'), value('block'), value('head'),
                   +document.activeElement.dataset.i],
          lines: Array.from(root.querySelectorAll('.d2lx-line.on'),
                            l => [+l.dataset.k, l.dataset.weight]),
          readout: root.querySelector('.d2lx-readout').textContent};
}"""
EXPLORER_DATA = re.compile(r'<script type="application/json" class="d2lattn-explorer-data">'
                           r'(.*?)</script>', re.S)
SEARCH_DONE = "() => document.querySelector('#search-results h2')?.textContent === 'Search Results'"
SEARCH_HITS = "els => els.map(a => a.getAttribute('href'))"


def find_chromium():
    """The system Chromium; Playwright's own browser is never downloaded."""
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    pytest.skip("no Chromium executable (chromium or chromium-browser) on PATH: "
                "install Debian's package with `apt-get install chromium`")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory):
    """Serve `directory` on 127.0.0.1 from a thread; yields the base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_port}/"
        finally:
            server.shutdown()


def is_local(url):
    parts = urlsplit(url)
    return parts.scheme in ("data", "blob") or parts.hostname == "127.0.0.1"


def is_favicon_miss(message):
    # Chromium asks the server root for /favicon.ico because the book declares no icon; that
    # request is the browser's own, not the page's.
    return message.text.startswith("Failed to load resource") and \
        urlsplit(message.location["url"]).path == "/favicon.ico"


@contextmanager
def open_page(context, url, visit):
    """A new tab on `url` that records console errors, uncaught exceptions and requests leaving
    127.0.0.1 into `visit["errors"]` and `visit["external"]`."""
    def on_console(message):
        if message.type == "error" and not is_favicon_miss(message):
            visit["errors"].append(f"console: {message.text} ({message.location['url']})")

    def on_request(request):
        if not is_local(request.url):
            visit["external"].append(request.url)

    page = context.new_page()
    page.on("console", on_console)
    page.on("pageerror", lambda error: visit["errors"].append(f"uncaught: {error}"))
    page.on("request", on_request)
    try:
        page.goto(url)
        yield page
    finally:
        page.close()


def screenshot(page, screenshots, name):
    """Save a full-page screenshot as `screenshots`/`name`.png; returns its relative path."""
    path = Path(urlsplit(name).path).with_suffix(".png")
    (screenshots / path).parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=screenshots / path, full_page=True)
    return path


def visit_page(context, base, name, screenshots):
    visit = {"errors": [], "external": []}
    with open_page(context, base + name, visit) as page:
        visit.update(page.evaluate(PAGE_FACTS))
        visit["themes"] = {"light": page.evaluate(THEME_FACTS)}
        visit["svg_text"] = {image["src"]: svg_text(context, urljoin(page.url, image["src"]),
                                                    image["shown"])
                             for image in visit["images"] if image["src"].endswith(".svg")}
        visit["screenshot"] = screenshot(page, screenshots, name)
        visit["explorers"] = {"light": explore(page)}
        if visit["launch"]:  # the reader clicks the rocket and sees the Colab entry
            page.click(".dropdown-launch-buttons button")
            visit["launch_visible"] = page.is_visible(".dropdown-launch-buttons a")
    return visit


def visit_in_dark_mode(context, base, name, screenshots):
    """What the page shows in the dark colour mode; its screenshot in `screenshots`/dark/."""
    visit = {"errors": [], "external": []}
    with open_page(context, base + name, visit) as page:
        facts = page.evaluate(THEME_FACTS)
        facts["screenshot"] = screenshot(page, screenshots, f"dark/{name}")
        facts["explorers"] = explore(page)
    return {**facts, "errors": visit["errors"], "external": visit["external"]}


def explore(page):
    """Use every attention explorer of the page as a reader would: choose its last kind of
    attention, last block and last head with the controls, Tab to the first query token and
    press End to reach the last. Returns what each explorer shows then (EXPLORER_VIEW)."""
    seen = []
    for n in range(page.locator(".d2lattn-explorer").count()):
        root = page.locator(".d2lattn-explorer").nth(n)
        data = json.loads(root.locator("script.d2lattn-explorer-data").text_content())
        kind = len(data["kinds"]) - 1
        block = len(data["kinds"][kind]["blocks"]) - 1
        head = len(data["kinds"][kind]["blocks"][block]) - 1
        for name, index in (("attention", kind), ("block", block)):
            if index:  # a select with one option is disabled
                root.locator(f"select.d2lx-{name}").select_option(index=index)
        root.locator(".d2lx-thumb").nth(head).click()
        root.locator('.d2lx-tok[data-side="q"][tabindex="0"]').focus()
        page.keyboard.press("End")
        seen.append(page.evaluate(EXPLORER_VIEW, n))
    return seen


def stored_explorers(path):
    """The data of the attention explorers a chapter's stored outputs hold, in order."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [json.loads(blob) for cell in notebook["cells"] for output in cell.get("outputs", [])
            for blob in EXPLORER_DATA.findall("".join(output.get("data", {}).get("text/html",
                                                                                 "")))]


def svg_text(context, url, shown):
    """The text of the SVG figure at `url` shown `shown` px wide: (text, px, script) each."""
    page = context.new_page()
    try:
        page.goto(url)
        return page.evaluate(SVG_TEXT_SIZES, shown)
    finally:
        page.close()


def visit_search(context, base, screenshots):
    visit = {"errors": [], "external": []}
    with open_page(context, base + SEARCH, visit) as page:
        page.wait_for_function(SEARCH_DONE, timeout=15_000)
        visit["hits"] = page.eval_on_selector_all("#search-results ul.search li a", SEARCH_HITS)
        visit["screenshot"] = screenshot(page, screenshots, SEARCH)
    return visit


@pytest.fixture(scope="module")
def visits(book_build):
    """Visit every page of the book's build and its search; name -> what was seen."""
    chromium = find_chromium()
    out, result = book_build
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html, screenshots = out / "_build" / "html", out / "_build" / "screenshots"
    screenshots.mkdir()
    pages = [str(path.relative_to(html)) for path in sorted((html / "book").glob("*.html"))]
    try:
        with serve(html) as base, sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.route(lambda url: not is_local(url), lambda route: route.abort())
            seen = {name: visit_page(context, base, name, screenshots) for name in pages}
            seen[SEARCH] = visit_search(context, base, screenshots)
            dark = browser.new_context(viewport={"width": 1280, "height": 900},
                                       color_scheme="dark")
            dark.route(lambda url: not is_local(url), lambda route: route.abort())
            for name in pages:
                facts = visit_in_dark_mode(dark, base, name, screenshots)
                seen[name]["explorers"]["dark"] = facts.pop("explorers")
                seen[name]["themes"]["dark"] = facts
                seen[name]["errors"] += facts.pop("errors")
                seen[name]["external"] += facts.pop("external")
            browser.close()
    finally:  # keep the screenshots as the run's artifacts, also when a check failed
        shutil.rmtree(SCREENSHOTS, ignore_errors=True)
        shutil.copytree(screenshots, SCREENSHOTS)
    return seen


def chapter_page(path):
    return f"book/{path.stem}.html"


def test_every_page_of_the_toc_was_opened(visits):
    expected = {f"{name}.html" for name in toc_files()} | {SEARCH}
    assert set(visits) == expected
    for name, visit in visits.items():
        assert (SCREENSHOTS / visit["screenshot"]).stat().st_size > 0, f"{name}: no screenshot"


def test_no_console_errors(visits):
    errors = {name: visit["errors"] for name, visit in visits.items() if visit["errors"]}
    assert not errors


def test_no_request_leaves_the_local_server(visits):
    external = {name: visit["external"] for name, visit in visits.items() if visit["external"]}
    assert not external


def test_math_is_typeset_by_the_bundled_mathjax(visits):
    for path in CHAPTERS:
        assert visits[chapter_page(path)]["formulas"] > 0, f"{path.name}: no formula"
    for name, visit in visits.items():
        if name == SEARCH:
            continue
        if visit["formulas"]:
            assert visit["mathjax"], f"{name}: MathJax did not load"
        assert not visit["untypeset"], f"{name}: formulas left as TeX"
        assert not visit["tex_errors"], f"{name}: TeX errors"
        assert not visit["raw_tex"], f"{name}: TeX outside any formula"


def test_every_image_loads(visits):
    for path in CHAPTERS:
        figures = [i for i in visits[chapter_page(path)]["images"] if "_images/" in i["src"]]
        assert figures, f"{path.name}: no figure"
    broken = {name: [i["src"] for i in visit["images"] if not i["loaded"]]
              for name, visit in visits.items() if name != SEARCH}
    assert not any(broken.values()), broken


def pages_in_each_mode(visits):
    """(page, colour mode, what it showed) for every page of the book in both modes."""
    assert all(set(visit["themes"]) == set(THEMES) for name, visit in visits.items()
               if name != SEARCH)
    return [(name, mode, facts) for name, visit in visits.items() if name != SEARCH
            for mode, facts in visit["themes"].items()]


def test_both_colour_modes_are_shown(visits):
    for name, mode, facts in pages_in_each_mode(visits):
        assert facts["theme"] == mode, f"{name}: asked for {mode}, shown {facts['theme']}"


def test_no_code_or_output_is_clipped(visits):
    """No code block of any page, input or output, scrolls sideways at 1280 px, in either mode."""
    clipped = {(name, mode): facts["clipped"] for name, mode, facts in pages_in_each_mode(visits)
               if facts["clipped"]}
    assert not clipped, f"pre blocks wider than their box at 1280 px (longest lines): {clipped}"


def test_captions_are_as_readable_as_the_prose(visits):
    """Every figure and table caption, in both colour modes, has at least
    MIN_CAPTION_CONTRAST against its background, and no less than the page's prose."""
    faint = {}
    captions = 0
    for name, mode, facts in pages_in_each_mode(visits):
        for caption in facts["captions"]:
            captions += 1
            floor = max(MIN_CAPTION_CONTRAST, (facts["prose"] or 0) - 0.05)
            if caption["contrast"] < floor:
                faint.setdefault((name, mode), []).append(
                    (caption["text"], round(caption["contrast"], 2), round(floor, 2)))
    assert captions >= 2 * len(CHAPTERS)
    assert not faint, f"captions fainter than the prose (text, contrast, needed): {faint}"


def test_no_display_formula_is_wider_than_the_page(visits):
    wide = {name: visit["wide_math"] for name, visit in visits.items() if visit.get("wide_math")}
    assert not wide, f"display formulas wider than the text at 1280 px: {wide}"


def test_install_cell_and_nbval_markers_are_hidden(visits):
    for path in CHAPTERS:
        text = visits[chapter_page(path)]["text"]
        assert "NBVAL" not in text, f"{path.name}: an nbval marker shows"
        assert "On Colab only: install" not in text, f"{path.name}: the install cell shows"


# Helpers that only format an output: their code is folded away in the HTML (the hide-input
# tag), so that the chapter reads as the lesson; their output shows.
FORMATTING_HELPERS = {"03_bahdanau_attention": "def marked(", "06_transformer": "def print_aligned("}


def test_formatting_helpers_are_folded_away(visits):
    shown = {name: definition for name, definition in FORMATTING_HELPERS.items()
             if definition in visits[f"book/{name}.html"]["text"]}
    assert not shown, f"formatting helpers shown in the lesson: {shown}"


def test_figures_are_shown_large_enough_to_read(visits):
    """Every figure is at least MIN_FIGURE_WIDTH px wide on the page; a plot is not shrunk to
    less than MIN_PLOT_SCALE of its size, so its 10 pt labels (13.9 px at the notebooks'
    100 dpi) stay >= MIN_TEXT_PX. (Text drawn in a plot cannot be measured in the page: a plot
    that sets a smaller font is not caught.)"""
    assert MIN_PLOT_SCALE * 10 * 100 / 72 >= MIN_TEXT_PX
    small = {}
    for path in CHAPTERS:
        for image in visits[chapter_page(path)]["images"]:
            if "_images/" not in image["src"]:
                continue
            shrunk = image["src"].endswith(".png") and \
                image["shown"] < MIN_PLOT_SCALE * image["natural"]
            if image["shown"] < MIN_FIGURE_WIDTH or shrunk:
                small.setdefault(path.name, []).append(
                    (image["src"], image["natural"], round(image["shown"])))
    assert not small, f"figures too small to read (src, natural px, shown px): {small}"


def test_figure_text_is_text_and_large_enough_to_read(visits):
    """Every SVG figure keeps its text as SVG text (not glyph outlines: selectable, found by
    the browser's search) at >= MIN_TEXT_PX px as shown on the page, its sub- and superscripts
    at >= MIN_SCRIPT_PX."""
    outlined, small = [], {}
    for name, visit in visits.items():
        for src, texts in visit.get("svg_text", {}).items():
            if not texts:
                outlined.append(src)
            for text in texts:
                if round(text["px"], 1) < (MIN_SCRIPT_PX if text["script"] else MIN_TEXT_PX):
                    small.setdefault(src, set()).add((text["text"], round(text["px"], 1)))
    assert sum(len(visit.get("svg_text", {})) for visit in visits.values()) >= len(CHAPTERS)
    assert not outlined, f"figures without SVG text (drawn as outlines?): {outlined}"
    assert not small, f"figure text smaller than {MIN_TEXT_PX} px (text, px): {small}"


def test_launch_button_opens_the_chapter_on_colab(visits):
    chapters = {chapter_page(path): f"{COLAB_BLOB}/book/{path.name}" for path in CHAPTERS}
    for name, visit in visits.items():
        if name in chapters:
            assert visit["launch"] == [chapters[name]], name
            assert visit["launch_visible"], f"{name}: the Colab entry does not show on click"
        elif name != SEARCH:
            assert visit["launch"] == [], f"{name} is not a notebook but has launch buttons"


def test_search_for_attention_lists_every_chapter(visits):
    found = {urlsplit(href).path for href in visits[SEARCH]["hits"]}
    missing = {chapter_page(path) for path in CHAPTERS} - found
    assert not missing, f"search for 'attention' found {sorted(found)}"


def test_explorers_show_the_stored_weights(visits):
    """Every page with an attention explorer in its notebook's outputs shows them, each built
    by its script; in both colour modes, the kind, block, head and token chosen through the
    page light one line per key, with the weights the notebook stored."""
    stored = {chapter_page(path): stored_explorers(path) for path in CHAPTERS}
    assert any(stored.values()), "no chapter holds an attention explorer"
    for name, explorers in stored.items():
        for mode in THEMES:
            seen = visits[name]["explorers"][mode]
            assert len(seen) == len(explorers), (name, mode)
            for view, data in zip(seen, explorers):
                kind, block, head, query = view["choice"]
                entry = data["kinds"][kind]
                assert view["mounted"] and view["choice"] == [
                    len(data["kinds"]) - 1, len(entry["blocks"]) - 1,
                    len(entry["blocks"][-1]) - 1, len(entry["queries"]) - 1], (name, mode)
                weights = entry["blocks"][block][head][query]
                assert view["lines"] == [[k, f"{w / data['scale']:.3f}"]
                                         for k, w in enumerate(weights)], (name, mode)
                assert f"block {block + 1}, head {head + 1}: query {query + 1}" in \
                    view["readout"], (name, mode)
