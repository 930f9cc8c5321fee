"""Publish a PEP 825 variant set: its wheels and `{name}-{version}-variants.json`, to a
self-hosted index that takes them (PyPI rejects variant file names today: refused in one line).

The upload is the legacy upload API every self-hosted index speaks (a multipart POST per file,
`:action=file_upload`, with the file's sha256), idempotent like the per-name publish: a file the
index already holds with the same sha256 is skipped, with another sha256 it stops everything; a
listing without hashes is settled by fetching the file and hashing it, as on the twine path.
Every request goes through the one HTTP client (`release.publish.transport`): a deadline per
request (`--upload-timeout`, `--index-timeout`), redirects within the host only.
The wheels go first and `-variants.json` last, so an installer never reads a variants file
whose wheels are not there yet; the listing is read again at the end and must hold every file.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import secrets
import urllib.error
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release.errors import PublishError
from release.inspect.report import failure_summary
from release.inspect.verify import verify_release
from release.publish import index, transport
from release.table import printable
from release.variants.make import VariantSet, label_of
from release.variants.metadata import INDEX_SUFFIX, read_document
from release.wheel.files import file_sha256, not_regular, read_bounded, reason
from release.wheel.names import filename_stem, parse_variant_wheel_name

PYPI_HOSTS = ("pypi.org", "upload.pypi.org", "test.pypi.org", "files.pythonhosted.org")
UPLOAD_TIMEOUT = 300.0
MAX_VARIANTS_JSON = 16 << 20
"""The largest `-variants.json` read (one is a few KiB)."""


def pypi_refusal(repository: str) -> str | None:
    """The one line that refuses a variant upload to PyPI (or TestPyPI), else None."""
    host = (urllib.parse.urlsplit(repository).hostname or "").lower()
    if host in PYPI_HOSTS:
        return (
            f"{host} rejects PEP 825 variant wheel file names today: publish the variant set to a "
            "self-hosted index (--repository URL); the per-name distributions are what PyPI gets"
        )
    return None


@dataclass(frozen=True)
class VariantFile:
    path: Path
    sha256: str
    kind: str
    """`wheel` or `variants-json`."""


def collect(directory: Path, shared: VariantSet, version: str) -> list[VariantFile]:
    """The variant set of `version` in `directory`, checked: every wheel's label is in the
    `-variants.json`, every label there has a wheel, and the json is what installers read.
    Wheels first, the json last. `PublishError` lists every problem."""
    stem = filename_stem(shared.distribution)
    index_file = directory / f"{stem}-{version}{INDEX_SUFFIX}"
    wheels = sorted(directory.glob(f"{stem}-{version}-*.whl"))
    problems: list[str] = []
    if not index_file.is_file():
        problems.append(f"{index_file}: missing (run `release variants --version {version}`)")
    if not wheels:
        problems.append(f"{directory}: no variant wheels of {shared.distribution} {version}")
    labels_found: set[str] = set()
    for wheel in wheels:
        if why := not_regular(wheel):
            problems.append(f"{wheel}: {why}, not a regular file (refused)")
        try:
            labels_found.add(parse_variant_wheel_name(wheel).label)
        except ValueError as exc:
            problems.append(str(exc))
    if index_file.is_file():
        try:
            data = read_bounded(index_file, MAX_VARIANTS_JSON)
        except OSError as exc:
            data, problems = b"", [*problems, f"{index_file}: cannot read it ({reason(exc)})"]
        problems += [f"{index_file.name}: {p}" for p in read_document(data, label=None)]
        if not problems:
            listed = set(_labels(data))
            name = index_file.name
            problems += [f"{name} lists {x!r}, but no wheel has it" for x in sorted(listed - labels_found)]
            problems += [f"wheels labelled {x!r} are not in {name}" for x in sorted(labels_found - listed)]
    if problems:
        msg = "the variant set is not ready to publish:\n" + "\n".join(f"  - {p}" for p in problems)
        raise PublishError(msg)
    files = [VariantFile(w, file_sha256(w), "wheel") for w in wheels]
    return [*files, VariantFile(index_file, file_sha256(index_file), "variants-json")]


def _labels(data: bytes) -> list[str]:
    return list(json.loads(data)["variants"])


def reverify(files: Sequence[VariantFile], shared: VariantSet, matrix: str) -> None:
    """Verify the exact bytes about to be uploaded, each wheel against its variant."""
    wheels = [f.path for f in files if f.kind == "wheel"]
    mapped = [(w, shared.variant_for_label(label_of(w) or "")) for w in wheels]
    reports = verify_release(mapped, variants=shared.variants, matrix=matrix)
    failures = failure_summary(reports, "variant wheels")
    if failures:
        raise PublishError(failures)
    for report, file in zip(reports, (f for f in files if f.kind == "wheel"), strict=True):
        if report.sha256 != file.sha256:
            msg = f"{file.path.name} changed while it was verified: {file.sha256}, then {report.sha256}"
            raise PublishError(msg)


def _multipart(fields: Mapping[str, str], file: Path) -> tuple[bytes, str]:
    boundary = "----variant-upload-" + secrets.token_hex(12)
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="content"; filename="{file.name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + file.read_bytes()
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def upload_file(
    file: VariantFile, *, repository: str, project: str, version: str,
    username: str | None, password: str | None, timeout: float = UPLOAD_TIMEOUT,
) -> None:  # fmt: skip
    """One legacy-API upload through the one HTTP client (`release.publish.transport`): one
    deadline of `timeout` seconds for the whole request, the credentials sent to the
    repository's host only (no redirect carries them, none leaves the host). `PublishError`
    naming the file and the HTTP status when refused."""
    fields = {
        ":action": "file_upload",
        "protocol_version": "1",
        "metadata_version": "2.1",
        "name": project,
        "version": version,
        "filetype": "bdist_wheel" if file.kind == "wheel" else "variants_json",
        "pyversion": "cp3" if file.kind == "wheel" else "source",
        "sha256_digest": file.sha256,
        "md5_digest": hashlib.md5(file.path.read_bytes(), usedforsecurity=False).hexdigest(),
    }
    body, content_type = _multipart(fields, file.path)
    authorization = None
    if username or password:
        token = base64.b64encode(f"{username or ''}:{password or ''}".encode()).decode()
        authorization = f"Basic {token}"
    shown = index.redact_url(repository)
    deadline = transport.Deadline(timeout)
    try:
        with deadline:
            transport.post(
                repository, body, deadline, 1 << 16, headers={"Content-Type": content_type},
                authorization=authorization,
            )  # fmt: skip
    except urllib.error.HTTPError as exc:
        exc.close()
        reason = printable(index.redact_text(str(exc.reason)))[:80]
        msg = f"{file.path.name}: the index refused the upload (HTTP {exc.code} {reason})"
        raise PublishError(msg) from None
    except transport.TooLarge:
        msg = f"{file.path.name}: {shown} answered the upload with more than 64 KiB: not an index"
        raise PublishError(msg) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        expired = deadline.expired or isinstance(getattr(exc, "reason", exc), TimeoutError)
        why = f"no complete answer within {timeout:g}s" if expired else index.transport_reason(exc)
        msg = f"{file.path.name}: upload to {shown} failed ({why})"
        raise PublishError(msg) from None


def _confirmed(
    name: str, listed: Mapping[str, str | None], *, index_url: str, project: str, timeout: float
) -> str | None:
    """The sha256 the index holds for `name`: listed, or (listed without one) the file it serves
    fetched and hashed, since a name alone confirms nothing. None when it is not listed."""
    if name not in listed:
        return None
    digest = listed[name]
    if digest is not None:
        return digest
    return index.fetch_sha256(index_url, project, name, timeout=timeout)


def publish_variant_set(
    files: Sequence[VariantFile], *, project: str, version: str, repository: str, index_url: str,
    username: str | None, password: str | None, dry_run: bool = False, log: Callable[[str], None] = print,
    upload_timeout: float = UPLOAD_TIMEOUT, index_timeout: float = index.DEFAULT_TIMEOUT,
) -> dict[str, str]:  # fmt: skip
    """Upload what the index lacks, then check it serves every file with its sha256 (a listing
    without hashes: each file fetched and hashed); file -> outcome."""
    listed = index.list_files(index_url, project, timeout=index_timeout)
    outcomes: dict[str, str] = {}
    for file in files:
        name = file.path.name
        held = _confirmed(name, listed, index_url=index_url, project=project, timeout=index_timeout)
        if held is not None:
            if held != file.sha256:
                msg = f"{name} is on the index with sha256 {held}, not {file.sha256}: not replaced"
                raise PublishError(msg)
            outcomes[name] = "already there"
        elif dry_run:
            outcomes[name] = "would upload"
        else:
            upload_file(file, repository=repository, project=project, version=version,
                        username=username, password=password, timeout=upload_timeout)  # fmt: skip
            outcomes[name] = "uploaded"
        log(f"{outcomes[name]:>13}  {name}")
    if not dry_run:
        after = index.list_files(index_url, project, timeout=index_timeout)
        missing = [
            f.path.name for f in files
            if _confirmed(f.path.name, after, index_url=index_url, project=project, timeout=index_timeout)
            != f.sha256
        ]  # fmt: skip
        if missing:
            msg = f"the index does not serve {', '.join(missing)} with their sha256 after the upload"
            raise PublishError(msg)
    return outcomes
