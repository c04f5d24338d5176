"""horovod.common.util, Horovod's helpers: env, _cache, the extension probes and build queries
(which must give horovod.torch's own answers), check_extension."""
import os
import re
import subprocess
import sys

import pytest
import torch

import horovod
import horovod.torch as hvd
from horovod.common import util


def test_env_sets_and_restores_set_and_unset_variables(monkeypatch):
    monkeypatch.setenv('HVD_UTIL_SET', 'before')
    monkeypatch.delenv('HVD_UTIL_UNSET', raising=False)
    monkeypatch.setenv('HVD_UTIL_NONE', 'kept')
    with util.env(HVD_UTIL_SET='inside', HVD_UTIL_UNSET='new', HVD_UTIL_NONE=None):
        assert os.environ['HVD_UTIL_SET'] == 'inside'
        assert os.environ['HVD_UTIL_UNSET'] == 'new'
        assert os.environ['HVD_UTIL_NONE'] == 'kept'  # None leaves a variable alone
    assert os.environ['HVD_UTIL_SET'] == 'before'
    assert 'HVD_UTIL_UNSET' not in os.environ
    assert os.environ['HVD_UTIL_NONE'] == 'kept'


def test_env_restores_after_an_exception(monkeypatch):
    monkeypatch.delenv('HVD_UTIL_UNSET', raising=False)
    with pytest.raises(KeyError):
        with util.env(HVD_UTIL_UNSET='new'):
            raise KeyError('boom')
    assert 'HVD_UTIL_UNSET' not in os.environ


def test_cache_computes_once_per_arguments():
    calls = []

    @util._cache
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4), square(3)] == [9, 9, 16, 9]
    assert calls == [3, 4]

    state = {'key': 1}

    @util._cache
    def read():
        return state['key']

    assert read() == 1
    state['key'] = 2
    assert read() == 1


@pytest.mark.parametrize('query', ['mpi_built', 'gloo_built', 'nccl_built', 'ddl_built', 'ccl_built'])
def test_build_queries_are_horovod_torch_answers(query):
    answer = getattr(util, query)()
    assert answer is not None  # None: no framework extension answered
    assert answer == getattr(hvd, query)()
    assert type(answer) is type(getattr(hvd, query)())


def test_mpi_built_as_horovods_test_common_asks():
    assert util.mpi_built() is True
    assert util.gloo_built() is False


def test_extension_available_for_this_build():
    assert util.extension_available('torch') is True
    assert util.extension_available('tensorflow') is False
    assert util.extension_available('mxnet') is False
    assert util.extension_available('no_such_framework') is False


def test_gpu_available_is_torchs_answer():
    assert util.gpu_available('torch') == torch.cuda.is_available()
    assert util.gpu_available('tensorflow') is False


def test_check_extension_finds_the_built_extension_and_names_a_missing_one():
    util.check_extension('horovod', 'HOROVOD_WITH_PYTORCH', horovod.__file__, '_horovodcpp')
    missing = util.get_extension_full_path(horovod.__file__, 'torch', 'mpi_lib_v2')
    assert missing == os.path.join(os.path.dirname(horovod.__file__), 'torch', 'mpi_lib_v2' + util.get_ext_suffix())
    with pytest.raises(ImportError, match='horovod.torch.*' + re.escape(missing) + '.*HOROVOD_WITH_PYTORCH'):
        util.check_extension('horovod.torch', 'HOROVOD_WITH_PYTORCH', horovod.__file__, 'torch', 'mpi_lib_v2')


def test_importing_util_loads_no_framework():
    # horovod.torch imports horovod.common: util must not import torch (or horovod.torch) itself.
    code = "import sys, horovod.common.util; print(sorted(m for m in ('torch', 'horovod.torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == '[]'
