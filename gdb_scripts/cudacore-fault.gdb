# What crashlab asks cuda-gdb about each fault it found natively, once the focus is on the
# faulting lane (crashlab sends: interpreter-exec mi "-cuda-focus-switch device D sm S warp W lane L").
# By hand: cuda-gdb ... -ex "target cudacore core.nvcudmp" -ex "cuda device 0 sm 124 warp 0 lane 0" \
#          -x gdb_scripts/cudacore-fault.gdb
# x/17i $errorpc-0x80: 8 instructions (16 bytes each) before the faulting one, it, 8 after;
# cuda-gdb marks them *> (errorPC), => (current PC) or *=> (both).
interpreter-exec mi "-cuda-focus-query kernel grid block thread device sm warp lane"
interpreter-exec mi "-cuda-info-lanes"
interpreter-exec mi "-data-evaluate-expression (long)$errorpc"
bt
x/17i $errorpc-0x80
info line *$errorpc
info registers
