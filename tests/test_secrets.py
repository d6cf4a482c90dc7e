"""No secret from a launch line, an environment or a log reaches anything crashlab writes.

The rules of crashlab/privacy/redact.py one by one (what they mask and what they must keep), a
hang guard on hostile lines, then the real ``crashlab serve`` around the stand-in SGLang server
with a secret planted in every channel, and the real ``crashlab replay`` reading a fault line
that holds secrets.
"""

from __future__ import annotations

import json
import time

import pytest

from crashlab.privacy.redact import MASK, PLAIN, Redactor
from crashlab.replay.oracle import LogWatch
from tests.conftest import run_cli
from tests.replay_support import FAST_WATCH, FIXTURES, standin
from tests.serve_harness import FAST, Serve, environment, free_port, sglang, survivors

# -- the rules -------------------------------------------------------------------------------

@pytest.mark.parametrize("line,masked", [
    ("server_args=ServerArgs(model_path='m', api_key='sk-abc', admin_api_key=None, hf_token=\"x1\")",
     "server_args=ServerArgs(model_path='m', api_key='***', admin_api_key=None, hf_token=\"***\")"),
    ('{"api_key": "s3cr3t", "token": null, "n": 1}', '{"api_key": "***", "token": null, "n": 1}'),
    ("{'db_password': 'pw', 'AWS_SECRET_ACCESS_KEY': 'x'}", "{'db_password': '***', 'AWS_SECRET_ACCESS_KEY': '***'}"),
    ("launch: python -m sglang.launch_server --api-key abc --port 30000",
     "launch: python -m sglang.launch_server --api-key *** --port 30000"),
    ("argv --admin-api-key=abc", "argv --admin-api-key=***"),
    ("X-Api-Key: abc123 next", "X-Api-Key: *** next"),
    ("apiKey=abc&model=m", "apiKey=***&model=m"),
    ("password = 'unclosed to the end", "password = '***"),
    ("headers={'Authorization': 'Bearer abc.def-ghi'}", "headers={'Authorization': 'Bearer ***'}"),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
    ("curl -H bearer abcdefgh12345678", "curl -H bearer ***"),
    ("GET https://alice:pw@hub.example/m and redis://tok@cache:6379", "GET https://alice:***@hub.example/m and redis://***@cache:6379"),
    ("hf_abcdefghijklmnopqrstuvwxyz0123 in the middle", "*** in the middle"),
    ("keys sk-proj-abcdefghijklmnopqrstuvwx, ghp_abcdefghijklmnopqrstuvwxyz0123456789, "
     "github_pat_11ABCDEFG0123456789_abcdefghij",
     "keys ***, ***, ***"),
    ("aws AKIAABCDEFGHIJKLMNOP slack xoxb-1234567890-abcdef", "aws *** slack ***"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl end", "jwt *** end"),
])
def test_the_rules_mask_secrets_in_log_text(line, masked):
    assert PLAIN.text(line) == masked


@pytest.mark.parametrize("line", [
    "python -m sglang.launch_server --max-total-tokens 4096 --tokenizer-path /models/tok",
    "ServerArgs(tokenizer_path='/models/tok', max_total_tokens=4096, skip_tokenizer_init=False, "
    "api_key=None, hf_token='', ssl_keyfile=None)",
    "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
    "KeyError: 'api_key'",
    "    if token == expected_token:",
    "KEYBOARD=us tokenizers: 3 monkeypatch ok",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "task-scheduler-0123456789abcdefghijkl self.hf_config https://hub.example/m",
    "Bearer short",
])
def test_the_rules_keep_what_a_triage_needs(line):
    assert PLAIN.text(line) == line


def test_the_launchs_secrets_are_masked_whatever_surrounds_them():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "argv-value-1", "--admin-api-key=argv-value-2",
            "--model-path", "https://bob:url-value-3@hub.example/m", "--max-total-tokens", "4096"]
    env = {"HF_TOKEN": "env-value-4", "MY_SERVICE_PASSWORD": "env-value-5", "USE_TOKEN": "1",
           "PATH": "/usr/bin"}
    redactor = Redactor.for_launch(argv, env)
    line = "x argv-value-1/argv-value-2|url-value-3 (env-value-4)env-value-5; 1 token at /usr/bin"
    assert redactor.text(line) == "x ***/***|*** (***)***; 1 token at /usr/bin"
    assert redactor.argv(["sh", "-c", "serve --api-key argv-value-1"]) == ["sh", "-c", "serve --api-key ***"]
    assert redactor.argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", "***",
                                   "--admin-api-key=***", "--model-path", "https://bob:***@hub.example/m",
                                   "--max-total-tokens", "4096"]
    assert redactor.environment({"ARGS": "--x env-value-5", **env}) == {
        "ARGS": "--x ***", "HF_TOKEN": "***", "MY_SERVICE_PASSWORD": "***", "USE_TOKEN": "***",
        "PATH": "/usr/bin"}
    quoted = 'a"b\\c-secret'
    document = json.dumps({"line": f"got {quoted}", "other": "fine"})
    assert quoted not in json.loads(Redactor([quoted]).serialized(document))["line"]


def test_secret_words_cover_auth_pass_pwd_cookie_session_private_but_not_the_shells_folders():
    env = {"HF_ENDPOINT_AUTH": "HfSecretNotShaped123", "DB_PASS": "PlainDbPass77", "MYSQL_PWD": "MysqlPlain88",
           "SESSION_COOKIE": "CookieValue99", "X_SESSION": "SessionValue11", "PRIVATE_KEY_PATH_PRIVATE": "PemValue22",
           "PWD": "/work/run-dir", "OLDPWD": "/work/before", "AUTHOR": "Somebody Plain"}
    redactor = Redactor.for_launch([], env)
    masked = redactor.environment(env)
    assert {name for name, value in masked.items() if value == MASK} == {
        "HF_ENDPOINT_AUTH", "DB_PASS", "MYSQL_PWD", "SESSION_COOKIE", "X_SESSION", "PRIVATE_KEY_PATH_PRIVATE"}
    assert redactor.text("cd /work/run-dir; HfSecretNotShaped123 CookieValue99") == "cd /work/run-dir; *** ***"
    assert PLAIN.text("oauth=PlainValue42 session: 'abcdefgh' retries_pass: 3") == \
        "oauth=*** session: '***' retries_pass: 3"


@pytest.mark.parametrize("line", [
    "api_key=" * 20_000,
    "a" * 200_000,
    "'token': '" * 20_000,
    "--api-key " * 20_000,
    "Authorization: " * 20_000,
    "eyJ" + "a" * 100_000 + ".eyJ" + "b" * 100_000,
    "sk-" + "-" * 200_000,
    "https://" + "a" * 100_000 + "@" * 10,
    ("x" * 50 + "key" + " " * 50) * 2_000,
])
def test_hostile_lines_do_not_hang_the_redaction(line):
    """A hang guard, not a speed figure: a backtracking blow-up takes minutes, not seconds."""
    redactor = Redactor.for_launch(["--api-key", "known-secret-value"], {"HF_TOKEN": "hf_known_value"})
    started = time.monotonic()
    redactor.text(line)
    assert time.monotonic() - started < 10.0


# -- crashlab serve: every channel -------------------------------------------------------------

API_KEY = "sk-argv-secret-0123456789abcdefghij"
HF_TOKEN = "hf_EnvSecretDoNotLeak0123456789abcd"
SERVICE_PASSWORD = "correct-horse-battery-staple-7"
URL_PASSWORD = "url-pass-do-not-leak"
BEARER = "bearer-do-not-leak-0123456789"
GITHUB = "ghp_CodeLineDoNotLeak0123456789abcdefgh"
RULES_ONLY = "rules-only-do-not-leak"
SECRETS = (API_KEY, HF_TOKEN, SERVICE_PASSWORD, URL_PASSWORD, BEARER, GITHUB, RULES_ONLY)

#: A user's plugin the stand-in runs before it dies: two log lines, then a traceback whose code
#: line and exception line hold credentials.
HOOK = f'''import os, sys
URL = "https://alice:{URL_PASSWORD}@hub.example/model"
print(f"fetching {{URL}} with {{{{'Authorization': 'Bearer {BEARER}'}}}}", file=sys.stderr, flush=True)
print(f"feature store login svc/{{os.environ['MY_SERVICE_PASSWORD']}} via {{os.environ['HF_TOKEN']}}; "
      'db_password: "{RULES_ONLY}"', file=sys.stderr, flush=True)


def fetch(url, token):
    raise PermissionError(f"401 Unauthorized for {{url}}")


fetch("https://alice:{URL_PASSWORD}@hub.example/model", token="{GITHUB}")
'''


def test_no_secret_reaches_the_run_directory_or_crashlabs_output(tmp_path):
    hook = tmp_path / "plugin.py"
    hook.write_text(HOOK)
    env = environment(crash="exit", crash_on="start", crash_hook=str(hook))
    env.update(HF_TOKEN=HF_TOKEN, MY_SERVICE_PASSWORD=SERVICE_PASSWORD)
    serve = Serve(tmp_path, sglang(free_port(), "--api-key", API_KEY, "--max-total-tokens", "4096"),
                  *FAST, "--quiet", env=env)
    assert serve.finish() == 0, serve.stderr
    assert survivors(serve.manifest()) == []
    evidence = (serve.incarnation / "stderr.log").read_text()
    for secret in SECRETS:  # planted, and kept byte for byte in the server's own log
        assert secret in evidence, secret
    written = [path for path in serve.run_dir.rglob("*")
               if path.is_file() and path.name not in ("stdout.log", "stderr.log")]
    assert {"manifest.json", "report.json", "report.md", "launch.json"} <= {p.name for p in written}
    for path in written:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (secret, path)
    for output in (serve.stdout, serve.stderr):
        for secret in SECRETS:
            assert secret not in output, (secret, output)

    # the channels were there, masked, and what a triage needs is intact
    [traceback] = [f for f in serve.report()["incidents"][0]["findings"] if f["kind"] == "traceback"]
    assert traceback["text"] == f"PermissionError: 401 Unauthorized for https://alice:{MASK}@hub.example/model"
    context = "\n".join(traceback["before"])
    assert "api_key='***'" in context and "max_total_tokens=4096" in context
    assert "tokenizer_path='stand-in/model'" in context
    assert f"'Authorization': 'Bearer {MASK}'" in context and f'db_password: "{MASK}"' in context
    assert f"feature store login svc/{MASK} via {MASK};" in context
    codes = [frame["code"] for frame in traceback["frames"]]
    assert f'fetch("https://alice:{MASK}@hub.example/model", token="{MASK}")' in codes
    assert "PermissionError: 401 Unauthorized" in (serve.run_dir / "report.md").read_text()
    launch = json.loads((serve.incarnation / "launch.json").read_text())
    assert launch["argv"][-6:-2] == ["--api-key", MASK, "--max-total-tokens", "4096"]
    assert launch["environment"]["HF_TOKEN"] == launch["environment"]["MY_SERVICE_PASSWORD"] == MASK


# -- crashlab replay: the fault lines it keeps ----------------------------------------------------

def _replay_against_a_dying_server(tmp_path, line: str, *options: str):
    """``crashlab replay`` against a stand-in that writes ``line`` to its log when it fails."""
    log = tmp_path / f"server{len(options)}.log"
    log.write_text("")
    with standin(tmp_path, "--die-on", "SELECT", "--die-how", "log", "--log", str(log),
                 "--crash-line", line) as server:
        done = run_cli("replay", *FAST_WATCH, FIXTURES / "crash_dump_0.5.23.pkl", "--url", server.url,
                       "--watch-log", log, *options, env={"MY_SERVICE_PASSWORD": SERVICE_PASSWORD})
    assert done.returncode == 0, done.stderr
    assert API_KEY in log.read_text()
    return done


def test_a_replays_fault_lines_and_views_hold_no_secret(tmp_path):
    line = (f"RuntimeError: CUDA error: an illegal memory access was encountered "
            f"(api_key='{API_KEY}', user svc/{SERVICE_PASSWORD}, Authorization: Bearer {BEARER})")
    as_json = _replay_against_a_dying_server(tmp_path, line, "--json")
    as_text = _replay_against_a_dying_server(tmp_path, line)
    attempt = json.loads(as_json.stdout)["attempts"][0]
    assert attempt["observed"]["lines"][1] == (
        f"RuntimeError: CUDA error: an illegal memory access was encountered "
        f"(api_key='{MASK}', user svc/{MASK}, Authorization: Bearer {MASK})")
    assert b"reproduced 1/1" in as_text.stdout
    for output in (as_json.stdout, as_json.stderr, as_text.stdout, as_text.stderr):
        for secret in (API_KEY, SERVICE_PASSWORD, BEARER):
            assert secret.encode() not in output, secret


def test_a_log_watch_masks_only_what_it_keeps(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    watch = LogWatch(log, ["CUDA error: "], redact=Redactor(["launch-secret"]).text)
    log.write_text("password=launch-secret on an ordinary line\n"
                   "CUDA error: an illegal memory access near launch-secret\n")
    assert watch.matches() == ["CUDA error: an illegal memory access near ***"]
    assert watch.lines == ["CUDA error: an illegal memory access near ***"]

