"""Reproduce Chapter 6's choice of settings: one change at a time, judged on validation.

Chapter 6 trains a Transformer (N = 2, d = 64, 4 heads, d_ff = 128) for 10 epochs on the
generated English-French corpus of Chapter 3 with dropout 0, batches of 64, a warm-up of 150
steps with factor 1, label smoothing 0.1 and post-norm. This script trains that model and each
variant that changes one of those settings, for every seed given, and prints per setting the
validation loss (plain cross-entropy per token), the validation BLEU (greedy decoding of the
500 validation sentences) and the seconds per epoch, as mean and range over the seeds. The test
set is never read.

    .venv/bin/python tools/transformer_settings.py                 # seed 1, as the chapter
    .venv/bin/python tools/transformer_settings.py --seeds 1 2 3   # with seed noise

Each run is also stored, by setting and seed, in ``--out`` (d2lattn/data/transformer_settings.json
by default, which Chapter 6 prints); runs already there are kept, and a run repeated replaces its
record. One seed of every setting takes about 15 minutes on 2 quiet CPU cores (10 runs of 10
epochs). Across CPUs (AVX2, AVX-512) the numbers agree to about the second decimal.
"""
import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import d2lattn
from d2lattn import (EncoderDecoder, TransformerDecoder, TransformerEncoder,
                     TransformerSchedule, corpus_bleu, greedy_search)
from d2lattn.data import load_corpus, load_data_nmt


@dataclass(frozen=True)
class Setting:
    """One training configuration of Chapter 6's model (the chapter's values by default)."""
    dropout: float = 0.0
    batch_size: int = 64
    warmup_steps: int = 150
    factor: float = 1.0
    label_smoothing: float = 0.1
    pre_norm: bool = False


CHAPTER = Setting()
VARIANTS = {
    "chosen settings": CHAPTER,
    "dropout 0.1": replace(CHAPTER, dropout=0.1),
    "batches of 32": replace(CHAPTER, batch_size=32),
    "warm-up 100": replace(CHAPTER, warmup_steps=100),
    "warm-up 200": replace(CHAPTER, warmup_steps=200),
    "warm-up 300": replace(CHAPTER, warmup_steps=300),
    "factor 2": replace(CHAPTER, factor=2.0),
    "factor 0.5": replace(CHAPTER, factor=0.5),
    "no label smoothing": replace(CHAPTER, label_smoothing=0.0),
    "pre-norm": replace(CHAPTER, pre_norm=True),
}
OUT = Path(d2lattn.data.__file__).with_name("transformer_settings.json")
NUM_HIDDENS, FFN_NUM_HIDDENS, NUM_HEADS, NUM_BLKS, NUM_EPOCHS = 64, 128, 4, 2, 10


def train_and_validate(setting, seed, corpus, device, num_epochs=NUM_EPOCHS):
    """Train one model; returns (history, validation BLEU, seconds per epoch), ``history``
    the per-epoch losses of :func:`d2lattn.train_seq2seq`."""
    train_iter, src_vocab, tgt_vocab = load_data_nmt(corpus.train, setting.batch_size)
    val_iter, _, _ = load_data_nmt(corpus.val, 128, None, src_vocab, tgt_vocab,
                                   is_train=False)
    d2lattn.set_seed(seed)
    net = EncoderDecoder(
        TransformerEncoder(len(src_vocab), NUM_HIDDENS, FFN_NUM_HIDDENS, NUM_HEADS, NUM_BLKS,
                           setting.dropout, pre_norm=setting.pre_norm),
        TransformerDecoder(len(tgt_vocab), NUM_HIDDENS, FFN_NUM_HIDDENS, NUM_HEADS, NUM_BLKS,
                           setting.dropout, pre_norm=setting.pre_norm))
    schedule = TransformerSchedule(NUM_HIDDENS, setting.warmup_steps, setting.factor)
    start = time.perf_counter()
    history = d2lattn.train_seq2seq(net, train_iter, None, num_epochs, tgt_vocab, device,
                                    val_iter=val_iter, lr_scheduler=schedule,
                                    label_smoothing=setting.label_smoothing)
    seconds = (time.perf_counter() - start) / num_epochs
    sources = [src for src, _ in corpus.val]
    references = [tgt for _, tgt in corpus.val]
    translations, _ = greedy_search(net, sources, src_vocab, tgt_vocab,
                                    2 + max(map(len, references)), device)
    return history, corpus_bleu(translations, references), seconds


def store(path, name, seed, history, bleu, seconds):
    """Add one run to the JSON file at path, replacing an earlier run of the same setting
    and seed; it keeps the losses of every epoch (the tests retrain the first)."""
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs = [r for r in runs if (r["setting"], r["seed"]) != (name, seed)]
    runs.append({"setting": name, "seed": seed, "val_loss": round(history["val"][-1], 4),
                 "val_bleu": round(bleu, 4), "seconds_per_epoch": round(seconds, 1),
                 "train_losses": [round(x, 5) for x in history["train"]],
                 "val_losses": [round(x, 5) for x in history["val"]],
                 **asdict(VARIANTS[name])})
    runs.sort(key=lambda r: (list(VARIANTS).index(r["setting"]), r["seed"]))
    path.write_text(json.dumps({"epochs": NUM_EPOCHS, "runs": runs}, indent=1) + "\n")


def summary(values, digits):
    """'mean' for one value, 'mean (min-max)' for several."""
    mean = f"{statistics.fmean(values):.{digits}f}"
    if len(values) == 1:
        return mean
    return f"{mean} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1],
                        help="initialisation seeds (the chapter trains with seed 1)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), metavar="NAME",
                        help="run only these settings (names as printed)")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON file of runs")
    args = parser.parse_args()
    corpus, device = load_corpus(n_train=4000), d2lattn.try_gpu()
    names = args.only or list(VARIANTS)
    print(f"{NUM_EPOCHS} epochs, seeds {args.seeds}; validation loss and BLEU "
          f"(mean, and min-max over seeds), seconds per epoch")
    print(f"{'setting':<24}{'val loss':>22}{'val BLEU':>22}{'s/epoch':>10}")
    for name in names:
        runs = []
        for seed in args.seeds:
            runs.append(train_and_validate(VARIANTS[name], seed, corpus, device))
            store(args.out, name, seed, *runs[-1])
        histories, bleu, seconds = zip(*runs)
        loss = [history["val"][-1] for history in histories]
        print(f"{name:<24}{summary(loss, 3):>22}{summary(bleu, 3):>22}"
              f"{statistics.fmean(seconds):>10.1f}", flush=True)


if __name__ == "__main__":
    main()
