"""streams.security: Kafka client security settings, with secrets that never show themselves."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cli.options import add_kafka_options, add_security_options, kafka_settings, security_from_args
from streams.security import KafkaSecurity, Secret, read_secret_file, security_from_mapping
from streams.settings import KafkaSettings
from streams.settings import kafka_settings as kafka_settings_from


def parse(argv: list[str], environ: dict[str, str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_security_options(p, environ or {})
    return p.parse_args(argv)


def test_secret_is_redacted_in_repr_str_and_format() -> None:
    s = Secret("hunter2")
    assert repr(s) == "Secret('<redacted>')"
    assert str(s) == "<redacted>"
    assert f"{s}" == "<redacted>"
    assert s.reveal() == "hunter2"


def test_settings_repr_never_shows_the_password() -> None:
    sec = KafkaSecurity(protocol="SASL_SSL", username="worker", password=Secret("hunter2"))
    settings = KafkaSettings(security=sec)
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in repr(sec)
    assert sec.describe() == "SASL_SSL, SCRAM-SHA-512 as worker"


def test_default_is_plaintext_without_credentials() -> None:
    sec = security_from_args(parse([]), {})
    assert sec == KafkaSecurity()
    assert sec.aiokafka_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert sec.faust_credentials() is None
    assert KafkaSettings().client_kwargs() == {"bootstrap_servers": "localhost:9092", "security_protocol": "PLAINTEXT"}


def test_password_comes_from_a_file(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    sec = security_from_args(
        parse(["--security-protocol", "sasl_plaintext", "--sasl-username", "u", "--sasl-password-file", str(pw)]), {}
    )
    assert sec.protocol == "SASL_PLAINTEXT"
    assert sec.mechanism == "SCRAM-SHA-512"
    assert sec.aiokafka_kwargs() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "s3cret",
    }


def test_password_comes_from_the_environment_and_options_from_tandem_variables() -> None:
    environ = {
        "TANDEM_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "TANDEM_SASL_MECHANISM": "scram-sha-256",
        "TANDEM_SASL_USERNAME": "collector-a",
        "TANDEM_SASL_PASSWORD": "pw-from-env",
    }
    sec = security_from_args(parse([], environ), environ)
    assert (sec.protocol, sec.mechanism, sec.username) == ("SASL_PLAINTEXT", "SCRAM-SHA-256", "collector-a")
    assert sec.password == Secret("pw-from-env")


def test_no_flag_takes_a_password(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--sasl-password", "hunter2"])
    err = capsys.readouterr().err
    assert "a password is never taken on the command line" in err
    assert "hunter2" not in err


def test_sasl_without_a_password_names_where_to_put_it() -> None:
    with pytest.raises(
        ValueError, match=r"needs the SASL password of 'u' \(--sasl-password-file or TANDEM_SASL_PASSWORD\)"
    ):
        security_from_args(parse(["--security-protocol", "SASL_SSL", "--sasl-username", "u"]), {})


def test_sasl_without_a_user_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a SASL user name"):
        KafkaSecurity(protocol="SASL_SSL", password=Secret("x"))


def test_unknown_protocol_and_mechanism_are_refused() -> None:
    with pytest.raises(ValueError, match="security protocol 'TLS'"):
        KafkaSecurity(protocol="TLS")
    with pytest.raises(ValueError, match="SASL mechanism 'GSSAPI'"):
        KafkaSecurity(protocol="SASL_SSL", mechanism="GSSAPI", username="u", password=Secret("x"))


def test_tls_files_without_tls_are_refused() -> None:
    with pytest.raises(ValueError, match="TLS files given but the security protocol is PLAINTEXT"):
        KafkaSecurity(ca_file="/ca.pem")


def test_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="both --ssl-certfile and --ssl-keyfile"):
        KafkaSecurity(protocol="SSL", cert_file="/c.pem")


def test_missing_tls_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--ssl-cafile: no such file '.*nope.pem'"):
        security_from_args(parse(["--security-protocol", "SSL", "--ssl-cafile", str(tmp_path / "nope.pem")]), {})


def test_secret_file_errors_never_show_content(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        read_secret_file(empty, "--sasl-password-file")
    with pytest.raises(ValueError, match="cannot read"):
        read_secret_file(tmp_path / "missing", "--sasl-password-file")


def test_faust_credentials_carry_the_mechanism_and_tls() -> None:
    from faust.auth import SASLCredentials, SSLCredentials

    sasl = KafkaSecurity(protocol="SASL_SSL", username="worker", password=Secret("pw"), mechanism="SCRAM-SHA-256")
    creds = sasl.faust_credentials()
    assert isinstance(creds, SASLCredentials)
    assert (creds.protocol.value, creds.mechanism.value, creds.username) == ("SASL_SSL", "SCRAM-SHA-256", "worker")
    assert "pw" not in repr(creds)
    assert isinstance(KafkaSecurity(protocol="SSL").faust_credentials(), SSLCredentials)


def test_every_kafka_command_takes_the_security_options(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("x")
    p = argparse.ArgumentParser()
    add_kafka_options(p)
    args = p.parse_args(["--security-protocol", "SASL_SSL", "--sasl-username", "w", "--sasl-password-file", str(pw)])
    assert kafka_settings(args).security.username == "w"


def test_the_settings_are_built_from_a_mapping_of_option_values_without_argparse(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    options = {
        "broker": "kafka://k1:9092,kafka://k2:9092",
        "topic_prefix": "t.",
        "partitions": 3,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_username": "collector-a",
        "sasl_password_file": str(pw),
        "actuator_clusters": "eu-1, eu-2,eu-1",
        "input_clusters": "eu-1",
    }
    settings = kafka_settings_from(options, environ={})
    assert (settings.bootstrap, settings.prefix, settings.partitions, settings.replication) == (
        "k1:9092,k2:9092",
        "t.",
        3,
        1,
    )
    assert (settings.actuator_clusters, settings.input_clusters, settings.input_signing) == (
        ("eu-1", "eu-2"),
        ("eu-1",),
        None,
    )
    assert settings.security == KafkaSecurity(
        protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username="collector-a", password=Secret("s3cret")
    )
    assert security_from_mapping({}, {}) == KafkaSecurity()
    with pytest.raises(ValueError, match=r"^--actuator-clusters: 'a/b' is not a cluster name$"):
        kafka_settings_from({"actuator_clusters": "a/b"})
