# The settings every crashlab debugger session starts with. crashlab passes each line as its own
# -iex option, so a setting an older debugger does not know costs one error line and nothing else
# (a command file, by contrast, stops at its first error: keep the portable ones first).
# By hand: cuda-gdb -nx -x gdb_scripts/crashlab-session.gdb -ex "target cudacore core.nvcudmp"
set pagination off
set height 0
set width 0
set confirm off
set print pretty off
set style enabled off
set debuginfod enabled off
