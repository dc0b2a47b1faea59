"""Who may speak for a cluster, and which decisions an applier may act on (docs/operating.md, "Security").

Kafka's ACLs tell principals apart by topic, not by what a record says: every collector writes the
same input topics, and an event names its cluster in its body.  So two record-level checks complete
the ACLs:

**Input records are authenticated per cluster.**  A collector (or ``tandem publish``) holds one
cluster's HMAC-SHA256 key and attaches ``tandem-mac: v1 <key-id> <mac>`` to every record, the MAC
covering the topic kind, the record key and the value (:func:`input_mac`).  The worker holds a
keyring (:class:`InputKeyring`): lines ``KEY_ID CLUSTER SECRET``; a record is accepted only when its
key id is in the keyring, its MAC verifies and the key's cluster is the event's cluster; anything
else is refused with the reason (the worker dead-letters it).  Several keys per cluster may be
listed: rotation adds the new key to the worker's keyring (re-read when the file changes), moves the
collector to it, then drops the old one; nothing is refused on the way.

**Decisions are signed by the worker.**  The worker signs each actuator record with its Ed25519 key
(:class:`DecisionSigner`): ``tandem-signature: v1 <key-id> <expires-ms> <signature>``, the signature
covering the key id, the expiry, the record key and the value.  An applier trusts a set of public keys
(:class:`DecisionVerifier`, several for rotation); it refuses a decision without a signature, with an
unknown key, a signature that does not verify (forged or altered) or an expiry in the past (replayed
late), before it reads or writes anything in its cluster.  The expiry is transport metadata in a
header, so the decision itself (its bytes, its id) stays the same in live and replay runs.

Key ids and reasons appear in logs and dead letters; secrets, MACs and signatures never do.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.errors import InvalidEvent
from streams.security import Secret

__all__ = [
    "DECISION_HEADER",
    "INPUT_HEADER",
    "DecisionRefused",
    "DecisionSigner",
    "DecisionVerifier",
    "InputKey",
    "InputKeyring",
    "InputRefused",
    "decision_verifier",
    "header",
    "input_mac",
    "load_input_keys",
    "sign_input",
    "worker_signing",
]

INPUT_HEADER = "tandem-mac"
DECISION_HEADER = "tandem-signature"
_INPUT_DOMAIN = b"tandem-input-v1"
_DECISION_DOMAIN = b"tandem-decision-v1"

log = logging.getLogger("tandem.signing")


class InputRefused(InvalidEvent):
    """An input record that does not prove it comes from its event's cluster (dead-lettered)."""

    def __init__(self, reason: str) -> None:
        super().__init__("", f"not authenticated: {reason}")


class DecisionRefused(ValueError):
    """An actuator record whose signature an applier does not accept."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _frame(*parts: bytes | None) -> bytes:
    """Length-prefixed parts (``-1`` for None): no two different inputs give the same bytes."""
    out = bytearray()
    for part in parts:
        if part is None:
            out += b"-1:"
        else:
            out += str(len(part)).encode() + b":" + part
    return bytes(out)


def header(headers: Any, name: str) -> bytes | None:
    """The last value of header ``name`` in aiokafka's ``[(name, bytes)]`` or Faust's mapping form."""
    if not headers:
        return None
    if isinstance(headers, Mapping):
        value = headers.get(name)
        return value.encode() if isinstance(value, str) else value
    found = None
    for k, v in headers:
        if k == name:
            found = v.encode() if isinstance(v, str) else v
    return found


# --- input records ----------------------------------------------------------------------------


@dataclass(frozen=True)
class InputKey:
    """One cluster's HMAC key: which cluster it speaks for, under which id."""

    key_id: str
    cluster: str
    secret: Secret = field(repr=False)


def load_input_keys(path: str | os.PathLike[str]) -> dict[str, InputKey]:
    """Lines ``KEY_ID CLUSTER SECRET`` (``#`` comments, blank lines ignored), first key first.

    Errors name the file and line, never a secret.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"input keys: cannot read {os.fspath(path)!r}: {exc.strerror or exc}") from None
    keys: dict[str, InputKey] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"{p}:{lineno}: expected 'KEY_ID CLUSTER SECRET' ({len(parts)} fields)")
        key_id, cluster, secret = parts
        if key_id in keys:
            raise ValueError(f"{p}:{lineno}: key id {key_id!r} is listed twice")
        if len(secret) < 16:
            raise ValueError(f"{p}:{lineno}: the secret of key {key_id!r} is shorter than 16 characters")
        keys[key_id] = InputKey(key_id, cluster, Secret(secret))
    if not keys:
        raise ValueError(f"input keys: {p} lists no key")
    return keys


def input_mac(key: InputKey, kind: str, record_key: bytes | None, value: bytes | None) -> bytes:
    """HMAC-SHA256 of an input record under ``key``: the topic kind, the record key and the value."""
    message = _frame(_INPUT_DOMAIN, key.key_id.encode(), kind.encode(), record_key, value)
    return hmac.new(key.secret.reveal().encode(), message, hashlib.sha256).digest()


def sign_input(key: InputKey, kind: str, record_key: bytes | None, value: bytes | None) -> tuple[str, bytes]:
    """The ``(name, value)`` header that authenticates one input record as ``key``'s cluster's."""
    return INPUT_HEADER, f"v1 {key.key_id} {_b64(input_mac(key, kind, record_key, value))}".encode()


class InputKeyring:
    """The worker's input keys, re-read when the file changes (rotation without a restart)."""

    def __init__(
        self, path: str | os.PathLike[str], *, recheck: float = 5.0, clock: Callable[[], float] = time.monotonic
    ):
        self.path = Path(path)
        self.recheck = recheck
        self.clock = clock
        self.keys = load_input_keys(self.path)
        self._stamp = self._file_stamp()
        self._checked = clock()

    def _file_stamp(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size, st.st_ino

    def refresh(self) -> None:
        """Re-read the keys if the file changed (a bad new file keeps the old keys and raises)."""
        self._checked = self.clock()
        try:
            stamp = self._file_stamp()
        except OSError:
            return  # a Secret volume swaps its files with a symlink: gone for an instant
        if stamp != self._stamp:
            self.keys = load_input_keys(self.path)
            self._stamp = stamp

    @property
    def clusters(self) -> frozenset[str]:
        return frozenset(k.cluster for k in self.keys.values())

    def verify(self, kind: str, record_key: bytes | None, value: bytes | None, headers: Any, cluster: str) -> InputKey:
        """The key that authenticates this record for ``cluster``; :class:`InputRefused` says why not."""
        if self.clock() - self._checked >= self.recheck:
            try:
                self.refresh()
            except ValueError as exc:  # keep the keys that worked, and say why the new file is not used
                log.warning("tandem: input keys not reloaded: %s", exc)
        return verify_input(self.keys, kind, record_key, value, headers, cluster)


def verify_input(
    keys: Mapping[str, InputKey], kind: str, record_key: bytes | None, value: bytes | None, headers: Any, cluster: str
) -> InputKey:
    """Pure check of one record's ``tandem-mac`` header against ``keys`` (see the module docstring)."""
    raw = header(headers, INPUT_HEADER)
    if raw is None:
        raise InputRefused(f"no {INPUT_HEADER} header (input authentication is on)")
    try:
        version, key_id, mac_text = raw.decode("ascii").split(" ")
        mac = _unb64(mac_text)
    except (UnicodeDecodeError, ValueError):
        raise InputRefused(f"malformed {INPUT_HEADER} header") from None
    if version != "v1":
        raise InputRefused(f"{INPUT_HEADER} version {version!r} is not v1")
    key = keys.get(key_id)
    if key is None:
        raise InputRefused(f"unknown key id {key_id!r}")
    if not hmac.compare_digest(mac, input_mac(key, kind, record_key, value)):
        raise InputRefused(f"the MAC of key {key_id!r} does not match the record (altered, or another key)")
    if key.cluster != cluster:
        raise InputRefused(f"key {key_id!r} speaks for cluster {key.cluster!r}, not for {cluster!r}")
    return key


# --- decisions --------------------------------------------------------------------------------


def _decision_message(key_id: str, expires_ms: int, record_key: bytes | None, value: bytes | None) -> bytes:
    return _frame(_DECISION_DOMAIN, key_id.encode(), str(expires_ms).encode(), record_key, value)


def _key_id(public: Any) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class DecisionSigner:
    """The worker's Ed25519 key (PEM, PKCS#8); its key id is derived from the public key."""

    def __init__(self, private_key: Any, ttl: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        self._key = private_key
        self.key_id = _key_id(private_key.public_key())
        self.ttl = ttl
        self.clock = clock

    def __repr__(self) -> str:
        return f"DecisionSigner(key_id={self.key_id!r}, ttl={self.ttl})"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], ttl: float = 3600.0) -> DecisionSigner:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(Path(path).read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            what = exc.strerror if isinstance(exc, OSError) else "not an unencrypted PEM private key"
            raise ValueError(f"decision signing key {os.fspath(path)!r}: {what}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"decision signing key {os.fspath(path)!r}: not an Ed25519 key")
        return cls(key, ttl)

    def sign(self, record_key: bytes | None, value: bytes | None) -> tuple[str, bytes]:
        """The ``(name, value)`` header of one actuator record, valid for ``ttl`` seconds from now."""
        expires_ms = int((self.clock() + self.ttl) * 1000)
        signature = self._key.sign(_decision_message(self.key_id, expires_ms, record_key, value))
        return DECISION_HEADER, f"v1 {self.key_id} {expires_ms} {_b64(signature)}".encode()


class DecisionVerifier:
    """The public keys an applier trusts (one or more PEM public keys, concatenated, in files)."""

    def __init__(self, public_keys: Iterable[Any], clock: Callable[[], float] = time.time) -> None:
        self.keys = {_key_id(k): k for k in public_keys}
        if not self.keys:
            raise ValueError("no trusted decision key")
        self.clock = clock

    @classmethod
    def from_files(cls, paths: Iterable[str | os.PathLike[str]]) -> DecisionVerifier:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        keys = []
        for path in paths:
            try:
                text = Path(path).read_bytes()
            except OSError as exc:
                raise ValueError(f"trusted decision keys {os.fspath(path)!r}: {exc.strerror}") from None
            blocks = [b"-----BEGIN" + b for b in text.split(b"-----BEGIN")[1:]]
            if not blocks:
                raise ValueError(f"trusted decision keys {os.fspath(path)!r}: no PEM public key")
            for block in blocks:
                try:
                    key = load_pem_public_key(block)
                except ValueError:
                    raise ValueError(f"trusted decision keys {os.fspath(path)!r}: not a PEM public key") from None
                if not isinstance(key, Ed25519PublicKey):
                    raise ValueError(f"trusted decision keys {os.fspath(path)!r}: not an Ed25519 key")
                keys.append(key)
        return cls(keys)

    def verify(self, record_key: bytes | None, value: bytes | None, headers: Any) -> str:
        """The signing key's id when the record is a decision signed by a trusted key, not expired."""
        from cryptography.exceptions import InvalidSignature

        raw = header(headers, DECISION_HEADER)
        if raw is None:
            raise DecisionRefused(f"no {DECISION_HEADER} header (the applier accepts signed decisions only)")
        try:
            version, key_id, expires_text, sig_text = raw.decode("ascii").split(" ")
            expires_ms = int(expires_text)
            signature = _unb64(sig_text)
        except (UnicodeDecodeError, ValueError):
            raise DecisionRefused(f"malformed {DECISION_HEADER} header") from None
        if version != "v1":
            raise DecisionRefused(f"{DECISION_HEADER} version {version!r} is not v1")
        key = self.keys.get(key_id)
        if key is None:
            raise DecisionRefused(f"signed by key {key_id!r}, which this applier does not trust")
        try:
            key.verify(signature, _decision_message(key_id, expires_ms, record_key, value))
        except InvalidSignature:
            raise DecisionRefused(
                f"the signature of key {key_id!r} does not match the decision (forged or altered)"
            ) from None
        now_ms = int(self.clock() * 1000)
        if now_ms >= expires_ms:
            raise DecisionRefused(f"the signature expired {(now_ms - expires_ms) / 1000:.0f} s ago (a late replay)")
        return key_id


# --- from option values ----------------------------------------------------------------------
# The flags are defined in ``cli/options.py``; these build from their values, keyed by option name.


def worker_signing(options: Mapping[str, Any]) -> dict[str, Any]:
    """``input_keyring`` and ``decision_signer`` of the worker's settings (None when not configured),
    from ``input_keys``, ``decision_signing_key`` and ``decision_ttl``."""
    keys = options.get("input_keys")
    signing = options.get("decision_signing_key")
    ttl = options.get("decision_ttl", 3600.0)
    if not ttl > 0:
        raise ValueError(f"--decision-ttl must be > 0, got {ttl}")
    return {
        "input_keyring": InputKeyring(keys) if keys else None,
        "decision_signer": DecisionSigner.from_file(signing, ttl) if signing else None,
    }


def decision_verifier(options: Mapping[str, Any]) -> DecisionVerifier | None:
    """The applier's verifier of the keys in ``trusted_decision_keys`` (comma-separated PEM files);
    None when there are none (every decision is taken)."""
    paths = [x.strip() for x in str(options.get("trusted_decision_keys") or "").split(",") if x.strip()]
    return DecisionVerifier.from_files(paths) if paths else None
