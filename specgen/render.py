"""Rendering every generated text from the Jinja2 templates.

All output text lives in templates/ so that a reviewer reads the files' layout in one
place; Python only supplies data and the escaping filters whose exact bytes matter
(`visible` is for document text shown as text, e.g. in description.txt).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from specgen.allow import AllowEntry, entry_json
from specgen.quoting import go_quote, js_string, ts_comment, visible

if TYPE_CHECKING:  # only template data here; `specgen run` renders its client without it
    import jinja2

    from specgen.operations import Generated
    from specgen.typescript import Param, TypeSet

#: Where the templates are: inside the installed package, or at the checkout's root.
TEMPLATE_DIRS = (Path(__file__).parent / "templates", Path(__file__).parent.parent / "templates")

#: The files `build` writes, in the order they are written and listed.
FILES = ("allow.json", "description.txt", "health_check.txt", "preamble.js", "types.d.ts")


@cache
def environment(html: bool = False) -> jinja2.Environment:
    """A shared environment: strict about undefined names; HTML-escaping only for pages.

    Generated code and JSON must never be HTML-escaped (their escaping is the `js`
    filter's job), while a page must escape everything it did not write itself.
    Compiled templates are kept on disk (`TemplateCache`), not compiled on every start.
    Jinja2 is imported here, at the first render: an MCP server whose start was kept
    (runtime/mcp/start_cache.py) renders nothing until a search, and the import is a
    tenth of a second of its start otherwise.
    """
    import jinja2

    from specgen.template_cache import TemplateCache

    dirs = [str(d) for d in TEMPLATE_DIRS if d.is_dir()]
    if not dirs:
        raise RuntimeError("specgen templates are missing from this installation")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=html,
        bytecode_cache=TemplateCache(),
    )
    env.filters["js"] = js_string
    env.filters["goquote"] = go_quote
    env.filters["visible"] = visible
    env.filters["tsdoc"] = ts_comment
    return env


def render(template: str, **data: object) -> str:
    return environment().get_template(template).render(**data)


def artifacts(gen: Generated, types: TypeSet | None = None) -> dict[str, str]:
    """The files `build` writes, by name; health_check.txt only when one GET is marked,
    types.d.ts when the caller derived the types (they need the document, not just gen)."""
    arguments = [op.arg_text for op in gen.operations]  # both files write each list
    out = {
        "allow.json": render("allow.json.j2", allow=[_entry_text(e) for e in gen.catalog]),
        "description.txt": render(
            "description.txt.j2", gen=gen, methods=description_rows(gen, arguments)
        ),
        "preamble.js": render("preamble.js.j2", gen=gen, methods=preamble_rows(gen, arguments)),
    }
    if types is not None:
        out["types.d.ts"] = render(
            "types.d.ts.j2", gen=gen, types=types, methods=method_rows(types)
        )
    if gen.health_check:
        out["health_check.txt"] = render("health_check.txt.j2", gen=gen)
    return {name: out[name] for name in FILES if name in out}


def preamble_rows(gen: Generated, arguments: list[str]) -> list[tuple[object, ...]]:
    """preamble.js's data per method: (op, name, arguments, row), `row` being its line
    of the default build's table (`Operation.row`), or "" for a method that concatenates
    its path (the reference build, whose line the template reads from `op`). `arguments`
    holds each method's `arg_text`, in order.

    Tuples the template's loop unpacks, for the reason `method_rows` gives."""
    return [
        (op, op.name, args, op.row if op.structured else "")
        for op, args in zip(gen.operations, arguments, strict=True)
    ]


def description_rows(gen: Generated, arguments: list[str]) -> list[tuple[object, ...]]:
    """description.txt's data per method: (name, arguments, method, template, summary,
    options_note), the note "" for a method without `options`; `arguments` as for
    `preamble_rows`.

    Tuples the template's loop unpacks, for the reason `method_rows` gives."""
    return [
        (
            op.name,
            args,
            op.method,
            op.template,
            op.summary,
            op.options_note if op.has_options else "",
        )
        for op, args in zip(gen.operations, arguments, strict=True)
    ]


def method_rows(types: TypeSet) -> list[tuple[object, ...]]:
    """types.d.ts's data per method, as tuples its loops unpack.

    Each row is (name, summary, doc, method, template, path_docs, extra_params,
    arguments, response): `doc` is "" when it repeats the summary, `path_docs` holds
    (argument, doc) for the path parameters with a doc, and each of `extra_params` is
    (name as a JSON string, location, TypeScript as comment text, required, sent, doc).

    Why: Jinja reads `t.op.name` through `Environment.getattr`, one Python call per dot,
    and the template read about 45,000 attributes for GitHub's 1,222 methods, over a
    third of its rendering. A shared parameter (`per_page`, `page`) is one Param object
    used hundreds of times, so its row (its name's quoting, its type's comment
    folding) is made once.
    """
    param_rows: dict[int, tuple[Param, tuple[object, ...]]] = {}
    rows: list[tuple[object, ...]] = []
    for t in types.operations:
        op = t.op
        extra = []
        for p in t.extra_params:
            hit = param_rows.get(id(p))
            if hit is None or hit[0] is not p:
                row = (js_string(p.name), p.location, ts_comment(p.ts), p.required, p.sent, p.doc)
                hit = param_rows[id(p)] = (p, row)
            extra.append(hit[1])
        rows.append(
            (
                op.name,
                op.summary,
                t.doc if t.doc != op.summary else "",
                op.method,
                op.template,
                [(p.name, p.doc) for p in t.path_params if p.doc],
                extra,
                t.arguments,
                t.response,
            )
        )
    return rows


def _entry_text(entry: AllowEntry) -> str:
    """One allow.json entry as JSON text: a string, or an object on one line."""
    value = entry_json(entry)
    if isinstance(value, str) and entry.query:
        return _query_text(value)
    if isinstance(value, str):
        return js_string(value)
    parts = []
    for key, item in value.items():
        if isinstance(item, str):
            text = js_string(item)
        elif isinstance(item, dict):
            text = "{" + ", ".join(f"{js_string(k)}: {js_string(v)}" for k, v in item.items()) + "}"
        else:
            text = "[" + ", ".join(map(js_string, item)) + "]"
        parts.append(f"{js_string(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def _query_text(value: str) -> str:
    """A string entry with query items as JSON text, `&` written as itself: it separates
    the items, and Go's HTML-safe \\u0026 would make the list unreadable.

    Nearly every entry has nothing else to escape (`js_string` leaves the text without
    its `&`s as it is), and then the text is quoted as it stands: GitHub's allow.json
    has 963 such entries, each a regex pass otherwise. tests/specgen/
    test_fast_paths_equivalence.py compares both ways over arbitrary text.
    """
    plain = value.replace("&", "")
    if js_string(plain) == f'"{plain}"':
        return f'"{value}"'
    return js_string(value).replace("\\u0026", "&")


def bundle(gen: Generated, files: dict[str, str]) -> str:
    """`emit json`: every artifact and note in one JSON object."""
    return render("bundle.json.j2", gen=gen, files=files, allow=[str(r) for r in gen.allow])


def all_sections(gen: Generated, files: dict[str, str]) -> str:
    """`build` without -o: every artifact on stdout under a section header."""
    return render("all.txt.j2", gen=gen, files=files)
