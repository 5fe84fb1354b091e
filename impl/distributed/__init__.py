"""Multi-rank end to end: DP attention with a tensor-parallel MLP over torch.distributed."""
