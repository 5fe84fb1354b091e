"""Renorm tunings the path tests share.

``SMALL_SHAPES``: launch shapes a quarter of the defaults, and chunks to match. Which path a row takes,
and every line of it, does not depend on the block sizes, while the Triton interpreter's cost grows
with them; the op table and the other renorm tests run the default shapes.
"""
from __future__ import annotations

SMALL_SHAPES = dict(chunk_align=256, first_pass=(256, 4), narrow_pass=(256, 4), wide_pass=((256, 4), (128, 4)),
                    compact=(256, 4), finish=((256, 4), (256, 4)), write=(256, 4))
