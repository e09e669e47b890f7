"""The files of deploy/ against what they describe: every YAML file parses;
the Deployment's arguments start a real `cllm serve` whose probe paths answer
200 and whose grace period covers its drain; the Service, the Prometheus
scrape config and the KEDA ScaledObject point at each other and at metric
names a running server exports; deploy/nginx/cllm.conf is the template filled
in, and `nginx -t` accepts it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import shutil
import subprocess

import pytest
import yaml

from server_util import CllmServer, tiny_model


@pytest.fixture(scope="module")
def deploy_dir(repo_root):
    return repo_root / "deploy"


@pytest.fixture(scope="module")
def deploy_script(deploy_dir):
    """deploy/test as a module (its template filling and nginx.conf wrapper)."""
    loader = importlib.machinery.SourceFileLoader("deploy_test", str(deploy_dir / "test"))
    spec = importlib.util.spec_from_loader("deploy_test", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def manifests(deploy_dir) -> dict:
    """{kind: document} over deploy/k8s, and every file parsed."""
    docs = {}
    for path in sorted((deploy_dir / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc and "kind" in doc and "apiVersion" in doc, f"{path.name}: a document without kind"
            docs.setdefault(doc["kind"], []).append(doc)
    return docs


@pytest.fixture(scope="module")
def prometheus(deploy_dir) -> dict:
    return yaml.safe_load((deploy_dir / "prometheus" / "prometheus.yml").read_text())


def container(manifests) -> dict:
    (dep,) = manifests["Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def flag_values(args: list[str]) -> dict:
    out = {}
    for a in args:
        if a.startswith("--"):
            k, _, v = a.partition("=")
            out[k] = v
    return out


def test_every_yaml_file_parses(deploy_dir):
    files = sorted(deploy_dir.rglob("*.yaml")) + sorted(deploy_dir.rglob("*.yml"))
    assert len(files) >= 4
    for f in files:
        assert list(yaml.safe_load_all(f.read_text())), f"{f} is empty"


def test_deployment_args_serve_and_probes_answer(manifests, cllm_bin, model_factory):
    c = container(manifests)
    args = c["args"]
    assert args[0] == "serve"
    # The model, the address and the sizes are the cluster's; every other flag
    # is passed as written.
    local = {"--host", "--port", "--threads", "--kv-cache-memory"}
    kept = [a for a in args[2:] if a.split("=")[0] not in local]
    assert len(kept) >= 4
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB", *kept) as srv:
        for probe in ("readinessProbe", "startupProbe", "livenessProbe"):
            get = c[probe]["httpGet"]
            assert get["port"] in [p["name"] for p in c["ports"]]
            assert srv.get(get["path"], headers={}).status_code == 200, probe
        assert c["readinessProbe"]["httpGet"]["path"] == "/health"
        served = srv.get("/v1/models").json()["data"][0]["id"]
        assert served == flag_values(args)["--served-model-name"]


def test_grace_period_covers_the_drain(manifests):
    (dep,) = manifests["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    c = container(manifests)
    shutdown = float(flag_values(c["args"])["--shutdown-timeout"])
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    sleep_s = float(pre_stop[1])
    # SIGKILL comes terminationGracePeriodSeconds after the preStop hook starts.
    assert pod["terminationGracePeriodSeconds"] >= sleep_s + shutdown + 5
    live = c["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > sleep_s + shutdown
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert int(flag_values(c["args"])["--port"]) == port
    assert c["resources"]["requests"]["cpu"] == flag_values(c["args"])["--threads"]


def test_service_selects_the_pods(manifests):
    (dep,) = manifests["Deployment"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = [p["name"] for p in container(manifests)["ports"]]
    assert len(manifests["Service"]) >= 1
    for svc in manifests["Service"]:
        assert svc["spec"]["selector"].items() <= labels.items()
        assert all(p["targetPort"] in ports for p in svc["spec"]["ports"])


def test_scaler_and_scrape_config_meet_the_metrics(manifests, prometheus, cllm_bin, model_factory):
    (dep,) = manifests["Deployment"]
    (so,) = manifests["ScaledObject"]
    assert so["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    query = trigger["metadata"]["query"]
    assert float(trigger["metadata"]["threshold"]) > 0
    job = re.search(r'job="([^"]+)"', query).group(1)
    (scrape,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == job]
    assert scrape["metrics_path"] == "/metrics"
    # The scrape keeps the Deployment's pods, on the port the Service names.
    labels = dep["spec"]["template"]["metadata"]["labels"]
    keep = {tuple(r["source_labels"]): r["regex"] for r in scrape["relabel_configs"] if r.get("action") == "keep"}
    pod_label = "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", "app.kubernetes.io/name")
    assert re.fullmatch(keep[(pod_label,)], labels["app.kubernetes.io/name"])
    assert re.fullmatch(keep[("__meta_kubernetes_pod_container_port_name",)], "http")
    # Every metric the query reads is one cllm exports.
    names = set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", query))
    assert "vllm:num_requests_waiting" in names
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB") as srv:
        exported = set(re.findall(r"^# TYPE (\S+) ", srv.get("/metrics").text, re.M))
    assert names <= exported, names - exported


def test_nginx_example_is_the_template_filled(deploy_dir, deploy_script):
    example = (deploy_dir / "nginx" / "cllm.conf").read_text()
    filled = deploy_script.fill_template("127.0.0.1:8000", ["127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"])
    assert example == filled, "deploy/nginx/cllm.conf is stale: run deploy/test --write-example"
    for directive in ("least_conn;", "hash $http_x_session_id consistent;", "proxy_buffering off;",
                      "proxy_http_version 1.1;", "proxy_next_upstream error timeout http_502 http_503 non_idempotent;",
                      "proxy_read_timeout 3600s;", "max_fails=1 fail_timeout=5s;", "keepalive 64;"):
        assert directive in example, directive


def test_nginx_accepts_the_example(deploy_dir, deploy_script, tmp_path):
    if not shutil.which("nginx"):
        pytest.fail("nginx is missing: run scripts/setup.sh (apt-get install nginx)", pytrace=False)
    conf = tmp_path / "nginx.conf"
    conf.write_text(deploy_script.main_conf(tmp_path, deploy_dir / "nginx" / "cllm.conf"))
    r = subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "test is successful" in r.stderr, r.stderr
    # A broken file is refused: the check can fail.
    bad = tmp_path / "bad.conf"
    bad.write_text((deploy_dir / "nginx" / "cllm.conf").read_text().replace("least_conn;", "least_conn"))
    conf.write_text(deploy_script.main_conf(tmp_path, bad))
    r = subprocess.run(["nginx", "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
