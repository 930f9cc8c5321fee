"""A small per-name release made here, for the variant-wheel and resolution tests: cpu, cuda and
rocm wheels of a stand-in engine for every matrix Python, with no GPU toolkit.

Each GPU extension is compiled with gcc and NEEDs a stand-in runtime built here with the real
soname (`libcudart.so.13`, `libamdhip64.so.7`); only the soname matters. METADATA says what the
wheel binds (`Requires-External`), as the toolkit's builds do.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from release.variants.resolution import LoopbackServer

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
TAG = "manylinux_2_28_x86_64"
GUARD = (
    b'"""Stand-in engine package."""\n'
    b"from importlib.metadata import distributions\n"
    b"_variants = [d for d in distributions() if (d.metadata.get('Name') or '').startswith('xfer-engine')]\n"
)
VARIANTS = {
    # name: (distribution, backend, toolkit, runtime soname or None, extra matrix keys)
    "cpu": ("xfer-engine-cpu", "cpu", None, None, {}),
    "cuda": ("xfer-engine", "cuda", "13.0", "libcudart.so.13", {"exclude": ["libcudart.so*", "libcuda.so*"]}),
    "rocm": (
        "xfer-engine-rocm",
        "rocm",
        "7.2",
        "libamdhip64.so.7",
        {"exclude": ["libamdhip64.so*", "libhsa-runtime64.so*"], "architectures": ["gfx942", "gfx950"]},
    ),
}


def _gcc(out: Path, source: Path, *flags: str) -> Path:
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-s", "-o", str(out), str(source), *flags], check=True)
    return out


def extensions(directory: Path) -> dict[str, Path]:
    """backend -> a stripped extension that NEEDs that backend's runtime soname (cpu: none)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the stand-in extensions")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "runtime.c").write_text("int standin_runtime(void) { return 0; }\n")
    (directory / "ext.c").write_text(
        "int standin_runtime(void);\nint PyInit__xfer(void) { return standin_runtime(); }\n"
    )
    (directory / "plain.c").write_text("int PyInit__xfer(void) { return 42; }\n")
    built = {"cpu": _gcc(directory / "_xfer_cpu.so", directory / "plain.c")}
    for name, (_dist, backend, _toolkit, soname, _extra) in VARIANTS.items():
        if soname is None:
            continue
        _gcc(directory / soname, directory / "runtime.c", f"-Wl,-soname,{soname}")
        built[backend] = _gcc(
            directory / f"_xfer_{name}.so",
            directory / "ext.c",
            "-Wl,--no-as-needed",
            f"-L{directory}",
            f"-l:{soname}",
        )
    return built


def write_binary_wheel(path: Path, files: dict[str, bytes]) -> Path:
    """A wheel with `files` (the .dist-info's METADATA and WHEEL among them) and its RECORD."""
    info = next(n.split("/")[0] for n in files if n.endswith(".dist-info/WHEEL"))
    rows = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    rows.append(f"{info}/RECORD,,")
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = (0o100755 if name.endswith(".so") else 0o100644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
        archive.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path


def per_name_wheel(
    wheelhouse: Path,
    variant: str,
    python: str,
    extension: Path,
    *,
    distribution: str | None = None,
    requires_external: str | None = "default",
    version: str = "0.1.0",
) -> Path:
    """One per-name wheel of `variant` for `python` in `wheelhouse/<variant>/` (overrides make a
    broken one: another distribution name, another runtime)."""
    dist, _backend, _toolkit, soname, _extra = VARIANTS[variant]
    dist = distribution or dist
    external = soname if requires_external == "default" else requires_external
    stem = dist.replace("-", "_")
    tag = "cp" + python.replace(".", "")
    info = f"{stem}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Python: >=3.10\n"
    if external:
        metadata += f"Requires-External: {external}\n"
    files = {
        "xfer/__init__.py": GUARD,
        f"xfer/_xfer.cpython-{tag[2:]}-x86_64-linux-gnu.so": extension.read_bytes(),
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-{TAG}\n"
        ).encode(),
    }
    return write_binary_wheel(wheelhouse / variant / f"{stem}-{version}-{tag}-{tag}-{TAG}.whl", files)


def write_matrix(directory: Path, pythons: tuple[str, ...] = PYTHONS, *, variant_wheels: bool = True) -> Path:
    variants = {}
    for name, (dist, backend, toolkit, _soname, extra) in VARIANTS.items():
        entry: dict[str, object] = {"distribution": dist, "backend": backend, **extra}
        if toolkit:
            entry["toolkit"] = toolkit
        variants[name] = entry
    data: dict[str, object] = {
        "schema_version": 1,
        "engine": {"source": str(ROOT / "engine"), "import_name": "xfer", "version": "0.1.0"},
        "python": list(pythons),
        "platform": {"floor": TAG},
        "variants": variants,
    }
    if variant_wheels:
        data["variant_wheels"] = {"distribution": "xfer-engine", "variants": list(VARIANTS)}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def make_release(directory: Path, pythons: tuple[str, ...] = PYTHONS) -> tuple[Path, Path]:
    """(matrix, wheelhouse) with a per-name wheel of every variant for every Python."""
    built = extensions(directory / "ext")
    wheelhouse = directory / "wheelhouse"
    for variant, (_dist, backend, *_rest) in VARIANTS.items():
        for python in pythons:
            per_name_wheel(wheelhouse, variant, python, built[backend])
    return write_matrix(directory, pythons), wheelhouse


class UploadIndex(LoopbackServer):
    """A self-hosted index on 127.0.0.1 for the publish test: it takes legacy-API uploads
    (multipart POST, `:action=file_upload`) of any file, wheels and `-variants.json` alike, and
    serves `<project>/` as a PEP 503 page listing every file with its sha256, as PEP 825 wants."""

    def __init__(self, root: Path) -> None:
        import email.parser
        import http.server

        from packaging.utils import canonicalize_name

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        uploads = self.uploads = []  # type: list[str]

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                super().__init__(*args, directory=str(root), **kwargs)

            def log_message(self, *args):  # type: ignore[no-untyped-def]
                pass

            def do_GET(self):  # type: ignore[no-untyped-def]
                project = root / self.path.strip("/")
                if self.path.endswith("/") and project.is_dir() and self.path.count("/") == 2:
                    digests = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in project.iterdir()}
                    links = "".join(f'<a href="{n}#sha256={d}">{n}</a>\n' for n, d in sorted(digests.items()))
                    body = f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                super().do_GET()

            def do_POST(self):  # type: ignore[no-untyped-def]
                length = int(self.headers["Content-Length"])
                raw = self.rfile.read(length)
                head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                message = email.parser.BytesParser().parsebytes(head + raw)
                fields = {}
                content = None
                for part in message.get_payload():
                    name = part.get_param("name", header="content-disposition")
                    if name == "content":
                        content = (part.get_filename(), part.get_payload(decode=True))
                    else:
                        fields[name] = part.get_payload(decode=True).decode()
                if fields.get(":action") != "file_upload" or content is None:
                    self.send_error(400, "not a file upload")
                    return
                filename, data = content
                if hashlib.sha256(data).hexdigest() != fields.get("sha256_digest"):
                    self.send_error(400, "sha256 does not match")
                    return
                target = root / canonicalize_name(fields["name"]) / filename
                if target.exists():
                    self.send_error(409, "file exists")
                    return
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                uploads.append(filename)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(Handler, name="upload-index")
