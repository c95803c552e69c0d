"""The guest client's check, through the route index, answers as the linear scan did.

Differential, in node: the client exactly as a run embeds it (runtime/sandbox/guest.py
renders templates/client.js.j2 with the grant's index) beside the scan the client used
to run over the plain allow list, written out below as it read. Both see the same
generated grants (colliding literals, `*`, partial segments, trailing slashes, segments
named after Object.prototype members, verbs in either case) and the same raw and
structured calls. The gate refuses nothing itself (the broker decides every call and
counts it), so the host function here refuses everything the way the broker does (a 403
with no headers), and a call counts as permitted when the guest sees that answer rather
than the gate's own text.
"""

from __future__ import annotations

import json
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import GuestGrant, HostReply, HostRequest, sandbox
from runtime.sandbox import guest
from specgen.routes import Route
from tests.conftest import node

# The client's route check before the index, verbatim in what it decides.
LINEAR = r"""
function segments(path) { return path.split("/").slice(1); }
function linearPermitted(allow, method, path) {
  try {
    if (decodeURIComponent(path) !== path || encodeURI(path) !== path) return false;
  } catch (e) {
    return false;
  }
  if (path.charAt(0) !== "/" || /[\\?#\u0000-\u001f\u007f]/.test(path)) return false;
  var segs = segments(path);
  for (var i = 0; i < segs.length; i++) {
    if (segs[i] === "." || segs[i] === "..") return false;
  }
  for (var a = 0; a < allow.length; a++) {
    if (String(allow[a].m).toUpperCase() !== method) continue;
    var pat = segments(allow[a].p);
    if (pat.length !== segs.length) continue;
    var ok = true;
    for (var j = 0; j < pat.length && ok; j++) {
      ok = pat[j] === "*" ? segs[j] !== "" : pat[j] === segs[j];
    }
    if (ok) return true;
  }
  return false;
}
function segmentAdmits(want, got) {
  if (got === "") return want === "";
  var star = want.indexOf("*");
  if (star < 0) return want === got;
  var pre = want.slice(0, star), post = want.slice(star + 1);
  return got.length > pre.length + post.length && got.slice(0, pre.length) === pre &&
    got.slice(got.length - post.length) === post;
}
function fill(route, values) {
  var segs = segments(route), out = [], next = 0;
  for (var i = 0; i < segs.length; i++) {
    var star = segs[i].indexOf("*");
    if (star < 0 || next >= values.length) { out.push(segs[i]); continue; }
    var v = String(values[next++]);
    out.push(segs[i].slice(0, star) + encodeURIComponent(v) + segs[i].slice(star + 1));
  }
  return "/" + out.join("/");
}
function linearAdmitted(allow, method, path) {
  var segs = segments(path);
  for (var a = 0; a < allow.length; a++) {
    if (String(allow[a].m).toUpperCase() !== method) continue;
    var pat = segments(allow[a].p);
    if (pat.length !== segs.length) continue;
    var ok = true;
    for (var j = 0; j < pat.length && ok; j++) ok = segmentAdmits(pat[j], segs[j]);
    if (ok) return true;
  }
  return false;
}
"""

DRIVER = r"""
var reached = 0;
globalThis.__coderunner_host_start = function () {
  reached++;
  return Promise.resolve({status: 403, body: "refused by the broker"});
};
CLIENT
LINEAR
(async function () {
  var out = [];
  for (var c of CASES) {
    var before = reached, refused = false;
    try {
      if (c.route === undefined) await host.call(c.method, c.path);
      else await host.call({method: c.method, route: c.route}, c.values);
    } catch (e) {
      refused = /not permitted by sandbox capability/.test(e.message);
      if (!refused && !/^host api 403: refused by the broker/.test(e.message)) throw e;
    }
    var m = String(c.method).toUpperCase();
    var linear = c.route === undefined
      ? linearPermitted(ALLOW, m, c.path)
      : linearAdmitted(ALLOW, m, fill(c.route, c.values));
    out.push([reached > before, !refused, linear]);
  }
  console.log(JSON.stringify(out));
})();
"""

SEGMENTS = [
    "a",
    "b",
    "*",
    "*.json",
    "v*",
    "a.json",
    "",
    "__proto__",
    "constructor",
    "hasOwnProperty",
]
GOT = ["a", "b", "x", "x.json", "v2", "a.json", "", "__proto__", "constructor", "%41", "é", "."]
VERBS = st.sampled_from(["GET", "POST", "get"])


@st.composite
def routes(draw: st.DrawFn) -> Route:
    segs = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3))
    return Route("/" + "/".join(segs), draw(VERBS))


@st.composite
def cases(draw: st.DrawFn, allow: list[Route]) -> dict[str, object]:
    method = draw(VERBS)
    values = draw(st.lists(st.sampled_from([*GOT, "a b", "x/y"]), max_size=3))
    if allow and draw(st.booleans()):
        route = draw(st.sampled_from(allow)).path
    else:
        route = draw(routes()).path
    if draw(st.booleans()):
        return {"method": method, "route": route, "values": values}
    segs = iter(values + ["x"] * 3)
    path = "/".join(seg.replace("*", next(segs)) if "*" in seg else seg for seg in route.split("/"))
    if draw(st.booleans()):
        path = "/" + "/".join(draw(st.lists(st.sampled_from(GOT), min_size=1, max_size=3)))
    return {"method": method, "path": path}


@st.composite
def grants(draw: st.DrawFn) -> tuple[list[Route], list[dict[str, object]]]:
    allow = draw(st.lists(routes(), max_size=12))
    return allow, draw(st.lists(cases(allow), min_size=20, max_size=40))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grant=grants())
def test_the_client_check_is_the_linear_scan(
    grant: tuple[list[Route], list[dict[str, object]]],
) -> None:
    allow, calls = grant
    client = guest.render_client("host", tuple(allow))
    plain = json.dumps([{"m": r.method, "p": r.path} for r in allow])
    source = (
        DRIVER.replace("CLIENT", client)
        .replace("LINEAR", LINEAR)
        .replace("CASES", json.dumps(calls))
        .replace("ALLOW", plain)
    )
    proc = subprocess.run(
        [node(), "-e", source], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    for (reached, not_refused, linear), call in zip(json.loads(proc.stdout), calls, strict=True):
        assert reached, call  # every call reaches the host: the broker decides it
        assert not_refused == linear, (call, allow)


def test_prototype_named_segments_gate_as_plain_text_in_the_sandbox() -> None:
    allow = (Route("/__proto__/*", "GET"), Route("/constructor", "GET"))
    code = """
const tries = ["/__proto__/x", "/constructor", "/toString", "/hasOwnProperty", "/__proto__"];
(async () => {
  for (const p of tries) {
    try { await host.get(p); console.log("sent " + p); }
    catch (e) { console.log("refused " + p); }
  }
})();
"""
    seen: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        # as the broker answers: the granted paths, and a headerless 403 for the rest
        seen.append(str(request.path))
        if request.path in ("/__proto__/x", "/constructor"):
            return HostReply(200, b"{}", "application/json", upstream=True)
        return HostReply(403, b"forbidden by sandbox capability allowlist\n")

    result = sandbox.run(code, grant=GuestGrant(allow=allow), handler=handler)
    assert result.stdout.split("\n") == [
        "sent /__proto__/x",
        "sent /constructor",
        "refused /toString",
        "refused /hasOwnProperty",
        "refused /__proto__",
        "",
    ]
    assert seen == ["/__proto__/x", "/constructor", "/toString", "/hasOwnProperty", "/__proto__"]
