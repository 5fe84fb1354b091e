"""Oracle for verify / prefill metadata and the field rule of the sync policy (docs/design.md §4).

Plain Python lists and loops. The field rule is restated here independently of
``impl/sync_policy.py`` so that editing the impl table cannot silently change
what the tests expect.
"""
from __future__ import annotations


def field_rule_allows_output_size(platform: str, algorithm: str) -> bool:
    """The field rule, in words: on HIP the output_size shortcut is allowed only for
    DSpark verify (MTP/EAGLE faulted without the sync); CUDA (and CPU, which follows
    CUDA) allow it whenever the total is exact."""
    if platform == "hip":
        return algorithm == "dspark"
    return platform in ("cuda", "cpu")


def expected_sync_kinds(platform: str, algorithm: str, path: str) -> list[str]:
    """The device-to-host syncs the metadata builder must perform, per path."""
    if path == "ragged-graph":
        return []  # captured: no sync at all
    kinds = ["item"] if path == "ragged-eager" else []  # reading sum(verify_lens) back
    if not field_rule_allows_output_size(platform, algorithm):
        kinds.append("repeat_interleave without output_size")
    return kinds


def pad_lens(lens: list[int], tier: int, padded_bs: int) -> list[int]:
    """Negative lens count as 0; padding is never negative (0 when the tier is below the sum)."""
    lens = [max(int(v), 0) for v in lens]
    out = list(lens) + [0] * (padded_bs - len(lens))
    leftover = max(tier - sum(lens), 0)
    n_pad = padded_bs - len(lens)
    if n_pad:
        for i in range(n_pad):
            out[len(lens) + i] = leftover // n_pad + (1 if i < leftover % n_pad else 0)
    elif lens:
        out[-1] += leftover
    return out


def token_metadata(prefix_lens, extend_lens, req_pool_indices, *, window, tier=None, padded_bs=None):
    """Per-token metadata as a dict of lists; ``tier`` selects the padded graph layout."""
    prefix, ext, rpi = (list(map(int, x)) for x in (prefix_lens, extend_lens, req_pool_indices))
    prefix, ext = [max(p, 0) for p in prefix], [max(e, 0) for e in ext]  # out of contract: negatives count as 0
    out = {k: [] for k in ("positions", "seq_lens_causal", "req_indices", "final_pos", "is_padding",
                           "token_batch_index")}
    for r in range(len(ext)):
        for j in range(ext[r]):
            pos = prefix[r] + j
            out["positions"].append(pos)
            out["seq_lens_causal"].append(pos + 1)
            out["req_indices"].append(rpi[r])
            out["final_pos"].append(prefix[r] + ext[r] - 1)
            out["is_padding"].append(False)
            out["token_batch_index"].append(r)
    if tier is not None:
        for _ in range(tier - sum(ext)):  # padding rows: skipped by the ring store
            out["positions"].append(0)
            out["seq_lens_causal"].append(1)
            out["req_indices"].append(rpi[-1])
            out["final_pos"].append(window)
            out["is_padding"].append(True)
            out["token_batch_index"].append(len(ext) - 1)
        out["padded_lens"] = pad_lens(ext, tier, len(ext) if padded_bs is None else padded_bs)
    starts, acc = [], 0
    for e in ext:
        starts.append(acc)
        acc += e
    out["extend_start_loc"] = starts
    out["seq_lens"] = [p + e for p, e in zip(prefix, ext)]
    out["num_tokens"] = len(out["positions"])
    return out


def unified_extend_fields(prefix_lens, extend_lens, req_pool_indices):
    """Per token of a prefill / extend / verify step, the unified-KV fields an engine's builder writes:
    ``state_slot`` (the request's slot), ``chunk_start`` (its prefix: the first position of this step),
    ``cu_q`` (its first row in the packed layout), ``final_pos`` (its last position after the step); and
    ``num_tokens``, the rows laid out (= the sum of the lengths, the only exact ``output_size``)."""
    out = {"state_slot": [], "chunk_start": [], "cu_q": [], "final_pos": []}
    row = 0
    for prefix, ext, slot in zip(prefix_lens, extend_lens, req_pool_indices):
        prefix, ext, slot = int(prefix), int(ext), int(slot)
        for _ in range(ext):
            out["state_slot"].append(slot)
            out["chunk_start"].append(prefix)
            out["cu_q"].append(row)
            out["final_pos"].append(prefix + ext - 1)
        row += ext
    out["num_tokens"] = row
    return out


def build_token_metadata(prefix_lens, extend_lens, req_pool_indices, *, window, num_tokens, padded_bs=None):
    """The op ``impl.kernels.build_token_metadata`` as tensors (CPU), from :func:`token_metadata`.

    ``extend_lens`` may be an int (every request extends that many rows). Out of contract (check mode
    raises there): ``num_tokens`` below the sum keeps the first ``num_tokens`` rows."""
    import torch

    prefix = [int(v) for v in prefix_lens]
    ext = [extend_lens] * len(prefix) if isinstance(extend_lens, int) else [int(v) for v in extend_lens]
    out = token_metadata(prefix, ext, req_pool_indices, window=window, tier=num_tokens,
                         padded_bs=padded_bs)
    n = num_tokens

    def t(key, dtype, rows=None):
        return torch.tensor(out[key][:rows], dtype=dtype)

    fields = (t("positions", torch.int64, n), t("seq_lens_causal", torch.int32, n),
              t("req_indices", torch.int32, n), t("final_pos", torch.int64, n),
              t("token_batch_index", torch.int64, n), t("is_padding", torch.bool, n),
              torch.tensor(ext, dtype=torch.int32), t("extend_start_loc", torch.int32),
              t("seq_lens", torch.int64))
    return fields + ((t("padded_lens", torch.int32),) if padded_bs is not None else ())
