"""The small graph of a schedule's chain on its change page (issue #30 item 1: "the admin
draws the small graph"): the schedules it runs after, level by level to the left, those
that run after it to the right, each a box linking to its change page; drawn server-side
as SVG (no script, no CDN), in the admin's colours (light and dark).

:func:`chain_levels` reads the links (one statement per level, both ways at once, at most
:data:`DEPTH` levels) and the shown schedules (one more); :func:`layout` places them (pure); the
template ``durable_schedules/admin/fragments/chain_graph.html`` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
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


def _walk(start: Any) -> tuple[dict[Any, int], set[tuple[Any, Any]]]:
    """The schedules reached from ``start`` through its links, each with its level
    (negative: upstream, positive: downstream), at most :data:`DEPTH` levels each way, and
    the links seen as (upstream, downstream) pairs: one statement per level, both ways at
    once (one for a schedule with no chain)."""
    levels: dict[Any, int] = {start: 0}
    links: set[tuple[Any, Any]] = set()
    ups, downs = {start}, {start}
    for depth in range(1, DEPTH + 1):
        found = ScheduleLink.objects.filter(
            Q(downstream_id__in=ups) | Q(upstream_id__in=downs)
        ).values_list("upstream_id", "downstream_id")
        new_ups: set[Any] = set()
        new_downs: set[Any] = set()
        for up, down in found:
            if down in ups and levels.get(down, 1) <= 0:  # a link above a node above
                links.add((up, down))
                if up not in levels:
                    levels[up] = -depth
                    new_ups.add(up)
            if up in downs and levels.get(up, -1) >= 0:  # a link below a node below
                links.add((up, down))
                if down not in levels:
                    levels[down] = depth
                    new_downs.add(down)
        ups, downs = new_ups, new_downs
        if not ups and not downs:
            break
    return levels, links


def chain_levels(obj: Schedule) -> tuple[list[Node], set[tuple[Any, Any]]]:
    """The schedules around ``obj`` in its chain, each with its level, and the links among
    them: one statement per level (both ways at once; one for a schedule with no chain) and
    one for the names. Empty when ``obj`` runs after none and none after it."""
    level, links = _walk(obj.pk)
    if len(level) == 1:
        return [], set()
    rows = Schedule.objects.filter(pk__in=list(level)).values_list("pk", "name", "status")
    nodes = [Node(pk, name, status, level[pk]) for pk, name, status in rows]
    return nodes, links


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
