"""Ctrl-C typed at a terminal: runs hvdrun on a pseudo-terminal, waits until both ranks sleep,
writes ^C to the terminal, and prints hvdrun's exit code and the seconds it took to end.
Usage: ctrl_c_tty.py HVDRUN RANK_PROGRAM TAG"""
import os
import pty
import select
import signal
import sys
import time

LIMIT_S = 30  # for the ranks to start, and again for hvdrun to end after ^C

hvdrun, rank_program, tag = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(hvdrun, [hvdrun, "-np", "2", rank_program, "sleep", "60", tag])


def read_until(done, deadline):
    """Reads the terminal until done(text) ("done"), EOF ("eof") or the deadline ("timeout")."""
    text = b""
    while not done(text):
        left = deadline - time.time()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return "timeout"
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closes when hvdrun exits
            chunk = b""
        if not chunk:
            return "eof"
        text += chunk
    return "done"


def give_up(what):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    print(-1, "failed:", what)
    sys.exit(1)


started = read_until(lambda t: t.count(b"SLEEPING") >= 2, time.time() + LIMIT_S)
if started != "done":
    give_up("the ranks did not start (%s)" % started)
sent = time.time()
os.write(fd, b"\x03")
if read_until(lambda t: False, sent + LIMIT_S) != "eof":
    give_up("hvdrun did not end within %d s of ^C" % LIMIT_S)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), "%.1f" % (time.time() - sent))
