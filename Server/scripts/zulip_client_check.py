"""Drives a live event-server (notes app) with Zulip's own Python client (PyPI `zulip`): construct the client
(it reads /api/v1/server_settings), register with event_types null and an empty narrow, long-poll the events
another user's write produced, refuse a non-empty narrow clearly, deregister (queue_id in the DELETE's form
body, as the client sends it), and find the queue gone; a client with a wrong key is constructed (server_settings
needs no key, as in Zulip) and its first request is a clear UNAUTHORIZED; a query sent through requests' params=
(spaces as `+`) is read as sent. Usage: zulip_client_check.py PORT"""
import sys

import requests
import zulip

site = f"http://127.0.0.1:{sys.argv[1]}"
alice = zulip.Client(email="alice", api_key="alice-key-1", site=site)
assert alice.zulip_version, "server_settings gave no zulip_version"

registered = alice.register(event_types=None)
assert registered["result"] == "success", registered
queue_id, last_event_id = registered["queue_id"], registered["last_event_id"]

# Bob writes a note to Alice through the mutations API (what an UpdateMachine's outbox sends).
write = requests.post(
    f"{site}/api/v1/mutations",
    auth=("bob", "bob-key-22"),
    json={"client_id": "python", "mutation_id": 1, "mutation": {"post": {"_0": "hello from bob", "to": ["alice"]}}},
    timeout=10,
)
assert write.status_code == 200, write.text

# The client's long-poll returns it.
events = alice.get_events(queue_id=queue_id, last_event_id=last_event_id)
assert events["result"] == "success", events
notes = [event for event in events["events"] if event.get("type") == "note"]
assert [note["text"] for note in notes] == ["hello from bob"], events

narrowed = alice.register(event_types=["note"], narrow=[["stream", "general"]])
assert narrowed["result"] == "error" and "narrow" in narrowed["msg"], narrowed

gone = alice.deregister(queue_id)
assert gone["result"] == "success", gone
after = alice.get_events(queue_id=queue_id, last_event_id=last_event_id)
assert after["result"] == "error" and after["code"] == "BAD_EVENT_QUEUE_ID", after

# A wrong key: the constructor (server_settings) succeeds, the first real request says UNAUTHORIZED.
wrong = zulip.Client(email="alice", api_key="not-alice-key", site=site)
assert wrong.zulip_version, "server_settings refused a client with a wrong key"
refused = wrong.register(event_types=None)
assert refused["result"] == "error" and refused["code"] == "UNAUTHORIZED", refused

# A query through requests' params=: a value with spaces is sent with `+`, and read back as spaces (an unknown
# queue whose id has a space in it is named in the answer as sent).
spaced = requests.get(
    f"{site}/api/v1/events",
    params={"queue_id": "no such queue", "last_event_id": -1, "dont_block": "true"},
    auth=("alice", "alice-key-1"),
    timeout=10,
)
assert "+" in spaced.request.url, spaced.request.url
assert spaced.json().get("queue_id") == "no such queue", spaced.text

print("zulip client: wrong key refused as UNAUTHORIZED after construction; `+` in a query read as a space: ok")
print("zulip client: server_settings, register (event_types null, narrow []), long-poll, narrow refused, deregister: ok")
