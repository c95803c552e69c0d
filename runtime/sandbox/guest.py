"""What the guest sees: the one ES-module source a run evaluates.

Order: shims + "\\n", then (grant only) the generic client rendered from
templates/client.js.j2, then "\\n" + preamble when the grant has one, then "\\n" + the
user's code. The same text becomes `execArgv[2]`, exactly as `qjs -e <source>` would
expose it, so a guest searching its globals sees precisely what it was given, and a key
can only be there if someone put it in a preamble (the key-confinement test plants one
to prove the search would find it).
"""

from __future__ import annotations

import collections
import functools
import json
import threading

from runtime.contract import MAX_REQUEST_BODY_BYTES
from runtime.identity_memo import IdentityMemo
from specgen.route_index import RouteIndex
from specgen.routes import Route

#: QuickJS-NG has only console.log; the other methods alias to it, so all console output
#: goes to stdout as on the reference's wasm provider. Intl is absent from this build, so
#: a small en-US Intl.NumberFormat / toLocaleString stands in. One line, so user code
#: line numbers shift by exactly one.
SHIMS = (
    "console.error = console.warn = console.info = console.debug = console.trace = console.log;"
    ' if (typeof Intl === "undefined") { (function () {'
    ' var SYM = {USD: "$", CAD: "$", AUD: "$", EUR: "\\u20ac", GBP: "\\u00a3", JPY: "\\u00a5", CNY: "\\u00a5", INR: "\\u20b9"};'
    " function fmt(n, o) { o = o || {}; n = Number(n);"
    ' if (n !== n) return "NaN"; if (!isFinite(n)) return (n < 0 ? "-" : "") + "\\u221e";'
    ' var cur = o.style === "currency" && o.currency ? String(o.currency).toUpperCase() : null;'
    ' var def = cur ? (cur === "JPY" ? 0 : 2) : 0;'
    " var mn = o.minimumFractionDigits === undefined ? def : Number(o.minimumFractionDigits);"
    " var mx = o.maximumFractionDigits === undefined ? Math.max(mn, cur ? def : 3) : Number(o.maximumFractionDigits);"
    " if (mx < mn) mx = mn;"
    ' var s = Math.abs(n).toFixed(mx), parts = s.split("."), i = parts[0], f = parts[1] || "";'
    ' while (f.length > mn && f.charAt(f.length - 1) === "0") f = f.slice(0, -1);'
    ' if (o.useGrouping !== false) i = i.replace(/\\B(?=(\\d{3})+(?!\\d))/g, ",");'
    ' var body = f ? i + "." + f : i; if (cur) body = (SYM[cur] || cur + "\\u00a0") + body;'
    ' return (n < 0 && Number(s) !== 0 ? "-" : "") + body; }'
    " function NumberFormat(locale, options) { if (!(this instanceof NumberFormat)) return new NumberFormat(locale, options); this.options = options || {}; }"
    " NumberFormat.prototype.format = function (n) { return fmt(n, this.options); };"
    " globalThis.Intl = {NumberFormat: NumberFormat};"
    " Number.prototype.toLocaleString = function (locale, options) { return fmt(this, options); };"
    " })(); }"
)


def _js_json(value: object) -> str:
    """JSON that is also a safe JS literal anywhere in a script (ASCII only)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).replace("</", "<\\/")


@functools.lru_cache(maxsize=64)
def render_client(global_name: str, allow: tuple[Route, ...]) -> str:
    """The injected client for a grant: its allow list as the route index, never a key.

    The index travels as a JSON string the client parses (JSON.parse makes every key an
    own data property, where an object literal would read `"__proto__": ...` as setting
    the prototype)."""
    from specgen.render import environment  # Jinja2 is loaded only by runs with a grant

    index = json.dumps(RouteIndex(allow).to_json(), separators=(",", ":"))
    return (
        environment()
        .get_template("client.js.j2")
        .render(
            global_name_json=_js_json(global_name),
            index_json=_js_json(index),
            max_body_bytes=MAX_REQUEST_BODY_BYTES,
        )
    )


def compose_source(
    code: str, *, global_name: str | None, allow: tuple[Route, ...] = (), preamble: str = ""
) -> str:
    """The whole module source of one run; `global_name` None means no grant (no client)."""
    parts = [SHIMS, "\n"]
    if global_name is not None:
        parts.append(render_client(global_name, tuple(allow)))
        if preamble:
            parts += ["\n", preamble]
    parts += ["\n", code]
    return "".join(parts)


#: Preludes composed lately, by the identity of (global name, allow tuple, preamble): the
#: runs of one grant pass the same objects every time, so their prelude is composed once
#: and is the same str each run (its hash, and the image cache's lookup, then cost
#: nothing).
MAX_PRELUDES = 64
_PRELUDES: IdentityMemo[str] = IdentityMemo(MAX_PRELUDES)


def prelude(global_name: str | None, allow: tuple[Route, ...] = (), preamble: str = "") -> str:
    """`compose_source("", ...)`: what a run evaluates before the agent's code."""
    return _PRELUDES.get(
        (global_name, allow, preamble),
        lambda: compose_source("", global_name=global_name, allow=allow, preamble=preamble),
    )


#: Preludes of several grants lately composed, by each grant's (global, allow, preamble).
_MANY_LOCK = threading.Lock()
_MANY: collections.OrderedDict[tuple[tuple[str, tuple[Route, ...], str], ...], str] = (
    collections.OrderedDict()
)


def prelude_of(grants: tuple[tuple[str, tuple[Route, ...], str], ...]) -> str:
    """The prelude of a run given several grants: the shims, then for each grant in
    order its client (its own global) and its preamble. Nothing of one grant is in
    another's client; each call names the global that made it (templates/client.js.j2)."""
    if len(grants) == 1:
        return prelude(*grants[0])
    with _MANY_LOCK:
        held = _MANY.get(grants)
        if held is not None:
            _MANY.move_to_end(grants)
            return held
    parts = [SHIMS, "\n"]
    for global_name, allow, preamble in grants:
        parts.append(render_client(global_name, allow))
        if preamble:
            parts += ["\n", preamble]
        parts.append("\n")
    text = "".join(parts)
    with _MANY_LOCK:
        _MANY[grants] = text
        while len(_MANY) > MAX_PRELUDES:
            _MANY.popitem(last=False)
    return text
