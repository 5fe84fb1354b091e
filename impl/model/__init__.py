"""The tiny DeepSeek-V4-like model: config presets, deterministic weights, target, drafts."""
from impl.model.tiny_config import TinyConfig, cpu_small, dsv4_geometry, preset

__all__ = ["TinyConfig", "cpu_small", "dsv4_geometry", "preset"]
