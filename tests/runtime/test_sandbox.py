"""The sandbox's guarantees, each asserted by behaviour (runtime/sandbox.py)."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from runtime import GuestGrant, HostReply, HostRequest, Limits, host_call_deadline
from runtime import run_sandbox as run
from specgen.routes import Route


def ok_handler(request: HostRequest) -> HostReply:
    method, path, body = request.method, request.path, request.body
    return HostReply(
        200,
        json.dumps(
            {"method": method, "path": path, "body": None if body is None else body.decode()}
        ).encode(),
    )


# -- evaluation like `qjs -e` ------------------------------------------------------------
def test_print_and_console_log_with_several_args():
    r = run(
        'print("a", 1, true); console.log("wasm", 6 * 7); console.error("e"); console.warn("w"); console.info("i"); console.debug("d")'
    )
    assert (r.exit_code, r.stdout, r.stderr) == (0, "a 1 true\nwasm 42\ne\nw\ni\nd\n", "")


def test_number_format_shim_cases_of_the_reference():
    code = (
        'const usd = {style: "currency", currency: "USD"};'
        " print((95000).toLocaleString(), (95000).toLocaleString('en-US', usd),"
        " (-1234567.5).toLocaleString('en-US', usd),"
        ' new Intl.NumberFormat("en-US", {style: "currency", currency: "EUR"}).format(1000))'
    )
    assert run(code).stdout == "95,000 $95,000.00 -$1,234,567.50 \u20ac1,000.00\n"


def test_sync_output_precedes_promise_jobs():
    r = run(
        'Promise.resolve().then(() => print("job")); queueMicrotask(() => print("micro")); print("sync")'
    )
    assert r.stdout == "sync\njob\nmicro\n"


def test_top_level_await_and_timers_run_to_completion():
    r = run(
        'await 1; const os = await import("qjs:os"); os.setTimeout(() => print("timer"), 1000); print("tla")'
    )
    assert (r.exit_code, r.stdout) == (0, "tla\ntimer\n")


def test_module_semantics_top_level_var_is_not_global():
    r = run("var x = 1; print(typeof globalThis.x, this === undefined)")
    assert r.stdout == "undefined true\n"


def test_uncaught_error_exits_1_with_error_on_stderr():
    r = run('throw new Error("boom")')
    assert r.exit_code == 1 and r.stderr.startswith("Error: boom\n") and r.stdout == ""


def test_syntax_error_and_thrown_string_exit_1_and_skip_the_rest():
    r = run('print("never"); let = ;')
    assert (r.exit_code, r.stdout) == (1, "") and r.stderr.startswith("SyntaxError")
    r = run('print("first"); throw "plain string"; print("never")')
    assert (r.exit_code, r.stdout) == (1, "first\n") and r.stderr.startswith("plain string")


def test_unhandled_rejection_exits_1_but_handled_later_does_not():
    r = run('Promise.reject(new Error("rej"))')
    assert r.exit_code == 1 and "Possibly unhandled promise rejection: Error: rej" in r.stderr
    r = run(
        'const p = Promise.reject(new Error("rej")); p.catch(e => print("caught " + e.message))'
    )
    assert (r.exit_code, r.stdout, r.stderr) == (0, "caught rej\n", "")


def test_proc_exit_code_is_the_run_exit_code():
    r = run('const std = await import("qjs:std"); print("before"); std.exit(7)')
    assert (r.exit_code, r.stdout) == (7, "before\n")


def test_output_without_a_final_newline_is_flushed_like_qjs_exit():
    r = run('const std = await import("qjs:std"); std.out.puts("partial"); std.err.puts("e")')
    assert (r.exit_code, r.stdout, r.stderr) == (0, "partial", "e")
    r = run(
        'const std = await import("qjs:std"); std.out.puts("before error"); throw new Error("x")'
    )
    assert (r.exit_code, r.stdout) == (1, "before error")
    r = run('const std = await import("qjs:std"); std.out.puts("before exit"); std.exit(3)')
    assert (r.exit_code, r.stdout) == (3, "before exit")


def test_fresh_state_between_runs():
    assert run("globalThis.leftover = 42; print(typeof leftover)").stdout == "number\n"
    assert run("print(typeof leftover)").stdout == "undefined\n"


def test_exec_argv_holds_the_whole_source_and_argv0():
    grant = GuestGrant(
        global_name="svc", allow=(Route("/v1/items/*", "GET"),), preamble="svc.extra = 1;"
    )
    r = run(
        "print(JSON.stringify([execArgv.length, execArgv[0], execArgv[1], argv0]));"
        'print(execArgv[2].indexOf("svc.extra = 1;") >= 0, execArgv[2].indexOf("/v1/items/*") >= 0,'
        ' execArgv[2].indexOf("MARKER_USER_CODE") >= 0, typeof svc.get)',
        grant=grant,
    )
    assert r.stdout == '[3,"qjs","-e","qjs"]\ntrue true true function\n'


def test_no_grant_means_no_client_global():
    r = run(
        'print(typeof host, typeof __coderunner_host_call, String(__coderunner_host_call).indexOf("native code") >= 0)'
    )
    assert r.stdout == "undefined function true\n"


# -- default deny --------------------------------------------------------------------------
def test_no_network_no_std_os_globals():
    r = run("print(typeof fetch, typeof std, typeof os, typeof XMLHttpRequest, typeof require)")
    assert r.stdout == "undefined undefined undefined undefined undefined\n"


def test_std_and_os_reach_no_file_env_or_stdin():
    code = """
const std = await import("qjs:std"); const os = await import("qjs:os");
print(std.loadFile("/etc/passwd"), std.open("/etc/passwd", "r"), std.getenv("HOME"), JSON.stringify(std.getenviron()));
print(os.open("/etc/passwd", os.O_RDONLY) < 0, os.readdir("/")[1] !== 0, os.stat("/")[1] !== 0);
print(JSON.stringify(std.in.getline()), std.in.read(new ArrayBuffer(8), 0, 8));
print(os.write(5, new ArrayBuffer(1), 0, 1) < 0);
"""
    r = run(code)
    assert (r.exit_code, r.stdout) == (
        0,
        "null null undefined {}\ntrue true true\nnull 0\ntrue\n",
    ), r.stderr


# -- limits ----------------------------------------------------------------------------------
def test_infinite_loop_times_out_with_124_then_next_run_works():
    r = run("while(true){}", limits=Limits(timeout_s=0.3))
    assert (r.exit_code, r.timed_out) == (124, True)
    assert r.duration_s < 0.3 + 1.0  # limit plus a generous margin for a loaded CI box
    assert run('print("next")').stdout == "next\n"


def test_timeout_inside_a_promise_job_and_try_catch():
    r = run(
        "Promise.resolve().then(() => { for(;;) { try { while(true){} } catch (e) {} } })",
        limits=Limits(timeout_s=0.2),
    )
    assert (r.exit_code, r.timed_out) == (124, True)


def test_timeout_is_clamped_and_defaulted():
    assert Limits(timeout_s=0).normalised().timeout_s == 5.0
    assert Limits(timeout_s=-3).normalised().timeout_s == 5.0
    assert Limits(timeout_s=99).normalised().timeout_s == 30.0


def test_allocation_bomb_ends_with_out_of_memory_then_next_run_works():
    r = run("let a=[]; for(;;) a.push(new Array(1e6).fill(1))", limits=Limits(memory_mb=32))
    assert r.exit_code != 0 and not r.timed_out
    assert "out of memory" in r.stderr
    assert run('print("next")').stdout == "next\n"


def test_memory_limit_is_real():
    code = "const b = new ArrayBuffer(128 * 1024 * 1024); print(b.byteLength)"
    assert run(code, limits=Limits(memory_mb=256)).stdout == "134217728\n"
    small = run(code, limits=Limits(memory_mb=32))
    assert small.exit_code != 0 and "out of memory" in small.stderr


def test_output_cap_truncates_and_flags_each_stream():
    r = run('for (let i = 0; i < 1000; i++) print("0123456789")', limits=Limits(output_bytes=100))
    assert r.exit_code == 0 and r.stdout == ("0123456789\n" * 10)[:100] and r.stdout_truncated
    assert not r.stderr_truncated
    r = run(
        'print("x".repeat(50)); throw new Error("y".repeat(500))', limits=Limits(output_bytes=100)
    )
    assert r.stderr_truncated and len(r.stderr) == 100 and not r.stdout_truncated
    assert run('print("next")').stdout == "next\n"


def test_deep_recursion_is_a_catchable_range_error_then_next_run_works():
    r = run(
        'let d = 0; function f(){ d++; f() } try { f() } catch (e) { print(e instanceof RangeError, e.message, d > 500) }; print("after")'
    )
    assert (r.exit_code, r.stdout) == (0, "true Maximum call stack size exceeded true\nafter\n")
    r = run("function f(){f()} f()")
    assert r.exit_code == 1 and r.stderr.startswith("RangeError: Maximum call stack size exceeded")
    assert run('print("next")').stdout == "next\n"


def test_recursion_the_stack_check_cannot_see_is_a_clean_trap():
    r = run('eval("(".repeat(100000) + "1" + ")".repeat(100000))')
    assert r.exit_code == 134 and r.stderr == "guest aborted: wasm error: call stack exhausted\n"
    assert run('print("next")').stdout == "next\n"


def test_memory_is_intact_after_a_caught_range_error():
    code = """
const keep = {a: [1, 2, 3], s: "intact"}; globalThis.g = 12345;
function f(){ f() } for (let i = 0; i < 20; i++) { try { f() } catch (e) {} }
print(JSON.stringify(keep), g, [3, 1, 2].sort().join(""));
"""
    assert run(code).stdout == '{"a":[1,2,3],"s":"intact"} 12345 123\n'


def test_host_calls_are_bounded():
    r = run(
        "const s = []; for (let i = 0; i < 4; i++) s.push(__coderunner_host_call(JSON.stringify({method: 'GET', path: '/a'})).status); print(s.join())",
        handler=ok_handler,
        limits=Limits(max_host_calls=2),
    )
    assert r.stdout == "200,200,429,429\n"


def test_handler_sees_the_run_deadline():
    seen = []

    def handler(request):
        seen.append(host_call_deadline())
        return HostReply(200, b"{}")

    run(
        "__coderunner_host_call(JSON.stringify({method: 'GET', path: '/a'}))",
        handler=handler,
        limits=Limits(timeout_s=2),
    )
    assert seen and seen[0] is not None
    assert host_call_deadline() is None


def test_time_inside_a_host_call_counts_against_the_limit():
    import time

    def slow(request):
        time.sleep(0.4)
        return HostReply(200, b"{}")

    r = run(
        "for (;;) __coderunner_host_call(JSON.stringify({method: 'GET', path: '/a'}))",
        handler=slow,
        limits=Limits(timeout_s=0.5),
    )
    assert (r.exit_code, r.timed_out) == (124, True)


def test_no_process_socket_or_worker_api_and_sleeps_are_virtual():
    code = (
        'const os = await import("qjs:os"); const std = await import("qjs:std"); const t = Date.now();'
        " os.sleep(10000); print(Date.now() - t, typeof os.exec, typeof std.urlGet, typeof std.popen,"
        " typeof os.socket, typeof os.Worker)"
    )
    r = run(code, limits=Limits(clock="fixed", timeout_s=1))
    assert (r.exit_code, r.stdout) == (
        0,
        "10000 undefined undefined undefined undefined undefined\n",
    )


def test_fixed_clock_is_reproducible():
    code = "print(new Date().toISOString(), Math.random())"
    a, b = run(code, limits=Limits(clock="fixed")), run(code, limits=Limits(clock="fixed"))
    assert a.stdout == b.stdout and a.stdout.startswith("2026-01-01T00:00:00")


# -- threads and memory ------------------------------------------------------------------------
def test_parallel_runs_in_threads_are_separate():
    results: dict[int, list[str]] = {}

    def work(k: int) -> None:
        results[k] = [
            run(f"globalThis.v = {k} * {j}; print(v)", handler=ok_handler).stdout for j in range(25)
        ]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [f"{k * j}\n" for j in range(25)] for k in range(4)}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


@pytest.mark.slow
def test_thousand_runs_grow_rss_by_less_than_10_mb():
    grant = GuestGrant(allow=(Route("/a", "GET"),))
    code = (
        'host.get("/a").then(v => print(v.path)); const big = new Array(10000).fill("x").join("")'
    )
    for _ in range(50):
        run(code, grant=grant, handler=ok_handler)
    gc.collect()
    before = _rss_bytes()
    for _ in range(1000):
        r = run(code, grant=grant, handler=ok_handler)
    gc.collect()
    assert r.stdout == "/a\n"
    assert _rss_bytes() - before < 10 * 1024 * 1024
