#!/bin/sh
# The MNIST example's checkpoint, saved at one world size, resumes at another (ctest's
# mnist_resume_* tests; the save is their fixture).
#
#   mnist_resume.sh save   NP MPIRUN "MPIRUN FLAGS" MNIST DATA DIR   # 1 epoch at NP, checkpoint in DIR
#   mnist_resume.sh resume NP MPIRUN "MPIRUN FLAGS" MNIST DATA DIR   # resume it at NP, test only
#
# A resume passes when rank 0 reports the saved epoch and world size, and the test accuracy over
# all held-out digits equals the one printed after the save (the same parameters score the same
# at any world size). Exit 77 (skipped) without the digits.
set -u
mode=$1 np=$2 mpirun=$3 flags=$4 mnist=$5 data=$6 dir=$7
if [ ! -f "$data/train-images-idx3-ubyte" ]; then
  echo "no digits in $data: run scripts/fetch-mnist.sh"
  exit 77
fi
mkdir -p "$dir"
checkpoint=$dir/mnist-resume.pt
# shellcheck disable=SC2086  # the flags are words
run() { $mpirun $flags -np "$np" "$mnist" --data "$data" --threads 1 --log-interval 1000 --epochs 1 "$@"; }
accuracy() { sed -n 's/^test: loss [0-9.]*, accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -n 1; }

case $mode in
  save)
    rm -f "$checkpoint" "$dir/save.log"
    run --checkpoint "$checkpoint" > "$dir/save.log" 2>&1
    rc=$?
    cat "$dir/save.log"
    [ $rc -eq 0 ] || { echo "FAIL: the np=$np run exited $rc"; exit 1; }
    [ -f "$checkpoint" ] || { echo "FAIL: no checkpoint at $checkpoint"; exit 1; }
    [ -n "$(accuracy "$dir/save.log")" ] || { echo "FAIL: no test accuracy printed"; exit 1; } ;;
  resume)
    log=$dir/resume-np$np.log
    run --resume "$checkpoint" --checkpoint '' > "$log" 2>&1
    rc=$?
    cat "$log"
    [ $rc -eq 0 ] || { echo "FAIL: the resume at np=$np exited $rc"; exit 1; }
    grep -q "^resumed $checkpoint: epoch 1 finished at [0-9]* ranks; continuing at $np\$" "$log" ||
      { echo "FAIL: no 'resumed ... epoch 1 ... continuing at $np' line"; exit 1; }
    saved=$(accuracy "$dir/save.log")
    resumed=$(accuracy "$log")
    echo "test accuracy after the save: $saved%, after resuming at np=$np: $resumed%"
    [ -n "$resumed" ] && [ "$saved" = "$resumed" ] || { echo "FAIL: the accuracies differ"; exit 1; } ;;
  *)
    echo "usage: mnist_resume.sh save|resume NP MPIRUN FLAGS MNIST DATA DIR"
    exit 2 ;;
esac
