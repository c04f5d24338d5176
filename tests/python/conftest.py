"""Shared by the Python front end's tests (run under hvdrun or mpirun: every rank runs the same
tests in the same order, so each test's collectives line up across the ranks)."""
import pytest
import torch

import horovod.torch as hvd

hvd.init()
torch.set_num_threads(1)  # up to four ranks share the two cores of CI

# Every dtype the runtime carries, and the ones it can reduce in every op.
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
INTEGER_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def contribution(rank, n, dtype=torch.float64, product=False):
    """What rank ``rank`` contributes in the closed-form tests: small integers, exact in every
    dtype, whose sum, product, min and max over up to four ranks fit in int8."""
    i = torch.arange(n, dtype=torch.float64)
    if product:
        values = (rank % 3 + 1) * (i % 2 + 1)
    else:
        values = (rank + 1) * (i % 5 + 1)
    return values.to(dtype)


def reduced_over(op, parts):
    """The closed form of ``op`` over ``parts`` (float64 tensors, one per rank)."""
    stacked = torch.stack(parts)
    if op == hvd.Sum:
        return stacked.sum(0)
    if op == hvd.Average:
        return stacked.sum(0) / len(parts)
    if op == hvd.Min:
        return stacked.min(0).values
    if op == hvd.Max:
        return stacked.max(0).values
    return stacked.prod(0)


def over_ranks(op, n, size=None, product=False):
    """The closed form of ``op`` over every rank's contribution(), in float64."""
    size = hvd.size() if size is None else size
    return reduced_over(op, [contribution(r, n, product=product) for r in range(size)])


def as_float64(t):
    return t.to(torch.float64)


def truncated(t, dtype):
    """A float64 closed form as the runtime stores it in ``dtype``: integers truncate toward zero,
    but a value within a few ulps of an integer is that integer (Note [Integers scale by
    truncation] in horovodcpp/core/host_scale.cc)."""
    if dtype not in INTEGER_DTYPES:
        return t
    nearest = t.round()
    return torch.where((t - nearest).abs() <= 4 * 2.220446049250313e-16 * t.abs(), nearest, t.trunc())


@pytest.fixture
def rank():
    return hvd.rank()


@pytest.fixture
def size():
    return hvd.size()


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_ranks(n): skipped below n ranks")


def pytest_runtest_setup(item):
    for marker in item.iter_markers(name="needs_ranks"):
        if hvd.size() < marker.args[0]:
            pytest.skip("needs at least %d ranks" % marker.args[0])
