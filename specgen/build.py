"""The generator's pipeline: load, check the version, validate, derive, render.

Shared by `build`, `emit` and `check` so that what CI checks is exactly what `build`
writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from specgen.errors import SpecError
from specgen.files import write_set
from specgen.load import Source, load, parse
from specgen.operations import Generated, generate
from specgen.quoting import capped, go_quote, visible
from specgen.render import FILES, artifacts
from specgen.servers import server_choice
from specgen.typescript import TypeSet
from specgen.typescript import generate as generate_types


class Options(NamedTuple):
    """What changes the output, besides the document itself. (Options and Result are
    NamedTuples for the reason specgen/frozen.py gives.)"""

    global_name: str = "host"
    server: str | None = None
    strict: bool = False
    validate: bool = True
    #: "" (the default build) or "reference" (exactly what the Go reference writes).
    compat: str = ""


class Result(NamedTuple):
    """What one run of the pipeline made: the document, the derived client, the files."""

    source: Source
    gen: Generated
    files: dict[str, str]
    types: TypeSet

    def notes(self) -> list[str]:
        """The lines `build` prints on stderr before anything else."""
        lines = [f"specgen: skipped {s.method} {s.path} ({s.reason})" for s in self.gen.skipped]
        lines += [f"specgen: warning: {w}" for w in self.gen.warnings]
        lines += [f"specgen: renamed: {r}" for r in self.gen.renamed]
        if self.gen.health_note:
            lines.append(f"specgen: health_check not set: {self.gen.health_note}")
        # paths and names come from the document: escaped, and a very long one cut
        return [capped(visible(line)) for line in lines]


def check_version(source: Source) -> str:
    swagger = source.doc.get("swagger")
    if "openapi" not in source.doc and swagger is not None:
        raise SpecError(
            f"specgen: {source.name} is a Swagger {go_quote(str(swagger))} document; specgen "
            "reads OpenAPI 3.x only, so convert it to OpenAPI 3 first"
        )
    version = source.doc.get("openapi")
    text = version if isinstance(version, str) else ("" if version is None else str(version))
    if not text.startswith("3."):
        raise SpecError(f"specgen: unsupported openapi version {go_quote(text)} (need 3.x)")
    return text


def _check_has_paths(source: Source) -> None:
    """A 3.1 document may hold only `webhooks`: requests the API sends to its users.
    None of them is a call a grant could allow, and "no paths" alone would not say why."""
    if not source.doc.get("paths") and source.doc.get("webhooks"):
        raise SpecError(
            f"specgen: {source.name} declares only webhooks (requests the API sends, not "
            "calls to it) and no paths, so there is nothing to generate a client for"
        )


def run(
    spec: str, options: Options, *, render_files: bool = True, raw: bytes | None = None
) -> Result:
    """Load, check and derive the client from `spec`; with `render_files` False the
    files are not rendered (`files` is empty): `specgen mcp` needs the operations and
    their types, not the preamble and allow list, which come from the grant, and
    rendering them was a third of its start on a large document. `raw`: the document's
    bytes, already read by a caller that needed them first (`spec` then only names it)."""
    source = load(spec) if raw is None else Source(spec, parse(spec, raw))
    check_version(source)
    if options.validate:
        from specgen.validate import structural_error_line

        line = structural_error_line(source.name, source.doc)
        if line:
            raise SpecError(line)
    _check_has_paths(source)
    prefix, server_note = server_choice(
        source.doc, options.server, first_on_disagreement=not options.compat
    )
    gen = generate(
        source.doc,
        name=source.name,
        global_name=options.global_name,
        prefix=prefix,
        strict=options.strict,
        compat=options.compat,
        warnings=(server_note,) if server_note else (),
    )
    types = generate_types(source.doc, gen, prefix)
    if types.dangling:
        gen = gen._replace(warnings=gen.warnings + tuple(map(_dangling_warning, types.dangling)))
    files = artifacts(gen, types) if render_files else {}
    return Result(source=source, gen=gen, files=files, types=types)


def _dangling_warning(ref: str) -> str:
    return (
        f"$ref {go_quote(ref)} points nowhere in the document, so what uses it is typed "
        "unknown (specgen validate reports where)"
    )


def write(result: Result, outdir: Path) -> list[str]:
    """Write every artifact as one set (specgen/files.py `write_set`: a failure leaves
    the old files, not half of a new build); then remove a stale health_check.txt.
    Returns the names written. A failure names the file it happened to."""
    if outdir.exists() and not outdir.is_dir():
        raise SpecError(f"specgen: {outdir}: not a directory")
    try:
        write_set(outdir, {name: text.encode() for name, text in result.files.items()})
        for name in FILES:
            stale = outdir / name
            if name not in result.files and stale.exists():
                stale.unlink()
    except OSError as exc:
        where = exc.filename or outdir
        raise SpecError(f"specgen: write {where}: {exc.strerror or exc}") from None
    return list(result.files)
