"""What ships for deployment agrees with itself and with groupshift's own rules, checked without
Docker or Kubernetes: the image's entrypoint (GROUPSHIFT_SET_* variables to `--set`), the
Dockerfile's defaults, the example Kubernetes manifest (parsed as YAML, its fields, its settings
through groupshift's validation) and the image tag's inputs. The image itself is built and run by
e2e/test_gateway_image.py; the manifest is not applied to a cluster anywhere (docs/deployment.md).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gateway.config import load_settings
from harness.gateway_image import dependency_requirements, image_tag, package_files

REPO = Path(__file__).resolve().parent.parent
IMAGE = REPO / "deploy" / "image"
MANIFEST = REPO / "deploy" / "kubernetes" / "groupshift.yaml"
# The packages `groupshift serve` imports from (the image runs nothing else).
SERVING_PACKAGES = ("groupshift", "protocol", "records", "engine", "translation", "gateway")


def _entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gateway_image_entrypoint", IMAGE / "entrypoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dockerfile_env() -> dict[str, str]:
    """The Dockerfile's ENV defaults (one ENV instruction with `\\`-continued NAME=VALUE lines)."""
    text = (IMAGE / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(item.split("=", 1) for item in line[4:].split())
    return env


def _dockerfile_user() -> str:
    users = re.findall(r"^USER (\S+)$", (IMAGE / "Dockerfile").read_text(), flags=re.M)
    assert len(users) == 1
    return str(users[0])


def _manifest() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return {d["kind"]: d for d in docs}


def _settings(env: dict[str, str]) -> Any:
    """The ServerConfig `groupshift serve` would load in a container with `env`."""
    args = _entrypoint().serve_arguments(env, [])
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    return load_settings(sets=sets).config


# -- the entrypoint ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "setting"),
    [
        ("GROUPSHIFT_SET_ADVERTISED_LISTENERS", "advertised.listeners"),
        ("GROUPSHIFT_SET_UPSTREAM_NODE_PORT_BASE", "upstream.node.port.base"),
        ("GROUPSHIFT_SET_LISTENER_NAME_EXT_SSL_KEYSTORE_TYPE", "listener.name.ext.ssl.keystore.type"),
        ("GROUPSHIFT_SET_A__B", "a_b"),
        ("GROUPSHIFT_SET_A___B", "a-b"),
    ],
)  # fmt: skip
def test_variable_names_become_setting_names(variable: str, setting: str) -> None:
    assert _entrypoint().setting_name(variable) == setting


@pytest.mark.parametrize(
    "variable", ["GROUPSHIFT_SET_", "GROUPSHIFT_SET__X", "GROUPSHIFT_SET_X_", "GROUPSHIFT_SET_A____B"]
)
def test_meaningless_variable_names_are_refused(variable: str) -> None:
    entrypoint = _entrypoint()
    with pytest.raises(entrypoint.SettingNameError, match=re.escape(variable)):
        entrypoint.serve_arguments({variable: "x"}, [])


def test_only_set_variables_become_settings_and_arguments_come_last() -> None:
    env = {
        "GROUPSHIFT_SET_NUM_PARTITIONS": "3",
        "GROUPSHIFT_DEBUG": "1",  # groupshift's own variable, not a setting
        "GROUPSHIFT_SET_ADVERTISED_LISTENERS": "PLAINTEXT://gw:19092",
        "PATH": "/usr/bin",
    }
    args = _entrypoint().serve_arguments(env, ["--set", "num.partitions=6"])
    assert args == [
        "serve",
        "--set", "advertised.listeners=PLAINTEXT://gw:19092",
        "--set", "num.partitions=3",
        "--set", "num.partitions=6",
    ]  # fmt: skip
    assert load_settings(sets=["num.partitions=3", "num.partitions=6"]).config.num_partitions == 6


# -- the Dockerfile ------------------------------------------------------------------------------


def test_dockerfile_pulls_nothing_and_runs_unprivileged() -> None:
    text = (IMAGE / "Dockerfile").read_text()
    assert re.findall(r"^FROM (.+)$", text, flags=re.M) == ["${PYTHON_IMAGE}"]
    assert re.search(r"^ARG PYTHON_IMAGE$", text, flags=re.M)
    uid, gid = _dockerfile_user().split(":")
    assert int(uid) != 0 and int(gid) != 0
    assert f"--uid {uid}" in text and f"--gid {gid}" in text
    assert re.search(r"^EXPOSE 9092 9404$", text, flags=re.M)
    assert "--no-index" in text  # installs from the context's wheels only
    assert 'ENTRYPOINT ["/opt/groupshift/venv/bin/python", "/opt/groupshift/entrypoint.py"]' in text


def test_dockerfile_defaults_are_valid_settings() -> None:
    env = _dockerfile_env()
    config = _settings({**env, "GROUPSHIFT_SET_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:19092"})
    listeners = [(x.bind_host, x.port, x.advertised_host, x.advertised_port) for x in config.served_listeners]
    assert listeners == [("0.0.0.0", 9092, "127.0.0.1", 19092)]
    assert config.metrics_listen == "0.0.0.0:9404"
    assert str(config.data_dir) == env["GROUPSHIFT_SET_LOG_DIRS"]
    assert Path(env["HOME"]) in Path(env["GROUPSHIFT_SET_LOG_DIRS"]).parents


# -- the Kubernetes manifest ---------------------------------------------------------------------


def test_manifest_has_the_objects_a_deployment_needs() -> None:
    objects = _manifest()
    assert set(objects) == {"Namespace", "PersistentVolumeClaim", "Deployment", "Service"}
    namespace = objects["Namespace"]["metadata"]["name"]
    for kind in ("PersistentVolumeClaim", "Deployment", "Service"):
        assert objects[kind]["metadata"]["namespace"] == namespace
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # one data directory, one node
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    assert objects["Service"]["spec"]["selector"] == labels


def test_manifest_probes_resources_and_security_context() -> None:
    pod = _manifest()["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["kafka"] == 9092 and ports["metrics"] == 9404  # the image's EXPOSE
    ready, live = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (ready["path"], ready["port"]) == ("/health/ready", "metrics")
    assert (live["path"], live["port"]) == ("/health/live", "metrics")
    assert container["startupProbe"]["httpGet"]["path"] == "/health/live"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    uid, gid = (int(x) for x in _dockerfile_user().split(":"))
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid, gid, gid)
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # the data directory lives on the claim (the image's HOME is the volume, the data dir in it)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    data_dir = Path(_dockerfile_env()["GROUPSHIFT_SET_LOG_DIRS"])
    claimed = [n for n, v in volumes.items() if "persistentVolumeClaim" in v]
    assert [volumes[n]["persistentVolumeClaim"]["claimName"] for n in claimed] == ["groupshift-data"]
    assert Path(mounts[claimed[0]]) in data_dir.parents
    if container["securityContext"].get("readOnlyRootFilesystem"):
        assert "/tmp" in mounts.values()


def test_manifest_settings_and_per_broker_ports_agree() -> None:
    objects = _manifest()
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    config = _settings({**_dockerfile_env(), **env})  # groupshift's own validation
    service = objects["Service"]
    service_host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    assert config.upstream is not None
    assert config.upstream.advertised_host == service_host
    assert env["GROUPSHIFT_SET_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{service_host}:9092"
    base = config.upstream.node_port_base
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    brokers = {name: port for name, port in ports.items() if name.startswith("broker-")}
    assert brokers and brokers == {f"broker-{n}": base + n for n in range(len(brokers))}
    # The Service keeps every port number (port-per-broker advertises the container's ports).
    by_name = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(by_name) == set(ports)
    for name, port in ports.items():
        assert by_name[name]["port"] == port and by_name[name]["targetPort"] == name


# -- the image's inputs --------------------------------------------------------------------------


def test_every_data_file_of_the_serving_packages_is_package_data() -> None:
    """A wheel carries only .py files and the package-data: a file `serve` reads must be named."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    package_data: dict[str, list[str]] = pyproject["tool"]["setuptools"]["package-data"]
    named = {REPO / pkg.replace(".", "/") / f for pkg, files in package_data.items() for f in files}
    for top in SERVING_PACKAGES:
        for path in (REPO / top).rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts:
                assert path in named, f"{path.relative_to(REPO)} is not in [tool.setuptools.package-data]"


def test_image_tag_follows_the_sources_and_the_parent(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    shutil.copyfile(REPO / "README.md", repo / "README.md")
    (repo / "pyproject.toml").write_text(
        '[project]\ndependencies = ["a>=1", "b; sys_platform != \'win32\'"]\n'
        '[tool.setuptools.packages.find]\ninclude = ["pkg*"]\n'
    )
    (repo / "pkg" / "__init__.py").write_text("X = 1\n")
    (repo / "other").mkdir()
    (repo / "other" / "__init__.py").write_text("")
    # The image's recipe comes from the checkout whose tag is asked for, not from wherever
    # harness/ is imported from (a wheel's site-packages has no deploy/: the compiled build's tests).
    shutil.copytree(REPO / "deploy" / "image", repo / "deploy" / "image")
    assert sorted(map(str, package_files(repo))) == ["README.md", "pkg/__init__.py", "pyproject.toml"]
    assert dependency_requirements(repo) == "a>=1\nb; sys_platform != 'win32'\n"
    first = image_tag("groupshift-matrix/python:1", repo)
    assert first.startswith("groupshift/gateway:")
    assert image_tag("groupshift-matrix/python:1", repo) == first
    (repo / "other" / "__init__.py").write_text("Y = 2\n")  # not in the wheel
    assert image_tag("groupshift-matrix/python:1", repo) == first
    assert image_tag("groupshift-matrix/python:2", repo) != first
    (repo / "pkg" / "__init__.py").write_text("X = 2\n")
    assert image_tag("groupshift-matrix/python:1", repo) != first
    second = image_tag("groupshift-matrix/python:1", repo)
    with (repo / "deploy" / "image" / "Dockerfile").open("a") as dockerfile:
        dockerfile.write("# another recipe\n")
    assert image_tag("groupshift-matrix/python:1", repo) not in (first, second)
