"""core/box_issues.py on hand-made images: each kind of issue found where it is, none where boxes and detections
agree, crowd regions never an issue, one issue per object, ranked by quality; the planted-fault scorer of the
benchmark counts what it should."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.box_faults import plant_box_faults, score_box_issues
from shardflow.core.box_issues import Annotation, Detections, class_thresholds, find_box_issues, image_issues

pytestmark = pytest.mark.unit

A, B = [.1, .1, .4, .4], [.5, .5, .8, .8]  # two objects' boxes
THRESHOLDS = {1: .6, 2: .6}


def _given(boxes: list, classes: list, crowd: list | None = None) -> Annotation:
    return Annotation(np.array(boxes, float).reshape(-1, 4), np.array(classes), np.array(crowd or [0] * len(classes),
                                                                                          bool))


def _found(boxes: list, scores: list, classes: list) -> Detections:
    return Detections(np.array(boxes, float).reshape(-1, 4), np.array(scores, float), np.array(classes))


def _kinds(truth: Annotation, seen: Detections) -> list[tuple[str, int]]:
    return [(i.kind, i.box) for i in image_issues(0, truth, seen, THRESHOLDS)]


def test_boxes_the_detections_confirm_are_no_issue() -> None:
    assert _kinds(_given([A, B], [1, 2]), _found([A, B, [.1, .11, .41, .4]], [.9, .7, .3], [1, 2, 1])) == []


def test_a_confident_detection_on_no_box_is_an_overlooked_object_listed_once() -> None:
    seen = _found([A, B, [.51, .5, .8, .81], [.5, .5, .8, .8]], [.9, .8, .7, .4], [1, 2, 2, 2])
    issues = image_issues(0, _given([A], [1]), seen, THRESHOLDS)
    assert [(i.kind, i.suggested_class, i.suggested_box) for i in issues] == [("overlooked", 2, tuple(B))]
    assert issues[0].quality == pytest.approx(0.2)
    # below its class's threshold, a detection is not confident: no issue
    assert _kinds(_given([A], [1]), _found([A, B], [.9, .4], [1, 2])) == []


def test_a_box_another_class_covers_more_strongly_is_swapped() -> None:
    issues = image_issues(0, _given([A, B], [1, 1]), _found([A, B, B], [.9, .8, .1], [1, 2, 1]), THRESHOLDS)
    assert [(i.kind, i.box, i.given_class, i.suggested_class) for i in issues] == [("swapped", 1, 1, 2)]
    assert issues[0].quality == pytest.approx(1 - (.8 - .1))
    # its own class covering it as strongly: the model is unsure, not the label
    assert _kinds(_given([B], [1]), _found([B, B], [.8, .8], [2, 1])) == []


def test_a_small_object_drawn_over_a_larger_one_is_not_swapped_by_the_larger_one_s_detection() -> None:
    inner = [.12, .12, .38, .38]  # inside A: a detection of A's class covers both at IoU >= 0.5
    assert _kinds(_given([A, inner], [2, 1]), _found([A, inner], [.9, .2], [2, 1])) == []
    # without A's own box, the same detection is a rival of the inner box's class
    assert _kinds(_given([inner], [1]), _found([A], [.9], [2])) == [("swapped", 0)]


def test_a_box_beside_its_object_is_badly_located_with_the_object_s_box_suggested() -> None:
    shifted = [.25, .25, .55, .55]  # A moved by half its size: IoU 0.14 with A
    issues = image_issues(0, _given([shifted, B], [1, 2]), _found([A, B], [.9, .9], [1, 2]), THRESHOLDS)
    assert [(i.kind, i.box, i.suggested_box) for i in issues] == [("badly_located", 0, tuple(A))]
    assert 0.1 < issues[0].quality < 0.3
    # a box no detection of its class touches lies on background: listed, less likely than the one above
    background = image_issues(0, _given([[.0, .6, .2, .9], B], [1, 2]), _found([B], [.9], [2]), THRESHOLDS)
    assert [(i.kind, i.suggested_box, i.quality) for i in background] == [("badly_located", None, 0.75)]


def test_an_object_between_two_open_boxes_is_the_place_of_the_one_its_class_is_not_seen_on() -> None:
    shifted, beside = [.25, .25, .55, .55], [.0, .25, .3, .55]  # both overlap A: `beside` IoU 0.2, `shifted` 0.14
    weak = _found([A, beside], [.9, .45], [1, 1])  # A confidently; `beside` by its own class, unsure (under 0.8 × 0.6)
    issues = image_issues(0, _given([shifted, beside], [1, 1]), weak, THRESHOLDS)
    assert [(i.kind, i.box, i.suggested_box) for i in issues] == [("badly_located", 0, tuple(A))]
    # seen on neither, the orphan goes to the box it overlaps most
    issues = image_issues(0, _given([shifted, beside], [1, 1]), _found([A], [.9], [1]), THRESHOLDS)
    assert [(i.kind, i.box) for i in issues][:1] == [("badly_located", 1)]


def test_crowd_regions_are_never_issues_nor_reasons_for_one() -> None:
    crowd = _given([A, B], [1, 2], crowd=[1, 0])
    assert _kinds(crowd, _found([B], [.9], [2])) == []  # nothing found in the crowd region: fine
    assert _kinds(crowd, _found([A, B], [.9, .9], [2, 2])) == []  # another class in it: no swap
    assert _kinds(crowd, _found([[.15, .15, .35, .35], B], [.9, .9], [1, 2])) == []  # an object inside it: seen


def test_thresholds_are_each_class_s_mean_score_where_it_is_right_and_issues_rank_by_quality() -> None:
    given = [_given([A], [1]), _given([A, B], [1, 2]), _given([A], [1])]
    found = [_found([A], [.9], [1]), _found([A, B], [.7, .5], [1, 2]), _found([A, B], [.8, .95], [1, 2])]
    thresholds = class_thresholds(given, found)
    assert thresholds == pytest.approx({1: .8, 2: .5})
    issues = find_box_issues(given, found, thresholds)
    assert [(i.image, i.kind) for i in issues] == [(2, "overlooked")]
    more = find_box_issues(given + [_given([], [])], found + [_found([B], [.6], [2])], thresholds)
    assert [(i.image, round(i.quality, 2)) for i in more] == [(2, .05), (3, .4)]


def test_planted_faults_are_where_the_benchmark_says(tmp_path) -> None:
    rows = [[f"img/{i // 2}.jpg", "disc" if i % 3 else "square", "0.1", "0.2", "", "", "0.3", "0.5", "", ""]
            for i in range(40)]
    (tmp_path / "a.csv").write_text("".join(",".join(r) + "\n" for r in rows))
    faults = plant_box_faults(tmp_path / "a.csv", tmp_path / "b.csv", per_kind=3, seed=1)
    lines = [line.split(",") for line in (tmp_path / "b.csv").read_text().splitlines()]
    assert len(lines) == 37 and len({f["path"] for f in faults}) == 9
    for fault in faults:
        if fault["kind"] == "swapped":
            assert lines[fault["row"] - 1][1] == fault["given"] != fault["true"]
        if fault["kind"] == "shifted":
            assert [float(v) for v in lines[fault["row"] - 1][2:4]] == pytest.approx([0.2, 0.35])
    found = [{"path": f["path"], "row": f["row"], "issue": {"swapped": "swapped", "shifted": "badly_located"}[f["kind"]]}
             for f in faults if f["kind"] != "removed"]
    assert score_box_issues(found, faults) == {"considered": 6, "hits": 6, "found": 6, "planted": 9,
                                               "precision": 1.0, "recall": 0.6667}
