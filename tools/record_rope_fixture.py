"""Record ``tests/data/rope_reference.json``: rotary positions computed by Hugging Face's own
Llama code, for tests/test_rope.py (the tests and the build never run this script).

Hugging Face ``transformers`` computes Llama's rotary positions in PyTorch and, without torch,
in its Flax port, ``transformers.models.llama.modeling_flax_llama`` (``FlaxLlamaRotaryEmbedding``:
``create_sinusoidal_positions``, ``rotate_half``, ``apply_rotary_pos_emb``). This script runs
the Flax port, so it needs no torch. Recorded with Python 3.11 in a throwaway virtual
environment (never the project's .venv), with the versions of transformers' own Flax pins::

    python3.11 -m venv /tmp/hfrope-venv
    /tmp/hfrope-venv/bin/pip install "transformers==4.49.0" "flax==0.7.0" \\
        "jax[cpu]==0.4.13" "jaxlib==0.4.13" "numpy<2"
    /tmp/hfrope-venv/bin/python tools/record_rope_fixture.py
    rm -rf /tmp/hfrope-venv

(about 760 MB installed, no CUDA). The file records the versions that ran.

Each case rotates X (heads, steps, d) = (2, 5, d), float32, at 5 non-consecutive positions,
for d = 8 and 16. FlaxLlamaRotaryEmbedding takes (batch, steps, heads, d), so X is passed as
X.transpose(1, 0, 2)[None] and the result transposed back to apply_rope's (..., steps, d).

The base: every Flax rotary table in transformers (Llama, Mistral, Gemma) is built with the
literal 10000; ``config.rope_theta`` is ignored. Cases with base 10000 are Hugging Face's code
as released ("source": "unmodified"). For base 500000 (Llama 3's rope_theta) the script runs
the same module with ``create_sinusoidal_positions`` rebuilt from its own bytecode with the
constant 10000 replaced by 500000 ("source": "create_sinusoidal_positions with base
substituted"): the same operations in the same precision, only the base changed.

Values are written as the shortest decimal that reads back as the same float32.
"""
import json
import sys
import types
from pathlib import Path

import flax
import jax
import jax.numpy as jnp
import numpy as np
import transformers
from transformers import LlamaConfig
from transformers.models.gemma import modeling_flax_gemma
from transformers.models.llama import modeling_flax_llama as llama
from transformers.models.mistral import modeling_flax_mistral

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "rope_reference.json"
HEADS = 2
POSITIONS = {8: [0, 1, 4, 9, 37], 16: [2, 3, 17, 50, 96]}
BASES = [10000, 500000]
ORIGINAL = llama.create_sinusoidal_positions


def table_with_base(base, table=ORIGINAL):
    """A module's create_sinusoidal_positions, with its constant 10000 replaced by base."""
    code = table.__code__
    assert code.co_consts.count(10000) == 1, code.co_consts
    consts = tuple(base if c == 10000 and type(c) is int else c for c in code.co_consts)
    return types.FunctionType(code.replace(co_consts=consts), table.__globals__,
                              table.__name__, table.__defaults__, table.__closure__)


def hf_rope(X, positions, base):
    """X (heads, steps, d) float32 rotated by FlaxLlamaRotaryEmbedding, same layout back."""
    heads, _, d = X.shape
    # The table has max_position_embeddings rows; create_sinusoidal_positions slices its last
    # axis (2 d long) to num_pos, so num_pos must be at least 2 d to keep all of it.
    config = LlamaConfig(hidden_size=heads * d, num_attention_heads=heads,
                         max_position_embeddings=max(max(positions) + 1, 2 * d),
                         rope_theta=float(base))
    llama.create_sinusoidal_positions = ORIGINAL if base == 10000 else table_with_base(base)
    try:
        module = llama.FlaxLlamaRotaryEmbedding(config, dtype=jnp.float32)
        query = jnp.asarray(X.transpose(1, 0, 2)[None])
        key = -query
        position_ids = jnp.asarray(positions, dtype=jnp.int32)[None]
        key_out, query_out = module.apply({}, key, query, position_ids)
    finally:
        llama.create_sinusoidal_positions = ORIGINAL
    out = np.asarray(query_out)[0].transpose(1, 0, 2)
    assert out.dtype == np.float32 and out.shape == X.shape
    np.testing.assert_array_equal(np.asarray(key_out)[0].transpose(1, 0, 2), -out)
    return out


def by_the_functions(X, positions, base, module):
    """The same rotation from a module's functions, called directly (a cross-check)."""
    d = X.shape[-1]
    table = module.create_sinusoidal_positions
    table = table if base == 10000 else table_with_base(base, table)
    sincos = np.asarray(table(max(max(positions) + 1, 2 * d), d))[np.asarray(positions)]
    sin, cos = np.split(sincos, 2, axis=-1)  # (steps, 1, d)
    x = jnp.asarray(X.transpose(1, 0, 2))
    return np.asarray(module.apply_rotary_pos_emb(x, sin, cos)).transpose(1, 0, 2)


def short(array):
    """Nested lists of the shortest decimals that read back as the same float32."""
    if array.ndim:
        return [short(row) for row in array]
    return float(str(np.float32(array)))


def main():
    rng = np.random.default_rng(31)
    cases = []
    for d, positions in POSITIONS.items():
        # Inputs with 3 decimals: short in the file, and exactly the float32 the tests read.
        X = np.round(rng.normal(size=(HEADS, len(positions), d)), 3).astype(np.float32)
        for base in BASES:
            out = hf_rope(X, positions, base)
            for module in (llama, modeling_flax_mistral, modeling_flax_gemma):
                np.testing.assert_array_equal(by_the_functions(X, positions, base, module), out)
            assert np.array_equal(np.asarray(short(out), dtype=np.float32), out)
            cases.append({"d": d, "base": float(base), "positions": positions,
                          "source": ("unmodified" if base == 10000 else
                                     "create_sinusoidal_positions with base substituted"),
                          "X": short(X), "expected": short(out)})
    versions = {"transformers": transformers.__version__, "flax": flax.__version__,
                "jax": jax.__version__, "jaxlib": jax.lib.__version__,
                "numpy": np.__version__, "python": sys.version.split()[0]}
    header = {"what": "apply_rope(X, positions, base) as Hugging Face transformers' Flax Llama "
                      "computes it (FlaxLlamaRotaryEmbedding: create_sinusoidal_positions, "
                      "rotate_half, apply_rotary_pos_emb), float32; X and expected are (heads, "
                      "steps, d); recorded by tools/record_rope_fixture.py",
              "versions": versions}
    OUT.write_text("{\n" + "".join(f"{json.dumps(k)}: {json.dumps(v)},\n"
                                    for k, v in header.items())
                   + '"cases": [\n' + ",\n".join("  " + json.dumps(case) for case in cases)
                   + "\n]}\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(cases)} cases, {versions}")


if __name__ == "__main__":
    main()
