"""Write operations and rows of the out-of-service tables: node_service and gpu_health (0008)."""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.model import NodeState
from master.store.dialect import upsert
from master.store.writer import Conn, WriteOp


@dataclass(frozen=True)
class NodeServiceRow:
    name: str
    mode: NodeState  # CORDONED or DRAINING
    drain_deadline: float | None


@dataclass(frozen=True)
class GpuHealthRow:
    uuid: str
    node: str
    quarantine: str  # why; "" = released
    ecc_seen: int


@dataclass(frozen=True)
class SetNodeServiceOp(WriteOp[None]):
    """Cordon or drain ``name`` (``mode`` None: back in service, the row goes)."""

    name: str
    mode: NodeState | None
    drain_deadline: float | None
    now: float

    def apply(self, conn: Conn) -> None:
        if self.mode is None:
            conn.execute("DELETE FROM node_service WHERE name = ?", (self.name,))
            return
        conn.execute(
            upsert("node_service", ("name", "mode", "drain_deadline", "updated_at"), ("name",)),
            (self.name, self.mode.value, self.drain_deadline, self.now),
        )


@dataclass(frozen=True)
class SetGpuHealthOp(WriteOp[None]):
    """Quarantine GPUs, or release them (``quarantine`` ""), remembering their ECC counts."""

    rows: tuple[GpuHealthRow, ...]
    now: float

    def apply(self, conn: Conn) -> None:
        conn.executemany(
            upsert("gpu_health", ("uuid", "node", "quarantine", "ecc_seen", "updated_at"), ("uuid",)),
            [(r.uuid, r.node, r.quarantine, r.ecc_seen, self.now) for r in self.rows],
        )


@dataclass(frozen=True)
class LoadServiceOp(WriteOp[tuple[list[NodeServiceRow], list[GpuHealthRow]]]):
    """Every cordoned/draining node and every GPU health row (read once at start, by the writer)."""

    def apply(self, conn: Conn) -> tuple[list[NodeServiceRow], list[GpuHealthRow]]:
        return _nodes(conn), _gpus(conn)


def _nodes(conn: Conn) -> list[NodeServiceRow]:
    return [
        NodeServiceRow(name, NodeState(mode), deadline)
        for name, mode, deadline in conn.execute("SELECT name, mode, drain_deadline FROM node_service")
    ]


def _gpus(conn: Conn) -> list[GpuHealthRow]:
    return [
        GpuHealthRow(uuid, node, why, int(ecc))
        for uuid, node, why, ecc in conn.execute("SELECT uuid, node, quarantine, ecc_seen FROM gpu_health")
    ]
