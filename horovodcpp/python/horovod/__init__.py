"""horovodcpp's Python package: Horovod 0.28's API on horovodcpp's runtime.

``import horovod.torch as hvd`` is the entry point; see README.md ("Python"). ``horovod.run``
launches a function on several processes (horovod/runner/__init__.py).
"""
from horovod.runner import run

# Horovod's version this package stands in for, marked as ours (PEP 440 local version).
__version__ = "0.28.1+horovodcpp"
