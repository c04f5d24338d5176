"""The mpirun settings (Open MPI 4) that change how mpirun prints the ranks' output, which
horovod.run refuses for a function: it reads each rank's results from mpirun's ``--tag-output``
lines (tagged_output.py), and a timestamp or XML around each piece of a long result line, or
untagged lines, would corrupt them. A command (launch._run with ``command``) takes them.

Checked: the flags in ``mpi_args`` (one or two dashes, ``=VALUE`` too), ``--mca``/``-mca``/
``--gmca``/``-gmca`` parameters there, and OMPI_MCA_ variables in the ranks' environment. Not
checked: MCA parameter files (``--am``, ``--tune``, ``mca-params.conf``).
"""
import shlex

_FLAGS = {
    'timestamp-output': 'mpirun would put a timestamp before each piece of every line',
    'xml': 'mpirun would print the output as XML',
    'xml-file': 'mpirun would print the output as XML',
    'output-filename': "mpirun's files would hold the result lines too; pass output_filename, "
                       'which horovod.run writes without them',
}

# Refused at any value in mpi_args: orte_tag_output because a 0 there, after hvdrun's
# --tag-output, untags the lines.
_PARAMETERS = {
    'orte_timestamp_output': _FLAGS['timestamp-output'],
    'orte_xml_output': _FLAGS['xml'],
    'orte_xml_file': _FLAGS['xml'],
    'orte_tag_output': "hvdrun tags the output itself (--tag-output), which horovod.run relies on",
}

_MCA_FLAGS = ('-mca', '--mca', '-gmca', '--gmca')


def refuse_output_format(mpi_args, env):
    """Raises ValueError naming the first setting in ``mpi_args`` (a string, or None) or
    ``env`` (the ranks' environment, which mpirun reads too) that changes mpirun's output."""
    try:
        words = shlex.split(mpi_args or '')
    except ValueError:  # unbalanced quotes: hvdrun's own check says so
        words = []
    for at, word in enumerate(words):
        name = word.lstrip('-').split('=', 1)[0]
        if word.startswith('-') and name in _FLAGS:
            raise ValueError(f"horovod.run: mpi_args '{word}': {_FLAGS[name]}")
        if word in _MCA_FLAGS and at + 1 < len(words) and words[at + 1] in _PARAMETERS:
            raise ValueError(f"horovod.run: mpi_args '{word} {words[at + 1]}': "
                             f'{_PARAMETERS[words[at + 1]]}')
    for parameter, reason in _PARAMETERS.items():
        if parameter == 'orte_tag_output':  # the command line's --tag-output wins over it
            continue
        value = env.get('OMPI_MCA_' + parameter, '')
        # Open MPI reads a boolean (or, for xml_file, a path); false and empty ones change nothing.
        if value.strip().lower() not in ('', '0', 'false', 'no', 'f', 'n'):
            raise ValueError(f'horovod.run: OMPI_MCA_{parameter}={value} in the environment: {reason}')
