#!/usr/bin/env python3
"""jwt_tool.py - JSON Web Tokens made independently of seckill, for its tests.

The keys and signatures come from the openssl command line, the encoding
(base64url, JSON) from Python's standard library: nothing here shares code
with src/http/auth_jwt.c.

  jwt_tool.py keys DIR            RSA (2048), a second RSA, EC P-256 and
                                  Ed25519 keys in DIR, and DIR/jwks.json with
                                  the public parts (kids rsa-1, ec-1, ed-1)
  jwt_tool.py jwks DIR OUT K:KID  a key set of the named keys only
  jwt_tool.py tokens DIR SPECS    SPECS (or @FILE): a JSON object name -> spec; prints a
                                  JSON object name -> token. A spec:
      {"key": "rsa"|"rsa2"|"ec"|"ed", "alg": "RS256"|"ES256"|"EdDSA"|"none"|"HS256",
       "kid": "rsa-1" (omit for none), "claims": {...},
       "tamper": "payload"|"signature", "hs_secret": "rsa-public-pem",
       "twin": true}
    claims values "now+N" / "now-N" become NumericDates. "twin" (ES256): a
    second token, NAME_twin, with the other valid S of the same signature
    (n - S: ECDSA's malleability), so that both S forms are offered.
"""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import time


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def openssl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, capture_output=True, check=True).stdout


def keys(d):
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{d}/rsa.pem")
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{d}/rsa2.pem")
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{d}/ec.pem")
    openssl("genpkey", "-algorithm", "ed25519", "-out", f"{d}/ed.pem")
    jwks(d, f"{d}/jwks.json", ["rsa:rsa-1", "ec:ec-1", "ed:ed-1"])


def jwk(d, name, kid):
    pem = f"{d}/{name}.pem"
    if name.startswith("rsa"):
        mod = openssl("rsa", "-in", pem, "-noout", "-modulus").decode().strip().split("=", 1)[1]
        text = openssl("rsa", "-in", pem, "-noout", "-text").decode()
        assert "publicExponent: 65537" in text
        return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": b64u(bytes.fromhex(mod)), "e": b64u((65537).to_bytes(3, "big"))}
    der = openssl("pkey", "-in", pem, "-pubout", "-outform", "DER")
    if name == "ec":
        pt = der[-65:]
        assert pt[0] == 4
        return {"kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
                "x": b64u(pt[1:33]), "y": b64u(pt[33:])}
    return {"kty": "OKP", "kid": kid, "crv": "Ed25519", "alg": "EdDSA", "x": b64u(der[-32:])}


def jwks(d, out, named):
    ks = [jwk(d, *n.split(":", 1)) for n in named]
    with open(out + ".tmp", "w") as f:
        json.dump({"keys": ks}, f, indent=1)
    os.replace(out + ".tmp", out)


def der_to_raw(der):
    """ECDSA-Sig-Value (SEQUENCE of two INTEGERs) -> R || S, 32 bytes each."""
    assert der[0] == 0x30
    i = 2 if der[1] < 0x80 else 3
    out = b""
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        v = der[i + 2:i + 2 + n]
        out += v.lstrip(b"\0").rjust(32, b"\0")
        i += 2 + n
    return out


def sign(d, key, alg, msg):
    pem = f"{d}/{key}.pem"
    if alg == "RS256":
        return openssl("dgst", "-sha256", "-sign", pem, data=msg)
    if alg == "ES256":
        return der_to_raw(openssl("dgst", "-sha256", "-sign", pem, data=msg))
    if alg == "EdDSA":
        with tempfile.NamedTemporaryFile() as f:
            f.write(msg)
            f.flush()
            return openssl("pkeyutl", "-sign", "-inkey", pem, "-rawin", "-in", f.name)
    raise ValueError(alg)


# the order of P-256's base point
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def other_s(tok):
    """The same ES256 token with S replaced by n - S: valid too."""
    h, p, sig = tok.split(".")
    raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    r, s = raw[:32], int.from_bytes(raw[32:], "big")
    return f"{h}.{p}.{b64u(r + (P256_N - s).to_bytes(32, 'big'))}"


def claim_values(c):
    now = int(time.time())
    out = {}
    for k, v in c.items():
        if isinstance(v, str) and v.startswith("now"):
            v = now + int(v[3:] or 0)
        out[k] = v
    return out


def token(d, spec):
    alg = spec["alg"]
    hdr = {"alg": alg, "typ": "JWT"}
    if "kid" in spec:
        hdr["kid"] = spec["kid"]
    payload = claim_values(spec.get("claims", {}))
    h = b64u(json.dumps(hdr, separators=(",", ":")).encode())
    p = b64u(json.dumps(payload, separators=(",", ":")).encode())
    msg = f"{h}.{p}".encode()
    if alg == "none":
        sig = b""
    elif alg == "HS256":
        secret = openssl("pkey", "-in", f"{d}/{spec['key']}.pem", "-pubout")
        sig = hmac.new(secret, msg, hashlib.sha256).digest()
    else:
        sig = sign(d, spec["key"], alg, msg)
    if spec.get("tamper") == "signature":
        sig = bytes([sig[0] ^ 1]) + sig[1:]
    if spec.get("tamper") == "payload":
        payload["sub"] = "999999"
        p = b64u(json.dumps(payload, separators=(",", ":")).encode())
    return f"{h}.{p}.{b64u(sig)}"


def main():
    cmd = sys.argv[1]
    if cmd == "keys":
        keys(sys.argv[2])
    elif cmd == "jwks":
        jwks(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "tokens":
        arg = sys.argv[3]
        specs = json.load(open(arg[1:])) if arg.startswith("@") else json.loads(arg)
        out = {}
        for n, s in specs.items():
            out[n] = token(sys.argv[2], s)
            if s.get("twin"):
                out[n + "_twin"] = other_s(out[n])
        print(json.dumps(out))
    else:
        sys.exit("usage: jwt_tool.py keys DIR | jwks DIR OUT K:KID... | tokens DIR SPECS")


if __name__ == "__main__":
    main()
