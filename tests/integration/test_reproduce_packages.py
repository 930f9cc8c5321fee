"""The packages of a real local build image, read as the manifest records them: one container
without network (`dpkg-query`), sorted `name=version`; an absent image is null with its reason."""

from __future__ import annotations

from release.reproduce import inputs

from .conftest import ROOT, LocalImages


def test_the_cpu_build_image_s_packages_are_recorded(local_images: LocalImages) -> None:
    tag = local_images.make(local_images.build_recipe("cpu"))
    variant = local_images.plan.variant("cpu")
    found = inputs.collect(ROOT, {"cpu": variant})
    image = found["variants"]["cpu"]["build_image"]  # type: ignore[index]
    assert image["local"] == tag
    packages = image["local_packages"]
    assert image["local_packages_reason"] is None, image
    assert packages == sorted(packages, key=lambda p: p.partition("=")[0])
    names = {p.partition("=")[0] for p in packages}
    assert "dpkg" in names and any(n.startswith("libc6:") or n == "libc6" for n in names), names
    assert len(str(image["local_packages_sha256"])) == 64
    absent = inputs.read_packages(local_images.engine, "localhost/xfer-test-no-such-image")
    assert absent.packages is None
    assert (
        absent.reason
        == f"image localhost/xfer-test-no-such-image is not in {local_images.engine}'s store here"
    )
