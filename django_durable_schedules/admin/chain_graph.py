"""The small graph of a schedule's chain on its change page (issue #30 item 1: "the admin
draws the small graph"): the schedules it runs after, level by level to the left, those
that run after it to the right, each a box linking to its change page; drawn server-side
as SVG (no script, no CDN), in the admin's colours (light and dark).

:func:`chain_levels` reads the links (one statement per level, at most :data:`DEPTH`
each way) and the shown schedules (one more); :func:`layout` places them (pure); the
template ``durable_schedules/admin/fragments/chain_graph.html`` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe

from ..models import Schedule, ScheduleLink
from .display import render_fragment

#: Levels shown each way from the schedule.
DEPTH = 3
#: Schedules shown on one level (the rest said as "+N more").
PER_LEVEL = 6
#: Geometry (px): a box, the gaps between columns and rows, the margin.
BOX_W, BOX_H, COL_GAP, ROW_GAP, MARGIN = 170, 30, 46, 12, 6
#: Longest name drawn in a box (the full name is its tooltip and accessible name).
NAME_CHARS = 22


@dataclass
class Node:
    """A schedule drawn: its key, name, status, level (negative: upstream, 0: the one the
    page is about, positive: downstream) and, once laid out, its box's corner."""

    key: Any
    name: str
    status: str
    level: int
    url: str | None = None
    x: int = 0
    y: int = 0

    @property
    def label(self) -> str:
        """The name cut to :data:`NAME_CHARS` characters (an ellipsis when cut)."""
        return self.name if len(self.name) <= NAME_CHARS else self.name[: NAME_CHARS - 1] + "…"


@dataclass
class Graph:
    """What the template draws: boxes, edges (upstream box, downstream box) and the
    "+N more" notes per level, with the drawing's size."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[Node, Node]] = field(default_factory=list)
    more: list[tuple[int, int, int]] = field(default_factory=list)  # (x, y, count)
    width: int = 0
    height: int = 0
    #: Every schedule of the chain read, drawn or not (:func:`chain_graph`).
    everyone: list[Node] = field(default_factory=list)
    #: The drawing (:func:`chain_graph`), "" for a schedule with no chain.
    svg: SafeString = field(default_factory=lambda: mark_safe(""))


def _walk(start: Any, column: str, other: str) -> tuple[dict[Any, int], set[tuple[Any, Any]]]:
    """Levels reached from ``start`` following links from ``column`` to ``other``
    (upstream: ``downstream_id`` -> ``upstream_id``), at most :data:`DEPTH` of them, and
    the links seen as (upstream, downstream) pairs."""
    levels: dict[Any, int] = {}
    links: set[tuple[Any, Any]] = set()
    frontier = {start}
    for depth in range(1, DEPTH + 1):
        found = ScheduleLink.objects.filter(**{f"{column}__in": frontier}).values_list(
            column, other
        )
        frontier = set()
        for near, far in found:
            links.add((far, near) if column == "downstream_id" else (near, far))
            if far not in levels and far != start:
                levels[far] = depth
                frontier.add(far)
        if not frontier:
            break
    return levels, links


def chain_levels(obj: Schedule) -> tuple[list[Node], set[tuple[Any, Any]]]:
    """The schedules around ``obj`` in its chain, each with its level, and the links among
    them: 2 statements per level each way at most, and one for the names. Empty when
    ``obj`` runs after none and none after it."""
    ups, up_links = _walk(obj.pk, "downstream_id", "upstream_id")
    downs, down_links = _walk(obj.pk, "upstream_id", "downstream_id")
    if not ups and not downs:
        return [], set()
    level = {**{k: -v for k, v in ups.items()}, **downs, obj.pk: 0}
    rows = Schedule.objects.filter(pk__in=list(level)).values_list("pk", "name", "status")
    nodes = [Node(pk, name, status, level[pk]) for pk, name, status in rows]
    return nodes, up_links | down_links


def layout(nodes: list[Node], links: set[tuple[Any, Any]]) -> Graph:
    """Place ``nodes`` in columns by level, left to right, each column in name order, at
    most :data:`PER_LEVEL` boxes (the rest counted in ``Graph.more``); the edges of
    ``links`` between boxes drawn. Pure."""
    graph = Graph()
    if not nodes:
        return graph
    low = min(n.level for n in nodes)
    columns: dict[int, list[Node]] = {}
    for node in sorted(nodes, key=lambda n: (n.level, n.level != 0, n.name)):
        columns.setdefault(node.level, []).append(node)
    rows = 1
    for level, column in sorted(columns.items()):
        x = MARGIN + (level - low) * (BOX_W + COL_GAP)
        for row, node in enumerate(column[:PER_LEVEL]):
            node.x, node.y = x, MARGIN + row * (BOX_H + ROW_GAP)
            graph.nodes.append(node)
        shown = min(len(column), PER_LEVEL)
        if len(column) > PER_LEVEL:
            graph.more.append((x, MARGIN + shown * (BOX_H + ROW_GAP) + 14, len(column) - shown))
        rows = max(rows, shown + (1 if len(column) > PER_LEVEL else 0))
    placed = {n.key: n for n in graph.nodes}
    graph.edges = sorted(
        ((placed[up], placed[down]) for up, down in links if up in placed and down in placed),
        key=lambda e: (e[0].level, e[0].name, e[1].name),
    )
    graph.width = 2 * MARGIN + (max(columns) - low + 1) * (BOX_W + COL_GAP) - COL_GAP
    graph.height = 2 * MARGIN + rows * (BOX_H + ROW_GAP) - ROW_GAP
    return graph


def chain_graph(obj: Schedule, site_name: str) -> Graph:
    """The graph of ``obj``'s chain (see the module), laid out, each node with the URL of
    its change page on the site ``site_name`` (None where the site has none), and its
    drawing (``Graph.svg``, "" when it has no chain)."""
    nodes, links = chain_levels(obj)
    if not nodes:
        return Graph()
    for node in nodes:
        try:
            node.url = reverse(
                "admin:durable_schedules_schedule_change", args=[node.key], current_app=site_name
            )
        except NoReverseMatch:
            node.url = None
    graph = layout(nodes, links)
    graph.everyone = nodes
    words = "; ".join(f"{up.name} then {down.name}" for up, down in graph.edges)
    graph.svg = render_fragment(
        "chain_graph",
        {
            "graph": graph,
            "box_w": BOX_W,
            "box_h": BOX_H,
            "half": BOX_H // 2,
            "words": f"The chain of {obj.name}: {words}.",
        },
    )
    return graph
