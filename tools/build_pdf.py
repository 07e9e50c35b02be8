"""Build the PDF edition of the book from the same sources, offline: Jupyter Book's single-page
HTML build, its formulas typeset by the MathJax the build ships, printed to A4 by headless
Chromium (Debian's package, driven by Playwright as in tests/test_browser.py).

    .venv/bin/python tools/build_pdf.py [--out _build/html] [--build .]

Run it after `jupyter-book build .`: the single page is built beside the HTML build, in the
same `_build` folder, so Sphinx reuses the pages that build parsed; the PDF goes into the HTML
build, and the file's name on its title page becomes a link to it (a build without the PDF has
no link to it). Without Chromium it says so and exits with status 0 (the
HTML book is complete without it).
"""
import argparse
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
PDF = "d2lattn-attention.pdf"
TITLE_PAGE = "book/index.html"  # in the HTML build; it names the PDF
TYPESET = """async () => {
  if (window.MathJax?.startup?.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  return document.querySelectorAll('.math:not(:has(mjx-container))').length;
}"""
FOOTER = ('<div style="font-size: 8px; width: 100%; text-align: center; color: #555">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def single_page(folder):
    """Build the book as one HTML page in ``folder``/_build/singlehtml (with the parsed pages
    of an HTML build there, if any); the page's path. The page is written as book/index.html
    with links relative to the build's root, so it is copied there."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([jupyter_book, "build", ROOT, "--builder", "singlehtml", "--path-output",
                    folder], check=True, capture_output=True)
    build = Path(folder) / "_build" / "singlehtml"
    shutil.copy(build / "book" / "index.html", build / "print.html")
    return build / "print.html"


def print_pdf(page_path, pdf, chromium):
    """Serve the single page's build on 127.0.0.1, wait for MathJax, print it to ``pdf``."""
    from playwright.sync_api import sync_playwright

    root = page_path.parent
    handler = functools.partial(_Quiet, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server, \
            sync_playwright() as playwright:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        page.route(lambda url: urlsplit(url).hostname != "127.0.0.1",
                   lambda route: route.abort())  # offline: nothing leaves this machine
        page.goto(f"http://127.0.0.1:{server.server_port}/"
                  f"{page_path.relative_to(root).as_posix()}")
        page.emulate_media(media="print")
        untypeset = page.evaluate(TYPESET)
        if untypeset:
            raise RuntimeError(f"{untypeset} formulas were not typeset by MathJax")
        page.pdf(path=str(pdf), format="A4", print_background=True,
                 margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
                 display_header_footer=True, header_template="<span></span>",
                 footer_template=FOOTER, outline=True, tagged=True)
        browser.close()
        server.shutdown()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "_build" / "html"),
                        help="the folder the PDF goes to (default: the HTML build)")
    parser.add_argument("--build", default=str(ROOT),
                        help="the --path-output of the HTML build, whose _build folder the "
                             "single page shares (default: the repository, as `jupyter-book "
                             "build .` has it)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no Chromium (apt-get install chromium): the PDF edition was not built")
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    print_pdf(single_page(args.build), Path(args.out) / PDF, chromium)
    print(f"wrote {Path(args.out) / PDF}")
    if link_from_title_page(Path(args.out)):
        print(f"linked it from {Path(args.out) / TITLE_PAGE}")


def link_from_title_page(html):
    """Make the PDF's name on the title page of the HTML build ``html`` (where the PDF was
    written) a link to it; whether there is such a page. The page names it without a link, so
    that a build without the PDF (a plain `jupyter-book build`) has no broken link."""
    page = html / TITLE_PAGE
    if not page.is_file():
        return False
    text = page.read_text(encoding="utf-8")
    linked, count = re.subn(r'<span id="pdf-edition">(.*?)</span>',
                            rf'<a id="pdf-edition" class="reference external" '
                            rf'href="../{PDF}">\1</a>', text)
    if not count and f'href="../{PDF}"' not in text:
        raise RuntimeError(f"{page} does not name the PDF (<span id=\"pdf-edition\">)")
    page.write_text(linked, encoding="utf-8")
    return True


if __name__ == "__main__":
    main()
