"""The exceptions Horovod's users catch, with Horovod's names and bases."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed (ranks disagreed about a tensor, a peer left, the runtime
    stopped). The message names the tensor, the ranks and what differed."""


class HostsUpdatedInterrupt(RuntimeError):
    """hvdrun announced a change of hosts: the job stops at this commit and is relaunched at the
    new size (horovod.torch.elastic.run turns it into the exit code hvdrun expects)."""

    def __init__(self, skip_sync=False):
        super().__init__("hvdrun announced a change of hosts")
        self.skip_sync = skip_sync
