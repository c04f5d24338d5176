#!/usr/bin/env python3
"""The layering of the source tree, as a test (docs/design.md, "The layering rule").

  check_layering.py [--self-test] ROOT

Fails, listing each offending include and the chain of project headers that led to it, when
  - horovodcpp/core includes a backend (backends/...), an MPI, NCCL, CUDA or LibTorch header,
    or the LibTorch front end (horovodcpp/torch);
  - timeline/ includes the core (horovodcpp/core) or the public API it implements
    (horovodcpp/include): the recorder reports through a callback and its own exception;
  - one backend includes the other (backends/mpi and backends/nccl), its headers or its library's.
Includes are followed through the project's own headers, so a core file that reaches <mpi.h>
through a header of another folder fails too. --self-test first checks, on a small tree written
to a temporary folder, that every rule catches what it should and nothing else.
"""
import os
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# Where quoted (and angle-bracket) includes of the project resolve, as in hvd_internal.
INCLUDE_ROOTS = (".", "horovodcpp", "horovodcpp/include")

MPI = ("MPI", re.compile(r"^(mpi\.h|mpi-ext\.h|mpi_portable_platform\.h|openmpi/|pmix\.h|pmix/)"))
NCCL = ("NCCL", re.compile(r"^(nccl\.h|nccl_net\.h|rccl)"))
CUDA = ("CUDA", re.compile(r"^(cuda[^/]*\.h|cuda/|cub/|thrust/|cublas|curand|cusparse|nvtx|driver_types\.h|"
                           r"vector_types\.h|device_launch_parameters\.h)"))
TORCH = ("LibTorch", re.compile(r"^(torch/|ATen/|c10/|caffe2/)"))


def in_repo(prefix, what):
    return (what, lambda path: path is not None and path.startswith(prefix))


# (layer folder, [(what it must not include, test on the spelled name), ...],
#                [(what it must not include, test on the resolved project path), ...])
RULES = [
    ("horovodcpp/core", [MPI, NCCL, CUDA, TORCH],
     [in_repo("backends/", "a backend"), in_repo("horovodcpp/torch/", "the LibTorch front end")]),
    ("timeline", [],
     [in_repo("horovodcpp/core/", "the core"), in_repo("horovodcpp/include/", "the core's public API")]),
    ("backends/mpi", [NCCL, CUDA], [in_repo("backends/nccl/", "the NCCL backend")]),
    ("backends/nccl", [MPI], [in_repo("backends/mpi/", "the MPI backend")]),
]


def includes_of(path):
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                out.append((m.group(1), m.group(2), number))
    return out


def resolve(root, including, kind, name):
    """The project file an include names (relative to root), or None for a system header."""
    candidates = [os.path.join(os.path.dirname(including), name)] if kind == '"' else []
    candidates += [os.path.join(r, name) for r in INCLUDE_ROOTS]
    for c in candidates:
        full = os.path.normpath(os.path.join(root, c))
        if os.path.isfile(full):
            return os.path.relpath(full, root)
    return None


def layer_files(root, folder):
    base = os.path.join(root, folder)
    for directory, _, names in os.walk(base):
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, name), root)


def violations(root):
    found = []
    for folder, by_name, by_path in RULES:
        for start in layer_files(root, folder):
            # Depth-first through project headers; each header once per starting file.
            seen = {start}
            stack = [(start, [start])]
            while stack:
                current, chain = stack.pop()
                for kind, name, line in includes_of(os.path.join(root, current)):
                    target = resolve(root, current, kind, name)
                    spelled = f"{kind}{name}{'>' if kind == '<' else kind}"
                    where = " -> ".join(chain) + f":{line} includes {spelled}"
                    for what, pattern in by_name:
                        if target is None and pattern.search(name):
                            found.append(f"{folder} must not include {what} headers: {where}")
                    for what, test in by_path:
                        if test(target):
                            found.append(f"{folder} must not include {what}: {where}")
                    if target is not None and target not in seen:
                        seen.add(target)
                        stack.append((target, chain + [target]))
    return sorted(set(found))


SELF_TEST_TREE = {
    "horovodcpp/core/good.cc": '#include "core/good.h"\n#include <vector>\n// #include <mpi.h> in a comment\n',
    "horovodcpp/core/good.h": '#include "timeline/recorder.h"\n',
    "horovodcpp/core/uses_mpi.cc": "#include <mpi.h>\n",
    "horovodcpp/core/uses_backend.cc": '#include "backends/mpi/world.h"\n',
    "horovodcpp/core/uses_torch.cc": "#include <torch/torch.h>\n",
    "horovodcpp/core/uses_front_end.cc": '#include "torch/adapter.h"\n',
    "horovodcpp/core/reaches_cuda.cc": '#include "timeline/gpu_events.h"\n',
    "horovodcpp/torch/adapter.h": "#include <torch/torch.h>\n",
    "timeline/recorder.h": "#include <string>\n",
    "timeline/gpu_events.h": '#include "timeline/recorder.h"\n#include <cuda_runtime.h>\n',
    "timeline/uses_core.cc": '#include "core/logging.h"\n',
    "timeline/uses_api.cc": "#include <horovodcpp/horovod.h>\n",
    "horovodcpp/core/logging.h": "",
    "horovodcpp/include/horovodcpp/horovod.h": "",
    "backends/mpi/world.h": "#include <mpi.h>\n",
    "backends/mpi/uses_nccl.cc": '#include "backends/nccl/ops.h"\n',
    "backends/nccl/ops.h": "#include <nccl.h>\n#include <cuda_runtime.h>\n",
    "backends/nccl/uses_mpi.cc": '#include "backends/nccl/ops.h"\n#include <mpi.h>\n',
    "backends/registry.cc": '#include "backends/mpi/world.h"\n#include "backends/nccl/ops.h"\n',
}

# The first file of each chain the self-test tree must be refused for, with the rule's words.
SELF_TEST_EXPECTED = [
    ("backends/mpi/uses_nccl.cc", "must not include NCCL headers"),
    ("backends/mpi/uses_nccl.cc", "must not include CUDA headers"),
    ("backends/mpi/uses_nccl.cc", "must not include the NCCL backend"),
    ("backends/nccl/uses_mpi.cc", "must not include MPI headers"),
    ("horovodcpp/core/reaches_cuda.cc", "must not include CUDA headers"),
    ("horovodcpp/core/uses_backend.cc", "must not include MPI headers"),
    ("horovodcpp/core/uses_backend.cc", "must not include a backend"),
    ("horovodcpp/core/uses_front_end.cc", "must not include LibTorch headers"),
    ("horovodcpp/core/uses_front_end.cc", "must not include the LibTorch front end"),
    ("horovodcpp/core/uses_mpi.cc", "must not include MPI headers"),
    ("horovodcpp/core/uses_torch.cc", "must not include LibTorch headers"),
    ("timeline/uses_api.cc", "must not include the core's public API"),
    ("timeline/uses_core.cc", "must not include the core"),
]


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for path, text in SELF_TEST_TREE.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        found = violations(root)
        got = sorted({(line.split(": ", 1)[1].split(" -> ")[0].split(":")[0],
                       line.split(": ", 1)[0].split(" ", 1)[1]) for line in found})
        expected = sorted(SELF_TEST_EXPECTED)
        if got != expected:
            print("layering: the self-test tree gave\n  " + "\n  ".join(found), file=sys.stderr)
            print("expected (file, rule):\n  " + "\n  ".join(map(str, expected)), file=sys.stderr)
            return False
    print(f"layering: self-test: each of the {len(RULES)} layers' rules refuses what it should ({len(found)} includes)")
    return True


def main(argv):
    args = [a for a in argv[1:] if a != "--self-test"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    if "--self-test" in argv and not self_test():
        return 1
    root = args[0]
    for folder, _, _ in RULES:
        if not os.path.isdir(os.path.join(root, folder)):
            print(f"layering: {folder} is not in {root}", file=sys.stderr)
            return 2
    found = violations(root)
    for line in found:
        print("layering: " + line)
    if found:
        print(f"layering: {len(found)} include(s) break the layering (docs/design.md, 'The layering rule')")
        return 1
    counted = sum(1 for folder, _, _ in RULES for _ in layer_files(root, folder))
    print(f"layering: {counted} files in {', '.join(f for f, _, _ in RULES)} keep to their layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
