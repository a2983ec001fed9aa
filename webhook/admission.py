"""AdmissionReview in, AdmissionReview out: the pure core of the webhook.

For a Pod CREATE or UPDATE (no subresource) whose tolerations miss the default
`not-ready`/`unreachable` NoExecute tolerations, the response carries a JSONPatch that appends
them; everything else is allowed unchanged. A review that is not well formed raises
`MalformedReview`, which the HTTP layer turns into a 400.

The seconds come from the cluster-wide settings, unless `namespace_defaults(namespace)` (a lookup
the caller passes in, e.g. the webhook's namespace cache) knows better: a namespace's annotations
override them, and a namespace labelled `taintkeeper.io/skip=true` is skipped like a pod with that
label. The lookup must be cheap and must not block: it is called once per pod review.

With `replace_builtin_seconds` (the webhook's --replace-builtin-defaults), a pod CREATE whose
tolerations include exactly what the built-in DefaultTolerationSeconds plugin adds (it runs before
every webhook and cannot be switched off on managed clusters) gets those tolerations' seconds
replaced by taintkeeper's: outcome `replaced`. UPDATEs never change an existing toleration.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.defaults import (
    DEFAULT_TOLERATION_SECONDS,
    DefaultSeconds,
    SecondsReplacement,
    builtin_default_replacements,
    missing_default_tolerations,
    skips,
)
from webhook.codec import dumps

SUPPORTED_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
MUTATED_OPERATIONS = ("CREATE", "UPDATE")

PATCHED = "patched"
REPLACED = "replaced"  # the built-in plugin's seconds were replaced (tolerations may also have been added)
UNCHANGED = "unchanged"
SKIPPED = "skipped"


class MalformedReview(ValueError):
    """The body is not an AdmissionReview this webhook can answer; the message says why."""


@dataclass(frozen=True, slots=True)
class NamespaceDefaults:
    """What is known about one namespace: the seconds for its pods (its annotations over the cluster
    defaults), why an annotation was ignored, and whether it opted out with the skip label."""

    seconds: DefaultSeconds
    warnings: tuple[str, ...] = ()
    skipped: bool = False


# Nothing known about a namespace (no cache, not synced, not seen yet): the cluster defaults apply.
NamespaceLookup = Callable[[str], NamespaceDefaults | None]


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__
class Verdict:
    """The answer to one review, with what the logs and metrics need to know about it."""

    response: dict[str, object]
    outcome: str
    uid: str
    operation: str = ""
    namespace: str = ""
    pod: str = ""
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # keys whose built-in seconds were replaced
    warnings: list[str] = field(default_factory=list)  # also in the response: shown to the pod's creator
    reason: str = ""  # why a pod review was skipped


def _require_object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise MalformedReview(f"{where} must be a JSON object")
    return value


def _admission_request(review: object) -> tuple[object, dict[str, object], str]:
    """The review's apiVersion, request and uid, checked."""
    body = _require_object(review, "the body")
    api_version = body.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        raise MalformedReview(f"apiVersion must be one of {', '.join(SUPPORTED_API_VERSIONS)}, got {api_version!r}")
    if body.get("kind") != "AdmissionReview":
        raise MalformedReview(f"kind must be AdmissionReview, got {body.get('kind')!r}")
    request = _require_object(body.get("request"), "request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid must be a non-empty string")
    return api_version, request, uid


def _is_pod_create_or_update(request: dict[str, object], operation: str) -> bool:
    resource = request.get("resource")
    is_pod = isinstance(resource, dict) and resource.get("group", "") == "" and resource.get("resource") == "pods"
    return is_pod and not request.get("subResource") and operation in MUTATED_OPERATIONS


def _tolerations(spec: dict[str, object]) -> list[dict[str, object]] | None:
    """spec.tolerations, checked: None when absent or null."""
    tolerations = spec.get("tolerations")
    if tolerations is None:
        return None
    if isinstance(tolerations, list):
        for toleration in tolerations:
            if not isinstance(toleration, dict):
                break
        else:
            return tolerations
    raise MalformedReview("request.object.spec.tolerations must be a list of objects")


_NO_METADATA: dict[str, object] = {}  # only read


def _pod_name(request: dict[str, object], metadata: dict[str, object]) -> str:
    name = request.get("name") or metadata.get("name")
    if not name and metadata.get("generateName"):
        return f"{metadata['generateName']}*"
    return str(name or "")


def _patch_for(
    spec: dict[str, object], added: list[dict[str, object]], replacements: list[SecondsReplacement]
) -> list[dict[str, object]]:
    """The JSONPatch operations replacing the seconds of `replacements`, then appending `added` to
    spec.tolerations (creating the list when absent or null).

    Each replacement first `test`s the old seconds, so a patch applied to any other pod fails rather
    than changing a toleration it did not mean to. The operations are written out rather than diffed
    (`jsonpatch.make_patch` deep-copies and walks both documents), and serialised as they are: their
    paths are built here, so parsing them back into `jsonpatch` objects would only check what is known.
    The tests apply every patch with `jsonpatch`.
    """
    operations: list[dict[str, object]] = []
    for replacement in replacements:
        path = f"/spec/tolerations/{replacement.index}/tolerationSeconds"
        operations += [
            {"op": "test", "path": path, "value": replacement.old_seconds},
            {"op": "replace", "path": path, "value": replacement.new_seconds},
        ]
    existing = spec.get("tolerations")
    if existing is None:
        if added:
            operation = "replace" if "tolerations" in spec else "add"  # replace a null, add a missing field
            operations.append({"op": operation, "path": "/spec/tolerations", "value": added})
        return operations
    start = len(existing)  # type: ignore[arg-type]
    operations += [
        {"op": "add", "path": f"/spec/tolerations/{start + i}", "value": toleration}
        for i, toleration in enumerate(added)
    ]
    return operations


def _encoded(patch: list[dict[str, object]]) -> str:
    """A patch as the response carries it: its JSON in base64."""
    return base64.b64encode(dumps(patch)).decode()


# A patch that only appends the default tolerations, encoded, with the keys it adds (None: nothing to add).
Addition = tuple[str, tuple[str, ...]] | None

ADDITIONS_KEPT = 128  # distinct additions remembered (a few per seconds configuration); more start over
_additions: dict[tuple[object, ...], Addition] = {}


def _addition(
    spec: dict[str, object],
    tolerations: list[dict[str, object]] | None,
    not_ready_seconds: int,
    unreachable_seconds: int,
) -> Addition:
    """The patch appending the default tolerations that spec's `tolerations` miss, and their keys.

    Making and encoding it is a large part of a review's work, for one of a few patches: it is
    remembered by what decides it. Absent or null tolerations: which of the two, and the seconds (the
    tolerations to add are then `missing_default_tolerations` of none). A list: its length and the
    (key, seconds) of each toleration to add, which `default_toleration` makes the rest of. Seconds
    that are not ints (True and 1.0 equal 1 as keys, not in JSON) are never remembered.
    """
    if type(not_ready_seconds) is not int or type(unreachable_seconds) is not int:
        return _fresh_addition(
            spec, missing_default_tolerations(tolerations or [], not_ready_seconds, unreachable_seconds)
        )
    added = None  # made only when the addition is not remembered
    if tolerations is None:
        key: tuple[object, ...] = (
            "null" if "tolerations" in spec else "absent",
            not_ready_seconds,
            unreachable_seconds,
        )
    else:
        added = missing_default_tolerations(tolerations, not_ready_seconds, unreachable_seconds)
        if not added:
            return None
        key = (len(tolerations), *[(toleration["key"], toleration["tolerationSeconds"]) for toleration in added])
    try:
        return _additions[key]
    except KeyError:
        if added is None:
            added = missing_default_tolerations([], not_ready_seconds, unreachable_seconds)
        return _remember(key, _fresh_addition(spec, added))


def _fresh_addition(spec: dict[str, object], added: list[dict[str, object]]) -> Addition:
    if not added:
        return None
    return _encoded(_patch_for(spec, added, [])), tuple(str(toleration["key"]) for toleration in added)


def _remember(key: tuple[object, ...], addition: Addition) -> Addition:
    if len(_additions) >= ADDITIONS_KEPT:
        _additions.clear()
    _additions[key] = addition
    return addition


def _no_namespace_facts(namespace: str) -> None:
    return None


def _answer(
    api_version: object,
    uid: str,
    outcome: str,
    operation: str,
    namespace: str,
    pod: str = "",
    *,
    reason: str = "",
    patch: str | None = None,
    warnings: tuple[str, ...] = (),
    added: list[str] | None = None,
    replaced: list[str] | None = None,
) -> Verdict:
    """The verdict allowing the pod, with `patch` (encoded) if any, and `warnings` for its creator."""
    response: dict[str, object] = {"uid": uid, "allowed": True}
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = patch
    if warnings:
        response["warnings"] = list(warnings)
    return Verdict(
        response={"apiVersion": api_version, "kind": "AdmissionReview", "response": response},
        outcome=outcome,
        uid=uid,
        operation=operation,
        namespace=namespace,
        pod=pod,
        added=[] if added is None else added,
        replaced=[] if replaced is None else replaced,
        warnings=list(warnings),
        reason=reason,
    )


def review_pod(
    review: object,
    not_ready_seconds: int = DEFAULT_TOLERATION_SECONDS,
    unreachable_seconds: int = DEFAULT_TOLERATION_SECONDS,
    *,
    namespace_defaults: NamespaceLookup = _no_namespace_facts,
    replace_builtin_seconds: int | None = None,
) -> Verdict:
    """Decide one AdmissionReview; raises MalformedReview for anything not well formed.

    The two seconds are the cluster defaults; `namespace_defaults` may override them per namespace.
    `replace_builtin_seconds`: None leaves every existing toleration alone; a number is the
    built-in plugin's tolerationSeconds, whose exact default tolerations get our seconds on CREATE.
    Warnings about a namespace's annotations are returned only when its defaults were applied (the
    pod was patched), so updates of pods that already carry the tolerations stay quiet.
    """
    api_version, request, uid = _admission_request(review)
    operation = str(request.get("operation") or "")
    namespace = str(request.get("namespace") or "")
    if not _is_pod_create_or_update(request, operation):
        return _answer(api_version, uid, SKIPPED, operation, namespace, reason="not a pod create or update")

    pod = _require_object(request.get("object"), "request.object")
    spec = _require_object(pod.get("spec"), "request.object.spec")
    tolerations = _tolerations(spec)
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else _NO_METADATA
    name = _pod_name(request, metadata)
    labels = metadata.get("labels")
    if skips(labels if isinstance(labels, dict) else None):
        return _answer(
            api_version, uid, SKIPPED, operation, namespace, name, reason="the pod is labelled taintkeeper.io/skip=true"
        )
    known = namespace_defaults(namespace)
    warnings: tuple[str, ...] = ()
    if known is not None:
        if known.skipped:
            return _answer(
                api_version,
                uid,
                SKIPPED,
                operation,
                namespace,
                name,
                reason="the namespace is labelled taintkeeper.io/skip=true",
            )
        not_ready_seconds, unreachable_seconds = known.seconds.not_ready, known.seconds.unreachable
        warnings = known.warnings
    if replace_builtin_seconds is not None and operation == "CREATE":  # UPDATEs keep every existing toleration
        ours = DefaultSeconds(not_ready_seconds, unreachable_seconds)
        replacements = builtin_default_replacements(tolerations or [], ours, replace_builtin_seconds)
        if replacements:
            added = missing_default_tolerations(tolerations or [], not_ready_seconds, unreachable_seconds)
            return _answer(
                api_version,
                uid,
                REPLACED,
                operation,
                namespace,
                name,
                patch=_encoded(_patch_for(spec, added, replacements)),
                warnings=warnings,
                added=[str(t["key"]) for t in added],
                replaced=[r.key for r in replacements],
            )
    addition = _addition(spec, tolerations, not_ready_seconds, unreachable_seconds)
    if addition is None:
        return _answer(api_version, uid, UNCHANGED, operation, namespace, name)
    patch, added_keys = addition
    return _answer(
        api_version, uid, PATCHED, operation, namespace, name, patch=patch, warnings=warnings, added=list(added_keys)
    )
