"""d2lattn: the Apache MXNet code of the attention course.

Importing the package is light: the grader (``python -m d2lattn.grading``) imports neither
MXNet nor a model. It sets mxnet's float32 accumulation of float16 softmaxes and sums
(``MXNET_SAFE_ACCUMULATION``, read by mxnet at every call: a float16 softmax over 5,000 keys
otherwise sums to 2.4), makes mxnet 1.9.1 importable on today's numpy (see
:mod:`d2lattn._compat`) and sees to it that mxnet, whenever it is imported (by a chapter's
``from mxnet import np`` or by the first model read from the package), first loads the CUDA 11
libraries of its GPU build when there is one (see :mod:`d2lattn.device`) and at once switches
to its numpy interface (``npx.set_np()``). The public API (:data:`API`) is imported from its
module on first use: ``d2lattn.DotProductAttention``, ``from d2lattn import masked_softmax``
and ``from d2lattn import *`` work as if the package had imported it all.
"""
import importlib
import importlib.abc
import importlib.util
import os
import sys

from . import _compat, device
from .version import __version__  # noqa: F401

API = {  # module: the public names the package gives
    "attention": ("AdditiveAttention", "ConcatAttention", "DotProductAttention",
                  "GeneralAttention", "KVCache", "MultiHeadAttention", "ScoredAttention",
                  "masked_softmax", "tiled_attention", "transpose_output", "transpose_qkv"),
    "bert": ("BERTClassifier", "BERTEncoder", "BERTModel", "MaskLM", "NextSentencePred",
             "PairClassifier", "Pooler", "load_pretrained", "mean_pool",
             "segment_mean_difference", "sentence_embeddings"),
    "decoding": ("beam_search", "greedy_search", "predict_seq2seq"),
    "device": ("cpu", "gpu", "num_gpus", "try_all_gpus", "try_gpu"),
    "gpt": ("GPT", "CausalSelfAttention", "GPTBlock", "generate", "lm_loss", "next_token_probs",
            "perplexity", "train_lm"),
    "metrics": ("bleu", "corpus_bleu"),
    "plotting": ("Animator", "plot", "show_heatmaps"),
    "positional": ("LearnedPositionalEmbedding", "NoPositionalEncoding", "PositionalEncoding",
                   "apply_rope", "sinusoidal_encoding"),
    "pooling": ("NWKernelRegression", "boxcar", "constant", "epanechnikov", "gaussian",
                "leave_one_out", "nadaraya_watson", "train_nw"),
    "seq2seq": ("AttentionDecoder", "Decoder", "Encoder", "EncoderDecoder",
                "Seq2SeqAttentionDecoder", "Seq2SeqDecoder", "Seq2SeqEncoder"),
    "text": ("Vocab", "WordPieceTokenizer", "get_tokens_and_segments", "truncate_pad"),
    "train": ("Accumulator", "MaskedSoftmaxCELoss", "Timer", "TransformerSchedule",
              "bert_batch_loss", "evaluate_accuracy", "grad_clipping", "seq2seq_loss",
              "set_seed", "train_bert", "train_classifier", "train_seq2seq"),
    "transformer": ("AddNorm", "PositionWiseFFN", "TransformerDecoder",
                    "TransformerDecoderBlock", "TransformerEncoder", "TransformerEncoderBlock"),
}
__all__ = [name for names in API.values() for name in names]
_HOME = {name: module for module, names in API.items() for name in names}


def __getattr__(name):
    """A public name (or a module) of the package, imported on first use and kept."""
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))


def _set_up_mxnet(mxnet):
    """What the package needs of an imported mxnet: its numpy interface, initializers that
    fill any float dtype."""
    mxnet.npx.set_np()
    _compat.fill_any_float_dtype()


class _MXNetImport(importlib.abc.MetaPathFinder):
    """Finds no module itself; the first time ``mxnet`` is imported, it has the import load
    the CUDA libraries before mxnet (which links against them) and set mxnet up after, and
    turns a failure into a message saying what to install."""

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet":
            return None
        sys.meta_path.remove(self)  # once, and so that the real finders answer now
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            global _cuda_loaded, _cuda_failed
            _cuda_loaded, _cuda_failed = device.preload_cuda_libraries()
            try:
                load(module)
            except (ImportError, OSError) as err:  # OSError: a GPU library is missing
                raise device._import_error(err, _cuda_failed) from err  # test_device
            _set_up_mxnet(module)

        spec.loader.exec_module = exec_module
        return spec


_cuda_loaded, _cuda_failed = [], {}  # the CUDA libraries preloaded, and those that failed
os.environ.setdefault("MXNET_SAFE_ACCUMULATION", "1")
_compat.apply()
if sys.modules.get("mxnet") is not None:  # imported before the package (the grader's runner)
    _set_up_mxnet(sys.modules["mxnet"])
elif importlib.util.find_spec("mxnet") is None:
    missing = ModuleNotFoundError("No module named 'mxnet'", name="mxnet")
    raise device._import_error(missing, {})
elif not any(isinstance(finder, _MXNetImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MXNetImport())
