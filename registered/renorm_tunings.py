"""Renorm tunings the path tests share.

Under Triton's interpreter (CPU jobs), ``SMALL_SHAPES``: launch shapes a quarter of the defaults, and
chunks to match. Which path a row takes, and every line of it, does not depend on the block sizes, while
the interpreter's cost grows with them. Compiled (GPU jobs), the path tests keep the default shapes, as do
the op table and the other renorm tests everywhere. ``PATH_VOCAB``: three chunks of the chunk length in
effect, so candidates come from several programs per row. ``registered/compiled_shapes.py`` (a pytest plugin)
sets the compiled values under the interpreter, so a CPU job can check a test's rows at the GPU's shapes.
"""
from __future__ import annotations

from impl.kernels._backend import INTERPRETED

SMALL_SHAPES = dict(chunk_align=256, first_pass=(256, 4), narrow_pass=(256, 4), wide_pass=((256, 4), (128, 4)),
                    compact=(256, 4), finish=((256, 4), (256, 4)), write=(256, 4)) if INTERPRETED else {}
COMPILED_PATH_VOCAB = 2100
PATH_VOCAB = 700 if INTERPRETED else COMPILED_PATH_VOCAB
