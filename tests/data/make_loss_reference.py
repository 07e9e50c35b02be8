"""Write ``loss_reference.json``: PyTorch's cross-entropy of logits holding inf and NaN.

Run with a Python that has ``torch`` (the tests never run it)::

    /tmp/refvenv/bin/python tests/data/make_loss_reference.py

Each case is a batch of two sequences of three steps over four classes, float32: sequence 0
has 2 valid steps, sequence 1 has 3. The junk logits sit at step 0 of sequence 0 (valid),
followed by a valid and a padded step, so that a sum over the steps passes the junk value
on. The loss of a sequence is ``F.cross_entropy(logits, labels, reduction="none",
label_smoothing=eps)`` summed over its valid steps, by PyTorch. JSON holds inf and NaN as
Python writes them (``Infinity``, ``NaN``).
"""
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

OUT = Path(__file__).with_name("loss_reference.json")
INF, NAN = math.inf, math.nan
# Step 0 of sequence 0: (what it shows, its four logits, its label).
JUNK = [
    ("-inf at another class", [2.0, -INF, 0.5, 1.0], 0),
    ("-inf at the label", [2.0, -INF, 0.5, 1.0], 1),
    ("-inf everywhere but the label", [1.0, -INF, -INF, -INF], 0),
    ("-inf everywhere", [-INF] * 4, 0),
    ("+inf at another class", [2.0, INF, 0.5, 1.0], 0),
    ("+inf at the label", [2.0, INF, 0.5, 1.0], 1),
    ("NaN at another class", [2.0, NAN, 0.5, 1.0], 0),
    ("NaN at the label", [2.0, NAN, 0.5, 1.0], 1),
    ("a difference that overflows to -inf", [3e38, -3e38, 0.0, 1.0], 0),
    ("huge and right", [1e30, 0.0, 0.0, 0.0], 0),
    ("huge and wrong", [1e30, 0.0, 0.0, 0.0], 1),
]
OTHER_STEPS = [[0.5, -1.0, 2.0, 0.0], [1.5, 0.25, -0.5, 3.0]]  # steps 1 and 2
VALID_LEN = [2, 3]


def main():
    cases = []
    for name, logits, label in JUNK:
        pred = [[logits] + OTHER_STEPS, [OTHER_STEPS[1], OTHER_STEPS[0], logits[::-1]]]
        labels = [[label, 2, 3], [0, 1, 3 - label]]
        for eps in (0.0, 0.1):
            per_step = F.cross_entropy(torch.tensor(pred, dtype=torch.float32).reshape(-1, 4),
                                       torch.tensor(labels).reshape(-1), reduction="none",
                                       label_smoothing=eps).reshape(2, 3)
            loss = [per_step[i, :n].sum().item() for i, n in enumerate(VALID_LEN)]
            cases.append({"name": name, "label_smoothing": eps, "pred": pred, "label": labels,
                          "valid_len": VALID_LEN, "loss": loss})
    data = {"source": f"torch {torch.__version__}, torch.nn.functional.cross_entropy",
            "cases": cases}
    OUT.write_text("{\n" + f'"source": {json.dumps(data["source"])},\n"cases": [\n'
                   + ",\n".join("  " + json.dumps(case) for case in cases) + "\n]}\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
