"""manifests/Containerfile read as the image's recipe: a Recipe, and the OCI image config it gives.

One recipe: everything the image says about itself comes from manifests/Containerfile, the file
`docker build` reads too. The final stage gives the config (ENV, USER, WORKDIR, EXPOSE, CMD,
ENTRYPOINT, LABEL) and the virtualenv it copies; the build stage gives the files COPY'd into
it, whether pip compiles, and what is uninstalled. `python:X.Y-slim` becomes Debian's pythonX.Y.
A Containerfile instruction this builder cannot mirror stops the build (RecipeError), so the two
cannot drift apart silently.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = ROOT / "manifests" / "Containerfile"
# The environment python:X.Y-slim starts from, which the Containerfile's `ENV PATH=...:$PATH` extends.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class RecipeError(Exception):
    """The Containerfile says something this builder cannot do (so the two would drift)."""


@dataclass
class Instruction:
    op: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Recipe:
    python: str  # "3.11", from FROM python:3.11-slim
    venv: str  # /opt/taintkeeper
    sources: list[str]  # what the build stage COPYs: pyproject.toml, README.md, the packages
    compile: bool  # pip install without --no-compile
    uninstall: list[str]  # pip uninstall -y ...
    env: list[tuple[str, str]]  # the final stage's environment, in order, $VARs expanded
    user: str | None = None
    workdir: str = "/"
    exposed: list[str] = field(default_factory=list)  # "8443/tcp"
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    build_packages: list[str] = field(default_factory=list)  # Debian packages the build stage installs (a compiler)
    labels: dict[str, str] = field(default_factory=dict)


def parse_containerfile(text: str) -> list[Stage]:
    """The stages and their instructions; continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    logical, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not logical and (not stripped or stripped.startswith("#")):
            continue
        if logical and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not logical:
            start = number
        if stripped.endswith("\\"):
            logical += stripped[:-1] + " "
            continue
        logical += stripped
        op, _, args = logical.partition(" ")
        op, args, logical = op.upper(), args.strip(), ""
        if op == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            if len(words) not in (1, 3) or (len(words) == 3 and name is None):
                raise RecipeError(f"line {start}: cannot read FROM {args}")
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            if op != "ARG":
                raise RecipeError(f"line {start}: {op} before the first FROM")
        else:
            stages[-1].instructions.append(Instruction(op, args, start))
    if logical:
        raise RecipeError("the Containerfile ends inside a continued line")
    if not stages:
        raise RecipeError("no FROM in the Containerfile")
    return stages


def _exec_form(instruction: Instruction) -> list[str]:
    try:
        value = json.loads(instruction.args)
    except json.JSONDecodeError:
        value = None
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise RecipeError(
            f"line {instruction.line}: {instruction.op} must be in exec (JSON) form: the image has no /bin/sh"
        )
    return value


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def _pairs(instruction: Instruction, env: dict[str, str]) -> list[tuple[str, str]]:
    """ENV/LABEL key=value pairs (or the legacy `ENV key value`), quotes removed, $VARs expanded."""
    words = shlex.split(instruction.args)
    if words and "=" not in words[0]:
        return [(words[0], _expand(instruction.args.split(None, 1)[1].strip(), env))]
    pairs = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise RecipeError(f"line {instruction.line}: cannot read {instruction.op} {instruction.args}")
        pairs.append((key, _expand(value, env)))
    return pairs


def _copy_args(instruction: Instruction) -> tuple[dict[str, str], list[str], str]:
    words = _exec_form(instruction) if instruction.args.startswith("[") else shlex.split(instruction.args)
    flags = dict(word[2:].partition("=")[::2] for word in words if word.startswith("--"))
    paths = [word for word in words if not word.startswith("--")]
    if len(paths) < 2:
        raise RecipeError(f"line {instruction.line}: cannot read COPY {instruction.args}")
    return flags, paths[:-1], paths[-1]


def _python_version(base: str, line: str) -> str:
    match = re.fullmatch(r"(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)-slim(?:-bookworm)?", base)
    if not match:
        raise RecipeError(f"{line}: the offline build makes only python:X.Y-slim (from Debian's pythonX.Y), not {base}")
    return match.group(1)


def recipe_from_containerfile(path: Path = CONTAINERFILE) -> Recipe:
    """What the image must be, read from the Containerfile's two stages."""
    stages = parse_containerfile(path.read_text())
    if len(stages) != 2 or stages[0].name is None:
        raise RecipeError("expected two stages: `FROM python:X.Y-slim AS build`, then the final one")
    build, final = stages
    python = _python_version(build.base, "the build stage")
    if _python_version(final.base, "the final stage") != python:
        raise RecipeError("the two stages use different Pythons")

    venv: str | None = None
    sources: list[str] = []
    compile_, uninstall, build_packages = True, [], []
    apt_install = ["apt-get", "update", "&&", "apt-get", "install", "-y", "--no-install-recommends"]
    for instruction in build.instructions:
        op, args = instruction.op, instruction.args
        words = shlex.split(args)
        if op in ("ENV", "ARG"):
            continue  # pip's own settings in the build stage; nothing of them reaches the image
        if op == "WORKDIR":
            continue  # where the sources are copied to: the wheel is built from a copy of them
        elif op == "COPY":
            flags, srcs, _dest = _copy_args(instruction)
            if flags:
                raise RecipeError(f"line {instruction.line}: COPY {args}: flags are not mirrored in the build stage")
            sources.extend(src.rstrip("/").removeprefix("./") for src in srcs)
        elif op == "RUN" and words[:3] == ["python", "-m", "venv"] and len(words) == 4:
            venv = words[3]
        elif (
            op == "RUN"
            and venv
            and words[:2] == [f"{venv}/bin/pip", "install"]
            and words[-1] == "."
            and set(words[2:-1]) <= {"--no-compile"}
        ):
            compile_ = "--no-compile" not in words
        elif op == "RUN" and venv and words[:5] == [f"{venv}/bin/python", "-m", "pip", "uninstall", "-y"]:
            uninstall.extend(words[5:])
        elif (
            op == "RUN"
            and words[: len(apt_install)] == apt_install
            and len(words) > len(apt_install)
            and all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", word) for word in words[len(apt_install) :])
        ):
            # Build tools (a compiler for a dependency published only as an sdist): here they are the
            # host's own, which the same Debian release provides; nothing of them reaches the image.
            build_packages.extend(words[len(apt_install) :])
        else:
            raise RecipeError(
                f"line {instruction.line}: the offline build (hack/image.py) cannot mirror "
                f"`{op} {args}` in the build stage; teach it, or change the Containerfile"
            )
    if venv is None:
        raise RecipeError("the build stage makes no virtualenv (`RUN python -m venv DIR`)")

    env = dict(BASE_ENV)
    recipe = Recipe(
        python=python,
        venv="",
        sources=sources,
        compile=compile_,
        uninstall=uninstall,
        env=[],
        build_packages=build_packages,
    )
    for instruction in final.instructions:
        op, args = instruction.op, instruction.args
        if op == "COPY":
            flags, srcs, dest = _copy_args(instruction)
            if flags != {"from": build.name} or srcs != [venv] or dest.rstrip("/") != venv:
                raise RecipeError(
                    f"line {instruction.line}: the final stage may only `COPY --from={build.name} "
                    f"{venv} {venv}`, not COPY {args}"
                )
            recipe.venv = venv
        elif op == "ENV":
            env.update(_pairs(instruction, env))
        elif op == "LABEL":
            recipe.labels.update(_pairs(instruction, env))
        elif op == "USER":
            recipe.user = args
        elif op == "WORKDIR":
            recipe.workdir = os.path.normpath(os.path.join(recipe.workdir, _expand(args, env)))
        elif op == "EXPOSE":
            recipe.exposed.extend(port if "/" in port else f"{port}/tcp" for port in args.split())
        elif op == "CMD":
            recipe.cmd = _exec_form(instruction)
        elif op == "ENTRYPOINT":
            recipe.entrypoint = _exec_form(instruction)
        else:
            raise RecipeError(
                f"line {instruction.line}: the offline build (hack/image.py) cannot mirror "
                f"`{op} {args}` in the final stage; teach it, or change the Containerfile"
            )
    if not recipe.venv:
        raise RecipeError(f"the final stage does not copy the virtualenv {venv}")
    recipe.env = list(env.items())
    return recipe


def image_config(recipe: Recipe) -> dict:
    """The OCI image config's `config` object (what the runtime starts the container with)."""
    config: dict = {"Env": [f"{key}={value}" for key, value in recipe.env], "WorkingDir": recipe.workdir}
    if recipe.user:
        config["User"] = recipe.user
    if recipe.exposed:
        config["ExposedPorts"] = {port: {} for port in recipe.exposed}
    if recipe.entrypoint is not None:
        config["Entrypoint"] = recipe.entrypoint
    if recipe.cmd is not None:
        config["Cmd"] = recipe.cmd
    if recipe.labels:
        config["Labels"] = recipe.labels
    return config
