"""The real Docker engine the docker tests need (``scripts/docker-test-setup.sh`` starts one and
loads the offline test image): a test without it is skipped, with the reason; under
HORUS_REQUIRE_DOCKER=1 (CI, after the setup script) it fails instead, so a broken engine cannot
pass as a skip."""

from __future__ import annotations

import asyncio
import os

import aiodocker
import pytest

IMAGE = os.environ.get("HORUS_TEST_IMAGE", "horus-test-busybox:latest")


async def engine_problem() -> str | None:
    """Why the engine or the test image cannot be used, or None."""
    try:
        async with aiodocker.Docker() as docker:
            await asyncio.wait_for(docker.version(), timeout=5)
            await docker.images.inspect(IMAGE)
    except Exception as err:  # no socket, a bad DOCKER_HOST, no answer, no image
        return f"no usable Docker engine or test image {IMAGE} ({err}); run scripts/docker-test-setup.sh"
    return None


def require_engine() -> None:
    """Skip the calling test (or module fixture) without the engine; fail it under
    HORUS_REQUIRE_DOCKER=1."""
    problem = asyncio.run(engine_problem())
    if problem and os.environ.get("HORUS_REQUIRE_DOCKER"):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)
