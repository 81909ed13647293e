"""ImageBuilder keeps the newest few older builds of an image repository, so that several
checkouts building different tags on one engine do not evict each other's images."""

from __future__ import annotations

from typing import Any

from harness.matrix import docker_images
from harness.matrix.docker_images import KEEP_OLDER_BUILDS, ImageBuilder


class _Image:
    def __init__(self, tag: str, created: str) -> None:
        self.tags = [tag]
        self.attrs = {"Created": created}


class _Images:
    def __init__(self, images: list[_Image]) -> None:
        self.images = images
        self.removed: list[str] = []

    def list(self, name: str) -> list[_Image]:
        return [i for i in self.images if i.tags[0].startswith(name + ":")]

    def remove(self, tag: str, noprune: bool = False) -> None:
        self.removed.append(tag)


class _Docker:
    def __init__(self, images: list[_Image]) -> None:
        self.images = _Images(images)


def test_only_builds_beyond_the_newest_older_ones_are_removed(monkeypatch: Any) -> None:
    monkeypatch.setattr(docker_images, "engine_home", lambda: None)
    images = [_Image(f"groupshift/gateway:v{i}", f"2026-11-28T10:{i:02d}:00Z") for i in range(8)]
    images.append(_Image("other/thing:v1", "2026-11-01T00:00:00Z"))
    docker = _Docker(images)
    ImageBuilder(docker)._drop_stale("groupshift/gateway:v5")
    kept_older = [f"groupshift/gateway:v{i}" for i in (7, 6, 4)][:KEEP_OLDER_BUILDS]
    removed = set(docker.images.removed)
    assert "groupshift/gateway:v5" not in removed
    assert not removed & set(kept_older)
    assert removed == {f"groupshift/gateway:v{i}" for i in range(8)} - {"groupshift/gateway:v5", *kept_older}
    assert "other/thing:v1" not in removed
