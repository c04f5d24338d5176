"""Horovod's framework-independent helpers (horovod.common.util) that user code and Horovod's
tests import: ``env``, ``_cache``, the extension probes and the build queries.

Horovod asks each framework extension in a forked child; horovodcpp has one, horovod.torch, so
the probes import it here and return its own answers (one source of truth). Nothing is imported
until a probe runs: horovod.torch imports horovod.common, and a process that never asks need not
load PyTorch.
"""
import importlib
import os
import sysconfig
import traceback
from contextlib import contextmanager

# The frameworks Horovod probes, in its order; horovodcpp builds only horovod.torch.
EXTENSIONS = ['tensorflow', 'torch', 'mxnet']


def _cache(fn):
    """Memoizes ``fn`` by its arguments: it runs once per distinct call."""
    results = {}

    def cached(*args, **kwargs):
        key = (args, frozenset(kwargs.items()))
        if key not in results:
            results[key] = fn(*args, **kwargs)
        return results[key]

    cached.__name__, cached.__doc__ = fn.__name__, fn.__doc__
    return cached


@contextmanager
def env(**kwargs):
    """Sets environment variables for the ``with`` block (``None`` values are skipped) and puts
    each back afterwards, removing the ones that were unset before."""
    values = {name: value for name, value in kwargs.items() if value is not None}
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def get_ext_suffix():
    """The file suffix of this Python's extension modules (e.g. ``.cpython-311-x86_64-linux-gnu.so``)."""
    return sysconfig.get_config_var('EXT_SUFFIX') or sysconfig.get_config_var('SO') or '.so'


def get_extension_full_path(pkg_path, *args):
    """The path of extension ``args[-1]`` in folder ``args[:-1]`` next to the file ``pkg_path``."""
    assert args, 'name the extension'
    folder = os.path.join(os.path.dirname(pkg_path), *args[:-1])
    return os.path.join(folder, args[-1] + get_ext_suffix())


def check_extension(ext_name, ext_env_var, pkg_path, *args):
    """Raises ImportError when the extension file ``get_extension_full_path(pkg_path, *args)`` is
    missing, naming ``ext_name`` and the build switch ``ext_env_var``."""
    path = get_extension_full_path(pkg_path, *args)
    if not os.path.exists(path):
        raise ImportError('Extension {} has not been built: {} not found. If this is not expected, '
                          'rebuild with {}=1 and read the build output.'.format(ext_name, path, ext_env_var))


def _probe(ext_base_name, ask, what, verbose):
    """``ask(horovod.<ext_base_name>)``, or None when that module does not import. An error is
    an answer of None, as in Horovod, whose child process reports nothing else."""
    if verbose:
        print('Checking whether extension {} was {}.'.format(ext_base_name, what))
    try:
        result = ask(importlib.import_module('horovod.' + ext_base_name))
    except Exception:  # a framework that is missing or broken answers None
        if verbose:
            traceback.print_exc()
        result = None
    if verbose:
        print('Extension {} {} {}.'.format(ext_base_name, 'was' if result else 'was NOT', what))
    return result


def extension_available(ext_base_name, verbose=False):
    """Whether ``horovod.<ext_base_name>`` imports: True for 'torch' here, False for the others."""
    return _probe(ext_base_name, lambda ext: ext is not None, 'built', verbose) or False


@_cache
def gpu_available(ext_base_name, verbose=False):
    """Whether the framework sees a GPU (horovod.torch: ``torch.cuda.is_available()``)."""
    return _probe(ext_base_name, lambda ext: ext._check_has_gpu(), 'running with GPU', verbose) or False


def _built(query, what, verbose):
    # The first framework that imports answers, as in Horovod; None when none does.
    for ext_base_name in EXTENSIONS:
        result = _probe(ext_base_name, lambda ext: getattr(ext, query)(), what, verbose)
        if result is not None:
            return result
    return None


@_cache
def mpi_built(verbose=False):
    return _built('mpi_built', 'built with MPI', verbose)


@_cache
def gloo_built(verbose=False):
    return _built('gloo_built', 'built with Gloo', verbose)


@_cache
def nccl_built(verbose=False):
    """The NCCL version code (e.g. 22703) when built with NCCL, else 0."""
    return _built('nccl_built', 'built with NCCL', verbose)


@_cache
def ddl_built(verbose=False):
    return _built('ddl_built', 'built with DDL', verbose)


@_cache
def ccl_built(verbose=False):
    return _built('ccl_built', 'built with CCL', verbose)
