"""The incident window's default, alone in a module: every command's --incident-window option
shows it, and reading it must not import the grouping."""

#: Seconds after an incident's first failure in which another server's crash joins it. SGLang
#: writes GPU coredumps before it lets a faulting server die, waiting for them
#: SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS (60 s by default), and a decode server notices a
#: dead prefill server after SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE (2) missed heartbeats
#: SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL (5 s) apart (sglang/srt/environ.py, 0.5.23): a decode
#: crash caused by a prefill fault comes some 75 s after it. 120 s covers that with a margin,
#: and stays under the 300 s request-waiting and bootstrap timeouts, past which a crash is as
#: likely to be a new failure as a consequence. --incident-window changes it.
DEFAULT_WINDOW = 120.0
