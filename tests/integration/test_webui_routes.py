"""The chat page's files over HTTP: GET / is the page and /webui/* its
scripts and styles, byte-equal to webui/ and to the files of Debian's
libjs-marked and libjs-highlight.js, with the content type a browser runs
them as, a Cache-Control policy and an ETag that answers a revalidation with
304; HEAD works, other methods get 405; no API key is needed for them (the
API still needs it); the page loads nothing from another host; and with
--no-webui every one of them is a 404 again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

from server_util import CllmServer, tiny_model

REPO = Path(__file__).resolve().parents[2]
JS = Path("/usr/share/javascript")
JS_TYPE = "text/javascript; charset=utf-8"
CSS_TYPE = "text/css; charset=utf-8"
OWN = "no-cache"
LIBRARY = "public, max-age=86400"

# path -> (file it must equal, Content-Type, Cache-Control)
ASSETS = {
    "/": (REPO / "webui/index.html", "text/html; charset=utf-8", OWN),
    "/index.html": (REPO / "webui/index.html", "text/html; charset=utf-8", OWN),
    "/webui/app.js": (REPO / "webui/app.js", JS_TYPE, OWN),
    "/webui/style.css": (REPO / "webui/style.css", CSS_TYPE, OWN),
    "/webui/marked.min.js": (JS / "marked/marked.min.js", JS_TYPE, LIBRARY),
    "/webui/highlight.min.js": (JS / "highlight.js/highlight.min.js", JS_TYPE, LIBRARY),
    "/webui/highlight.css": (JS / "highlight.js/styles/github.css", CSS_TYPE, LIBRARY),
}


@pytest.fixture(scope="module")
def keyed_server(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", api_key="sk-webui") as srv:
        yield srv


def get(srv, path, **headers):
    return requests.get(srv.url(path), headers=headers, timeout=30)


@pytest.mark.parametrize("path", list(ASSETS))
def test_asset_is_served_without_a_key(keyed_server, path):
    source, content_type, cache_control = ASSETS[path]
    r = get(keyed_server, path)
    assert r.status_code == 200, r.text[:300]
    assert r.content == source.read_bytes()
    assert r.headers["Content-Type"] == content_type
    assert r.headers["Cache-Control"] == cache_control
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert re.fullmatch(r'"[0-9a-f]{16}"', r.headers["ETag"])


def test_revalidation_answers_304(keyed_server):
    etag = get(keyed_server, "/webui/app.js").headers["ETag"]
    for if_none_match in (etag, "W/" + etag, f'"0000000000000000", {etag}', "*"):
        r = get(keyed_server, "/webui/app.js", **{"If-None-Match": if_none_match})
        assert r.status_code == 304, if_none_match
        assert r.content == b""
        assert r.headers["ETag"] == etag
        assert r.headers["Cache-Control"] == OWN
    r = get(keyed_server, "/webui/app.js", **{"If-None-Match": '"0000000000000000"'})
    assert r.status_code == 200 and r.content == (REPO / "webui/app.js").read_bytes()
    # Each file has its own tag: the page's tag does not revalidate a script.
    page_etag = get(keyed_server, "/").headers["ETag"]
    assert page_etag != etag
    assert get(keyed_server, "/webui/app.js", **{"If-None-Match": page_etag}).status_code == 200


def test_head_and_other_methods(keyed_server):
    r = requests.head(keyed_server.url("/"), timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.content == b""
    for method in ("POST", "PUT", "DELETE"):
        r = requests.request(method, keyed_server.url("/webui/app.js"), timeout=30)
        assert r.status_code == 405, method
        assert r.headers["Allow"] == "GET, HEAD"
        assert "not allowed" in r.json()["error"]["message"]


def test_the_api_still_needs_the_key(keyed_server):
    assert get(keyed_server, "/v1/models").status_code == 401
    assert get(keyed_server, "/v1/models", Authorization="Bearer sk-webui").status_code == 200
    assert get(keyed_server, "/webui/nothing.js").status_code == 404


def test_page_loads_only_its_own_files(keyed_server):
    """Every script and style the page names is served here: nothing comes
    from a CDN or any other host."""
    page = get(keyed_server, "/").text
    refs = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', page)
    assert "data:," in refs  # no icon: the browser asks for no /favicon.ico
    refs.remove("data:,")
    assert len(refs) == 5, refs
    for ref in refs:
        assert ref.startswith("/webui/"), ref
        assert get(keyed_server, ref).status_code == 200, ref
    assert "http://" not in page and "https://" not in page


def test_no_webui_turns_the_page_off(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB", "--no-webui") as srv:
        for path in ASSETS:
            r = get(srv, path)
            assert r.status_code == 404, path
            assert r.json()["error"]["message"] == f"No route for GET {path}"
        assert get(srv, "/v1/models").status_code == 200


def test_no_webui_in_help_and_config(run_cllm, model_factory):
    r = run_cllm("serve", "--help")
    assert r.returncode == 0 and "--no-webui" in r.stdout
    on = json.loads(run_cllm("serve", tiny_model(model_factory), "--print-config").stdout)
    off = json.loads(run_cllm("serve", tiny_model(model_factory), "--no-webui", "--print-config").stdout)
    assert on["no-webui"] is False and off["no-webui"] is True
