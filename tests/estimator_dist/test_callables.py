"""A user's function named as the user would find it (``estimator_dist.callables``)."""
import functools

from estimator_dist import callables

_HERE = __file__


def input_fn(batch_size=8):
    return batch_size


class Inputs:
    def input_fn(self):
        return 8

    def __call__(self):
        return 8


def _builder():
    def inner():
        return 8
    return inner


def _line(function):
    return function.__code__.co_firstlineno


def test_function_lambda_and_inner_function_named_with_file_and_line():
    inner = _builder()
    lam = lambda: 8  # noqa: E731 - a lambda is one of the cases.
    assert callables.describe(input_fn) == (
        f"{__name__}.input_fn ({_HERE}:{_line(input_fn)})")
    assert callables.describe(inner) == (
        f"{__name__}._builder.<locals>.inner ({_HERE}:{_line(inner)})")
    assert callables.describe(lam) == (
        f"{__name__}.test_function_lambda_and_inner_function_named_with_file_and_line."
        f"<locals>.<lambda> ({_HERE}:{_line(lam)})")


def test_partial_method_object_and_wrapper_named_by_their_code():
    method = Inputs.input_fn
    call = Inputs.__call__

    @functools.wraps(input_fn)
    def wrapper():
        return input_fn()

    assert callables.describe(functools.partial(input_fn, batch_size=4)) == (
        f"functools.partial({__name__}.input_fn) ({_HERE}:{_line(input_fn)})")
    assert callables.describe(Inputs().input_fn) == (
        f"{__name__}.Inputs.input_fn ({_HERE}:{_line(method)})")
    assert callables.describe(Inputs()) == (
        f"{__name__}.Inputs instance ({_HERE}:{_line(call)})")
    assert callables.describe(wrapper) == f"{__name__}.input_fn ({_HERE}:{_line(input_fn)})"
    assert callables.describe(len) == "builtins.len"


def test_closure_value_reads_a_free_variable():
    def wrap(input_fn):
        return lambda input_context: input_fn()

    assert callables.closure_value(wrap(input_fn), "input_fn") is input_fn
    assert callables.closure_value(wrap(input_fn), "mode") is None
    assert callables.closure_value(len, "input_fn") is None
