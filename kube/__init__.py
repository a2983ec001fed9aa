"""taintkeeper's contact with the Kubernetes API, used by the webhook, the controller, the
certificate sync and the dev tools alike (client-go's place in upstream):

- `client.py`: the ApiClient from a kubeconfig or the pod's service account; timeouts, patch types;
- `errors.py`: what an API error means (not found, conflict, gone, invalid) and one line for a log;
- `request.py`: one request with raw JSON in and out, where the generated methods do not serve;
- `informer.py` + `store.py`: list+watch into an indexed store of slim views, with several handlers;
- `list_stream.py`: a LIST response read item by item off the stream, never held whole;
- `leader.py`: leader election on a Lease; `events.py`: the asynchronous event recorder;
- `timestamps.py`: the API's Time and MicroTime <-> epoch seconds;
- `server_clock.py` measures the apiserver's clock against ours; `clock_offset.py` bounds the offset
  from the `Date` headers, purely.

It imports nothing of the applications (webhook, controller, certs): they sit above it.
"""
