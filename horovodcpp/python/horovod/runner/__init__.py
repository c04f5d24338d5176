"""Helpers of Horovod's runner that user code and Horovod's test suite import. Launch jobs with
horovodcpp's ``hvdrun`` (or mpirun)."""
