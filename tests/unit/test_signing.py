"""streams.signing: per-cluster input MACs checked by the worker, decision signatures checked by the applier."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from streams.security import Secret
from streams.signing import (
    DECISION_HEADER,
    INPUT_HEADER,
    DecisionRefused,
    DecisionSigner,
    DecisionVerifier,
    InputKey,
    InputKeyring,
    InputRefused,
    load_input_keys,
    sign_input,
    verify_input,
)

KEY_A = InputKey("a-2026", "a", Secret("secret-of-cluster-a-0123"))
KEY_A2 = InputKey("a-2027", "a", Secret("next-secret-of-cluster-a"))
KEY_B = InputKey("b-2026", "b", Secret("secret-of-cluster-b-0123"))
KEYS = {k.key_id: k for k in (KEY_A, KEY_A2, KEY_B)}
RKEY = b"a/ns/Deployment/web"
VALUE = b'{"type":"metric"}'


def test_a_record_signed_with_its_clusters_key_is_accepted() -> None:
    h = [sign_input(KEY_A, "metric", RKEY, VALUE)]
    assert verify_input(KEYS, "metric", RKEY, VALUE, h, "a") is KEY_A


def test_both_keys_of_a_cluster_are_accepted_during_rotation() -> None:
    for key in (KEY_A, KEY_A2):
        assert verify_input(KEYS, "metric", RKEY, VALUE, [sign_input(key, "metric", RKEY, VALUE)], "a") is key


def test_cluster_bs_key_cannot_speak_for_cluster_a() -> None:
    h = [sign_input(KEY_B, "metric", RKEY, VALUE)]
    with pytest.raises(InputRefused, match="not authenticated: key 'b-2026' speaks for cluster 'b', not for 'a'"):
        verify_input(KEYS, "metric", RKEY, VALUE, h, "a")


@pytest.mark.parametrize(
    ("kind", "rkey", "value"),
    [("metric", RKEY, b'{"type":"metric","x":1}'), ("metric", b"a/ns/Deployment/db", VALUE), ("hpa", RKEY, VALUE)],
)
def test_an_altered_record_is_refused(kind: str, rkey: bytes, value: bytes) -> None:
    h = [sign_input(KEY_A, "metric", RKEY, VALUE)]
    with pytest.raises(InputRefused, match="the MAC of key 'a-2026' does not match the record"):
        verify_input(KEYS, kind, rkey, value, h, "a")


def test_unsigned_unknown_and_malformed_headers_are_refused() -> None:
    with pytest.raises(InputRefused, match="no tandem-mac header"):
        verify_input(KEYS, "metric", RKEY, VALUE, [], "a")
    unknown = [sign_input(InputKey("x", "a", Secret("s" * 20)), "metric", RKEY, VALUE)]
    with pytest.raises(InputRefused, match="unknown key id 'x'"):
        verify_input(KEYS, "metric", RKEY, VALUE, unknown, "a")
    with pytest.raises(InputRefused, match="malformed tandem-mac header"):
        verify_input(KEYS, "metric", RKEY, VALUE, [(INPUT_HEADER, b"garbage")], "a")


def test_a_tombstone_is_authenticated_too() -> None:
    h = [sign_input(KEY_A, "policy", RKEY, None)]
    assert verify_input(KEYS, "policy", RKEY, None, h, "a") is KEY_A
    with pytest.raises(InputRefused):
        verify_input(KEYS, "policy", RKEY, b"", h, "a")


def test_refusals_never_show_the_secret_or_the_mac() -> None:
    h = [sign_input(KEY_B, "metric", RKEY, VALUE)]
    with pytest.raises(InputRefused) as caught:
        verify_input(KEYS, "metric", RKEY, VALUE, h, "a")
    assert KEY_B.secret.reveal() not in str(caught.value)
    assert h[0][1].decode().split()[2] not in str(caught.value)
    assert "secret" not in repr(KEY_B)


def test_keys_file_lines_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    f.write_text("# id cluster secret\na-1 a secret-of-cluster-a-0123\n\nb-1 b secret-of-cluster-b-0123\n")
    keys = load_input_keys(f)
    assert [(k.key_id, k.cluster) for k in keys.values()] == [("a-1", "a"), ("b-1", "b")]
    f.write_text("a-1 a secret-of-cluster-a-0123\na-1 a another-secret-0123456\n")
    with pytest.raises(ValueError, match=r"keys:2: key id 'a-1' is listed twice"):
        load_input_keys(f)
    f.write_text("a-1 a short\n")
    with pytest.raises(ValueError, match=r"keys:1: the secret of key 'a-1' is shorter than 16 characters") as caught:
        load_input_keys(f)
    assert "short'" not in str(caught.value).replace("shorter", "")
    f.write_text("a-1 secret-of-cluster-a-0123\n")
    with pytest.raises(ValueError, match=r"keys:1: expected 'KEY_ID CLUSTER SECRET' \(2 fields\)"):
        load_input_keys(f)


def test_keyring_picks_up_a_new_key_without_a_restart(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    f.write_text("a-2026 a secret-of-cluster-a-0123\n")
    now = [0.0]
    ring = InputKeyring(f, recheck=5.0, clock=lambda: now[0])
    h2 = [sign_input(KEY_A2, "metric", RKEY, VALUE)]
    with pytest.raises(InputRefused, match="unknown key id 'a-2027'"):
        ring.verify("metric", RKEY, VALUE, h2, "a")
    f.write_text("a-2026 a secret-of-cluster-a-0123\na-2027 a next-secret-of-cluster-a\n")
    now[0] = 5.0
    assert ring.verify("metric", RKEY, VALUE, h2, "a").key_id == "a-2027"
    assert ring.clusters == frozenset({"a"})


# --- decisions ------------------------------------------------------------------------------------


def signer(now: float = 1000.0, ttl: float = 60.0) -> DecisionSigner:
    return DecisionSigner(Ed25519PrivateKey.generate(), ttl, clock=lambda: now)


def test_a_signed_decision_verifies_until_it_expires() -> None:
    s = signer()
    h = [s.sign(RKEY, VALUE)]
    assert DecisionVerifier([s._key.public_key()], clock=lambda: 1059.9).verify(RKEY, VALUE, h) == s.key_id
    with pytest.raises(DecisionRefused, match=r"the signature expired 0 s ago \(a late replay\)"):
        DecisionVerifier([s._key.public_key()], clock=lambda: 1060.0).verify(RKEY, VALUE, h)


def test_an_altered_decision_or_a_changed_expiry_is_refused() -> None:
    s = signer()
    v = DecisionVerifier([s._key.public_key()], clock=lambda: 1000.0)
    h = [s.sign(RKEY, VALUE)]
    with pytest.raises(DecisionRefused, match="does not match the decision \\(forged or altered\\)"):
        v.verify(RKEY, VALUE + b" ", h)
    version, key_id, expires, sig = h[0][1].decode().split()
    later = [(DECISION_HEADER, f"{version} {key_id} {int(expires) + 3600_000} {sig}".encode())]
    with pytest.raises(DecisionRefused, match="forged or altered"):
        v.verify(RKEY, VALUE, later)


def test_a_decision_signed_by_an_untrusted_key_or_unsigned_is_refused() -> None:
    trusted, rogue = signer(), signer()
    v = DecisionVerifier([trusted._key.public_key()], clock=lambda: 1000.0)
    with pytest.raises(DecisionRefused, match=f"signed by key '{rogue.key_id}', which this applier does not trust"):
        v.verify(RKEY, VALUE, [rogue.sign(RKEY, VALUE)])
    with pytest.raises(DecisionRefused, match="no tandem-signature header"):
        v.verify(RKEY, VALUE, None)


def test_keys_load_from_pem_files_and_several_are_trusted(tmp_path: Path) -> None:
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    (tmp_path / "worker.key").write_bytes(new.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    pubs = b"".join(k.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo) for k in (old, new))
    (tmp_path / "trusted.pem").write_bytes(pubs)
    s = DecisionSigner.from_file(tmp_path / "worker.key", ttl=30)
    v = DecisionVerifier.from_files([tmp_path / "trusted.pem"])
    assert len(v.keys) == 2
    assert v.verify(RKEY, VALUE, [s.sign(RKEY, VALUE)]) == s.key_id
    assert "PRIVATE" not in repr(s)
    (tmp_path / "bad.pem").write_text("nothing")
    with pytest.raises(ValueError, match="no PEM public key"):
        DecisionVerifier.from_files([tmp_path / "bad.pem"])
    with pytest.raises(ValueError, match="not an unencrypted PEM private key"):
        DecisionSigner.from_file(tmp_path / "trusted.pem")
