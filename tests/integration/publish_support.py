"""Helpers for the publish tests: a real index (pypiserver), tiny wheels, a fault-injecting proxy.

The tiny wheels are valid (METADATA, WHEEL, RECORD with hashes) and carry the manylinux tag of
a tiny matrix, so preflight, `twine check --strict`, the upload and the index treat them like the
real ones; their `.verify.json` reports are written directly (they contain no ELF file to verify).
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER = "publisher"
PASSWORD = "s3cret-Pa55-for-tests"
FLOOR = "manylinux_2_34_x86_64"
VARIANTS = {"cpu": ("xfer-engine-cpu", "cpu"), "rocm": ("xfer-engine-rocm", "rocm")}
PYTHONS = ("3.10", "3.13")

TINY_MATRIX = """\
schema_version: 1
engine:
  source: engine
  import_name: xfer
  version: "{version}"
python: [{pythons}]
platform:
  floor: {floor}
variants:
{variants}
publish:
  tag_pattern: "v*"
  repository: "http://127.0.0.1:9/"
  prerelease: skip
"""


GUARD = b"import importlib.metadata\n\nimportlib.metadata.distribution(__name__)\n"
"""The variant guard verify's variant-conflict rule looks for."""
_NEEDED = {"xfer-engine-rocm": ("libamdhip64.so.6", "libc.so.6")}
"""What each tiny wheel's extension links: a GPU variant links its runtime."""


def write_matrix(directory: Path, *, version: str = "0.1.0", pythons: Sequence[str] = PYTHONS) -> Path:
    variants = "\n".join(
        f"  {name}:\n    distribution: {dist}\n    backend: {backend}"
        for name, (dist, backend) in VARIANTS.items()
    )
    text = TINY_MATRIX.format(
        version=version, pythons=", ".join(f'"{p}"' for p in pythons), floor=FLOOR, variants=variants
    )
    path = directory / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_name(
    distribution: str, version: str, python: str, platform: str = FLOOR, *, abi: str | None = None
) -> str:
    """The file name; `abi="abi3"` for the one wheel of a stable ABI (`cp312-abi3`)."""
    tag = "cp" + python.replace(".", "")
    return f"{distribution.replace('-', '_')}-{version}-{tag}-{abi or tag}-{platform}.whl"


def make_wheel(
    directory: Path,
    distribution: str,
    version: str,
    python: str,
    *,
    platform: str = FLOOR,
    payload: bytes = b"",
    filename: str | None = None,
    abi: str | None = None,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A tiny valid wheel; `filename` lets a test lie about what is inside."""
    from tests.hostile.builders import elf_bytes

    tag = "cp" + python.replace(".", "")
    abi_tag = abi or tag
    stem = distribution.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
        f"Summary: tiny test wheel\nDescription-Content-Type: text/markdown\n\n"
        f"# {distribution}\n\nA tiny wheel for the publish tests.\n"
    )
    wheel_meta = (
        "Wheel-Version: 1.0\nGenerator: publish-tests\nRoot-Is-Purelib: false\n"
        f"Tag: {tag}-{abi_tag}-{platform}\n"
    )
    files = {
        "xfer/__init__.py": GUARD + f"VARIANT = {distribution!r}\n".encode(),
        **({f"{dist_info}/PAYLOAD": payload} if payload else {}),
        "xfer/_core.so": elf_bytes(needed=_NEEDED.get(distribution, ("libc.so.6",)), soname=None),
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": wheel_meta.encode(),
        **(extra or {}),
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    path = directory / (filename or wheel_name(distribution, version, python, platform, abi=abi))
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return path


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def release_reports(wheelhouse: Path) -> dict[str, dict[str, Any]]:
    """Real release-mode verify reports (by file name) of every wheel in `wheelhouse/<variant>/`,
    verified as one release against a tiny matrix of their version and Pythons, as preflight
    verifies them again."""
    from release.config import matrix as matrix_mod
    from release.inspect.verify import verify_release
    from release.plan.steps import make_plan

    wheels = sorted(w for w in wheelhouse.glob("*/*.whl") if w.parent.name in VARIANTS)
    version = wheels[0].name.split("-")[1]
    pythons = sorted({f"{w.name.split('-')[2][2]}.{w.name.split('-')[2][3:]}" for w in wheels})
    with tempfile.TemporaryDirectory() as scratch:
        beside = wheelhouse.parent / "matrix.yaml"
        matrix = beside if beside.is_file() else write_matrix(Path(scratch), version=version, pythons=pythons)
        plan = make_plan(matrix_mod.load(matrix))
        mapped = [(w, plan.variants[w.parent.name]) for w in wheels]
        reports = verify_release(
            mapped, variants=plan.variants, matrix=None, release=True, expected_version=version
        )
    return {r.wheel.name: r.to_json() for r in reports}


def write_report(
    wheel: Path, variant: str, distribution: str, *, ok: bool = True, release: bool = True
) -> Path:
    """The release-mode verify report `release verify --release --write-reports` writes;
    `ok=False` makes its first rule fail, `release=False` makes it a non-release report."""
    report = release_reports(wheel.parent.parent).get(wheel.name)
    if report is None:  # a wheel outside the variants' directories: verified alone
        from release.inspect.verify import verify_wheel

        report = verify_wheel(wheel, release=True).to_json()
    _adjust(report, ok=ok, release=release)
    path = wheel.with_name(wheel.name + ".verify.json")
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _adjust(report: dict[str, Any], *, ok: bool, release: bool) -> None:
    if not ok:
        report["rules"][0]["status"] = "fail"
        report["ok"] = report["releasable"] = False
    if not release:
        report["release_mode"] = False


def make_wheelhouse(
    directory: Path, *, version: str = "0.1.0", pythons: Sequence[str] = PYTHONS, payload_size: int = 0
) -> Path:
    """`<directory>/<variant>/` with one wheel and report per variant x Python.

    `payload_size` adds that many incompressible bytes so a proxy can cut a file in the middle.
    """
    for variant, (dist, _backend) in VARIANTS.items():
        for py in pythons:
            payload = b"#" + os.urandom(payload_size // 2).hex().encode() + b"\n" if payload_size else b""
            make_wheel(directory / variant, dist, version, py, payload=payload)
    for name, report in release_reports(directory).items():
        wheel = next(directory.glob(f"*/{name}"))
        wheel.with_name(name + ".verify.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return directory


def expected_files(wheelhouse: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(wheelhouse.glob("*/*.whl"))}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    msg = f"nothing answered on 127.0.0.1:{port} within {timeout}s"
    raise TimeoutError(msg)


def complete_bodies(app: Callable[..., Any]) -> Callable[..., Any]:
    """WSGI middleware: refuse a request whose body ended before its Content-Length.

    pypiserver 2.4 (bottle 0.12) stores whatever part of a file arrived before the connection
    dropped; PyPI does not (it checks the digests twine sends). With this the test index behaves
    like PyPI; `IndexServer(strict=False)` keeps pypiserver's own behaviour.
    """

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            body = b""
            stream = environ["wsgi.input"]
            while len(body) < length:
                chunk = stream.read(min(length - len(body), 1 << 16))
                if not chunk:
                    start_response("400 Bad Request", [("Content-Type", "text/plain")])
                    return [b"incomplete request body"]
                body += chunk
            environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    return wrapped


def serve(argv: Sequence[str]) -> None:
    """`python -m tests.integration.publish_support serve ARGS`: pypiserver with complete_bodies."""
    from pypiserver import __main__ as pypiserver_main
    from pypiserver import bottle_wrapper

    original = bottle_wrapper.run

    def run(app: Any = None, **kwargs: Any) -> Any:
        return original(app=complete_bodies(app), **kwargs)

    bottle_wrapper.run = run
    pypiserver_main.main(["run", *argv])


@dataclass
class IndexServer:
    """pypiserver on 127.0.0.1 with upload authentication; restartable on the same dir and port.

    `strict` (the default) refuses truncated uploads like PyPI does (see `complete_bodies`).
    """

    workdir: Path
    port: int = field(default_factory=free_port)
    strict: bool = True
    proc: subprocess.Popen[bytes] | None = None

    @property
    def packages(self) -> Path:
        return self.workdir / "packages"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def simple(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"

    def start(self) -> None:
        from passlib.apache import HtpasswdFile

        self.packages.mkdir(parents=True, exist_ok=True)
        htpasswd = self.workdir / "htpasswd.txt"
        if not htpasswd.exists():
            ht = HtpasswdFile(str(htpasswd), new=True)
            ht.set_password(USER, PASSWORD)
            ht.save()
        log = (self.workdir / "server.log").open("ab")
        launcher = (
            ["-m", "tests.integration.publish_support", "serve"]
            if self.strict
            else ["-m", "pypiserver", "run"]
        )
        cmd = [
            sys.executable, *launcher,
            "-p", str(self.port), "-P", str(htpasswd), "-a", "update",
            "--host", "127.0.0.1", "--disable-fallback", str(self.packages),
        ]  # fmt: skip
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        )
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=ROOT
        )
        log.close()
        try:
            wait_for_port(self.port)
        except TimeoutError:
            self.stop()
            raise

    def kill(self) -> None:
        """Die without warning, like a server that crashed."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def files(self) -> dict[str, str]:
        """What the index holds on disk: file name -> sha256."""
        return {p.name: sha256_file(p) for p in sorted(self.packages.glob("*.whl"))}

    def listing(self) -> dict[str, str | None]:
        """What the index says over its simple API, for every project on it."""
        from release.publish import index

        projects = {p.name.split("-", 1)[0] for p in self.packages.glob("*.whl")}
        listed: dict[str, str | None] = {}
        for project in sorted(projects):
            listed.update(index.list_files(self.simple, project))
        return listed


@pytest.fixture
def index_server(tmp_path: Path) -> Iterator[IndexServer]:
    server = IndexServer(tmp_path / "index")
    server.workdir.mkdir()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.kill()


class FaultProxy:
    """A TCP proxy on 127.0.0.1 that breaks the first upload (a POST) it carries.

    `cut_after`: close both ends once that many request bytes went through (the server never
    gets the whole file). `drop_response`: forward the whole request, then close the client's
    end without the answer (the file landed, the client does not know).
    """

    def __init__(
        self, target_port: int, *, cut_after: int | None = None, drop_response: bool = False
    ) -> None:
        self.target_port = target_port
        self.cut_after = cut_after
        self.drop_response = drop_response
        self.faults = 0
        self._armed = True
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _take_fault(self, first: bytes) -> bool:
        with self._lock:
            if self._armed and first.startswith(b"POST"):
                self._armed = False
                self.faults += 1
                return True
            return False

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        first = client.recv(65536)
        faulty = self._take_fault(first)
        done = threading.Event()

        def pump_back() -> None:
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    if faulty and self.drop_response:
                        break
                    client.sendall(data)
            done.set()
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pump_back, daemon=True).start()
        sent = 0
        data = first
        with contextlib.suppress(OSError):
            while data:
                if faulty and self.cut_after is not None and sent + len(data) >= self.cut_after:
                    upstream.sendall(data[: max(self.cut_after - sent, 0)])
                    break
                upstream.sendall(data)
                sent += len(data)
                data = client.recv(65536)
        if faulty and self.cut_after is not None:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        else:
            done.wait(timeout=30)
        for sock in (client, upstream):
            sock.close()


Behaviour = Callable[[socket.socket, str], None]


class HostileIndex:
    """An HTTP server on 127.0.0.1 that answers each connection as a behaviour says.

    `behaviours` are used one per connection, in order, the last one for every later
    connection; each gets the socket and the request path. `connections` counts them.
    """

    def __init__(self, *behaviours: Behaviour) -> None:
        self.behaviours = list(behaviours)
        self.connections = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def simple(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def __enter__(self) -> HostileIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            behaviour = self.behaviours[min(self.connections, len(self.behaviours) - 1)]
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, behaviour), daemon=True).start()

    def _serve(self, conn: socket.socket, behaviour: Behaviour) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(30)
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ", 2)[1].decode("latin-1")
            if getattr(behaviour, "wants_request", False):
                behaviour(conn, path, request)  # type: ignore[call-arg]
            else:
                behaviour(conn, path)


def send(status: str, headers: dict[str, str], body: bytes) -> Behaviour:
    """A complete answer."""

    def behave(conn: socket.socket, path: str) -> None:
        head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": str(len(body)), **headers}.items())
        conn.sendall(f"HTTP/1.1 {status}\r\n{head}Connection: close\r\n\r\n".encode() + body)

    return behave


def raw(data: bytes) -> Behaviour:
    """These bytes, then close: a broken answer of any kind."""
    return lambda conn, path: conn.sendall(data)


def json_page(files: Sequence[str] = ()) -> Behaviour:
    """A valid PEP 691 page for whichever project is asked for."""

    def behave(conn: socket.socket, path: str) -> None:
        project = path.rstrip("/").rsplit("/", 1)[-1]
        page = {"meta": {"api-version": "1.1"}, "name": project, "files": [{"filename": f} for f in files]}
        send("200 OK", {"Content-Type": "application/vnd.pypi.simple.v1+json"}, json.dumps(page).encode())(
            conn, path
        )

    return behave


def _read_body(conn: socket.socket, request: bytes) -> bytes:
    """The rest of a request's body (per its Content-Length), so an answer is not a reset."""
    head, _, body = request.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return body


def echo_headers(listing: Behaviour | None = None) -> Behaviour:
    """An index that echoes every request header back in the reason of its error answer to an
    upload (a POST), the Authorization header included; a GET gets `listing` (default: nothing)."""
    pages = listing or json_page()

    def behave(conn: socket.socket, path: str, request: bytes) -> None:
        if not request.startswith(b"POST"):
            pages(conn, path)
            return
        _read_body(conn, request)
        headers = request.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]
        reason = "Bad Request, you sent " + "; ".join(h.decode("latin-1") for h in headers)
        body = f"headers: {reason}\n".encode()
        head = f"HTTP/1.1 400 {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        conn.sendall(head.encode("latin-1") + b"Connection: close\r\n\r\n" + body)

    behave.wants_request = True  # type: ignore[attr-defined]
    return behave


def files_without_hashes(served: dict[str, bytes], *, fetchable: bool = True) -> Behaviour:
    """A PEP 691 page listing `served`'s names with no sha256, and the file behind each link: the
    bytes given (the same wheel, or another file under the same name), or 404 when not
    `fetchable`."""

    def behave(conn: socket.socket, path: str) -> None:
        if path.startswith("/files/"):
            name = path.rsplit("/", 1)[-1]
            if fetchable and name in served:
                send("200 OK", {"Content-Type": "application/octet-stream"}, served[name])(conn, path)
            else:
                send("404 Not Found", {"Content-Type": "text/plain"}, b"gone")(conn, path)
            return
        project = path.rstrip("/").rsplit("/", 1)[-1]
        stem = project.replace("-", "_") + "-"
        files = [{"filename": n, "url": f"/files/{n}", "hashes": {}} for n in served if n.startswith(stem)]
        page = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
        send("200 OK", {"Content-Type": "application/vnd.pypi.simple.v1+json"}, json.dumps(page).encode())(
            conn, path
        )

    return behave


def routes(default: Behaviour, **by_prefix: Behaviour) -> Behaviour:
    """`by_prefix[p]` for a request path starting with `/p` (underscores for slashes), else `default`."""

    def behave(conn: socket.socket, path: str) -> None:
        for prefix, behaviour in by_prefix.items():
            if path.startswith("/" + prefix.replace("_", "/")):
                behaviour(conn, path)
                return
        default(conn, path)

    return behave


def drip_json(every: float = 0.5, limit: float = 60.0) -> Behaviour:
    """A JSON answer whose body arrives one byte every `every` seconds (no read is ever slow)."""
    return drip(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", every, limit
    )


def relay(base: str) -> Behaviour:
    """The real index's answer to the same GET (a listing that reflects uploads)."""

    def behave(conn: socket.socket, path: str) -> None:
        request = urllib.request.Request(base.rstrip("/") + path, headers={"Accept": "text/html"})
        try:
            with urllib.request.urlopen(request, timeout=20) as answer:
                status, body = f"{answer.status} OK", answer.read()
                kind = answer.headers.get("Content-Type", "text/html")
        except urllib.error.HTTPError as exc:
            status, body, kind = f"{exc.code} Not Found", b"", "text/html"
        send(status, {"Content-Type": kind}, body)(conn, path)

    return behave


def drip(head: bytes, every: float = 0.5, limit: float = 60.0) -> Behaviour:
    """Send `head`, then one byte every `every` seconds (for at most `limit` seconds)."""

    def behave(conn: socket.socket, path: str) -> None:
        conn.sendall(head)
        end = time.monotonic() + limit
        while time.monotonic() < end:
            conn.sendall(b"x")
            time.sleep(every)

    return behave


def flood(head: bytes, total: int) -> Behaviour:
    """Send `head`, then `total` bytes as fast as the client takes them (it may hang up)."""

    def behave(conn: socket.socket, path: str) -> None:
        conn.sendall(head)
        block = b"0" * (1 << 20)
        sent = 0
        while sent < total:
            conn.sendall(block)
            sent += len(block)

    return behave


# ------------------------------------------------------------------------------------------------
# A stand-in for the GitHub CLI: `gh release view/create/upload/download` over a directory


def fake_gh(argv: Sequence[str], root: Path) -> int:
    """`gh release …` against `root/<owner>/<name>/<tag>/` (the assets) and `root/calls.jsonl`.

    Like gh: `view` fails with "release not found"; `create` refuses an existing tag; `upload`
    refuses an existing asset name unless `--clobber` (which it honours, so a test can see it is
    never passed); asset digests are given unless FAKE_GH_NO_DIGEST is set (older GitHub).
    """
    with (root / "calls.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(list(argv)) + "\n")
    args = list(argv)
    if args[:1] != ["release"] or "--repo" not in args:
        print(f"unknown command: {' '.join(args)}", file=sys.stderr)
        return 2
    at = args.index("--repo")
    repo = args[at + 1]
    del args[at : at + 2]
    command, tag, rest = args[1], args[2], args[3:]
    release = root / repo / tag
    if command == "view":
        if not release.is_dir():
            print("release not found", file=sys.stderr)
            return 1
        assets = []
        for path in sorted(p for p in release.iterdir() if p.name != ".release.json"):
            asset: dict[str, Any] = {"name": path.name, "size": path.stat().st_size, "state": "uploaded"}
            if not os.environ.get("FAKE_GH_NO_DIGEST"):
                asset["digest"] = "sha256:" + sha256_file(path)
            assets.append(asset)
        print(json.dumps({"assets": assets}))
        return 0
    flags = {a for a in rest if a.startswith("--")}
    files = [Path(a) for a in rest if not a.startswith("--") and Path(a).is_file()]
    if command == "create":
        if release.is_dir():
            print(f"HTTP 422: a release with the same tag name already exists: {tag}", file=sys.stderr)
            return 1
        release.mkdir(parents=True)
        (release / ".release.json").write_text(json.dumps(sorted(flags)), encoding="utf-8")
        for f in files:
            shutil.copyfile(f, release / f.name)
        return 0
    if command == "upload":
        if not release.is_dir():
            print("release not found", file=sys.stderr)
            return 1
        taken = [f.name for f in files if (release / f.name).exists()]
        if taken and "--clobber" not in flags:
            print(f"asset under the same name already exists: {taken}", file=sys.stderr)
            return 1
        for f in files:
            shutil.copyfile(f, release / f.name)
        return 0
    if command == "download":
        pattern, target = rest[rest.index("--pattern") + 1], Path(rest[rest.index("--dir") + 1])
        assets = [p for p in release.iterdir() if p.name != ".release.json"]
        hits = [p for p in assets if fnmatch.fnmatch(p.name, pattern)]
        for p in hits:
            shutil.copyfile(p, target / p.name)
        return 0 if hits else 1
    print(f"unknown command: release {command}", file=sys.stderr)
    return 2


def write_fake_gh(directory: Path) -> tuple[Path, Path]:
    """An executable `gh` stand-in in `directory` and the root of the releases it keeps."""
    root = directory / "github"
    root.mkdir(parents=True, exist_ok=True)
    script = directory / "gh"
    script.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={shlex.quote(str(ROOT))}\n"
        f"exec {shlex.quote(sys.executable)} -m tests.integration.publish_support gh "
        f'{shlex.quote(str(root))} "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script, root


def gh_calls(root: Path) -> list[list[str]]:
    path = root / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_release(
    *args: str, matrix: Path, env: dict[str, str] | None = None, timeout: float = 120, debug: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python -m release --matrix M …` with the toolkit on the path and test credentials."""
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TWINE_", "PYPI_", "GITHUB_", "ACTIONS_"))
    }
    full_env.update({"TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD, "PYTHONPATH": str(ROOT)})
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "release", "--matrix", str(matrix), *(["--debug"] if debug else []), *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=timeout, check=False
    )


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    serve(sys.argv[2:])
if __name__ == "__main__" and sys.argv[1:2] == ["gh"]:
    sys.exit(fake_gh(sys.argv[3:], Path(sys.argv[2])))
