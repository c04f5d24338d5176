"""The timeline with cycle marks, as Horovod's test_timeline.py reads it: while recording, rank 0's
file is valid JSON holding the tensor's row under its Horovod name, its NEGOTIATE_ALLREDUCE and
ALLREDUCE spans, and Horovod's CYCLE_START instants; each instant is where a CYCLE slice begins."""
import json
import time

import torch

import horovod.torch as hvd


def events_in(path):
    with open(path) as f:
        return json.load(f)


def tensor_row(events, name):
    """The pid of the row whose process_name is ``name``, or None."""
    rows = [e['pid'] for e in events if e['ph'] == 'M' and e['name'] == 'process_name' and e['args']['name'] == name]
    return rows[0] if rows else None


def horovods_events(events):
    """What Horovod's test looks for, each found in its proper form."""
    row = tensor_row(events, 'allreduce.test_allreduce')
    spans = {e['name'] for e in events if e['ph'] == 'X' and e['pid'] == row}
    instants = [e for e in events if e['name'] == 'CYCLE_START']
    return row is not None and {'NEGOTIATE_ALLREDUCE', 'ALLREDUCE'} <= spans and len(instants) > 0


def test_horovods_names_and_cycle_marks_while_recording(tmp_path_factory, rank):
    path = hvd.broadcast_object(str(tmp_path_factory.mktemp("marks") / "trace.json"), 0)
    hvd.start_timeline(path, mark_cycles=True)
    try:
        hvd.allreduce(torch.tensor([1, 2, 3], dtype=torch.float32), name='test_allreduce')
        time.sleep(0.1)  # and then one read, as Horovod's test does
        if rank == 0:
            events = events_in(path)
            assert horovods_events(events), events
            for e in events:
                if e['name'] == 'CYCLE_START':
                    assert (e['ph'], e['s'], e['pid'], e['tid']) == ('i', 'g', 1, 1), e
    finally:
        hvd.stop_timeline()
    hvd.barrier()
    if rank == 0:
        events = events_in(path)
        instants = sorted(e['ts'] for e in events if e['name'] == 'CYCLE_START')
        slices = sorted(e['ts'] for e in events if e['name'] == 'CYCLE' and e['ph'] == 'X' and e['pid'] == 1)
        assert instants and instants == slices
