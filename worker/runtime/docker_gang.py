"""Where a multi-node gang's containers meet: the network a part joins, and on a named network the
rank-0 container's alias, which every part gets as its ``MASTER_ADDR``.

Pure functions of the launch request and the operator's ``--docker-gang-network``. On ``host`` the
master's rendezvous env is kept as it is (rank 0's node address, where the container's port is
open). On any other network nothing is published on the node's address, so the rank-0 container
joins it under :func:`horus_core.gang.rendezvous_alias` and every part's ``MASTER_ADDR`` and
``PET_MASTER_ADDR`` name that alias, which Docker's embedded DNS resolves on user-defined networks
(a bridge on one host, an attachable overlay across hosts).
"""

from __future__ import annotations

from typing import Any

from horus_core.gang import rendezvous_alias
from worker.runtime.base import LaunchRequest

HOST_NETWORK = "host"
# Gang networks that cannot work: parts on "none" reach nothing, and Docker's default "bridge"
# resolves no names (aliases need a user-defined network).
_NO_RENDEZVOUS = ("none", "bridge", "default")


def check_gang_network(name: str) -> None:
    """Raises ValueError naming the problem when parts of a gang could not meet on ``name``."""
    if not name or name.startswith("container:"):
        raise ValueError(f"gang network {name!r} would share a container's namespace")
    if name in _NO_RENDEZVOUS:
        raise ValueError(
            f"gang network {name!r} cannot resolve the rank-0 container's name: use host or a "
            "user-defined network (docker network create; an attachable overlay across hosts)"
        )


def is_gang_part(request: LaunchRequest) -> bool:
    """A part of a multi-node gang (the master's rendezvous env says so)."""
    nnodes = dict(request.env).get("PET_NNODES", "")
    return nnodes.isdigit() and int(nnodes) > 1


def uses_alias(request: LaunchRequest, gang_network: str) -> bool:
    """Whether this part meets the others by the rank-0 container's alias (a named gang network)."""
    return gang_network != HOST_NETWORK and is_gang_part(request)


def is_rank0(request: LaunchRequest) -> bool:
    return dict(request.env).get("PET_NODE_RANK", "") == "0"


def rendezvous_rewrites(request: LaunchRequest, gang_network: str) -> dict[str, str]:
    """The env a part's container gets instead of the master's rank-0 node address (none on host)."""
    if not uses_alias(request, gang_network):
        return {}
    alias = rendezvous_alias(request.key.job_id, request.key.attempt)
    return {"MASTER_ADDR": alias, "PET_MASTER_ADDR": alias}


def networking_config(request: LaunchRequest, gang_network: str) -> dict[str, Any] | None:
    """The create body's ``NetworkingConfig``: the rank-0 part's alias on the gang network, else none."""
    if not (uses_alias(request, gang_network) and is_rank0(request)):
        return None
    alias = rendezvous_alias(request.key.job_id, request.key.attempt)
    return {"EndpointsConfig": {gang_network: {"Aliases": [alias]}}}
