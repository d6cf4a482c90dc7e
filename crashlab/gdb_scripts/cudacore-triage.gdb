# What crashlab asks cuda-gdb right after opening a dump (inspect --debugger), one command at a
# time. Usable by hand, after the session settings and the dump:
#   cuda-gdb -nx -batch -x gdb_scripts/crashlab-session.gdb -ex "target cudacore core.nvcudmp" \
#            -x gdb_scripts/cudacore-triage.gdb
# The -cuda-* commands are cuda-gdb's MI commands, run from the CLI through interpreter-exec:
# their named fields survive the column changes of the CLI tables between releases.
interpreter-exec mi "-cuda-info-kernels"
interpreter-exec mi "-cuda-focus-query kernel grid block thread device sm warp lane"
