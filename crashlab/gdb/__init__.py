"""cuda-gdb (and GNU gdb) driven through pexpect: driver, output readers, triage flow, cross-check."""
