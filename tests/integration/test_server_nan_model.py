"""A model that computes NaN logits (weights broken in a way no loader check
sees) gets a clean error per request, whatever the sampling options: a 500
naming the engine, the server up, the KV blocks back in the pool. Where only
some tokens' logits are NaN, those tokens are never sampled."""

from __future__ import annotations

import shutil

import gguf
import numpy as np
import pytest

from server_util import CllmServer, tiny_model

OPTIONS = [{"temperature": 0}, {"temperature": 1}, {"temperature": 0.7, "top_k": 5}, {"top_p": 0.5},
           {"min_p": 0.1}, {"min_p": 1.0}, {"repetition_penalty": 1.5, "presence_penalty": 1, "frequency_penalty": 1},
           {"logit_bias": {"5": 100, "7": -100}}, {"logprobs": 3}, {"n": 3, "temperature": 1}]


def broken_copy(model_factory, tmp_path, name, rows=None):
    """A copy of the tiny model whose output head is NaN (every row, or only `rows`)."""
    path = tmp_path / f"{name}.gguf"
    shutil.copy(tiny_model(model_factory), path)
    reader = gguf.GGUFReader(path, "r+")
    data = next(t for t in reader.tensors if t.name == "output.weight").data  # a map of the file
    if rows is None:
        data[...] = np.nan
    else:
        data[rows, :] = np.nan
    del data, reader
    return path


def used_blocks(srv) -> float:
    return srv.metrics()["cllm:kv_cache_blocks_used"]


def test_all_nan_logits_fail_each_request_cleanly(cllm_bin, model_factory, tmp_path):
    path = broken_copy(model_factory, tmp_path, "nan-head")
    with CllmServer(cllm_bin, path, "--kv-cache-memory", "16MiB", "--no-enable-prefix-caching") as srv:
        for opts in OPTIONS:
            for stream in (False, True):
                r = srv.post("/v1/completions", {"prompt": "hello", "max_tokens": 4, "stream": stream, **opts})
                if stream:
                    assert r.status_code == 200  # the error comes as an event once streaming started
                    assert '"server_error"' in r.text and "[DONE]" in r.text, r.text[:500]
                else:
                    assert r.status_code == 500, (opts, r.text[:300])
                    assert r.json()["error"]["type"] == "server_error"
        assert srv.get("/health").status_code == 200
        assert used_blocks(srv) == 0
        assert srv.proc.poll() is None


def test_nan_rows_are_never_sampled(cllm_bin, model_factory, tmp_path):
    """Every even token's logit is NaN: each option set still answers, and
    the logprobs (of the model's distribution, over the possible tokens)
    show only possible tokens were drawn or ranked."""
    path = broken_copy(model_factory, tmp_path, "nan-rows", rows=list(range(0, 320, 2)))
    with CllmServer(cllm_bin, path, "--kv-cache-memory", "16MiB") as srv:
        for opts in OPTIONS:
            body = {"prompt": "hello", "max_tokens": 8, "ignore_eos": True, **opts}
            body.setdefault("logprobs", 2)
            r = srv.post("/v1/completions", body)
            assert r.status_code == 200, (opts, r.text[:300])
            for choice in r.json()["choices"]:
                lps = choice["logprobs"]
                assert len(lps["token_logprobs"]) == 8
                for lp, top in zip(lps["token_logprobs"], lps["top_logprobs"]):
                    assert -9999 < lp <= 0, (opts, lps)
                    assert all(-9999 < v <= 0 for v in top.values()), (opts, top)
        assert srv.get("/health").status_code == 200
