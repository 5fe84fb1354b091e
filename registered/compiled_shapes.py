"""A pytest plugin (``-p registered.compiled_shapes``): the renorm path tests at the shapes they run compiled.

Under Triton's interpreter the path tests take a quarter of the default launch shapes and a 700-entry vocabulary
(``registered/renorm_tunings.py``); compiled, on the GPU, the defaults and 2100 entries. Rows built so that a
guess takes a given route can take another at the other shapes (four of the probe's route tests did, on the
GPU). Loaded before the test modules are imported, this plugin sets the compiled values, so a CPU job runs the
same tests at the GPU's shapes (``test_renorm_probe.py`` does, in a subprocess).
"""
from __future__ import annotations

import registered.renorm_tunings as shapes

shapes.SMALL_SHAPES = {}
shapes.PATH_VOCAB = shapes.COMPILED_PATH_VOCAB
