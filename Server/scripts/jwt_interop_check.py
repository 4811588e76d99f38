"""Tokens made by another stack: an identity provider in Python (joserfc) publishes a JWKS file and signs
RS256 and ES256 tokens; a live event-server configured with --jwt-* takes them, refuses an expired one, one
for another audience and one by an unknown key with their reasons, takes a key rotated into the file
without a restart, and still takes an API key beside them.

Usage: jwt_interop_check.py keygen WORKDIR | check PORT WORKDIR
"""
import base64
import json
import sys
import time
import urllib.error
import urllib.request

from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

ISSUER = "https://id.test/"
AUDIENCE = "sync-api"


def publish(workdir, keys):
    with open(f"{workdir}/jwks.json", "w") as out:
        json.dump(KeySet(keys).as_dict(private=False), out)


def keygen(workdir):
    rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "alg": "RS256", "use": "sig"})
    ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1", "alg": "ES256", "use": "sig"})
    with open(f"{workdir}/private.json", "w") as out:
        json.dump([rsa.as_dict(private=True), ec.as_dict(private=True)], out)
    publish(workdir, [rsa, ec])


def token(key, sub, **changes):
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "nbf": now - 1, "exp": now + 120}
    claims.update(changes)
    return jwt.encode({"alg": key.get("alg") or key.alg, "kid": key.kid}, claims, key)


def register(port, authorization):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/register", data=b"", method="POST",
        headers={"Authorization": authorization, "Content-Type": "application/x-www-form-urlencoded"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def expect_refused(port, authorization, reason):
    status, body, headers = register(port, authorization)
    assert status == 401 and body.get("code") == "UNAUTHORIZED" and body.get("reason") == reason, (status, body)
    assert headers.get("WWW-Authenticate", "").startswith("Bearer"), headers
    print(f"jwt interop: {reason} refused as it must")


def check(port, workdir):
    with open(f"{workdir}/private.json") as source:
        rsa_dict, ec_dict = json.load(source)
    rsa, ec = RSAKey.import_key(rsa_dict), ECKey.import_key(ec_dict)
    for key, user in ((rsa, "alice"), (ec, "bob")):
        status, body, _ = register(port, f"Bearer {token(key, user)}")
        assert status == 200 and "queue_id" in body, (key.kid, status, body)
        print(f"jwt interop: {key.get('alg')} token from joserfc registered {user}")
    basic = base64.b64encode(b"carol:carol-key-1").decode()
    status, body, _ = register(port, f"Basic {basic}")
    assert status == 200, (status, body)
    print("jwt interop: an API key beside the tokens registered carol")
    expect_refused(port, f"Bearer {token(rsa, 'alice', exp=int(time.time()) - 120)}", "TOKEN_EXPIRED")
    expect_refused(port, f"Bearer {token(ec, 'alice', aud='billing')}", "TOKEN_WRONG_AUDIENCE")
    expect_refused(port, f"Bearer {token(ec, 'alice', iss='https://id.other/')}", "TOKEN_WRONG_ISSUER")

    # A rotation: a new key appears in the file (the old ones stay for the tokens still out).
    rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2", "alg": "RS256", "use": "sig"})
    fresh = token(rotated, "alice")
    expect_refused(port, f"Bearer {fresh}", "TOKEN_UNKNOWN_KEY")
    publish(workdir, [rsa, ec, rotated])
    # An unknown kid reads the key set again at most once per 30 s: the next one after that is taken.
    time.sleep(31)
    status, body, _ = register(port, f"Bearer {token(rotated, 'alice')}")
    assert status == 200, ("rotated key", status, body)
    print("jwt interop: a key rotated into the JWKS file taken without a restart")


if __name__ == "__main__":
    if sys.argv[1] == "keygen":
        keygen(sys.argv[2])
    else:
        check(int(sys.argv[2]), sys.argv[3])
