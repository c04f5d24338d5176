"""Thread helpers (Horovod's horovod.runner.util.threads)."""
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs ``target(*args)`` in a new thread (a daemon by default) and returns the started
    thread. With ``silent``, an exception in ``target`` ends the thread without a traceback."""
    def run():
        try:
            target(*args)
        except BaseException:
            if not silent:
                raise

    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
