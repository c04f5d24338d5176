"""Each rank's own stdout (or stderr), recovered from hvdrun's (mpirun --tag-output).

mpirun forwards a rank's output in chunks as it reads them and puts the tag ``[JOB,RANK]<stdout>:``
(``<stderr>`` on stderr) before every chunk and after every newline inside one. A chunk may end
in the middle of a line, and another rank's chunk may come next, so a long line (a result frame
of megabytes) arrives cut into pieces interleaved with other ranks' output, each piece tagged.
Joining each rank's pieces gives back exactly what that rank wrote. Text after a newline that
carries no tag is mpirun's own (or, on stderr, hvdrun's).
"""
import re

_LONGEST_TAG = 40  # '[' up to ':' with two large integers


class TaggedOutput:
    """Feed hvdrun's stdout (``stream`` b'stdout') or stderr (b'stderr') in; ``on_line(rank,
    line)`` gets each complete line of each rank (rank ``None`` for mpirun's and hvdrun's own
    lines), newline included; ``close()`` passes on what is left without one."""

    def __init__(self, on_line, stream=b'stdout'):
        self._on_line = on_line
        self._tag = re.compile(rb'\[\d+,(\d+)\]<' + stream + rb'>:')
        self._pending = b''
        self._rank = None   # whose text continues here: the last tag's rank, None after a newline
        self._lines = {}    # rank -> the pieces of its current line (joined once it is complete)

    def feed(self, data):
        data = self._pending + data
        self._pending = b''
        at = 0
        while True:
            tag = self._tag.search(data, at)
            end = tag.start() if tag else len(data)
            if not tag:
                # Keep a tag that the next read completes.
                cut = data.rfind(b'[', at)
                if cut >= 0 and len(data) - cut < _LONGEST_TAG and b'\n' not in data[cut:]:
                    self._pending, end = data[cut:], cut
            self._text(data[at:end])
            if not tag:
                return
            self._rank = int(tag.group(1))
            at = tag.end()

    def _text(self, text):
        while text:
            newline = text.find(b'\n')
            if newline < 0:
                self._lines.setdefault(self._rank, []).append(text)
                return
            line = self._lines.pop(self._rank, []) + [text[:newline + 1]]
            self._on_line(self._rank, b''.join(line))
            self._rank = None
            text = text[newline + 1:]

    def close(self):
        self._text(self._pending)
        self._pending = b''
        for rank in sorted(self._lines, key=lambda rank: -1 if rank is None else rank):
            self._on_line(rank, b''.join(self._lines[rank]))
        self._lines = {}
