"""A Pod in protobuf -> the JSON-shaped dict `objects.pod_view` reads, with only the fields it reads.

The pods LIST asks for protobuf (kube/protobuf.py: the apiserver encodes it several times faster
than JSON); this declares the few fields a PodView needs, numbered as in upstream's generated.proto,
and writes them out as the API's JSON would have them: a string left out when empty (the API's
`omitempty`), a Time as RFC 3339, an empty Time (Go's zero time) as absent. Everything else in
the pod (containers, volumes, managedFields, ...) is skipped by the C parser unread.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf.message import Message

from kube.protobuf import Field, message_classes
from kube.timestamps import format_time

_SCHEMA = {
    "Time": [Field("seconds", 1, "int64"), Field("nanos", 2, "int32")],
    "StringEntry": [Field("key", 1, "string"), Field("value", 2, "string")],  # a map<string, string> entry
    "ObjectMeta": [
        Field("name", 1, "string"),
        Field("namespace", 3, "string"),
        Field("uid", 5, "string"),
        Field("generation", 7, "int64"),
        Field("creationTimestamp", 8, "Time"),
        Field("deletionTimestamp", 9, "Time"),
        Field("labels", 11, "StringEntry", repeated=True),
        Field("annotations", 12, "StringEntry", repeated=True),
    ],
    "Toleration": [
        Field("key", 1, "string"),
        Field("operator", 2, "string"),
        Field("value", 3, "string"),
        Field("effect", 4, "string"),
        Field("tolerationSeconds", 5, "int64"),
    ],
    "PodSpec": [Field("nodeName", 10, "string"), Field("tolerations", 22, "Toleration", repeated=True)],
    "PodCondition": [Field("type", 1, "string"), Field("status", 2, "string"), Field("lastTransitionTime", 4, "Time")],
    "PodStatus": [Field("conditions", 2, "PodCondition", repeated=True)],
    "Pod": [Field("metadata", 1, "ObjectMeta"), Field("spec", 2, "PodSpec"), Field("status", 3, "PodStatus")],
}
_Pod = message_classes("taintkeeper.pod", _SCHEMA)["Pod"]
_TOLERATION_STRINGS = ("key", "operator", "value", "effect")


def pod_json(data: bytes) -> dict[str, Any]:
    """The pod's fields `pod_view` reads, from one protobuf-encoded Pod (a LIST item)."""
    pod: Any = _Pod.FromString(data)
    meta, spec = pod.metadata, pod.spec
    metadata: dict[str, Any] = _strings(meta, ("name", "namespace", "uid"))
    if meta.generation:  # 1.33+ servers count a pod's spec changes; older ones leave it out
        metadata["generation"] = meta.generation
    _put_time(metadata, "creationTimestamp", meta)
    _put_time(metadata, "deletionTimestamp", meta)
    if meta.labels:
        metadata["labels"] = {entry.key: entry.value for entry in meta.labels}
    if meta.annotations:
        metadata["annotations"] = {entry.key: entry.value for entry in meta.annotations}
    spec_json: dict[str, Any] = {"nodeName": spec.nodeName} if spec.nodeName else {}
    if spec.tolerations:
        spec_json["tolerations"] = [_toleration(toleration) for toleration in spec.tolerations]
    conditions = []
    for condition in pod.status.conditions:
        entry = {"type": condition.type, "status": condition.status}
        _put_time(entry, "lastTransitionTime", condition)
        conditions.append(entry)
    return {"metadata": metadata, "spec": spec_json, "status": {"conditions": conditions} if conditions else {}}


def _toleration(toleration: Any) -> dict[str, Any]:
    entry = _strings(toleration, _TOLERATION_STRINGS)
    if toleration.HasField("tolerationSeconds"):
        entry["tolerationSeconds"] = toleration.tolerationSeconds
    return entry


def _strings(message: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: value for name in names if (value := getattr(message, name))}


def _put_time(target: dict[str, Any], name: str, holder: Message) -> None:
    if holder.HasField(name):
        value: Any = getattr(holder, name)
        if value.seconds or value.nanos:  # an empty Time is Go's zero time: null in JSON
            target[name] = _time_text(value.seconds)


@functools.lru_cache(maxsize=4096)  # pods made in the same second share their timestamps
def _time_text(seconds: int) -> str:
    return format_time(seconds)
