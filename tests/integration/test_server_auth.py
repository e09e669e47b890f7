"""Where the API key comes from and what it guards: --api-key, $CLLM_API_KEY,
$VLLM_API_KEY (vLLM's name; $CLLM_API_KEY wins), --api-key-file (so the key
is not in /proc/PID/cmdline); /v1/*, /tokenize and /detokenize need it,
/metrics only with --metrics-require-api-key, /health never."""

from __future__ import annotations

import os

import pytest
import requests

from server_util import CllmServer, tiny_model


def status(srv, path, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.get(srv.url(path), headers=headers, timeout=30).status_code


def assert_guarded(srv, key, metrics_guarded=False):
    assert status(srv, "/v1/models") == 401
    assert status(srv, "/v1/models", "sk-wrong") == 401
    assert status(srv, "/v1/models", key) == 200
    assert status(srv, "/health") == 200
    assert status(srv, "/metrics") == (401 if metrics_guarded else 200)
    assert status(srv, "/metrics", key) == 200


@pytest.mark.parametrize("env,key", [
    ({"CLLM_API_KEY": "sk-cllm"}, "sk-cllm"),
    ({"VLLM_API_KEY": "sk-vllm"}, "sk-vllm"),
    ({"CLLM_API_KEY": "sk-cllm", "VLLM_API_KEY": "sk-vllm"}, "sk-cllm"),
], ids=["cllm", "vllm", "both"])
def test_key_from_environment(cllm_bin, model_factory, env, key):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", env=env) as srv:
        assert_guarded(srv, key)
        if len(env) == 2:
            assert status(srv, "/v1/models", env["VLLM_API_KEY"]) == 401


def test_key_file_keeps_key_off_the_command_line(cllm_bin, model_factory, tmp_path):
    key = "sk-from-file-0123456789"
    path = tmp_path / "key"
    path.write_text(f"  {key}\n")
    os.chmod(path, 0o600)
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", "--api-key-file", path,
                    "--metrics-require-api-key") as srv:
        assert_guarded(srv, key, metrics_guarded=True)
        cmdline = open(f"/proc/{srv.proc.pid}/cmdline", "rb").read()
        assert key.encode() not in cmdline
        r = requests.get(srv.url("/metrics"), timeout=30)
        assert r.json()["error"]["type"] == "authentication_error"
        assert r.headers.get("WWW-Authenticate") == "Bearer"


def test_metrics_open_by_default_with_a_key(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", api_key="sk-1") as srv:
        assert_guarded(srv, "sk-1", metrics_guarded=False)


@pytest.mark.parametrize("args,env,needle", [
    (["--api-key", "sk-1", "--api-key-file", "{key}"], {}, "not both"),
    (["--api-key-file", "/nonexistent/cllm-key"], {}, "/nonexistent/cllm-key"),
    (["--api-key-file", "{empty}"], {}, "no api key"),
    (["--metrics-require-api-key"], {}, "needs a key"),
], ids=["key-and-file", "missing-file", "empty-file", "metrics-without-key"])
def test_bad_key_settings_stop_the_server(run_cllm, model_factory, tmp_path, args, env, needle):
    (tmp_path / "key").write_text("sk-1\n")
    (tmp_path / "empty").write_text("\n")
    args = [a.format(key=tmp_path / "key", empty=tmp_path / "empty") for a in args]
    run_env = {k: v for k, v in os.environ.items() if k not in ("CLLM_API_KEY", "VLLM_API_KEY")}
    r = run_cllm("serve", tiny_model(model_factory), "--port", "0", *args, env={**run_env, **env}, timeout=60)
    assert r.returncode == 1, r.stderr
    assert needle in r.stderr.lower(), r.stderr
    assert "sk-1" not in r.stderr
