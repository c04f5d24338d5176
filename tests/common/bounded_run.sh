#!/usr/bin/env bash
# ctest's runner for a multi-rank job that has no script of its own:
#   bounded_run.sh SECONDS COMMAND [ARGS...]
# Runs COMMAND under bounded_job (bounded_job.sh) with a tag of its own, and exits with its status:
# 137 after describing the job's ranks (threads, kernel waits, stacks) when it did not end within
# SECONDS. ctest's TIMEOUT stays above SECONDS (the description's time) as the last resort; alone
# it kills the job without a word of where the ranks were.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/bounded_job.sh"
seconds=$1
shift
# This shell's pid and start time: unique among the jobs running at once.
tag="HVD_BOUNDED_RUN=$$.$(date +%s%N)"
bounded_job "$seconds" "$tag" env "$tag" "$@"
