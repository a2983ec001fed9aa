"""Build taintkeeper's image offline (hack/image.py, as `make image` does) and check what was built:
its config, its contents, and that it runs as its user from a read-only root, in a chroot of its
unpacked layers and in a containerd of its own after `ctr images import`.

Cold (nothing cached) the build takes about a minute on 2 cores; cached, it is instant.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack import image_archive, image_recipe, private_containerd, versions

pytestmark = pytest.mark.image

# Runs with the host's Python in a private mount namespace: the image's root bind-mounted read-only,
# /tmp (a tmpfs, or the directory given) and /proc and /dev over it, then chroot, WORKDIR, USER, and
# exec the command with the image's environment. Shares the host's network, so tests can connect.
RUNNER = textwrap.dedent("""
    import json, os, subprocess, sys
    root, tmp, user, workdir, env, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], \\
        json.loads(sys.argv[5]), sys.argv[6:]
    def mount(*args):
        subprocess.run(["mount", *args], check=True)
    mount("--bind", root, root)
    mount("-o", "remount,bind,ro", root)
    if tmp:
        mount("--bind", tmp, root + "/tmp")
    else:
        mount("-t", "tmpfs", "-o", "mode=1777,size=64m", "tmpfs", root + "/tmp")
    mount("-t", "proc", "proc", root + "/proc")
    mount("--rbind", "/dev", root + "/dev")
    os.chroot(root)
    os.chdir(workdir)
    uid, gid = (int(part) for part in user.split(":"))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    program = argv[0] if "/" in argv[0] else next(
        (f"{d}/{argv[0]}" for d in env["PATH"].split(":") if os.access(f"{d}/{argv[0]}", os.X_OK)), argv[0])
    os.execve(program, argv, env)
""")


def cannot(reason: str) -> None:
    """Skip with the reason; in CI, fail instead (never skip silently there)."""
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def built(taintkeeper_image: image_archive.BuiltImage) -> image_archive.BuiltImage:
    """Built before the first test starts (tests/conftest.py), outside every test's timeout."""
    if os.geteuid() != 0:
        cannot("the image tests run as root (chroot into the image, a containerd of their own)")
    return taintkeeper_image


@pytest.fixture(scope="module")
def rootfs(built: image_archive.BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("image") / "rootfs"
    root.mkdir()
    image_archive.unpack(built.archive, root)
    return root


def command(
    rootfs: Path, config: dict, argv: list[str], tmp: Path | None = None, env: dict[str, str] | None = None
) -> list[str]:
    image_env = dict(entry.split("=", 1) for entry in config["Env"]) | (env or {})
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        sys.executable,
        "-c",
        RUNNER,
        str(rootfs),
        str(tmp or ""),
        config["User"],
        config["WorkingDir"],
        json.dumps(image_env),
        *argv,
    ]


def run_in_image(
    rootfs: Path, built: image_archive.BuiltImage, argv: list[str], **kwargs
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(rootfs, built.config["config"], argv, **kwargs), capture_output=True, text=True, timeout=120
    )


def test_config_is_the_containerfiles(built: image_archive.BuiltImage) -> None:
    assert built.config["config"] == image_recipe.image_config(image_recipe.recipe_from_containerfile())
    config = built.config["config"]
    env = dict(entry.split("=", 1) for entry in config["Env"])
    assert config["User"] == "65532:65532"
    assert config["WorkingDir"] == "/tmp"
    assert config["Cmd"] == ["python", "-m", "webhook"]
    assert env["PATH"].startswith("/opt/taintkeeper/bin:")
    assert env["PYTHONDONTWRITEBYTECODE"] == env["PYTHONUNBUFFERED"] == "1"
    assert set(config["ExposedPorts"]) == {"8443/tcp", "10257/tcp"}
    assert (built.config["architecture"], built.config["os"]) == ("amd64", "linux")
    assert built.reference == f"docker.io/library/{versions.image_reference()}"  # the version's tag
    assert built.archive.stat().st_size < 80e6


def test_contents(rootfs: Path) -> None:
    """Debian's interpreter, the virtualenv, bytecode for both, and nothing of pip, setuptools, apt, dpkg or docs."""
    site = rootfs / "opt/taintkeeper/lib/python3.11/site-packages"
    assert (rootfs / "usr/bin/python3.11").is_file()
    assert os.readlink(rootfs / "opt/taintkeeper/bin/python3.11") == "/usr/bin/python3.11"
    assert "home = /usr/bin\n" in (rootfs / "opt/taintkeeper/pyvenv.cfg").read_text()
    for package in (
        "webhook",
        "controller",
        "certs",
        "shared",
        "plumbing",
        "kubernetes",
        "flask",
        "gunicorn",
        "gevent",
    ):
        assert (site / package / "__init__.py").is_file(), package
    for absent in ("pip", "setuptools", "_distutils_hack"):
        assert not (site / absent).exists() and not list(site.glob(f"{absent}-*.dist-info")), absent
    for absent in (
        "usr/bin/dpkg",
        "usr/bin/apt-get",
        "usr/bin/tar",
        "usr/bin/sh",
        "usr/share/doc",
        "usr/share/man",
        "var/lib/dpkg",
    ):
        assert not (rootfs / absent).exists(), absent
    # Bytecode that a read-only root needs (nothing can be written beside the sources), valid whatever
    # the files' times: flags 0b01 = a hash, not checked against the source.
    for module in (
        "usr/lib/python3.11/__pycache__/json",
        "usr/lib/python3.11/json/__pycache__/decoder",
        "opt/taintkeeper/lib/python3.11/site-packages/kubernetes/client/__pycache__/api_client",
        "opt/taintkeeper/lib/python3.11/site-packages/webhook/__pycache__/app",
    ):
        compiled = list(rootfs.glob(f"{module}*.cpython-311.pyc"))
        if module.endswith("__pycache__/json"):  # json is a package: its __init__
            compiled = list(rootfs.glob("usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc"))
        assert len(compiled) == 1, module
        assert int.from_bytes(compiled[0].read_bytes()[4:8], "little") == 0b01, module
    for script in ("taintkeeper-webhook", "taintkeeper-controller", "taintkeeper-certs", "kubectl-taintkeeper"):
        assert (rootfs / "opt/taintkeeper/bin" / script).read_text().startswith("#!/opt/taintkeeper/bin/python\n")
    assert (rootfs / "tmp").stat().st_mode & 0o7777 == 0o1777


def test_runs_as_its_user_from_a_read_only_root(rootfs: Path, built: image_archive.BuiltImage) -> None:
    probe = textwrap.dedent("""
        import json, os, sys
        try:
            open("/opt/taintkeeper/x", "w")
            writable = True
        except OSError:
            writable = False
        print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(), "version": sys.version,
                          "executable": sys.executable, "real": os.path.realpath(sys.executable),
                          "prefix": sys.prefix, "base_prefix": sys.base_prefix, "root_writable": writable,
                          "path": sys.path}))
    """)
    result = run_in_image(rootfs, built, ["python", "-c", probe])
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    debian_version = next(
        line.split(" = ")[1]
        for line in (rootfs / "opt/taintkeeper/pyvenv.cfg").read_text().splitlines()
        if line.startswith("version = ")
    )
    assert (seen["uid"], seen["gid"], seen["cwd"]) == (65532, 65532, "/tmp")
    assert seen["version"].startswith(debian_version + " ")  # Debian's 3.11.2, not the host's Python
    assert seen["version"].split()[0] != ".".join(map(str, sys.version_info[:3])) or debian_version == sys.version
    assert (seen["executable"], seen["real"]) == ("/opt/taintkeeper/bin/python", "/usr/bin/python3.11")
    assert (seen["prefix"], seen["base_prefix"]) == ("/opt/taintkeeper", "/usr")
    assert "/opt/taintkeeper/lib/python3.11/site-packages" in seen["path"]
    assert not seen["root_writable"]


@pytest.mark.parametrize("module", ["webhook", "controller", "certs"])
def test_entry_points_run(rootfs: Path, built: image_archive.BuiltImage, module: str) -> None:
    result = run_in_image(rootfs, built, ["python", "-m", module, "--help"])
    assert result.returncode == 0, result.stderr
    assert f"usage: python -m {module}" in result.stdout


def test_every_extension_module_loads(rootfs: Path, built: image_archive.BuiltImage) -> None:
    """The compiled parts of the wheels and of the standard library find their shared libraries in the image."""
    modules = [
        "gevent.libev.corecext",
        "gevent.libuv._corecffi",
        "greenlet",
        "gunicorn_h1c",
        "orjson",
        "cryptography.hazmat.bindings._rust",
        "pydantic_core",
        "yaml._yaml",
        "google._upb._message",
        "ssl",
        "hashlib",
        "sqlite3",
        "ctypes",
        "lzma",
        "bz2",
        "zlib",
        "readline",
        "uuid",
        "decimal",
        "_ssl",
    ]
    probe = (
        "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
        "from cryptography.hazmat.primitives.asymmetric import ec\nec.generate_private_key(ec.SECP256R1())\n"
    )
    result = run_in_image(rootfs, built, ["python", "-c", probe, *modules])
    assert result.returncode == 0, result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_webhook_serves_tls_from_the_image(rootfs: Path, built: image_archive.BuiltImage, tmp_path: Path) -> None:
    """`python -m certs` writes a serving pair into /tmp, `python -m webhook` serves it (gevent workers,
    gunicorn's heartbeat and metrics files in TMPDIR=/tmp), all as 65532 from the read-only root."""
    tmp_path.chmod(0o1777)
    certs = run_in_image(
        rootfs,
        built,
        [
            "python",
            "-m",
            "certs",
            "--service",
            "taintkeeper-webhook",
            "--out-dir",
            "/tmp/tls",
            "--ip",
            "127.0.0.1",
            "--print",
            "none",
        ],
        tmp=tmp_path,
    )
    assert certs.returncode == 0, certs.stderr
    port = free_port()
    argv = [
        "python",
        "-m",
        "webhook",
        f"--bind=127.0.0.1:{port}",
        "--cert-file=/tmp/tls/tls.crt",
        "--key-file=/tmp/tls/tls.key",
        "--namespace-cache=false",
        "--workers=1",
    ]
    log = (tmp_path / "webhook.log").open("w")
    server = subprocess.Popen(
        command(rootfs, built.config["config"], argv, tmp=tmp_path, env={"TMPDIR": "/tmp"}),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    context = ssl.create_default_context(cafile=str(tmp_path / "tls" / "ca.crt"))
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5) as reply:
                    status = reply.status
                    break
            except OSError:
                time.sleep(0.3)
        assert status == 200, (tmp_path / "webhook.log").read_text()[-3000:]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture
def containerd() -> Iterator[str]:
    """A containerd of this test's own, its state under /tmp; yields its socket."""
    binaries = {name: shutil.which(name) for name in ("containerd", "ctr", "runc", "containerd-shim-runc-v2")}
    missing = [name for name, path in binaries.items() if path is None]
    if missing:
        cannot(f"{', '.join(missing)} not installed (hack/local-cluster.sh deps --nodes installs them)")
    directory = Path(tempfile.mkdtemp(prefix="tk-ctr-", dir="/tmp"))  # a short path: unix sockets
    config, address = private_containerd.write_plain_config(directory)
    try:
        with private_containerd.running(config, address, directory / "containerd.log"):
            yield address
    finally:
        subprocess.run(["umount", "-R", f"{directory}/root"], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


def test_containerd_imports_and_runs_it(built: image_archive.BuiltImage, containerd: str) -> None:
    ctr = ["ctr", "-a", containerd, "-n", "k8s.io"]
    imported = subprocess.run(
        [*ctr, "images", "import", str(built.archive)], capture_output=True, text=True, timeout=300
    )
    assert imported.returncode == 0, imported.stderr
    listed = subprocess.run([*ctr, "images", "ls"], capture_output=True, text=True, timeout=60).stdout
    assert any(line.split()[:1] == [built.reference] and built.digest in line for line in listed.splitlines()), listed
    tmpfs = "type=tmpfs,src=tmpfs,dst=/tmp,options=rw:nosuid:nodev:mode=1777"
    run = [*ctr, "run", "--rm", "--read-only", "--mount", tmpfs, built.reference]
    whoami = "import os; print(os.getuid(), os.getgid(), os.getcwd())"
    probe = subprocess.run([*run, "tk-probe", "python", "-c", whoami], capture_output=True, text=True, timeout=120)
    assert probe.stdout.split() == ["65532", "65532", "/tmp"], probe.stderr
    controller = subprocess.run(
        [*run, "tk-controller", "python", "-m", "controller", "--help"], capture_output=True, text=True, timeout=120
    )
    assert controller.returncode == 0 and "usage: python -m controller" in controller.stdout, controller.stderr
    default = subprocess.run([*run, "tk-default"], capture_output=True, text=True, timeout=120)  # CMD: the webhook
    assert default.returncode == 2, default.stdout + default.stderr
    assert "webhook: error: --cert-file" in default.stdout + default.stderr
