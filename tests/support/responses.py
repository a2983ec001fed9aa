"""Stand-ins for the raw HTTP responses the kubernetes client returns with `_preload_content=False`."""

from __future__ import annotations

import io

import urllib3


class Body(io.BytesIO):
    """A response body that closes itself at its end, as http.client's does (urllib3 streams until closed)."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if not data:
            self.close()
        return data


def http_response(payload: bytes) -> urllib3.HTTPResponse:
    """A streamed (not preloaded) response carrying `payload`."""
    return urllib3.HTTPResponse(body=Body(payload), preload_content=False)
