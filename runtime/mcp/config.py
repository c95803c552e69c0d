"""`specgen mcp --config FILE`: one file describing a server that many agents share.

Flags describe a one-profile server; a team's gateway has more to say (several
profiles, each with its document, client authentication, a shared quota store, where
the audit and telemetry go), and says it once, in a file that can be reviewed and
versioned. The file is TOML (`.toml`) or JSON (any other name), checked against the
JSON Schema `specgen mcp schema` prints (config.schema.json, with jsonschema-rs, the
validator specgen checks documents with), then for what a schema cannot say (an
address, an origin, a quota store URL). Relative paths are relative to the file's
folder, so a config means the same from any working directory.

What is wrong is refused in one line that names the file and the key: unknown keys, a
missing grants file, a profile the grants file lacks, a document that cannot be read.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson

#: A config file is a few dozen lines; a larger one is refused unread.
MAX_CONFIG_BYTES = 1 << 20
SCHEMA_NAME = "config.schema.json"


class ConfigError(ValueError):
    """A config that cannot be served; the text is one line naming the file."""


def schema_text() -> str:
    """The config's JSON Schema, exactly as published (`specgen mcp schema`)."""
    return files("runtime.mcp").joinpath(SCHEMA_NAME).read_text(encoding="utf-8")


_validator: Any = None


def _validate(doc: Any, where: str) -> None:
    global _validator
    if _validator is None:
        _validator = jsonschema_rs.validator_for(orjson.loads(schema_text()))
    for error in _validator.iter_errors(doc):
        at = "/".join(str(part) for part in error.instance_path)
        raise ConfigError(f"{where}{': ' + at if at else ''}: {_plain(error.message)}")


def _plain(text: str, limit: int = 300) -> str:
    """A message quoting the file's own text, with anything unprintable escaped."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


@dataclass(frozen=True)
class ServedProfile:
    name: str
    spec: str
    server: str | None = None
    base_url: str | None = None


@dataclass(frozen=True)
class AuditSinks:
    file: Path | None = None
    stderr: bool = True
    stdout: bool = False
    otel: bool = False


@dataclass(frozen=True)
class Telemetry:
    enabled: bool | None = None
    otlp_endpoint: str | None = None
    service_name: str = "plimsoll-specgen"


@dataclass(frozen=True)
class ServerConfig:
    """A checked config, paths made absolute."""

    path: Path
    grants: Path
    profiles: tuple[ServedProfile, ...]
    listen: str | None = None
    caller: str | None = None
    #: The `auth` block as written (runtime.mcp.auth.parse_auth checks the rest).
    auth: dict[str, Any] | None = None
    allow_origins: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    timeout_s: float = 5.0
    memory_mb: int = 256
    workers: int | None = None
    isolation: str | None = None
    quota_store: str | None = None
    audit: AuditSinks = AuditSinks()
    telemetry: Telemetry = Telemetry()


def _read(path: Path) -> Any:
    where = f"--config {str(path)!r}"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: over {MAX_CONFIG_BYTES} bytes")
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ConfigError(f"{where}: not UTF-8") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not TOML ({_plain(str(exc))})") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON ({_plain(str(exc))})") from None


def _local(base: Path, text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def _spec(base: Path, text: str) -> str:
    """A document named by path (made absolute) or by an http(s) URL (kept)."""
    if text.startswith(("http://", "https://")):
        return text
    return str(_local(base, text))


def load_config(path: Path) -> ServerConfig:
    """Read and check a server config; ConfigError (one line) on any fault.

    The grants file must exist and name every profile served; reading it as the
    runtime does (keys, documents) happens when the server opens it."""
    where = f"--config {str(path)!r}"
    doc = _read(path)
    _validate(doc, where)
    base = path.resolve().parent
    grants = _local(base, doc["grants"])
    if not grants.is_file():
        raise ConfigError(f"{where}: grants: {str(grants)!r} is not a file")
    profiles = tuple(
        ServedProfile(
            p["name"],
            _spec(base, p["spec"]),
            p.get("server"),
            p.get("base_url"),
        )
        for p in doc["profiles"]
    )
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: profiles: each profile may be served once")
    _has_profiles(grants, names, where)
    audit = doc.get("audit", {})
    telemetry = doc.get("telemetry", {})
    if audit.get("stdout") and "listen" not in doc:
        raise ConfigError(
            f"{where}: audit: stdout is the MCP channel on stdio; give listen, or use a file"
        )
    if audit.get("otel") and telemetry.get("enabled") is False:
        raise ConfigError(f"{where}: audit: otel needs telemetry, which the config turns off")
    return ServerConfig(
        path=path,
        grants=grants,
        profiles=profiles,
        listen=doc.get("listen"),
        caller=doc.get("caller"),
        auth=doc.get("auth"),
        allow_origins=tuple(doc.get("allow_origins", ())),
        allow_hosts=tuple(doc.get("allow_hosts", ())),
        timeout_s=float(doc.get("timeout_s", 5.0)),
        memory_mb=int(doc.get("memory_mb", 256)),
        workers=doc.get("workers"),
        isolation=doc.get("isolation"),
        quota_store=doc.get("quota_store"),
        audit=AuditSinks(
            file=_local(base, audit["file"]) if "file" in audit else None,
            stderr=audit.get("stderr", True),
            stdout=audit.get("stdout", False),
            otel=audit.get("otel", False),
        ),
        telemetry=Telemetry(
            enabled=telemetry.get("enabled"),
            otlp_endpoint=telemetry.get("otlp_endpoint"),
            service_name=telemetry.get("service_name", "plimsoll-specgen"),
        ),
    )


def _has_profiles(grants: Path, names: list[str], where: str) -> None:
    """Every served profile is in the grants file (read as JSON only: its keys and
    documents are the runtime's to load, when the server opens the grants)."""
    try:
        with grants.open("rb") as f:
            doc = orjson.loads(f.read(16 << 20))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: grants {str(grants)!r}: {_plain(str(exc))}") from None
    found = doc.get("profiles") if isinstance(doc, dict) else None
    known = set(found) if isinstance(found, dict) else set()
    for name in names:
        if name not in known:
            raise ConfigError(
                f"{where}: profiles: {orjson.dumps(name).decode()} is not a profile of "
                f"{str(grants)!r}"
            )
