"""What the engine's host glue (runtime/sandbox/engine_build/host_glue.c) gives the guest,
as docs/engine.md lists it: quickjs-libc's behaviour for the parts the sandbox keeps, and
nothing that reaches a file, the environment or a process."""

from __future__ import annotations

from runtime import Limits
from runtime import run_sandbox as run

HEADER = 'import * as std from "qjs:std"; import * as os from "qjs:os";\n'


def out(code: str, **limits) -> str:
    r = run(HEADER + code, limits=Limits(clock="fixed", **limits))
    assert (r.exit_code, r.stderr) == (0, ""), r.stderr
    return r.stdout


def test_intervals_repeat_until_cleared_and_timeouts_fire_in_order():
    code = """
let n = 0; const id = os.setInterval(() => { n++; if (n === 3) { os.clearInterval(id); print("stop", n); } }, 10);
os.setTimeout(() => print("b"), 20); os.setTimeout(() => print("a"), 5);
const never = os.setTimeout(() => print("never"), 1); os.clearTimeout(never);
"""
    assert out(code) == "a\nb\nstop 3\n"


def test_sleep_async_and_sleep_move_the_sandbox_clock_not_the_wall_clock():
    code = "const t = Date.now(); await os.sleepAsync(2500); os.sleep(500); print(Date.now() - t)"
    r = run(HEADER + code, limits=Limits(clock="fixed", timeout_s=1))
    assert (r.exit_code, r.stdout) == (0, "3000\n") and r.duration_s < 1


def test_a_timer_callback_that_throws_ends_the_run_with_its_error():
    r = run(HEADER + 'os.setTimeout(() => { throw new TypeError("late") }, 5); print("first")')
    assert (r.exit_code, r.stdout) == (1, "first\n")
    assert r.stderr.startswith("TypeError: late\n")


def test_no_module_but_the_built_ins_can_be_imported():
    code = """
for (const name of ["./x.js", "/etc/passwd", "qjs:bjson", "node:fs"]) {
  try { await import(name); print("imported", name); } catch (e) { print(e.name, e.message); }
}
"""
    assert out(code) == (
        "ReferenceError could not load module 'x.js'\n"  # normalised against <cmdline>
        "ReferenceError could not load module '/etc/passwd'\n"
        "ReferenceError could not load module 'qjs:bjson'\n"
        "ReferenceError could not load module 'node:fs'\n"
    )


def test_import_meta_names_the_agent_module():
    assert out("print(import.meta.url, import.meta.main)") == "file://<cmdline> true\n"


def test_errors_print_their_stack_and_their_causes():
    r = run('throw new Error("outer", {cause: new RangeError("inner")})')
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[0] == "Error: outer" and lines[1].startswith("    at ")
    assert "Caused by: RangeError: inner" in lines


def test_print_survives_a_value_whose_to_string_throws():
    code = 'print({toString() { throw new Error("no") }}, 1); print(Symbol("s").description)'
    assert out(code) == "[object Object] 1\ns\n"


def test_std_and_os_odds_and_ends():
    code = """
print(os.platform, os.isatty(1), JSON.stringify(os.getcwd()), typeof os.now());
print(os.remove("/tmp/x") < 0, os.rename("/a", "/b") < 0, os.mkdir("/d") < 0, os.close(3) < 0);
print(typeof std.strerror(std.Error.ENOENT), std.Error.EBADF > 0, std.fdopen(1, "w"));
std.out.write(new Uint8Array([104, 105, 10]).buffer, 0, 3);
std.out.putByte(33); std.out.puts("\\n"); print(std.in.eof(), std.in.getByte(), std.out.fileno());
"""
    assert out(code) == (
        'wasi false ["/",0] number\ntrue true true true\nstring true null\nhi\n!\nfalse -1 1\n'
    )
