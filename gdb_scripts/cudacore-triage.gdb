# The fixed look at a CUDA coredump that crashlab's debugger flow starts from; usable by hand:
#   cuda-gdb -nx -batch -ex "target cudacore core.nvcudmp" -x gdb_scripts/cudacore-triage.gdb
# (target first: -ex and -x run in the order given). The pexpect driver of crashlab/gdb/ that
# is to run these one at a time is not written yet (the cuda-gdb issue).
set pagination off
set width 0
set confirm off
info cuda devices
info cuda kernels
info cuda sms
info cuda warps
info cuda lanes
bt
x/20i $errorpc-0x80
x/8i $pc
info registers
info line *$errorpc
