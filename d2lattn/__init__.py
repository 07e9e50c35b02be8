"""d2lattn: the Apache MXNet code of the attention course.

Importing the package makes mxnet 1.9.1 work on today's numpy (see :mod:`d2lattn._compat`),
loads the CUDA 11 libraries of mxnet's GPU build when there is one (see :mod:`d2lattn.device`),
switches mxnet to its numpy interface (``npx.set_np()``), turns on mxnet's float32
accumulation of float16 softmaxes and sums (``MXNET_SAFE_ACCUMULATION``, read by mxnet at
every call: a float16 softmax over 5,000 keys otherwise sums to 2.4) and exports the public
API.
"""
import os

from . import _compat, device

os.environ.setdefault("MXNET_SAFE_ACCUMULATION", "1")
_compat.apply()
_cuda_loaded, _cuda_failed = device.preload_cuda_libraries()  # before mxnet links against them
try:
    import mxnet  # noqa: F401
except (ImportError, OSError) as err:  # OSError: a library of the GPU build is missing
    raise device._import_error(err, _cuda_failed) from err  # tests: test_compat, test_device

from mxnet import npx

npx.set_np()
_compat.fill_any_float_dtype()

from .attention import (AdditiveAttention, ConcatAttention, DotProductAttention,  # noqa: E402
                        GeneralAttention, KVCache, MultiHeadAttention, ScoredAttention,
                        masked_softmax, transpose_output, transpose_qkv)
from .bert import (BERTClassifier, BERTEncoder, BERTModel, MaskLM,  # noqa: E402
                   NextSentencePred, PairClassifier, Pooler, load_pretrained, mean_pool,
                   segment_mean_difference, sentence_embeddings)
from .decoding import beam_search, greedy_search, predict_seq2seq  # noqa: E402
from .device import cpu, gpu, num_gpus, try_all_gpus, try_gpu  # noqa: E402
from .gpt import (GPT, CausalSelfAttention, GPTBlock, generate, lm_loss, next_token_probs,  # noqa: E402
                  perplexity, train_lm)
from .metrics import bleu, corpus_bleu  # noqa: E402
from .plotting import Animator, plot, show_heatmaps  # noqa: E402
from .positional import (LearnedPositionalEmbedding, NoPositionalEncoding,  # noqa: E402
                         PositionalEncoding, apply_rope, sinusoidal_encoding)
from .pooling import (NWKernelRegression, boxcar, constant, epanechnikov,  # noqa: E402
                      gaussian, leave_one_out, nadaraya_watson, train_nw)
from .seq2seq import (AttentionDecoder, Decoder, Encoder, EncoderDecoder,  # noqa: E402
                      Seq2SeqAttentionDecoder, Seq2SeqDecoder, Seq2SeqEncoder)
from .tiled import tiled_attention  # noqa: E402
from .text import (Vocab, WordPieceTokenizer, get_tokens_and_segments,  # noqa: E402
                   truncate_pad)
from .train import (Accumulator, MaskedSoftmaxCELoss, Timer, TransformerSchedule,  # noqa: E402
                    bert_batch_loss, evaluate_accuracy, grad_clipping, seq2seq_loss,
                    set_seed, train_bert, train_classifier, train_seq2seq)
from .transformer import (AddNorm, PositionWiseFFN, TransformerDecoder,  # noqa: E402
                          TransformerDecoderBlock, TransformerEncoder, TransformerEncoderBlock)

__version__ = "0.1.0"
