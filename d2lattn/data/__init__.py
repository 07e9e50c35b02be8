"""Data for the course: offline corpora, minibatch loaders and a checksummed downloader.

The function ``download`` is deliberately not imported here: it would hide the module
``d2lattn.data.download`` (``import d2lattn.data.download as m`` would give the function).
"""
from .grammar import Corpus, generate_pairs, load_corpus  # noqa: F401
from .download import DATA_HUB, default_cache_dir, download_extract  # noqa: F401
from .nmt import (ArrayLoader, build_array_nmt, load_array, load_data_nmt,  # noqa: F401
                  load_fra_eng, preprocess_nmt, tokenize_nmt)
from .pretrain import load_data_bert, load_paragraphs, read_pydoc_paragraphs  # noqa: F401
from .doc_topics import (bow_features, bow_logistic_regression, bow_vocab,  # noqa: F401
                         encode_sentences, encode_word_order, load_data_doc_topics,
                         logistic_regression, read_doc_topics, read_word_order)
