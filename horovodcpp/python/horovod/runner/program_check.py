"""Whether the program the ranks run can run, checked before anything starts: hvdrun's
``--dry-run`` does not look at the program, and a launch that cannot find it fails only as a
RuntimeError after mpirun starts. Checked on the caller's host, as hvdrun checks it; every host
needs it at the same path.
"""
import os
import shutil


def require_runnable(what, program, env):
    """Raises ValueError naming ``program`` (``what``: the argument that gave it) unless it is
    an executable file: a path with a '/' as it is, a bare name through ``env``'s PATH."""
    if os.sep in program:
        if not os.path.exists(program):
            raise ValueError(f"horovod.run: {what} '{program}' does not exist")
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise ValueError(f"horovod.run: {what} '{program}' is not an executable file")
    elif shutil.which(program, path=env.get('PATH', os.defpath)) is None:
        raise ValueError(f"horovod.run: {what} '{program}' is not found in PATH")
