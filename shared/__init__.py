"""Pure taint logic shared by the webhook and the controller.

Everything here works on plain dicts shaped like Kubernetes API JSON (camelCase keys), does no
I/O, and imports neither `kubernetes` nor `flask`; wherever time matters it takes `now`.
"""
