"""Where horovod.run finds hvdrun: the one built or installed with this package, else PATH.

The build writes ``_hvdrun_location.py`` next to this file (horovodcpp/python/CMakeLists.txt):
the build tree's hvdrun as an absolute path, an install's as a path relative to the installed
``horovod`` package, so a moved prefix still finds its own. The package's own hvdrun comes first
because the ranks' runtime and the launcher are meant to be of one build.
"""
import os
import shutil


def _own_hvdrun():
    try:
        from horovod.runner._hvdrun_location import HVDRUN
    except ImportError:  # the package's sources used without a build or install
        return None
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.normpath(os.path.join(package, HVDRUN))


def find_hvdrun():
    """The hvdrun to launch with; raises RuntimeError saying where it looked."""
    own = _own_hvdrun()
    if own and os.access(own, os.X_OK):
        return own
    on_path = shutil.which('hvdrun')
    if on_path:
        return on_path
    where = f"not at {own} (where this package's build or install puts it), " if own else ''
    raise RuntimeError(f'horovod.run: hvdrun not found: {where}not on PATH either; build the '
                       'hvdrun target (or install horovodcpp) or put hvdrun on PATH')
