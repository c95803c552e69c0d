"""Build the sandbox's JavaScript engine (QuickJS-NG for wasm32-wasi) from pinned sources.

Why a build of our own: the prebuilt reactor modules on the registry stopped exporting
the QuickJS C API the sandbox drives, so the engine could not take upstream fixes. Here
the engine comes from the `quickjs-ng` sdist on PyPI (QuickJS-NG's own C sources) and
the compiler from the `ziglang` wheel on PyPI, both fetched with pip and checked against
the SHA-256 in pins.json, and the module is linked to export exactly exports.txt.

Reproducible: fixed flags, `-ffile-prefix-map` for every source folder, a compiler
cache of our own, no timestamps; the result must hash to pins.json's `engine_sha256`
or the build fails (`--unpinned` prints the hash instead, for an upgrade).

Standalone on purpose (standard library and pip only): the hatch build hook
(hatch_build.py) loads this file by path inside an isolated build environment, where
nothing of this project is importable yet.

    python runtime/sandbox/engine_build/build.py [--out FILE] [--cache DIR] [--unpinned | --pin]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS = HERE / "pins.json"
EXPORTS = HERE / "exports.txt"
GLUE = HERE / "host_glue.c"
#: Where the module goes by default: inside the package, next to engine.py's loader.
DEFAULT_OUT = HERE.parent / "_engine" / "qjs-ng.wasm"
#: The engine's C files inside the sdist's `upstream-quickjs/` folder.
ENGINE_SOURCES = ("quickjs.c", "libregexp.c", "libunicode.c", "dtoa.c")
#: Shadow stack at the bottom of linear memory (zig's wasm linker puts it first), so an
#: overflow leaves memory instead of running into the heap and data. The allocator is
#: the one zig 0.15's wasi-libc links (emmalloc), which grows memory by what is asked
#: for; zig 0.17 links its own wasm allocator, which rounds large blocks up to a power
#: of two, so a 128 MiB ArrayBuffer would no longer fit a 256 MiB run.
STACK_BYTES = 1 << 20
#: The module's declared memory, the smallest limit a run accepts (terms.MIN_MEMORY_MB):
#: a small grant's memory image fits in it (a 14-operation one's does, GitHub's 1,222
#: operations' does not) and a run restoring it grows nothing. Each growth changes page protections: two calls per run (grown, then
#: reset for the pool slot's next run), ~80 us each under gVisor (traced with runsc --strace).
INITIAL_MEMORY_BYTES = 2 << 20

#: Compiler flags; part of the output cache key. -O2 as upstream's release build; the
#: WASI emulation defines because QuickJS-NG's sources include <signal.h> and use clock().
CFLAGS = (
    "-target",
    "wasm32-wasi",
    "-mexec-model=reactor",
    "-O2",
    "-std=gnu11",
    "-D_WASI_EMULATED_SIGNAL",
    "-D_WASI_EMULATED_PROCESS_CLOCKS",
    "-Wno-everything",
)
LDFLAGS = (
    "-lwasi-emulated-signal",
    "-lwasi-emulated-process-clocks",
    f"-Wl,-z,stack-size={STACK_BYTES}",
    f"-Wl,--initial-memory={INITIAL_MEMORY_BYTES}",
    "-Wl,--export-table",
    "-s",
)


class BuildError(Exception):
    """One line that says what failed; the CLI prints it and exits 1."""


def load_pins() -> dict:
    return json.loads(PINS.read_text("utf-8"))


def exports() -> list[str]:
    names = [ln.strip() for ln in EXPORTS.read_text("utf-8").splitlines()]
    return [n for n in names if n and not n.startswith("#")]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _pip_download(requirement: str, hashes: list[str], dest: Path, *extra: str) -> None:
    """pip with --require-hashes: pip itself refuses a file whose hash is not pinned."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(requirement + " " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n")
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes"]
        cmd += ["--disable-pip-version-check", "-q", "-d", str(dest), "-r", req.name, *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(req.name)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"pip download {requirement} failed: {last!r}")


def _fetch(cache: Path, filename: str, sha256: str, requirement: str, *extra: str) -> Path:
    """A pinned registry file in the cache, downloaded on first need, always re-hashed."""
    path = cache / "downloads" / filename
    if not path.is_file() or sha256_file(path) != sha256:
        _pip_download(requirement, [sha256], path.parent, *extra)
    if not path.is_file():
        raise BuildError(f"pip did not produce {filename}")
    got = sha256_file(path)
    if got != sha256:
        raise BuildError(f"{filename} has sha256 {got}, pinned {sha256}")
    return path


def engine_sources(cache: Path, pins: dict) -> Path:
    """The sdist's `upstream-quickjs/` folder, extracted once per pinned sdist."""
    sdist = pins["quickjs_ng"]
    name = f"quickjs_ng-{sdist['version']}.tar.gz"
    folder = cache / f"quickjs-ng-{sdist['version']}-{sdist['sha256'][:12]}"
    if (folder / ".complete").is_file():
        return folder
    archive = _fetch(
        cache,
        name,
        sdist["sha256"],
        f"quickjs-ng=={sdist['version']}",
        "--no-binary",
        ":all:",
    )
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".src-"))
    prefix = f"quickjs_ng-{sdist['version']}/upstream-quickjs/"
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.name.startswith(prefix) or not member.isfile():
                continue
            rel = member.name[len(prefix) :]
            if "/" in rel or not rel.endswith((".c", ".h")):
                continue
            data = tar.extractfile(member)
            assert data is not None
            (tmp / rel).write_bytes(data.read())
    missing = [s for s in (*ENGINE_SOURCES, "quickjs.h") if not (tmp / s).is_file()]
    if missing:
        shutil.rmtree(tmp)
        raise BuildError(f"the sdist lacks {missing}")
    (tmp / ".complete").write_text("")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def _platform_tag() -> str:
    machine = platform.machine().lower()
    if sys.platform.startswith("linux") and machine in ("x86_64", "amd64"):
        return "linux-x86_64"
    if sys.platform.startswith("linux") and machine in ("aarch64", "arm64"):
        return "linux-aarch64"
    raise BuildError(
        f"no pinned ziglang wheel for {sys.platform} {machine}: add one to {PINS.name}"
    )


def zig_binary(cache: Path, pins: dict) -> Path:
    """zig from the pinned `ziglang` wheel for this machine, unpacked once."""
    zig = pins["ziglang"]
    wheel = zig["wheels"][_platform_tag()]
    folder = cache / f"zig-{zig['version']}-{wheel['sha256'][:12]}"
    binary = folder / "ziglang" / "zig"
    if (folder / ".complete").is_file():
        return binary
    path = _fetch(
        cache,
        wheel["filename"],
        wheel["sha256"],
        f"ziglang=={zig['version']}",
        "--only-binary",
        ":all:",
    )
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".zig-"))
    with zipfile.ZipFile(path) as whl:
        for info in whl.infolist():
            target = (tmp / info.filename).resolve()
            if not str(target).startswith(str(tmp.resolve()) + os.sep):
                raise BuildError(f"unsafe path in {wheel['filename']}: {info.filename!r}")
            whl.extract(info, tmp)
            mode = (info.external_attr >> 16) & 0o777
            if mode & 0o111:
                target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if not (tmp / "ziglang" / "zig").is_file():
        shutil.rmtree(tmp)
        raise BuildError(f"{wheel['filename']} holds no ziglang/zig")
    (tmp / ".complete").write_text("")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return binary


_WASM_MAGIC = b"\x00asm\x01\x00\x00\x00"
_SECTION_TABLE, _FUNCREF = 4, 0x70


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def drop_table_maximum(wasm: bytes) -> bytes:
    """The one post-link step: the function table loses its maximum, so the host can
    `table.grow` slots for its native functions (zig's linker has no --growable-table).
    Every other byte is copied through; any unexpected layout is a BuildError."""
    if not wasm.startswith(_WASM_MAGIC):
        raise BuildError("the linker did not produce a WebAssembly 1.0 module")
    out, pos, tables = bytearray(_WASM_MAGIC), len(_WASM_MAGIC), 0
    while pos < len(wasm):
        sid = wasm[pos]
        size, body = _read_uleb(wasm, pos + 1)
        payload = wasm[body : body + size]
        pos = body + size
        if sid == _SECTION_TABLE:
            tables += 1
            count, at = _read_uleb(payload, 0)
            if count != 1 or payload[at] != _FUNCREF or payload[at + 1] != 0x01:
                raise BuildError("expected one funcref table with a maximum")
            minimum, at = _read_uleb(payload, at + 2)
            _maximum, at = _read_uleb(payload, at)
            if at != len(payload):
                raise BuildError("unexpected bytes after the table entry")
            payload = bytes([1, _FUNCREF, 0x00]) + _uleb(minimum)
        out.append(sid)
        out += _uleb(len(payload)) + payload
    if tables != 1:
        raise BuildError(f"expected one table section, found {tables}")
    return bytes(out)


def build_key(pins: dict) -> str:
    """Everything that decides the output bytes (besides the pinned inputs' hashes)."""
    material = {
        "quickjs_ng": pins["quickjs_ng"],
        "ziglang": pins["ziglang"]["version"],
        "glue": hashlib.sha256(GLUE.read_bytes()).hexdigest(),
        "exports": exports(),
        "cflags": CFLAGS,
        "ldflags": LDFLAGS,
        "sources": ENGINE_SOURCES,
        "post_link": ["drop_table_maximum"],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def compile_engine(cache: Path, pins: dict, dest: Path) -> None:
    """One zig cc invocation; its compiler cache lives in `cache`, not in $HOME."""
    src = engine_sources(cache, pins)
    zig = zig_binary(cache, pins)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".glue-") as tmp:
        # The glue is copied next to nothing else, so its path in the build is fixed.
        glue = Path(tmp) / "host_glue.c"
        shutil.copyfile(GLUE, glue)
        cmd = [str(zig), "cc", *CFLAGS, f"-I{src}"]
        cmd += [f"-ffile-prefix-map={src}=quickjs", f"-ffile-prefix-map={tmp}=glue"]
        cmd += [str(src / s) for s in ENGINE_SOURCES] + [str(glue)]
        cmd += [*LDFLAGS, *(f"-Wl,--export={name}" for name in exports())]
        cmd += ["-o", str(dest)]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "ZIG_GLOBAL_CACHE_DIR": str(cache / "zig-cache"),
            "ZIG_LOCAL_CACHE_DIR": str(cache / "zig-cache"),
            "SOURCE_DATE_EPOCH": "0",
        }
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln] or ["no output"]
        raise BuildError(f"zig cc failed: {errors[0]!r}")
    dest.write_bytes(drop_table_maximum(dest.read_bytes()))


def build(out: Path = DEFAULT_OUT, cache: Path | None = None, *, pinned: bool = True) -> str:
    """Build (or take from the cache) the engine into `out`; returns its SHA-256."""
    pins = load_pins()
    cache = (cache or default_cache()).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / f"engine-{build_key(pins)}.wasm"
    if not cached.is_file():
        tmp = cache / f".{cached.name}.{os.getpid()}"
        compile_engine(cache, pins, tmp)
        tmp.replace(cached)
    digest = sha256_file(cached)
    if pinned and digest != pins["engine_sha256"]:
        raise BuildError(
            f"built engine has sha256 {digest}, pinned {pins['engine_sha256']} "
            "(an upgrade: build with --unpinned, then pin the new hash)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.copyfile(cached, tmp_out)
    tmp_out.replace(out)
    return digest


def default_cache() -> Path:
    """$PLIMSOLL_ENGINE_CACHE, else the checkout's .cache/engine-build."""
    env = os.environ.get("PLIMSOLL_ENGINE_CACHE")
    return Path(env) if env else HERE.parents[2] / ".cache" / "engine-build"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the sandbox's QuickJS-NG engine.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the .wasm goes")
    parser.add_argument("--cache", type=Path, default=None, help="downloads and compiler cache")
    parser.add_argument(
        "--unpinned", action="store_true", help="print the hash instead of checking it"
    )
    parser.add_argument(
        "--pin", action="store_true", help="build, then write the hash into pins.json (upgrades)"
    )
    args = parser.parse_args(argv)
    try:
        digest = build(args.out, args.cache, pinned=not (args.unpinned or args.pin))
        if args.pin:
            pins = load_pins()
            pins["engine_sha256"] = digest
            tmp = PINS.with_name(f".{PINS.name}.{os.getpid()}")
            tmp.write_text(json.dumps(pins, indent=2) + "\n", "utf-8")
            tmp.replace(PINS)
    except BuildError as exc:
        print(f"engine build: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"engine build: {exc.strerror or exc}: {exc.filename!r}", file=sys.stderr)
        return 1
    print(f"engine build: {args.out} sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
