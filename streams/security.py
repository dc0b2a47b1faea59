"""How every tandem component authenticates to Kafka and encrypts its traffic (docs/operating.md).

One typed :class:`KafkaSecurity` carries Kafka's standard client settings: the security protocol
(``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``), the CA file that verifies the broker, an
optional client certificate and key (mutual TLS), and SASL credentials (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``).  It is turned into aiokafka's keyword arguments (:meth:`KafkaSecurity.aiokafka_kwargs`,
for the producers, consumers and admin clients of ``publish``, ``topics``, ``collect``, ``apply`` and
``audit``) and into Faust's ``broker_credentials`` (:meth:`KafkaSecurity.faust_credentials`, for the
worker), which Faust hands to the same aiokafka arguments (``faust.transport.drivers.aiokafka.
credentials_to_aiokafka_auth``), so both drivers speak to the broker the same way.

The password is never a command-line value (``ps`` and shell histories show those): it comes from a
file (``--sasl-password-file``, e.g. a mounted Kubernetes Secret) or from ``TANDEM_SASL_PASSWORD``.
It is held in a :class:`Secret`, whose ``repr``/``str`` are redacted, so printing settings, logging
them or putting them in an error message never shows it.

The flags are defined by ``cli.options.add_security_options``; :func:`security_from_mapping` builds the
settings from their values.

=============================  =============================================================
variable (flag)                meaning
=============================  =============================================================
``TANDEM_SECURITY_PROTOCOL``   ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``
``TANDEM_SSL_CAFILE``          PEM CA bundle that verifies the broker (default: system CAs)
``TANDEM_SSL_CERTFILE``        client certificate (PEM) for mutual TLS
``TANDEM_SSL_KEYFILE``         its private key (PEM)
``TANDEM_SASL_MECHANISM``      ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` (default)
``TANDEM_SASL_USERNAME``       SASL user name (the principal ``User:<name>`` of the ACLs)
``TANDEM_SASL_PASSWORD_FILE``  file whose first line is the password
``TANDEM_SASL_PASSWORD``       the password itself (environment only; no flag on purpose)
=============================  =============================================================
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import kafkalog

# aiokafka logs the SASL exchange at debug level: redacted from the first import of the Kafka
# settings, before any client exists (streams/kafkalog.py).
kafkalog.install()

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "KafkaSecurity",
    "Secret",
    "read_secret_file",
    "security_from_mapping",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_MECHANISM = "SCRAM-SHA-512"
REDACTED = "<redacted>"


class Secret:
    """A secret string that does not show itself: ``repr``/``str``/format print ``<redacted>``.

    :meth:`reveal` is the one way to get the value, at the single place that hands it to a client.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, spec: str) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


def read_secret_file(path: str | os.PathLike[str], what: str) -> Secret:
    """The first line of ``path`` (a mounted Secret ends with no newline or one), as a :class:`Secret`.

    Errors name the file and what it was for, never its content.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {os.fspath(path)!r}: {exc.strerror or exc}") from None
    value = text.splitlines()[0].strip() if text.strip() else ""
    if not value:
        raise ValueError(f"{what}: {os.fspath(path)!r} is empty")
    return Secret(value)


@dataclass(frozen=True)
class KafkaSecurity:
    """A Kafka client's security settings (Kafka's own names; see the module docstring)."""

    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    mechanism: str | None = None
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        protocol = self.protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol!r}: expected one of {', '.join(SECURITY_PROTOCOLS)}")
        object.__setattr__(self, "protocol", protocol)
        if self.sasl:
            mechanism = (self.mechanism or DEFAULT_MECHANISM).upper()
            if mechanism not in SASL_MECHANISMS:
                raise ValueError(f"SASL mechanism {self.mechanism!r}: expected one of {', '.join(SASL_MECHANISMS)}")
            object.__setattr__(self, "mechanism", mechanism)
            if not self.username:
                raise ValueError(f"security protocol {protocol} needs a SASL user name (--sasl-username)")
            if self.password is None or not self.password:
                raise ValueError(
                    f"security protocol {protocol} needs the SASL password of {self.username!r} "
                    "(--sasl-password-file or TANDEM_SASL_PASSWORD)"
                )
        elif self.username or self.password is not None:
            raise ValueError(f"SASL credentials given but the security protocol is {protocol} (use SASL_SSL)")
        if not self.tls and (self.ca_file or self.cert_file or self.key_file):
            raise ValueError(f"TLS files given but the security protocol is {protocol} (use SSL or SASL_SSL)")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("mutual TLS needs both --ssl-certfile and --ssl-keyfile")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context that verifies the broker's certificate and host name (None without TLS)."""
        if not self.tls:
            return None
        from aiokafka.helpers import create_ssl_context

        try:
            return create_ssl_context(cafile=self.ca_file, certfile=self.cert_file, keyfile=self.key_file)
        except (OSError, ssl.SSLError) as exc:
            files = ", ".join(f for f in (self.ca_file, self.cert_file, self.key_file) if f)
            raise ValueError(f"TLS files ({files}): {exc}") from None

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``AIOKafkaProducer``/``AIOKafkaConsumer``/``AIOKafkaAdminClient``."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        if self.sasl:
            assert self.password is not None and self.username is not None and self.mechanism is not None
            kwargs["sasl_mechanism"] = self.mechanism
            kwargs["sasl_plain_username"] = self.username
            kwargs["sasl_plain_password"] = self.password.reveal()
            kafkalog.note_identity(self.username, self.mechanism)
        return kwargs

    def faust_credentials(self) -> Any:
        """Faust's ``broker_credentials`` (``faust.SASLCredentials``/``SSLCredentials``), None for PLAINTEXT.

        Faust turns them into the same aiokafka arguments as :meth:`aiokafka_kwargs` for each of its
        clients (consumer, producer, the admin requests that create its topics).
        """
        if self.protocol == "PLAINTEXT":
            return None
        from faust.auth import SASLCredentials, SSLCredentials

        context = self.ssl_context()
        if self.sasl:
            assert self.password is not None and self.username is not None and self.mechanism is not None
            kafkalog.note_identity(self.username, self.mechanism)
            # SASLCredentials takes SASL_SSL when it has a TLS context and SASL_PLAINTEXT without.
            return SASLCredentials(
                username=self.username, password=self.password.reveal(), ssl_context=context, mechanism=self.mechanism
            )
        return SSLCredentials(context)

    def describe(self) -> str:
        """One line for logs: the protocol, the mechanism and the user, never the password."""
        parts = [self.protocol]
        if self.sasl:
            parts.append(f"{self.mechanism} as {self.username}")
        if self.cert_file:
            parts.append("client certificate")
        return ", ".join(parts)


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name)
    return value if value else None


def security_from_mapping(options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> KafkaSecurity:
    """:class:`KafkaSecurity` from a mapping of option values keyed by option name
    (``security_protocol``, ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``, ``sasl_mechanism``,
    ``sasl_username``, ``sasl_password_file``; the flags of ``cli.options.add_security_options``),
    the password from its file or ``TANDEM_SASL_PASSWORD`` in ``environ`` (ValueError names what is
    wrong)."""
    environ = os.environ if environ is None else environ
    protocol = options.get("security_protocol") or "PLAINTEXT"
    password: Secret | None = None
    username = options.get("sasl_username")
    if protocol.upper() in ("SASL_PLAINTEXT", "SASL_SSL"):
        if options.get("sasl_password_file"):
            password = read_secret_file(options["sasl_password_file"], "--sasl-password-file")
        elif _env("TANDEM_SASL_PASSWORD", environ):
            password = Secret(environ["TANDEM_SASL_PASSWORD"])
    else:
        username = None  # a user name left in the environment does not matter without SASL
    for flag in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = options.get(flag)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{flag.replace('_', '-')}: no such file {path!r}")
    return KafkaSecurity(
        protocol=protocol,
        ca_file=options.get("ssl_cafile"),
        cert_file=options.get("ssl_certfile"),
        key_file=options.get("ssl_keyfile"),
        mechanism=options.get("sasl_mechanism"),
        username=username,
        password=password,
    )
