"""The toleration backfill (`toleration-backfill`): appends the default not-ready/unreachable
tolerations to pods admitted without them (while the webhook was down)."""
