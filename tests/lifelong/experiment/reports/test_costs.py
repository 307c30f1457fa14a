"""The cost view: derived costs equal measured ones, the Pareto front, the table and the plot."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lifelong
from lifelong import cost
from lifelong.experiment.reports.costs import (
    ENCODER_PARAMETERS,
    LABEL_SIZE,
    cost_source,
    cost_value,
    derived_cost,
    derived_passes,
    label_offsets,
    pareto_markdown,
    pareto_table,
)
from lifelong.experiment.rundir import find_runs, load_run
from tests.conftest import tiny_demo

COMMITTED = Path(__file__).parents[4] / "results" / "real_budget" / "text"


def measured_run(tmp_path, strategy, **changes):
    config = tiny_demo(
        tmp_path / strategy, strategy=strategy, train_size=16, test_size=8, **changes
    )
    return load_run(lifelong.run(config).run_dir)


@pytest.mark.parametrize(
    ("strategy", "changes"),
    [
        ("seq", {}),
        ("replay", {}),
        ("mbpa++", {}),  # K = 32 >= the memory's 32 examples: every one is retrieved
        ("oml-er", {"strategy_options": {"oml-er": {"support_batches": 2}}}),
    ],
)
def test_the_derivation_of_old_runs_equals_what_a_run_measures(tmp_path, strategy, changes):
    """The rows a config and report determine are the rows the meter counted."""
    record = measured_run(tmp_path, strategy, **changes)
    measured = record.metrics["cost"]
    passes = derived_passes(record)
    encoder = sum(measured[p]["forward_rows"] for p in cost.PHASES)
    trained = sum(measured[p]["backward_rows"] for p in cost.PHASES)
    head = sum(measured[p]["head_backward_rows"] for p in cost.PHASES)
    assert passes.forward + passes.trained == encoder
    assert passes.trained == trained
    assert passes.head_trained == head
    assert cost_source(record) == "measured"
    assert cost_value(record, "total_flops") == record.metrics["total_flops"]
    # without the measured keys the derived FLOPs bound the measured ones from above (rows are
    # taken at max_length tokens) and the memory is the stored examples at that length
    del record.metrics["total_flops"], record.metrics["memory_bytes"]
    derived = derived_cost(record)
    assert derived["source"] == "derived" and cost_source(record) == "derived"
    assert derived["total_flops"] >= measured["total_flops"]


def test_encoder_parameter_counts_are_the_loaded_encoders():
    from lifelong.encoders.factory import load_encoder

    encoder = load_encoder("tiny")
    non_embedding, _ = cost.non_embedding_parameters(encoder)
    total = sum(p.numel() for p in encoder.parameters())
    assert ENCODER_PARAMETERS["tiny"] == (non_embedding, total, encoder.hidden_size)


@pytest.mark.slow
def test_minilm_parameter_counts_are_the_loaded_encoders():
    from lifelong.encoders.factory import load_encoder

    encoder = load_encoder("minilm")
    non_embedding, _ = cost.non_embedding_parameters(encoder)
    total = sum(p.numel() for p in encoder.parameters())
    assert ENCODER_PARAMETERS["minilm"] == (non_embedding, total, encoder.hidden_size)


def test_every_committed_text_run_but_meta_mbpa_has_a_cost():
    records = find_runs(COMMITTED)
    unknown = {r.strategy for r in records if cost_source(r) is None}
    assert unknown <= {"meta-mbpa"}
    table = pareto_table(records)
    assert table.loc[table.configuration == "seq", "tflops"].iloc[0] > 0


def frame(rows):
    table = pd.DataFrame(rows)
    table["stream"], table["joint"] = "text", False
    return table


def test_the_front_holds_what_nothing_beats_at_no_more_cost():
    from lifelong.experiment.reports.costs import _front

    table = frame(
        [
            {"configuration": "cheap", "mean": 20.0, "tflops": 10.0},
            {"configuration": "dominated", "mean": 15.0, "tflops": 20.0},
            {"configuration": "better", "mean": 40.0, "tflops": 30.0},
            {"configuration": "tied", "mean": 40.0, "tflops": 30.0},
            {"configuration": "unknown", "mean": 90.0, "tflops": math.nan},
        ]
    )
    assert _front(table, "tflops") == [True, False, True, True, False]
    table.loc[2, "joint"] = True  # a joint learner: neither on the front nor beating anyone
    assert _front(table, "tflops") == [True, False, False, True, False]


def test_configurations_name_the_options_their_runs_differ_in(tmp_path):
    records = find_runs(COMMITTED, names={"replay_i_s0", "seq_i_s0"})
    assert set(pareto_table(records).configuration) == {"replay", "seq"}
    small = json.loads(json.dumps(records[0].config))
    small["strategy_options"][records[0].strategy] = {"replay_every": 10}
    other = type(records[0])(**{**records[0].__dict__, "config": small})
    labels = list(pareto_table([records[0], other]).configuration)
    assert len(labels) == 2 and any("replay_every=10," in label for label in labels)


def test_the_report_writes_the_pareto_table_and_plot(tmp_path):
    """On the committed runs of a few strategies (every run draws plots of its own: all of them
    would make this slow), the report carries the Pareto table and its figure; on all of them,
    dense replay is on the compute front and MbPA++ is not."""
    from lifelong.experiment.reports import write_report

    every = find_runs(COMMITTED)
    some = [r for r in every if r.strategy in {"seq", "mbpa++", "avalanche:replay", "ncm"}]
    written = write_report(some, tmp_path)
    text = written["report.md"].read_text()
    assert "## What each result cost" in text and "avalanche:replay" in text
    assert "plots/pareto_text.png" in written
    assert pareto_markdown(pareto_table(some)) in text
    table = pareto_table(every)
    front = set(table.loc[table.front_compute, "configuration"])
    assert "avalanche:replay" in front and "mbpa++" not in front


def test_labels_at_nearby_points_do_not_overlap():
    """Three strategies at one point (MTL, er, er at 200): the second label goes a line down,
    the third (a line up is MTL's) left of the point, or two lines down where the axes end
    there; a label with nothing near keeps its place right of and above its point."""
    at = np.array([[100.0, 200.0], [100.0, 199.0], [100.0, 198.0], [400.0, 50.0]])  # 72 dpi
    names = ["mtl (joint: not continual)", "er", "er (memory_size=200)", "ncm"]
    offsets = label_offsets(at, names, dpi=72.0)
    line = 1.2 * LABEL_SIZE
    assert offsets[0] == (4.0, 3.0, "left") and offsets[3] == (4.0, 3.0, "left")
    assert offsets[1] == (4.0, 3.0 - line, "left"), "a line down"
    assert offsets[2] == (-4.0, 3.0, "right"), "left of the point, on its own line"
    edged = label_offsets(at, names, dpi=72.0, left_edge=90.0)
    assert edged[2] == (4.0, 3.0 - 2 * line, "left"), "not past the axes: two lines down"

    def box(i: int, placed: list) -> tuple[float, float, float, float]:
        dx, dy, align = placed[i]
        width = 0.6 * LABEL_SIZE * len(names[i])
        x0 = at[i, 0] + dx if align == "left" else at[i, 0] + dx - width
        return x0, at[i, 1] + dy, x0 + width, at[i, 1] + dy + line

    for placed in (offsets, edged):
        for i in range(4):
            for j in range(i):
                a, b = box(i, placed), box(j, placed)
                assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (i, j)
