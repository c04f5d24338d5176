"""horovod.run's ``output_filename`` for a function: each rank's stdout and stderr in
``DIR/1/rank.N/stdout`` and ``.../stderr``, N zero-padded to the digits of the job's size, as
``mpirun --output-filename DIR`` (Open MPI 4.1) lays them out.

Written by the caller from the streams it already reads, not by mpirun: mpirun's files would hold
the result lines (result_frames.py) and its tags, where these hold exactly what each rank's
program wrote. The results travel on stdout so that they need nothing beyond mpirun across hosts;
so they are taken out here, as for the caller's own display. The files are on the caller's host.
"""
import os


class RankOutputFiles:
    def __init__(self, directory, size):
        """Creates the empty files of ranks 0 to ``size``-1, as mpirun does at launch."""
        self._directory = os.path.abspath(directory)
        self._digits = len(str(size))
        self._files = {}
        for rank in range(size):
            for stream in 'stdout', 'stderr':
                self._file(rank, stream)

    def _file(self, rank, stream):
        if (rank, stream) not in self._files:
            folder = os.path.join(self._directory, '1', f'rank.{rank:0{self._digits}d}')
            os.makedirs(folder, exist_ok=True)
            self._files[rank, stream] = open(os.path.join(folder, stream), 'wb')
        return self._files[rank, stream]

    def write(self, rank, stream, data):
        """Appends ``data`` (bytes) to rank ``rank``'s ``stream`` ('stdout' or 'stderr'); a rank
        beyond the first launch's size (an elastic job that grew) gets its files then."""
        if data:
            f = self._file(rank, stream)
            f.write(data)
            f.flush()  # readable while the job runs, as mpirun's are

    def close(self):
        for f in self._files.values():
            f.close()
