"""A local read on a path where it has no value is a TranslationError naming the line of the
read (issue 10), never a silent 0; locals assigned on every path translate and agree with
Python."""

from __future__ import annotations

import numpy as np
import pytest

import skelpy as sk

A = np.array([-3.5, -1.0, 0.0, 0.5, 2.0, 7.25, 11.0], np.float32)
DEBUG = False


def one_path(x):
    if x > 0:
        y = x
    return y                                   # line read: 3 after the def


def only_in_else(x):
    if x > 0:
        pass
    else:
        y = -x
    return y * 2


def loop_may_not_run(x, n):
    for i in range(n):
        s = x * i
    return s


def loop_var_after_dynamic_loop(x, n):
    for i in range(n):
        x = x + i
    return x + i


def while_may_not_run(x):
    k = 0
    while k * k < x:
        k += 1
        last = k
    return last


def aug_of_unassigned(x):
    if x > 1:
        s = 1.0
    s += x
    return s


def in_expression(x):
    if x > 0:
        y = x
    return x if x < 0 else y + 1


def helper_one_path(v):
    if v > 2:
        w = v
    return w


def calls_bad_helper(x):
    return helper_one_path(x) + 1


@pytest.mark.parametrize("fn, name, offset", [
    (one_path, "y", 3), (only_in_else, "y", 5), (while_may_not_run, "last", 5),
    (aug_of_unassigned, "s", 3), (in_expression, "y", 3), (calls_bad_helper, "w", None),
])
def test_read_without_value_on_some_path_is_an_error(fn, name, offset):
    with pytest.raises(sk.TranslationError, match=f"'{name}' may be used before it is "
                                                  "assigned") as info:
        sk.Map(fn)(A)
    if offset is not None:
        line = fn.__code__.co_firstlineno + offset
        assert f"test_definite_assignment.py:{line} ({fn.__name__})" in str(info.value)
    else:
        line = helper_one_path.__code__.co_firstlineno + 3
        assert f"test_definite_assignment.py:{line} (helper_one_path)" in str(info.value)


@pytest.mark.parametrize("fn", [loop_may_not_run, loop_var_after_dynamic_loop])
def test_after_a_loop_that_may_not_run(fn):
    with pytest.raises(sk.TranslationError, match="may be used before it is assigned"):
        sk.Map(fn)(A, 3)


def both_paths(x):
    if x > 0:
        y = x * 2
    elif x < -1:
        y = -x
    else:
        y = x + 100
    return y


def constant_loop(x):
    for i in range(3):
        s = x * i
    return s + i


def while_true_break(x):
    k = 0
    while True:
        k += 1
        if k > 2:
            r = x + k
            break
    return r


def return_on_other_path(x):
    if x > 0:
        return x
    else:
        y = x * 3
    return y


def static_branch(x):
    if DEBUG:
        pass
    else:
        y = x - 1
    return y


def assigned_in_every_branch_of_loop(x):
    t = 0.0
    for i in range(4):
        if i % 2:
            u = x
        else:
            u = -x
        t += u
    return t + u


def continue_then_assign(x):
    acc = 0.0
    for i in range(5):
        v = x * i
        if i == 2:
            continue
        acc += v
    return acc + v


@pytest.mark.parametrize("fn", [both_paths, constant_loop, while_true_break,
                                return_on_other_path, static_branch,
                                assigned_in_every_branch_of_loop, continue_then_assign])
def test_assigned_on_every_path_agrees_with_python(fn):
    got = sk.Map(fn)(A).to_numpy()
    want = np.array([fn(x) for x in A], dtype=got.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
