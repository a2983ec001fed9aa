"""What an API refusal looks like in a component's log: one pattern for every test that reads logs."""

from __future__ import annotations

import re

# A 403 standing alone ("(403)", "status 403", "code=403"), not inside a time ("14,403 INFO" from Python's
# logging, ".403+" in an RFC 3339 time) or a uid ("-403a"), or the API's reason for it.
REFUSED = re.compile(r"(?<![\w.:,-])403(?![\w.])|forbidden", re.IGNORECASE)
