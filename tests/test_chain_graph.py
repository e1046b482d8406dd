"""The admin's small graph of a chain (issue #30 item 1: "the admin draws the small
graph"): :mod:`django_durable_schedules.admin.chain_graph`."""

from __future__ import annotations

import re

import pytest

from django_durable_schedules.admin.chain_graph import (
    BOX_W,
    PER_LEVEL,
    Node,
    chain_graph,
    layout,
)
from django_durable_schedules.models import Schedule, ScheduleLink

pytestmark = pytest.mark.django_db


@pytest.mark.vendor_independent  # the SVG layout, pure
def test_layout_puts_levels_in_columns_left_to_right_and_counts_what_is_left_out() -> None:
    nodes = [Node("me", "me", "active", 0), Node("a", "a", "active", -1)]
    nodes += [Node(f"d{i}", f"down-{i}", "active", 1) for i in range(PER_LEVEL + 2)]
    links = {("a", "me")} | {("me", f"d{i}") for i in range(PER_LEVEL + 2)}
    graph = layout(nodes, links)
    x = {n.key: n.x for n in graph.nodes}
    assert x["a"] < x["me"] < x["d0"] and x["me"] - x["a"] > BOX_W
    assert len(graph.nodes) == 2 + PER_LEVEL
    assert [count for _, _, count in graph.more] == [2]
    assert len(graph.edges) == 1 + PER_LEVEL  # the edges to boxes not drawn are left out
    assert graph.width > 3 * BOX_W and graph.height > 0
    assert layout([], set()).nodes == []


@pytest.mark.vendor_independent  # the SVG layout, pure
def test_a_long_name_is_cut_in_its_box_and_whole_in_its_tooltip() -> None:
    node = Node(1, "a" * 40, "active", 0)
    assert len(node.label) == 22 and node.label.endswith("…")


def _schedule(name: str, kind: str = "interval") -> Schedule:
    fields = {"interval_seconds": 3600} if kind == "interval" else {}
    return Schedule.objects.create(name=name, callback="tests.noop", kind=kind, **fields)


def test_the_graph_of_a_middle_step_draws_its_chain_with_links_and_words() -> None:
    a, x = _schedule("import"), _schedule("prices")
    b, c = _schedule("aggregate", "after"), _schedule("mail", "after")
    for up, down in ((a, b), (x, b), (b, c)):
        ScheduleLink.objects.create(upstream=up, downstream=down)
    html = str(chain_graph(b, "admin").svg)
    assert html.count("<rect") == 4 and html.count('class="dds-chain-edge"') == 3
    assert f'href="/admin/durable_schedules/schedule/{c.pk}/change/"' in html
    assert 'class="dds-chain-node dds-chain-self"' in html
    assert (
        "The chain of aggregate: import then aggregate; prices then aggregate; aggregate then mail."
        in html
    )
    assert re.search(r'<svg [^>]*role="img"', html)
    lonely = _schedule("alone")
    assert str(chain_graph(lonely, "admin").svg) == ""


def test_the_graph_reads_a_fixed_number_of_statements(django_assert_max_num_queries) -> None:
    rows = [_schedule("root")] + [_schedule(f"step-{i}", "after") for i in range(5)]
    for up, down in zip(rows, rows[1:], strict=False):
        ScheduleLink.objects.create(upstream=up, downstream=down)
    # Three levels at most, both ways in one statement a level, and the names.
    with django_assert_max_num_queries(4):
        html = str(chain_graph(rows[3], "admin").svg)
    assert html.count("<rect") == 6  # root, step-0..step-4 around step-2: 3 up, 2 down


def test_the_change_page_lists_every_direct_link_even_those_the_graph_leaves_out(
    admin_client,
) -> None:
    from django_durable_schedules.admin import ScheduleAdmin  # noqa: F401 - registers

    root = _schedule("root")
    downs = [_schedule(f"report-{i:02d}", "after") for i in range(PER_LEVEL + 3)]
    for down in downs:
        ScheduleLink.objects.create(upstream=root, downstream=down)
    page = admin_client.get(f"/admin/durable_schedules/schedule/{root.pk}/change/")
    text = page.content.decode()
    assert page.status_code == 200 and "+3 more" in text
    assert all(f">{d.name}</a>" in text for d in downs)  # the "Before:" line names them all
    assert text.count("<rect") == 1 + PER_LEVEL
