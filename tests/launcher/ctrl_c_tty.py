"""Ctrl-C typed at a terminal: runs hvdrun on a pseudo-terminal, waits until both ranks sleep,
writes ^C to the terminal, and prints hvdrun's exit code and the seconds it took to end.
Usage: ctrl_c_tty.py HVDRUN RANK_PROGRAM TAG"""
import os
import pty
import sys
import time

hvdrun, rank_program, tag = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(hvdrun, [hvdrun, "-np", "2", rank_program, "sleep", "60", tag])
seen = b""
start = time.time()
while seen.count(b"SLEEPING") < 2 and time.time() - start < 30:
    seen += os.read(fd, 4096)
sent = time.time()
os.write(fd, b"\x03")
while True:
    try:
        if not os.read(fd, 4096):
            break
    except OSError:  # the terminal closes when hvdrun exits
        break
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), "%.1f" % (time.time() - sent))
