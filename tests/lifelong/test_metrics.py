import numpy as np
import pytest

from lifelong.metrics import (
    average_accuracy,
    backward_transfer,
    forgetting,
    forward_transfer,
    summary,
)

# Hand-computed example: 3 tasks.
R = np.array(
    [
        [80.0, 10.0, 5.0],
        [60.0, 90.0, 20.0],
        [50.0, 70.0, 85.0],
    ]
)
b = np.array([30.0, 8.0, 4.0])


def test_average_accuracy_is_mean_of_last_row():
    assert average_accuracy(R) == pytest.approx((50 + 70 + 85) / 3)


def test_bwt_by_hand():
    # ((50 - 80) + (70 - 90)) / 2 = -25
    assert backward_transfer(R) == pytest.approx(-25.0)


def test_fwt_by_hand():
    # ((R[0,1] - b1) + (R[1,2] - b2)) / 2 = ((10 - 8) + (20 - 4)) / 2 = 9
    assert forward_transfer(R, b) == pytest.approx(9.0)


def test_forgetting_uses_best_earlier_accuracy():
    # task 0: max(80, 60) - 50 = 30; task 1: max(90) - 70 = 20 -> 25
    assert forgetting(R) == pytest.approx(25.0)
    # a task that improved after it was learnt: its best earlier value counts
    R2 = np.array([[40.0, 0.0, 0.0], [70.0, 50.0, 0.0], [60.0, 50.0, 90.0]])
    assert forgetting(R2) == pytest.approx(((70 - 60) + (50 - 50)) / 2)


def test_forgetting_variants_agree_when_no_task_scores_before_training():
    # R[0, 1] = 10 < R[1, 1] = 90: the earlier row does not raise task 1's best
    assert forgetting(R, since="any") == forgetting(R, since="trained") == pytest.approx(25.0)


def test_forgetting_any_counts_rows_before_the_task_was_trained():
    # task 1 scores 70 before it is trained (shared labels), 50 once trained, 40 at the end
    shared = np.array([[80.0, 70.0, 5.0], [60.0, 50.0, 20.0], [55.0, 40.0, 85.0]])
    # since trained: task 0 max(80, 60) - 55 = 25; task 1 max(50) - 40 = 10 -> 17.5
    assert forgetting(shared) == forgetting(shared, since="trained") == pytest.approx(17.5)
    # Chaudhry et al. (2018), any earlier row: task 1 max(70, 50) - 40 = 30 -> (25 + 30) / 2
    assert forgetting(shared, since="any") == pytest.approx(27.5)
    metrics = summary(shared, np.zeros(3))
    assert metrics["forgetting"] == pytest.approx(17.5)
    assert metrics["forgetting_any"] == pytest.approx(27.5)
    with pytest.raises(ValueError, match="since must be 'trained' or 'any'"):
        forgetting(shared, since="ever")  # type: ignore[arg-type]


def test_single_task_has_no_transfer_to_measure():
    one = np.array([[75.0]])
    assert summary(one, np.array([10.0])) == {  # None: undefined, not "no forgetting"
        "pooled_accuracy": None,  # no test-set sizes given
        "average_accuracy": 75.0,
        "bwt": None,
        "fwt": None,
        "forgetting": None,
        "forgetting_any": None,
    }


def test_no_forgetting_when_accuracy_holds():
    flat = np.array([[90.0, 0.0], [90.0, 80.0]])
    assert backward_transfer(flat) == 0.0
    assert forgetting(flat) == 0.0


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="square"):
        average_accuracy(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="b must have shape"):
        forward_transfer(R, np.zeros(2))
