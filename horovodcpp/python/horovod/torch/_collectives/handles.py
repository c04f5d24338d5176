"""The handles ``*_async`` calls return: what must stay alive until each operation ends, and how
``synchronize()`` turns it into the caller's result."""
from horovod import _horovodcpp as _C

# handle -> (what must stay alive until the operation ends, the result or a FromOutputs)
_handle_map = {}


class FromOutputs:
    """A result built from the outputs the runtime allocated, and the rows received from each
    rank (alltoall); subclasses say how."""
    __slots__ = ()

    def result(self, outputs, received):
        raise NotImplementedError


class _OneOutput(FromOutputs):
    __slots__ = ()

    def result(self, outputs, received):
        return outputs[0]


class _OutputList(FromOutputs):
    __slots__ = ()

    def result(self, outputs, received):
        return outputs


GATHERED = _OneOutput()          # one output tensor
GATHERED_LIST = _OutputList()    # a list of output tensors


def keep(handle, alive, result):
    """Records ``handle``: ``alive`` stays referenced until synchronize(); ``result`` is what it
    returns (a FromOutputs to build it from the runtime's outputs)."""
    _handle_map[handle] = (alive, result)


def forget_all():
    """shutdown(): the runtime has failed every pending operation."""
    _handle_map.clear()


def poll(handle):
    """True once the operation behind ``handle`` has finished (synchronize() will not block)."""
    return _C.poll(handle)


def synchronize(handle):
    """Waits for the operation behind ``handle`` (the GIL released) and returns its result:
    the output tensor, a tuple/list for grouped calls, (output, received_splits) for alltoall.
    Raises HorovodInternalError when the operation failed. None for an unknown handle."""
    entry = _handle_map.pop(handle, None)
    if entry is None:
        return None
    result = entry[1]
    if isinstance(result, FromOutputs):
        outputs, received = _C.wait_outputs(handle)
        return result.result(outputs, received)
    _C.wait(handle)
    return result
