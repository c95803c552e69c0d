"""The wheel, installed into a fresh venv, generates the golden files from outside the checkout.

In a checkout the templates are found at the repository root; an installed specgen must
find the copies shipped inside the package. Only a real wheel in a real venv, run from a
directory that is not the checkout, proves that (and that the console script exists).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "golden"


def sh(*args: str | Path, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_installed_wheel_builds_the_golden_files_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    sh(sys.executable, "-m", "build", "--wheel", "--outdir", dist, ROOT, cwd=tmp_path)
    wheels = list(dist.glob("plimsoll_specgen-*.whl"))
    assert len(wheels) == 1, wheels
    import zipfile

    with zipfile.ZipFile(wheels[0]) as wheel:
        licences = {Path(n).name for n in wheel.namelist() if "/licenses/" in n}
    assert licences == {"LICENSE", "NOTICE"}, licences

    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    # The running interpreter's pip installs into the new venv; dependencies come from
    # the configured indexes (or pip's cache), the project itself only from the wheel.
    sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        wheels[0],
        cwd=tmp_path,
    )

    work = tmp_path / "elsewhere"
    work.mkdir()
    where = sh(
        python,
        "-c",
        "import specgen.render as r; print(r.__file__); print(*r.TEMPLATE_DIRS, sep='\\n')",
        cwd=work,
    ).stdout.splitlines()
    module = Path(where[0])
    assert module.is_relative_to(venv), module  # not the editable checkout
    assert (module.parent / "templates" / "preamble.js.j2").is_file()
    assert not any(Path(d).is_relative_to(ROOT) for d in where[1:])

    specgen = venv / "bin" / "specgen"
    assert specgen.is_file()
    cases = json.loads((GOLDEN / "cases.json").read_text())
    for name, case in cases.items():
        spec = work / f"{name}{Path(case['spec']).suffix}"
        shutil.copyfile(ROOT / case["spec"], spec)
        out = work / name
        args = [str(a) for a in case.get("args", [])]
        sh(specgen, "build", spec.name, "-o", name, *args, cwd=work)
        built = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
        want = {p.name: p.read_bytes() for p in sorted((GOLDEN / name).iterdir())}
        assert built == want, name
        checked = sh(specgen, "check", spec.name, str(GOLDEN / name), *args, cwd=work)
        assert checked.stderr == "specgen: up to date\n"
    # the grants schema is packaged, so `grant schema` works from an installed wheel
    printed = sh(specgen, "grant", "schema", cwd=work).stdout
    assert printed == (ROOT / "specgen" / "grants.schema.json").read_text(encoding="utf-8")
    # the engine was built into the wheel (hatch_build.py): the installed package holds
    # the pinned module and runs JavaScript with it, nothing of the checkout involved
    engine_check = (
        "import hashlib; from runtime import run_sandbox; from runtime.sandbox import engine_file;"
        " p = engine_file.wasm_path(); print(p);"
        " print(hashlib.sha256(p.read_bytes()).hexdigest() == engine_file.WASM_SHA256);"
        " print(run_sandbox('print(6 * 7)').stdout.strip())"
    )
    wasm, pinned, answer = sh(python, "-c", engine_check, cwd=work).stdout.splitlines()
    assert Path(wasm).is_relative_to(venv) and (pinned, answer) == ("True", "42")
