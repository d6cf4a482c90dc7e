# What crashlab asks cuda-gdb about each fault it found natively, once the focus is on the
# faulting lane (crashlab sends: interpreter-exec mi "-cuda-focus-switch device D sm S warp W lane L";
# cuda-gdb answers ^done,"CUDA focus unchanged.\n" when that lane already has the focus).
# By hand: cuda-gdb ... -ex "target cudacore core.nvcudmp" -ex "cuda device 0 sm 124 warp 0 lane 0" \
#          -x gdb_scripts/cudacore-fault.gdb -ex "x/17i \$errorpc-0x80"
# crashlab adds the disassembly itself, x/Ni over the addresses of the native SASS window
# (inspect --context N: N instructions of 16 bytes each side of the faulting one); cuda-gdb
# marks them *> (errorPC), => (current PC) or *=> (both).
# "info registers" gives R*, pc, UR* and UP*; "info registers system" the predicates P* and errorpc.
interpreter-exec mi "-cuda-focus-query kernel grid block thread device sm warp lane"
interpreter-exec mi "-cuda-info-lanes"
interpreter-exec mi "-data-evaluate-expression (long)$errorpc"
bt
info line *$errorpc
info registers
info registers system
